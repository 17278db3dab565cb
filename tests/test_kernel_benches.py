"""What `planner calibrate` times beside its engines (calibration/kernel_benches.py): the GEMM/HBM micro-benchmark once
per campaign, and the fused-MoE kernel bench when a job runs bf16/fp8 experts in vLLM's Triton fused MoE, until its
whole grid is recorded.  The commands are checked here with a recording stand-in; the bench itself ran on an H200
(calibration/data/h200-2026-12-03-moe-kernel)."""

from __future__ import annotations

from pathlib import Path

from calibration.kernel_benches import (
    LINEAR_KERNEL_BUDGET_S,
    LINEAR_KERNEL_POINTS,
    MOE_KERNEL_BUDGET_S,
    kernel_benches,
    runs_fused_moe,
)
from calibration.moe_kernel_bench import SHAPES, TOKENS
from calibration.records import read_records
from calibration.refit import DATA


def _job(model, weights="bf16"):
    return {"model": model, "weights": weights, "kv": "auto", "mixed": False, "role": "fit"}


def _run(records, jobs, tmp_path):
    calls = []

    def stream(cmd, log_path, env, timeout_s):
        calls.append((cmd[2], Path(log_path).name, timeout_s, env["PYTHONPATH"]))
        return 0, ""

    raw = tmp_path / "h200-sxm-vllm0.26.0-2026-12-03.jsonl"
    ran = kernel_benches(raw, tmp_path, "h200-sxm", records, jobs, stream)
    return ran, calls


def test_which_jobs_run_the_fused_moe():
    assert runs_fused_moe([_job("qwen3-30b-a3b")]) and runs_fused_moe([_job("mixtral-8x7b", "fp8")])
    assert runs_fused_moe([_job("llama-3.1-8b"), _job("deepseek-v2-lite")])  # MLA's experts: the bf16 fused MoE
    assert runs_fused_moe([_job("qwen3-235b-a22b-l16")])  # a probe variant
    assert not runs_fused_moe([_job("gpt-oss-120b", "mxfp4"), _job("mixtral-8x7b", "int4"), _job("llama-3.1-8b")])
    assert not runs_fused_moe([_job("some-imported-model")])  # --model-dir: not looked up


def test_the_default_plan_times_both_once(tmp_path):
    """A fresh campaign with a MoE job: the micro-benchmark, then the kernel bench into the campaign's raw file under
    its budget; a dense-only campaign: the micro-benchmark alone."""
    ran, calls = _run([], [_job("mistral-7b-v0.3"), _job("qwen3-30b-a3b")], tmp_path)
    assert ran == ["microbench", "moe_kernel_bench"]
    assert [c[0] for c in calls] == ["calibration.microbench", "calibration.moe_kernel_bench"]
    assert calls[1][1].endswith(".moe-kernel.log") and calls[1][2] == MOE_KERNEL_BUDGET_S + 60
    assert ran == _run([], [_job("qwen3-30b-a3b")], tmp_path)[0]
    assert _run([], [_job("mistral-7b-v0.3")], tmp_path)[0] == ["microbench"]


def test_an_fp8_job_times_the_linear_layers_once(tmp_path):
    """A job with fp8 weights (dense, or a MoE's fp8 attention GEMMs) runs the linear kernel bench into the raw file
    (the fit's linear kernel law, for that GPU); the committed H200 run (1,008 timings) is complete; bf16 jobs never."""
    ran, calls = _run([{"type": "microbench"}], [_job("llama-3.1-8b", "fp8")], tmp_path)
    assert ran == ["linear_kernel_bench"] and calls[0][0] == "calibration.linear_kernel_bench"
    assert calls[0][1].endswith(".linear-kernel.log") and calls[0][2] == LINEAR_KERNEL_BUDGET_S + 60
    recs = read_records(DATA / "h200-2026-12-03-linear-kernel/lb/linear-kernel.jsonl") + [{"type": "microbench"}]
    assert len([r for r in recs if r.get("type") == "linear_kernel"]) == LINEAR_KERNEL_POINTS == 1008
    assert _run(recs, [_job("llama-3.1-8b", "fp8")], tmp_path)[0] == []
    assert _run([{"type": "microbench"}], [_job("llama-3.1-8b"), _job("qwen3-30b-a3b", "fp8")],
                tmp_path)[0] == ["moe_kernel_bench", "linear_kernel_bench"]
    assert _run([{"type": "microbench"}], [_job("llama-3.1-8b")], tmp_path)[0] == []


def test_a_resumed_campaign_finishes_a_cut_kernel_bench_only(tmp_path):
    """The committed H200 bench recorded all 420 points: nothing to run again; with half of them (a cut run) the bench
    runs again (it skips the points already in the file); the micro-benchmark never twice."""
    recs = read_records(DATA / "h200-2026-12-03-moe-kernel/ka/moe-kernel.jsonl") + [{"type": "microbench"}]
    kernel = [r for r in recs if r.get("type") == "moe_kernel"]
    assert len(kernel) == len(SHAPES) * 2 * len(TOKENS) == 420
    assert _run(recs, [_job("qwen3-30b-a3b")], tmp_path)[0] == []
    half = [r for r in recs if r.get("type") != "moe_kernel"] + kernel[:210]
    assert _run(half, [_job("qwen3-30b-a3b")], tmp_path)[0] == ["moe_kernel_bench"]
