"""``planner simulate`` and ``planner slo-search`` (planner.cli.simulate)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

runner = CliRunner()


def _cli(*args):
    from planner.cli.app import app

    return runner.invoke(app, list(args))


def test_cli_simulate_json():
    r = _cli("simulate", "--model", "mistral-7b-v0.3", "--gpu", "h200-sxm", "--profile", "none", "--rate", "5",
             "--num-requests", "200", "--prompt-tokens", "256", "--output-tokens", "32",
             "--shared-prefix-tokens", "1024", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    for k in ("ttft_s", "tpot_s", "e2e_s"):
        assert set(d[k]) == {"mean", "p50", "p90", "p99"}
    for k in ("output_tokens_per_s", "requests_per_s", "preemptions", "prefix_cache_hit_rate", "kv_usage_max"):
        assert k in d
    assert d["prefix_cache_hit_rate"] > 0.7 and d["completed"] == 200


def test_cli_simulate_says_the_weights_it_simulated():
    """Without --weight-dtype the model's published dtype is simulated (gpt-oss-20b: MXFP4), and the header and the
    JSON say so, not the flag's absence."""
    base = ("simulate", "--model", "gpt-oss-20b", "--gpu", "h200-sxm", "--rate", "2", "-n", "40",
            "--prompt-tokens", "512", "--output-tokens", "32")
    r = _cli(*base, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["weight_dtype"] == "mxfp4"
    r = _cli(*base)
    assert r.exit_code == 0 and "(TP 1, mxfp4 weights, bf16 KV)" in r.stdout.splitlines()[0], r.output
    r = _cli(*base, "--weight-dtype", "bf16", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["weight_dtype"] == "bf16", r.output


def test_cli_simulate_variants(tmp_path):
    base = ("simulate", "--model", "mistral-7b-v0.3", "--gpu", "h200-sxm", "--profile", "none", "-n", "100",
            "--prompt-tokens", "512", "--output-tokens", "128")
    r = _cli(*base, "--concurrency", "8", "--compare-sequential", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["speedup_vs_sequential"] > 1 and d["running_max"] <= 8
    r = _cli(*base, "--rate", "5", "--sequential", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["sequential"] is True
    r = _cli(*base, "--rate", "5", "--spec-preset", "eagle", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["spec_decode"]["k"] == 5
    r = _cli(*base, "--workload", "agentic", "--rate", "1")
    assert r.exit_code == 0 and "TTFT ms" in r.stdout
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.2,300,20\n")
    series = tmp_path / "s.csv"
    r = _cli(*base, "--trace", str(trace), "--series-csv", str(series), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["completed"] == 2
    assert series.read_text().startswith("t_s,kv_usage_fraction")


@pytest.mark.parametrize("args,field", [
    (("--rate", "-3"), "--rate"),
    (("--rate", "1", "--concurrency", "4"), "--concurrency"),
    (("--spec-k", "4"), "--spec-acceptance"),
    (("--spec-k", "4", "--spec-acceptance", "1.5"), "--spec-acceptance"),
    (("--spec-preset", "nope"), "--spec-preset"),
    (("--workload", "nope"), "--workload"),
    (("--max-num-seqs", "512", "--max-num-batched-tokens", "256"), "--max-num-batched-tokens"),
    (("--tp", "0"), "--tp"),
    (("--weight-dtype", "int3"), "--weight-dtype"),
])
def test_cli_simulate_bad_input_exits_2_naming_the_field(args, field):
    r = _cli("simulate", "--model", "mistral-7b-v0.3", "--gpu", "h200-sxm", "--profile", "none", "-n", "10", *args)
    assert r.exit_code == 2, r.output
    assert field in r.output and len(r.output.strip().splitlines()) == 1


def test_cli_slo_search_csv_and_json():
    args = ("slo-search", "--model", "mistral-7b-v0.3", "--gpu", "h200-sxm,l4", "--profile", "none",
            "--prompt-tokens", "512", "--output-tokens", "128",
            "--ttft-slo-ms", "500", "--tpot-slo-ms", "50", "--rate", "40", "-n", "200")
    r = _cli(*args, "--csv", "-")
    assert r.exit_code == 0, r.output
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("gpu_id,gpu,vendor,tensor_parallel") and len(lines) > 3  # every TP of both GPUs
    j = _cli(*args, "--json")
    d = json.loads(j.stdout)
    best = d["candidates"][0]  # ranked by the whole fleet's $/month (planner.fleet)
    assert best["feasible"] and best["replicas"] >= 1 and d["fleet"] == best
    assert best["ttft_tail_at_knee_s"] <= 0.5 and best["tpot_tail_at_knee_s"] <= 0.05
    assert all(c["usd_per_month"] >= best["usd_per_month"] for c in d["candidates"] if c["feasible"])
    r = _cli("slo-search", "--model", "llama-3.1-70b", "--gpu", "l4", "--tp", "1", "--profile", "none",
             "--prompt-tokens", "512", "--output-tokens", "128",
             "--ttft-slo-ms", "500", "--tpot-slo-ms", "50", "-n", "50", "--json")
    row = json.loads(r.stdout)["candidates"][0]
    # no candidate meets the targets: the rows are printed, then exit 1 with one line
    assert r.exit_code == 1 and row["feasible"] is False and "does not fit" in row["note"]
    assert r.stderr.strip().startswith("error: infeasible: ")
    bad = _cli("slo-search", "--model", "mistral-7b-v0.3", "--ttft-slo-ms", "-1", "--tpot-slo-ms", "50")
    assert bad.exit_code == 2 and "--ttft-slo-ms" in bad.output
