"""Roofline latency of a step and of its phases (prefill, decode, TP, MoE), by hand arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import deepseek_v3, gpt_oss_120b, make_deployment, make_gpu, mistral_7b

from planner.kernel_families import experts_touched
from planner.phases import decode_step_costs, decode_step_time, prefill_time
from planner.profile import CalibrationProfile
from planner.roofline import hw_coeffs, model_costs
from planner.specs import count_params

BW = 3.35e12
PEAK = 989e12


# ------------------------------------------------------------------------------------------ decode


def test_decode_batch1_is_weights_plus_kv_over_bandwidth():
    """Mistral bf16, batch 1, 4,096-token context on 3.35 TB/s:
    weights streamed = (7.248e9 − 0.134e9 embedding, gathered not streamed) × 2 B = 14.23e9 B;
    KV read 4,096 × 131,072 B + the new token's K/V 131,072 B = 0.537e9 B;
    (14.23e9 + 0.537e9) / 3.35e12 = 4.41 ms, memory-bound."""
    m, g = mistral_7b(), make_gpu()
    p = count_params(m)
    weights = (p.total - p.embedding) * 2
    kv = 4096 * 131_072 + 131_072
    t = decode_step_time(m, g, make_deployment(), 1, 4096)
    assert t.memory_s == pytest.approx((weights + kv) / BW, rel=1e-9)
    assert t.time_s == pytest.approx(4.41e-3, rel=0.01)
    assert t.bound == "memory"


def test_decode_flops_at_batch_1():
    """2 × matmul params (no embedding; lm_head once per sequence) + attention 2 × 32 heads × 256 × ctx × 32 layers."""
    m, g = mistral_7b(), make_gpu()
    p = count_params(m)
    t = decode_step_time(m, g, make_deployment(), 1, 1000)
    attn = 2 * 32 * (128 + 128) * 1000 * 32
    assert t.flops == pytest.approx(2 * p.active_matmul_no_lm_head + 2 * p.lm_head_matmul + attn, rel=1e-9)


def test_decode_batch_amortises_weights():
    """64 sequences share one weight read: TPOT(64) is far below 64 × TPOT(1) but above TPOT(1)."""
    m, g = mistral_7b(), make_gpu()
    t1 = decode_step_time(m, g, make_deployment(), 1, 2048).time_s
    t64 = decode_step_time(m, g, make_deployment(), 64, 2048).time_s
    assert t1 < t64 < 0.2 * 64 * t1


def test_decode_broadcasts_like_a_loop():
    m, g = mistral_7b(), make_gpu()
    mc, hw = model_costs(m, make_deployment()), hw_coeffs(g, "bf16")
    b = np.array([1, 8, 64])[:, None]
    c = np.array([128, 4096])[None, :]
    grid = decode_step_costs(mc, hw, b, c).time_s
    for i, bb in enumerate([1, 8, 64]):
        for j, cc in enumerate([128, 4096]):
            assert grid[i, j] == pytest.approx(decode_step_costs(mc, hw, bb, cc).time_s)


# ----------------------------------------------------------------------------------------- prefill


def test_prefill_flops_and_compute_bound():
    """4,096-token prompt: 2 × 6.98e9 matmul params × 4,096 + attention 2 × 32 × 256 × (4,096 × 4,097 / 2)
    × 32 layers + lm_head 2 × 32,768 × 4,096 once ≈ 6.16e13 FLOP; / 989e12 = 62 ms, compute-bound."""
    m, g = mistral_7b(), make_gpu()
    p = count_params(m)
    P = 4096
    flops = 2 * p.active_matmul_no_lm_head * P + 2 * 32 * 256 * (P * (P + 1) / 2) * 32 + 2 * p.lm_head_matmul
    t = prefill_time(m, g, make_deployment(), P)
    assert t.flops == pytest.approx(flops, rel=1e-9)
    assert t.time_s == pytest.approx(flops / PEAK, rel=0.02)
    assert t.bound == "compute"


# ------------------------------------------------------------------------------ tensor parallel, MoE


def test_tensor_parallel_allreduce_cost():
    """TP 2, one decode token: 2 all-reduces × 32 layers × (5 µs + 2 × (2−1)/2 × 4,096 × 2 B / 450e9 B/s)."""
    m, g = mistral_7b(), make_gpu()
    t = decode_step_time(m, g, make_deployment(num_gpus=2, tensor_parallel=2), 1, 100)
    assert t.comm_s == pytest.approx(2 * 32 * (5e-6 + 1.0 * 4096 * 2 / 450e9), rel=1e-9)


def test_tensor_parallel_halves_weight_reads():
    m, g = mistral_7b(), make_gpu()
    one = decode_step_time(m, g, make_deployment(), 1, 100)
    two = decode_step_time(m, g, make_deployment(num_gpus=2, tensor_parallel=2), 1, 100)
    assert two.memory_s == pytest.approx(one.memory_s / 2, rel=0.01)


def test_experts_touched():
    """E·(1 − (1 − k/E)^T): one token touches k experts; many tokens approach E; 128 experts top-4,
    32 tokens: 128 × (1 − (124/128)^32) = 82.9."""
    assert experts_touched(128, 4, 1) == pytest.approx(4)
    assert experts_touched(128, 4, 32) == pytest.approx(128 * (1 - (124 / 128) ** 32))
    assert experts_touched(128, 4, 10_000) == pytest.approx(128)


def test_moe_decode_reads_more_experts_with_batch():
    """GPT-OSS 120B: batch 1 streams 4 experts per layer, batch 64 most of the 128."""
    m, g = gpt_oss_120b(), make_gpu(memory_bytes=192 * 2**30)
    d = make_deployment(weight_dtype="mxfp4")
    b1 = decode_step_time(m, g, d, 1, 1).memory_s
    b64 = decode_step_time(m, g, d, 64, 1).memory_s
    assert 5 < b64 / b1 < 30


def test_mla_decode_runs():
    m, g = deepseek_v3(), make_gpu()
    t = decode_step_time(m, g, make_deployment(num_gpus=8, tensor_parallel=8, weight_dtype="fp8"), 16, 4096)
    assert np.isfinite(t.time_s) and t.time_s > 0


def test_calibrated_profile_slows_things_down():
    m, g = mistral_7b(), make_gpu()
    prof = CalibrationProfile(mode="calibrated", weight_bandwidth_efficiency=0.8, step_overhead_s=1e-3)
    ideal = decode_step_time(m, g, make_deployment(), 1, 100).time_s
    cal = decode_step_time(m, g, make_deployment(), 1, 100, profile=prof).time_s
    assert cal > ideal + 1e-3


def test_a_prefill_keeps_every_part_of_its_steps():
    """A one-step prefill is exactly that step: the fused-MoE GEMM and the dequantisation terms are summed
    over a phase's steps like the others (they were once dropped, hiding the MoE GEMM from every prefill)."""
    from planner.attention_sums import attended_prefill
    from planner.io import catalog
    from planner.phases import prefill_time_costs
    from planner.roofline import hw_coeffs, model_costs, step_time
    from planner.specs import Deployment

    g = catalog.gpu("h200-sxm")
    prof = catalog.profile_for("h200-sxm")
    for model_id, wd in (("qwen3-30b-a3b", "bf16"), ("llama-3.1-8b", "fp8")):
        m = catalog.model(model_id)
        d = Deployment.for_gpu(g, weight_dtype=wd, max_num_batched_tokens=16384)
        mc, hw = model_costs(m, d), hw_coeffs(g, wd, prof, m)
        st = step_time(mc, hw, prefill_tokens=4096, prefill_attended=attended_prefill(mc, 0.0, 4096), sampled_seqs=1.0)
        ph = prefill_time_costs(mc, hw, 4096, 1, 16384)
        assert ph.time_s == pytest.approx(float(st.total_s) + hw.request_overhead_s, rel=1e-12)


def test_sum_steps_adds_every_part_by_name():
    """phases.sum_steps adds each of roofline.STEP_PARTS (a part added to StepTime is summed too):
    2 steps like a + 3 like b = 2·a + 3·b for every part, the mode kept."""
    from planner.phases import sum_steps
    from planner.roofline import STEP_PARTS, StepTime

    a = StepTime(**{n: float(i + 1) for i, n in enumerate(STEP_PARTS)}, mode="calibrated")
    b = StepTime(**{n: 10.0 * (i + 1) for i, n in enumerate(STEP_PARTS)}, mode="calibrated")
    s = sum_steps(a, 2, b, 3)
    assert s.mode == "calibrated"
    assert len(STEP_PARTS) == 12  # 11 + launch_s (an eager step's CPU launch floor, issue #21)
    for i, n in enumerate(STEP_PARTS):
        assert float(getattr(s, n)) == 2 * (i + 1) + 3 * 10 * (i + 1), n
