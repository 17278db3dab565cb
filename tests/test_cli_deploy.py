"""``planner deploy`` through the CLI: files written, --json, --help naming every file, bad input exit 2."""

from __future__ import annotations

import json
import shlex

import pytest
from deploy_validation import validate_manifest_text
from typer.testing import CliRunner

from planner.cli.app import app
from planner.deploy.flags import parse_serve_args

EXAMPLE = ["deploy", "--model", "llama-3.1-8b", "--gpu", "h200-sxm", "--rate", "20", "--ttft-slo-ms", "500",
           "--tpot-slo-ms", "50"]
FILES = {"serve.sh", "predictions.json", "k8s-deployment.yaml", "helm-values-production-stack.yaml", "README.md"}


def run(args):
    return CliRunner().invoke(app, args)


def test_writes_the_bundle(tmp_path):
    r = run(EXAMPLE + ["--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert {p.name for p in tmp_path.iterdir()} == FILES
    size = json.loads(run(["size", *EXAMPLE[1:], "--json"]).stdout)["fleet"]  # the fleet engine's answer
    assert "vllm serve meta-llama/Llama-3.1-8B" in r.output
    assert f"Fleet: {size['replicas']} replica(s) = {size['num_gpus']} GPUs" in r.output
    words = shlex.split((tmp_path / "serve.sh").read_text().strip().splitlines()[-1])  # [ENV=… ] vllm serve …
    assert parse_serve_args(words[words.index("vllm") + 2:])["--max-model-len"] == "4608"
    assert (tmp_path / "serve.sh").stat().st_mode & 0o111
    validate_manifest_text((tmp_path / "k8s-deployment.yaml").read_text())
    pred = json.loads((tmp_path / "predictions.json").read_text())
    assert pred["replicas"] == size["replicas"] and pred["max_model_len"] == 4608 and pred["files"] == sorted(FILES)
    assert pred["sizing"]["model_id"] == "llama-3.1-8b"


def test_the_replica_rows_meet_the_targets_and_show_the_fleet_engines_operating_point(tmp_path):
    """Gemma-3-27B on H200s at 4 req/s, 12,000 + 800 tokens, TTFT <= 5 s, TPOT <= 60 ms: deploy's replica rows were
    at the 136 requests that fit (TPOT 127.8 ms, twice the target) because its workload dropped the targets; they
    are now at the largest batch under them, as the dashboard's Deploy view and `planner size` show it, and the
    fleet engine's operating point (the rate, requests in flight and p99 tails it sized the fleet on) is beside them:
    the same numbers `planner size --json` gives for its best fleet."""
    ask = ["--model", "gemma-3-27b", "--gpu", "h200-sxm", "--rate", "4", "--prompt-tokens", "12000",
           "--output-tokens", "800", "--ttft-slo-ms", "5000", "--tpot-slo-ms", "60"]
    r = run(["deploy", *ask, "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    pred = json.loads((tmp_path / "predictions.json").read_text())
    assert pred["tpot_s"] <= 0.060 and pred["sizing"]["slo_binding"] == "tpot"
    assert pred["batch_size_per_replica"] < pred["max_concurrency_at_max_model_len"]
    best = json.loads(run(["size", *ask, "--json"]).stdout)["fleet"]
    op = pred["operating_point"]
    assert (op["tail"], op["ttft_slo_s"], op["tpot_slo_s"]) == ("p99", 5.0, 0.06)
    assert op["rate_per_s_per_replica"] == pytest.approx(best["usable_rate_per_s"])
    assert op["tpot_tail_s"] == pytest.approx(best["tpot_tail_s"]) and op["tpot_tail_s"] <= 0.060
    assert op["ttft_tail_s"] == pytest.approx(best["ttft_tail_s"]) and op["ttft_tail_s"] <= 5.0
    line = f"{op['rate_per_s_per_replica']:,.3g} req/s per replica (knee {op['knee_rate_per_s_per_replica']:,.3g})"
    assert f"at the fleet's operating point (serving simulator): {line}" in r.output
    assert line in (tmp_path / "README.md").read_text() and line in (tmp_path / "serve.sh").read_text()


def test_json_prints_everything():
    r = run(EXAMPLE + ["--json", "--disaggregated"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    for key in ("serve_command", "serve_argv", "kv_pool_bytes_per_gpu", "kv_capacity_tokens",
                "max_concurrency_at_max_model_len", "ttft_idle_s", "tpot_s", "replicas", "usd_per_hour",
                "disaggregated", "sizing", "file_texts"):
        assert key in d, key
    assert set(d["file_texts"]) == FILES | {"k8s-disaggregated.yaml"}
    assert d["disaggregated"]["measured"] is False and d["out_dir"] is None


def test_help_documents_every_output_file():
    r = run(["deploy", "--help"])
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    for name in sorted(FILES | {"k8s-raycluster.yaml", "k8s-disaggregated.yaml"}):
        assert name in text, name


def test_multinode_choice_in_the_output():
    r = run(["deploy", "--model", "llama-3.1-405b", "--gpu", "h100-sxm"])
    assert r.exit_code == 0, r.output
    assert "TP 8 × PP 2 = 16 GPU(s) per replica on 2 nodes × 8 GPUs" in r.output
    assert "--distributed-executor-backend ray" in r.output and "k8s-raycluster.yaml" in r.output


@pytest.mark.parametrize("args, flag", [
    (["--max-model-len", "100"], "--max-model-len"),              # below prompt + output
    (["--disaggregated"], "--rate"),                               # pools are sized from a rate
    (["--namespace", "Bad_NS"], "--namespace"),
    (["--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization"),
    (["--spec-preset", "eagle"], "--spec-model"),
    (["--spec-preset", "nope", "--spec-model", "x"], "--spec-preset"),
    (["--tp", "4", "--pp", "3"], "--pp"),                          # 12 GPUs are not whole 8-GPU nodes
])
def test_bad_input_exits_2(args, flag):
    r = run(["deploy", "-m", "llama-3.1-8b", "-g", "h200-sxm", *args])
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"error: {flag}"), r.output


def test_prefix_caching_is_one_planning_flag(tmp_path, monkeypatch):
    """--no-prefix-caching is a planning flag of size, report and deploy alike: the fleet engine sizes the replicas with
    the setting the written command gives vLLM (before, deploy took it for the command only)."""
    from planner import fleet
    from planner.cli.flags import PlanFlags

    assert PlanFlags(model="m", prefix_caching=False).question().enable_prefix_caching is False
    assert PlanFlags(model="m").question().enable_prefix_caching is None  # vLLM's default for the model
    asked = []
    real = fleet.plan_fleet
    monkeypatch.setattr(fleet, "plan_fleet",
                        lambda q, *a, **k: asked.append(q.enable_prefix_caching) or real(q, *a, **k))
    r = run(EXAMPLE + ["--no-prefix-caching", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "--no-enable-prefix-caching" in (tmp_path / "serve.sh").read_text() and asked == [False]
    assert run(["size", *EXAMPLE[1:], "--no-prefix-caching"]).exit_code == 0 and asked[-1] is False
