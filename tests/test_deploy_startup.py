"""planner.deploy.startup_check: one test per rule vLLM 0.26 refuses or fails to start on, and the deploy
command refusing such a plan (exit 1, one line, no files)."""

from __future__ import annotations

import json

import pytest
from conftest import make_deployment, make_gpu, mistral_7b
from typer.testing import CliRunner

from planner.cli.app import app
from planner.deploy import MIN_HEADROOM_BYTES, startup_check
from planner.specs import AttentionSpec

GiB = 2**30


def fields(check) -> list[str]:
    return [p.field for p in check.problems]


def test_a_plan_that_fits_starts():
    """Mistral 7B bf16 (14.5 GB) on an 80 GiB GPU at 0.92, 4,096 tokens: no problem, a KV pool, 8% headroom."""
    c = startup_check(mistral_7b(), make_gpu(), make_deployment(), 4096)
    assert c.ok and c.reasons() == []
    assert c.kv_pool_bytes_per_gpu > 50e9 and c.kv_capacity_tokens > 100_000
    assert c.headroom_bytes == pytest.approx(0.08 * 80 * GiB)


def test_tp_beyond_one_node():
    """TP 16 on 8-GPU nodes: tensor parallel must stay inside a node."""
    c = startup_check(mistral_7b(), make_gpu(), make_deployment(num_gpus=16, tensor_parallel=16), 4096)
    assert "tensor_parallel" in fields(c)
    assert "8" in c.problems[0].reason and "pipeline" in c.problems[0].reason


def test_tp_not_dividing_attention_heads():
    """32 heads, TP 3: 32 % 3 = 2, refused."""
    c = startup_check(mistral_7b(), make_gpu(), make_deployment(num_gpus=3, tensor_parallel=3), 4096)
    assert fields(c) == ["tensor_parallel"] and "32 attention heads" in c.reasons()[0]


def test_tp_and_kv_heads_must_divide_one_another():
    """48 heads and 12 KV heads at TP 8: 48 % 8 = 0 but 12 % 8 = 4 and 8 ∤ 12, refused."""
    m = mistral_7b().model_copy(update={"attention": AttentionSpec(kind="gqa", num_heads=48, num_kv_heads=12,
                                                                   head_dim=128)})
    c = startup_check(m, make_gpu(), make_deployment(num_gpus=8, tensor_parallel=8), 4096)
    assert "tensor_parallel" in fields(c) and "12 KV heads" in " ".join(c.reasons())


def test_pp_beyond_layers():
    """PP 40 on a 32-layer model."""
    c = startup_check(mistral_7b(), make_gpu(), make_deployment(num_gpus=40, pipeline_parallel=40), 4096)
    assert "pipeline_parallel" in fields(c) and "32 layers" in " ".join(c.reasons())


def test_context_beyond_model_limit():
    """max_model_len 40,000 > Mistral's 32,768."""
    c = startup_check(mistral_7b(), make_gpu(), make_deployment(), 40_000)
    assert "max_model_len" in fields(c) and "32,768" in " ".join(c.reasons())


def test_batched_tokens_below_max_num_seqs():
    """max_num_batched_tokens 128 < max_num_seqs 256: vLLM refuses the scheduler config."""
    c = startup_check(mistral_7b(), make_gpu(), make_deployment(max_num_batched_tokens=128, max_num_seqs=256), 4096)
    assert fields(c) == ["max_num_batched_tokens"]


def test_no_kv_pool():
    """0.15 × 80 GiB = 12.9 GB usable < 14.5 GB of weights: nothing left for KV."""
    c = startup_check(mistral_7b(), make_gpu(), make_deployment(gpu_memory_utilization=0.15), 4096)
    assert "gpu_memory_utilization" in fields(c) and c.kv_capacity_tokens == 0


def test_kv_pool_smaller_than_one_max_model_len_request():
    """At 0.2 the pool is a few GB; one 32,768-token request needs 32,768 × 131,072 B = 4.29 GB > pool."""
    dep = make_deployment(gpu_memory_utilization=0.2)
    small = startup_check(mistral_7b(), make_gpu(), dep, 1024)
    assert small.ok and 0 < small.kv_pool_bytes_per_gpu < 32_768 * 131_072
    c = startup_check(mistral_7b(), make_gpu(), dep, 32_768)
    assert fields(c) == ["max_model_len"] and "KV per GPU" in c.reasons()[0]


def test_too_little_headroom_above_gpu_memory_utilization():
    """0.995 leaves 0.005 × 80 GiB = 0.4 GiB above the pool, below the 1 GiB CUDA graphs and NCCL need."""
    c = startup_check(mistral_7b(), make_gpu(), make_deployment(gpu_memory_utilization=0.995), 4096)
    assert fields(c) == ["gpu_memory_utilization"]
    assert c.headroom_bytes == pytest.approx(0.005 * 80 * GiB) and c.headroom_bytes < MIN_HEADROOM_BYTES


# ------------------------------------------------------------------------------ the command refuses

@pytest.mark.parametrize("args, flag", [
    (["--tp", "3"], "--tp"),                                       # 32 heads
    (["--max-model-len", "200000"], "--max-model-len"),            # Llama 3.1: 131,072
    (["--max-num-batched-tokens", "100", "--max-num-seqs", "200"], "--max-num-batched-tokens"),
    (["--gpu-memory-utilization", "0.1"], "--gpu-memory-utilization"),  # 14.98 GB usable < 16 GB weights
    (["--gpu-memory-utilization", "0.999"], "--gpu-memory-utilization"),  # headroom
    (["--tpot-slo-ms", "1"], "--tpot-slo-ms"),                     # below one sequence's decode step
])
def test_deploy_refuses_a_plan_that_would_not_start(tmp_path, args, flag):
    """Each is refused with exit 1 and one line naming the flag; nothing is written.  ``--tp 1`` keeps the
    layout as asked (chosen automatically, TP 2 would hold what does not fit at 0.1)."""
    out = tmp_path / "bundle"
    layout = [] if "--tp" in args else ["--tp", "1"]
    r = CliRunner().invoke(app, ["deploy", "-m", "llama-3.1-8b", "-g", "h200-sxm", *layout, *args, "--out", str(out)])
    assert r.exit_code == 1, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: infeasible: {flag}: "), r.output
    assert not out.exists()


def test_deploy_refuses_a_model_no_layout_can_hold():
    """Llama 3.1 405B bf16 on one 8 × H100 node (--tp 8 --pp 1): 811 GB of weights on 8 × 79 GiB.  With --tp 8
    alone the PP is the engine's ("more only when no node holds the model"): TP 8 × PP 2 on two nodes."""
    r = CliRunner().invoke(app, ["deploy", "-m", "llama-3.1-405b", "-g", "h100-sxm", "--tp", "8", "--pp", "1"])
    assert r.exit_code == 1 and r.output.startswith("error: infeasible: --gpu-memory-utilization: does not fit")
    r = CliRunner().invoke(app, ["deploy", "-m", "llama-3.1-405b", "-g", "h100-sxm", "--tp", "8", "--json"])
    assert r.exit_code == 0, r.output
    assert "--tensor-parallel-size 8 --pipeline-parallel-size 2" in json.loads(r.stdout)["serve_command"]
