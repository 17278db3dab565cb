"""Roofline latency (prefill, decode, TP, MoE) and what plan/sweep/cost build on it, by hand arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
from inline_specs import deepseek_v3, gpt_oss_120b, make_gpu, mistral_7b

from planner.batching import largest_batch_under_slo, pick_largest_batch, ttft_under_load_costs
from planner.cost import fleet_for, prefill_busy_costs, throughput, token_cost
from planner.phases import decode_step_costs, decode_step_time, prefill_time, prefill_time_costs
from planner.plan import plan
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.roofline import experts_touched, hw_coeffs, model_costs
from planner.specs import Deployment, Workload, count_params
from planner.sweep import sweep

BW = 3.35e12
PEAK = 989e12


def _dep(**kw) -> Deployment:
    return Deployment(gpu_id="test-gpu", **kw)


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
    t = decode_step_time(m, g, _dep(), 1, 4096)
    assert t.memory_s == pytest.approx((weights + kv) / BW, rel=1e-9)
    assert t.time_s == pytest.approx(4.41e-3, rel=0.01)
    assert t.bound == "memory"


def test_decode_flops_at_batch_1():
    """2 × matmul params (no embedding; lm_head once per sequence) + attention 2 × 32 heads × 256 × ctx × 32 layers."""
    m, g = mistral_7b(), make_gpu()
    p = count_params(m)
    t = decode_step_time(m, g, _dep(), 1, 1000)
    attn = 2 * 32 * (128 + 128) * 1000 * 32
    assert t.flops == pytest.approx(2 * p.active_matmul_no_lm_head + 2 * p.lm_head_matmul + attn, rel=1e-9)


def test_decode_batch_amortises_weights():
    """64 sequences share one weight read: TPOT(64) is far below 64 × TPOT(1) but above TPOT(1)."""
    m, g = mistral_7b(), make_gpu()
    t1 = decode_step_time(m, g, _dep(), 1, 2048).time_s
    t64 = decode_step_time(m, g, _dep(), 64, 2048).time_s
    assert t1 < t64 < 0.2 * 64 * t1


def test_decode_broadcasts_like_a_loop():
    m, g = mistral_7b(), make_gpu()
    mc, hw = model_costs(m, _dep()), hw_coeffs(g, "bf16")
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
    t = prefill_time(m, g, _dep(), P)
    assert t.flops == pytest.approx(flops, rel=1e-9)
    assert t.time_s == pytest.approx(flops / PEAK, rel=0.02)
    assert t.bound == "compute"


def test_ttft_under_load_equals_idle_prefill_at_batch_1():
    """A request joining 0 running sequences is the idle-engine prefill (prompt ≤ max_num_batched_tokens)."""
    m, g = mistral_7b(), make_gpu()
    mc, hw = model_costs(m, _dep()), hw_coeffs(g, "bf16")
    for P in (100, 4096, 8192):
        a = ttft_under_load_costs(mc, hw, P, 1, P + 256, 8192).time_s
        b = prefill_time_costs(mc, hw, P, 1, 8192).time_s
        assert a == pytest.approx(b, rel=1e-9)


def test_ttft_under_load_chunks_long_prompts():
    """16,384 tokens with 8,192-token steps and 191 running sequences: budget 8,001 → ceil(16,384 / 8,001) = 3 steps."""
    mc, hw = model_costs(mistral_7b(), _dep()), hw_coeffs(make_gpu(), "bf16")
    t = ttft_under_load_costs(mc, hw, 16384, 192, 16384, 8192)
    assert t.num_steps == 3
    one_chunk = ttft_under_load_costs(mc, hw, 16384 / 3, 192, 16384, 8192)  # same step, no prior chunks
    assert t.time_s > 3 * one_chunk.time_s


# ------------------------------------------------------------------------------ tensor parallel, MoE


def test_tensor_parallel_allreduce_cost():
    """TP 2, one decode token: 2 all-reduces × 32 layers × (5 µs + 2 × (2−1)/2 × 4,096 × 2 B / 450e9 B/s)."""
    m, g = mistral_7b(), make_gpu()
    t = decode_step_time(m, g, _dep(num_gpus=2, tensor_parallel=2), 1, 100)
    assert t.comm_s == pytest.approx(2 * 32 * (5e-6 + 1.0 * 4096 * 2 / 450e9), rel=1e-9)


def test_tensor_parallel_halves_weight_reads():
    m, g = mistral_7b(), make_gpu()
    one = decode_step_time(m, g, _dep(), 1, 100)
    two = decode_step_time(m, g, _dep(num_gpus=2, tensor_parallel=2), 1, 100)
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
    d = _dep(weight_dtype="mxfp4")
    b1 = decode_step_time(m, g, d, 1, 1).memory_s
    b64 = decode_step_time(m, g, d, 64, 1).memory_s
    assert 5 < b64 / b1 < 30


def test_mla_decode_runs():
    m, g = deepseek_v3(), make_gpu()
    t = decode_step_time(m, g, _dep(num_gpus=8, tensor_parallel=8, weight_dtype="fp8"), 16, 4096)
    assert np.isfinite(t.time_s) and t.time_s > 0


def test_calibrated_profile_slows_things_down():
    m, g = mistral_7b(), make_gpu()
    prof = CalibrationProfile(mode="calibrated", weight_bandwidth_efficiency=0.8, step_overhead_s=1e-3)
    ideal = decode_step_time(m, g, _dep(), 1, 100).time_s
    cal = decode_step_time(m, g, _dep(), 1, 100, profile=prof).time_s
    assert cal > ideal + 1e-3


# -------------------------------------------------------------------------------------------- cost


def test_cost_arithmetic():
    """$3.60/GPU-h = $0.001/s. Batch 10, TPOT 20 ms, 100 output tokens → decode 2 s; prefill 0.5 s for
    10 prompts of 1,000: output $/M = 0.001 × 2 / (10 × 100) × 1e6 = $2.00; input $/M = 0.001 × 0.5 /
    (10 × 1,000) × 1e6 = $0.05; blended 0.001 × 2.5 / 11,000 × 1e6 = $0.227; tokens/s = 10 × 100 / 2.5 = 400."""
    tp = throughput(10, 0.020, 0.5, 1000, 100, gpus_per_replica=1)
    c = token_cost(tp, 3.6)
    assert tp.output_tokens_per_s == pytest.approx(400)
    assert tp.requests_per_s == pytest.approx(4)
    assert c.usd_per_million_output_tokens == pytest.approx(2.0)
    assert c.usd_per_million_input_tokens == pytest.approx(0.05)
    assert c.usd_per_million_tokens_blended == pytest.approx(0.001 * 2.5 / 11_000 * 1e6)
    assert c.usd_per_request == pytest.approx(0.00025)


def test_fleet_for_rate():
    """10 req/s at 2.6 req/s per 2-GPU replica: ceil(3.85) = 4 replicas = 8 GPUs."""
    f = fleet_for(10.0, 2.6, 2, 64)
    assert (f.replicas, f.num_gpus) == (4, 8)
    assert f.utilization == pytest.approx(10 / (4 * 2.6))
    assert fleet_for(None, 2.6, 1, 64, concurrency=200).replicas == 4  # ceil(200 / 64)


def test_prefill_busy_per_request_never_rises_with_batch():
    mc, hw = model_costs(mistral_7b(), _dep()), hw_coeffs(make_gpu(), "bf16")
    b = np.arange(1, 400)
    per = prefill_busy_costs(mc, hw, 100, b, 8192) / b
    assert np.all(np.diff(per) <= 1e-15)


# -------------------------------------------------------------------------------------- SLO search


def test_pick_largest_batch():
    b = np.array([1, 2, 4, 8, 16])
    tpot = np.array([1, 2, 3, 4, 5.0])
    ttft = np.array([1, 1, 2, 9, 9.0])
    assert pick_largest_batch(b, tpot, ttft, 3.5, None, 100) == (4, "tpot")
    assert pick_largest_batch(b, tpot, ttft, None, 5, 100) == (4, "ttft")
    assert pick_largest_batch(b, tpot, ttft, 3.5, 5, 100) == (4, "tpot+ttft")
    assert pick_largest_batch(b, tpot, ttft, None, None, 100) == (16, "limit")
    assert pick_largest_batch(b, tpot, ttft, None, None, 3) == (2, "limit")
    assert pick_largest_batch(b, tpot, ttft, 0.5, None, 100) == (0, "tpot")


def test_slo_search_binds_on_tpot():
    m, g = mistral_7b(), make_gpu()
    w = Workload(prompt_tokens=2048, output_tokens=256, tpot_slo_s=0.012)
    s = largest_batch_under_slo(m, g, _dep(), w)
    assert s.binding == "tpot"
    assert s.tpot_s <= 0.012 < s.tpot_candidates_s[s.batch_size]  # next batch breaks it


def test_slo_search_capped_by_memory_and_max_num_seqs():
    m, g = mistral_7b(), make_gpu()
    w = Workload(prompt_tokens=4096, output_tokens=512)
    s = largest_batch_under_slo(m, g, _dep(), w)
    assert s.binding == "memory" and s.batch_size == s.max_concurrency > 0
    s2 = largest_batch_under_slo(m, g, _dep(max_num_seqs=16), w)
    assert s2.binding == "max_num_seqs" and s2.batch_size == 16


def test_slo_search_with_a_huge_limit_is_exact():
    """max_num_seqs 10^6 on a tiny model: the grid-and-refine search lands on the same batch as brute force."""
    from inline_specs import make_model

    from planner.specs import AttentionSpec

    m = make_model(hidden_size=256, num_layers=2, intermediate_size=512, vocab_size=1000, max_context_tokens=4096,
                   attention=AttentionSpec(kind="mqa", num_heads=4, num_kv_heads=1, head_dim=64))
    g = make_gpu(memory_bytes=192 * 2**30)
    d = _dep(max_num_seqs=10**6, max_num_batched_tokens=10**7)
    mc, hw = model_costs(m, d), hw_coeffs(g, "bf16")
    from planner.cost import effective_tpot_s, prefill_busy_costs

    b = np.arange(1, 300_001)
    busy = prefill_busy_costs(mc, hw, 64, b, d.max_num_batched_tokens)
    tpot = effective_tpot_s(decode_step_costs(mc, hw, b, 64 + 8).time_s, b, busy, 16)
    target = float(tpot[123_456])  # exactly the (effective) TPOT of batch 123,457
    s = largest_batch_under_slo(m, g, d, Workload(prompt_tokens=64, output_tokens=16, tpot_slo_s=target))
    assert s.max_concurrency > 300_000
    assert s.batch_size == int(b[tpot <= target].max()) and s.binding == "tpot"


# ---------------------------------------------------------------------------------- plan and sweep


def test_plan_reasons_name_the_numbers():
    m, g = mistral_7b(), make_gpu()
    r = plan(m, g, _dep(), Workload(prompt_tokens=1024, output_tokens=128, tpot_slo_s=0.001))
    assert not r.feasible
    assert any(x.startswith("TPOT target 1.0 ms is below the") and "single sequence" in x for x in r.reasons)
    r2 = plan(m, g, _dep(), Workload(prompt_tokens=40000, output_tokens=128))
    assert any("exceeds the model's 32,768-token limit" in x for x in r2.reasons)


def test_plan_to_dict_is_json_safe():
    import json

    r = plan(mistral_7b(), make_gpu(), _dep(), Workload(prompt_tokens=4096, output_tokens=512, request_rate_per_s=5))
    d = r.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["calibration_mode"] == "ideal" and d["price_source"]
    assert d["gpus_needed"] >= 1 and d["max_concurrency"] == r.max_concurrency
    assert len(r.to_frame()) == 1


CALIBRATED = CalibrationProfile(
    mode="calibrated", gpu_id="test-gpu", matmul_efficiency_max=0.7, matmul_half_tokens=300,
    weight_bandwidth_efficiency=0.85, kv_bandwidth_efficiency=0.8, step_overhead_s=2e-3, per_seq_overhead_s=2e-5,
    non_torch_bytes=0.4e9, cudagraph_bytes=0.3e9, activation_bytes_per_batched_token_per_width=3.0,
    weight_bytes_factor=1.01,
)


@pytest.mark.parametrize("profile", [IDEAL_PROFILE, CALIBRATED], ids=["ideal", "calibrated"])
def test_sweep_rows_match_plan(profile):
    """Every sweep row is what plan() says for the same configuration (same formulas, vectorised)."""
    m, g = mistral_7b(), make_gpu()
    w = Workload(prompt_tokens=2048, output_tokens=256, tpot_slo_s=0.02, ttft_slo_s=0.5)
    df = sweep(m, w, gpus=[g], weight_dtypes=["bf16", "int4"], kv_dtypes=["bf16", "fp8"], tensor_parallels=[1, 2],
               contexts=[512, 2048], batch_sizes=[1, 7, 64], profile_for=lambda gpu_id: profile)
    assert set(df["calibration_mode"]) == {profile.mode if profile else "ideal"}
    assert len(df) == 2 * 2 * 2 * 2 * 3
    for row in df.sample(12, random_state=0).itertuples():
        d = Deployment.for_gpu(g, num_gpus=row.tensor_parallel, tensor_parallel=row.tensor_parallel,
                               weight_dtype=row.weight_dtype, kv_cache_dtype=row.kv_cache_dtype)
        wl = Workload(prompt_tokens=row.prompt_tokens, output_tokens=256, concurrency=row.batch_size)
        r = plan(m, g, d, wl, profile)
        assert row.max_concurrency == r.max_concurrency
        assert row.kv_pool_bytes_per_gpu == pytest.approx(r.memory.kv_pool_bytes)
        if r.slo.batch_size == row.batch_size:
            assert row.tpot_s == pytest.approx(r.tpot_effective_s)
            assert row.decode_step_s == pytest.approx(r.tpot.time_s)
            assert row.ttft_s == pytest.approx(r.slo.ttft_s)
            assert row.output_tokens_per_s == pytest.approx(float(r.throughput.output_tokens_per_s))
            assert row.cost_usd_per_million_output_tokens == pytest.approx(
                float(r.cost.usd_per_million_output_tokens))


def test_sweep_ranks_feasible_cheapest_first():
    m, g = mistral_7b(), make_gpu()
    df = sweep(m, Workload(prompt_tokens=1024, output_tokens=256, tpot_slo_s=0.03), gpus=[g])
    assert list(df["rank"]) == list(range(1, len(df) + 1))
    ok = df[df["meets_slo"]]
    assert ok.index.max() < df[~df["meets_slo"]].index.min()
    assert ok["cost_usd_per_million_output_tokens_all_in"].is_monotonic_increasing


def test_report_writers(tmp_path):
    """CSV/JSON of a plan: raw numbers in unit-suffixed columns, price source and calibration mode included."""
    import json

    import pandas as pd

    from planner.report import latency_frame, memory_frame, write_csv, write_json

    r = plan(mistral_7b(), make_gpu(), _dep(), Workload(prompt_tokens=4096, output_tokens=512))
    df = pd.read_csv(write_csv([r, r], tmp_path / "r.csv"))
    assert len(df) == 2
    assert {"price_source", "price_date", "calibration_mode", "weight_bytes_per_gpu", "tpot_s"} <= set(df.columns)
    assert pd.api.types.is_float_dtype(df["tpot_s"]) and df["calibration_mode"].iloc[0] == "ideal"
    d = json.loads(write_json(r, tmp_path / "r.json").read_text())
    assert d["weight_bytes_per_gpu"] == pytest.approx(r.memory.weight_bytes)
    mem = memory_frame(r)
    assert mem["bytes_per_gpu"].sum() == pytest.approx(r.memory.gpu_memory_bytes)
    assert list(latency_frame(r)["phase"]) == ["ttft", "tpot"]
