"""Issue #20 items 4-7 and 9 (the CLI's side): every answer on valid or extreme input is a plan, a one-line error
naming its flag, field or file, or ``error: infeasible: …`` -- never a traceback, an internal error, invalid JSON,
a file naming nothing, or latencies for weights that do not fit."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from planner.cli.app import app
from planner.io.catalog import PROFILES_DIR

ROOT = Path(__file__).resolve().parent.parent
LOADTEST = ROOT / "tests" / "data" / "loadtests" / "guidellm-mock-fixed.json"
PROFILE = PROFILES_DIR / "h200-sxm-vllm-0.26.0.yaml"


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def one_error_line(r) -> str:
    lines = [x for x in r.output.strip().splitlines() if x.startswith(("error:", "internal error:"))]
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    return lines[0]


# ------------------------------------------------------------------------ item 4: the one start-up rule


@pytest.mark.parametrize("args", [
    ("simulate", "--model", "llama-3.1-70b", "--gpu", "l4", "--kv-capacity-tokens", "1000000", "-n", "50"),
    ("replay", str(LOADTEST), "--model", "llama-3.1-70b", "--gpu", "rtx-4090", "--kv-capacity-tokens", "100000"),
])
def test_weights_that_do_not_fit_are_infeasible_even_with_a_kv_pool_given(args):
    """Llama 3.1 70B in bf16 needs 133.9 GiB per GPU before any KV cache (weights × the profile's factor + its
    131,072 × 128 × 2 B rotary table + overheads, the lm_head transient 2.25 × 128,256 × 8,192 B the peak); an L4 has 22 GiB.  A KV pool given in
    tokens does not make the weights fit: exit 1, the start-up rule's reason (it exited 0 with latencies)."""
    r = run(*args)
    assert r.exit_code == 1
    line = one_error_line(r)
    assert line.startswith("error: infeasible: --gpu-memory-utilization: does not fit: needs 133.9 GiB per GPU")


# ------------------------------------------------------------------------ item 5: bounded manifests


def test_a_fleet_of_thousands_of_multinode_replicas_is_refused_fast():
    """DeepSeek-V3 on A100 80 GB: TP 8 × PP 2 per replica (2 nodes), 1.69 req/s each (the plan); 10,000 req/s
    -> about 5,900 replicas = 5,900 RayClusters (34 MB; 5,927 with the profile of the report).  Refused above 256,
    naming --rate, in seconds."""
    t = time.perf_counter()
    r = run("deploy", "--model", "deepseek-v3", "--gpu", "a100-sxm-80gb", "--rate", "10000")
    assert r.exit_code == 1 and time.perf_counter() - t < 30
    line = one_error_line(r)
    m = __import__("re").match(r"error: infeasible: --rate: the fleet needs ([\d,]+) replicas spanning 2 nodes each", line)
    assert m and int(m.group(1).replace(",", "")) > 5000 and "at most 256" in line, line


def test_a_million_requests_per_second_answers_fast_without_memory_error():
    """--rate 1e6 --json: 592,612 replicas × 2 nodes = 1,185,224 pods > 150,000 (one Kubernetes cluster's
    documented limit): refused at once (it ran 104 s and ended in a MemoryError)."""
    t = time.perf_counter()
    r = run("deploy", "--model", "deepseek-v3", "--gpu", "a100-sxm-80gb", "--rate", "1000000", "--json")
    assert r.exit_code == 1 and time.perf_counter() - t < 30
    assert "more than one Kubernetes cluster holds (150,000 pods)" in one_error_line(r)


def test_a_single_node_fleet_is_one_deployment_object_at_any_size_below_the_cluster_limit():
    from planner.deploy.bundle import MAX_RAYCLUSTERS

    r = run("deploy", "--model", "llama-3.1-8b", "--gpu", "h200-sxm", "--rate", "5000", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    docs = list(yaml.safe_load_all(d["file_texts"]["k8s-deployment.yaml"]))
    assert d["replicas"] > MAX_RAYCLUSTERS and docs[0]["spec"]["replicas"] == d["replicas"] and len(docs) == 2


# ------------------------------------------------------------------------ items 6, 7: errors that name things


def test_report_with_one_output_token():
    """One output token per request has no time per output token: the TPOT percentiles are null with a note
    (it was 'internal error: TypeError')."""
    r = run("report", "--model", "llama-3.1-8b", "--gpu", "h200-sxm", "--output-tokens", "1", "--tpot-slo-ms", "50",
            "--json")
    assert r.exit_code == 0, r.output
    rows = {x["quantity"]: x for x in json.loads(r.stdout)["rows"]}
    assert rows["TPOT p99"]["value"] is None and "one output token" in rows["TPOT p99"]["band_or_note"]
    assert rows["TTFT p50"]["value"] > 0


def _profile(tmp_path: Path, **changes) -> Path:
    d = yaml.safe_load(PROFILE.read_text())
    d.update(changes)
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(d))
    return p


@pytest.mark.parametrize("field,value,fragment", [
    ("matmul_efficiency_max", 1e-300, "matmul_efficiency_max: Input should be greater than or equal to 0.01"),
    ("weight_bandwidth_efficiency", 1e-300, "weight_bandwidth_efficiency: Input should be greater than or equal"),
    ("step_overhead_s", 1e300, "step_overhead_s: Input should be less than or equal to 10"),
    ("matmul_half_tokens", 1e300, "matmul_half_tokens: Input should be less than or equal to 10000000"),
])
def test_a_profile_with_absurd_coefficients_is_a_profile_error(tmp_path, field, value, fragment):
    """An efficiency of 1e-300 overflowed (OverflowError) or made size call a plan 'feasible with TTFT 3e297 s'."""
    r = run("size", "--model", "llama-3.1-8b", "--gpu", "h200-sxm", "--profile", str(_profile(tmp_path, **{
        field: value})))
    assert r.exit_code == 2
    line = one_error_line(r)
    assert line.startswith("error: --profile: p.yaml: ") and fragment in line


def test_a_profile_date_that_is_no_date_names_the_field(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text(PROFILE.read_text().replace("created: '2026-11-29T10:40:08+00:00'", "created: 2024-13-45"))
    r = run("size", "--model", "llama-3.1-8b", "--gpu", "h200-sxm", "--profile", str(p))
    assert r.exit_code == 2
    assert one_error_line(r) == ("error: --profile: p.yaml: created: '2024-13-45' is not an ISO 8601 date/time "
                                 "(month must be in 1..12)")
    p.write_text(PROFILE.read_text().replace("created: '2026-11-29T10:40:08+00:00'", "created: 2024-11-18"))
    assert run("size", "--model", "llama-3.1-8b", "--gpu", "h200-sxm", "--profile", str(p)).exit_code == 0


def test_max_num_batched_tokens_below_max_num_seqs_names_it():
    r = run("report", "--model", "llama-3.1-8b", "--gpu", "h200-sxm", "--max-num-batched-tokens", "1")
    assert r.exit_code == 1
    assert one_error_line(r).startswith("error: infeasible: max_num_batched_tokens: 1 is below max_num_seqs 1,024")


def test_validate_json_with_an_extreme_measurement(tmp_path):
    """A measured prefill of 1e-320 s made every error infinite and --json 'Out of range float values are not
    JSON compliant'; it is refused naming the line and column.  And --json never holds NaN/inf: null."""
    head, row = (ROOT / "calibration" / "data" / "h200-validation.csv").read_text().splitlines()[:2]
    cells = row.split(",")
    cells[head.split(",").index("measured")] = "1e-320"
    p = tmp_path / "m.csv"
    p.write_text(head + "\n" + ",".join(cells) + "\n")
    r = run("validate", str(p), "--json")
    assert r.exit_code == 2
    assert one_error_line(r) == "error: m.csv line 2: measured: 1e-320 is below 1e-07 s; no real prefill_s is"
    from planner.io.jsonl import json_safe

    import numpy as np

    assert json_safe({"a": [float("nan"), np.float64("inf"), 1.5, (2, float("-inf"))]}) == {"a": [None, None, 1.5,
                                                                                                   [2, None]]}


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command,name", [
    (("report", "--model", "llama-3.1-8b", "--gpu", "h200-sxm"), "plan.md"),
    (("deploy", "--model", "llama-3.1-8b", "--gpu", "h200-sxm"), "serve.sh"),
])
def test_a_full_disk_names_the_file(tmp_path, command, name):
    """Writing into a full disk (a file that is a link to /dev/full) said 'No space left on device', naming
    nothing; now the file and its flag."""
    (tmp_path / name).symlink_to("/dev/full")
    r = run(*command, "--out", str(tmp_path))
    assert r.exit_code == 2
    assert one_error_line(r) == f"error: --out: cannot write '{tmp_path / name}': No space left on device"


def test_a_full_stdout_is_named():
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "planner.cli", "size", "--model", "llama-3.1-8b", "--gpu",
                            "h200-sxm"], stdout=full, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and r.stderr.strip() == "error: standard output: No space left on device"


# ------------------------------------------------------------------------ item 9 (CLI)


@pytest.mark.parametrize("target", ["-", "/dev/stdout"])
def test_csv_to_standard_output_with_json_is_refused(target):
    r = run("sweep", "--model", "llama-3.1-8b", "--gpu", "h200-sxm", "--csv", target, "--json")
    assert r.exit_code == 2
    assert one_error_line(r) == "error: --csv: it and --json would both write standard output; give one"


def test_csv_to_dev_stdout_is_the_only_output():
    """Without --json, --csv /dev/stdout writes the CSV alone (no table after it), as --csv - does."""
    r = run("sweep", "--model", "llama-3.1-8b", "--gpu", "h200-sxm", "--tp", "1", "--csv", "/dev/stdout")
    assert r.exit_code == 0, r.output
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("rank,model_id,") and all(x.count(",") == lines[0].count(",") for x in lines)


@pytest.mark.parametrize("command", ["size", "report"])
def test_num_gpus_must_be_whole_replicas(command):
    """size --tp 2 --num-gpus 3 priced 2 GPUs under a '3 × H200' title; refused, naming --num-gpus."""
    r = run(command, "--model", "llama-3.1-8b", "--gpu", "h200-sxm", "--tp", "2", "--num-gpus", "3")
    assert r.exit_code == 2
    assert one_error_line(r) == ("error: --num-gpus: num_gpus = 3 is not a whole number of replicas of "
                                 "tensor_parallel × pipeline_parallel = 2 GPUs; give 2 or 4")


def test_streamlit_never_looks_up_its_external_ip(monkeypatch):
    """The project's .streamlit/config.toml binds 127.0.0.1: Streamlit's start-up banner prints that one URL and
    never calls checkip.amazonaws.com (without the setting, a headless start made two HTTP requests)."""
    pytest.importorskip("streamlit")
    from streamlit import config, net_util
    from streamlit.web import bootstrap

    calls: list[str] = []
    monkeypatch.setattr(net_util, "_make_blocking_http_get", lambda url, timeout=5: calls.append(url))
    monkeypatch.setattr(net_util, "_external_ip", None)
    monkeypatch.chdir(ROOT)
    config.get_config_options(force_reparse=True)
    try:
        assert config.get_option("server.address") == "127.0.0.1" and config.get_option("server.headless")
        assert config.get_option("browser.gatherUsageStats") is False
        bootstrap._print_url(False)
        assert calls == []
    finally:
        monkeypatch.undo()
        config.get_config_options(force_reparse=True)
