"""The serving simulator: hand-checkable cases, invariants, properties and the CLI commands.

Step times come from the ideal roofline (IDEAL_PROFILE) unless a test says otherwise, so every
expected number below is ``StepCost.step_s`` of a batch one can write down by hand.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import deepseek_v3, gemma_3_27b, gpt_oss_120b, make_gpu, mistral_7b
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from planner import catalog
from planner.profile import CalibrationProfile
from planner.roofline import attended_decode, attended_prefill, hw_coeffs, model_costs, step_time
from planner.simulate import (
    SPEC_PRESETS,
    EngineConfig,
    SpecDecode,
    StepCost,
    engine_setup,
    rate_sweep,
    replay,
    simulate,
    simulate_sequential,
    slo_search,
    spec_expected_tokens,
    spec_speedup,
    sum_max_linear,
)
from planner.specs import Deployment
from planner.workloads import agentic, batch, chat, load_trace, make_requests, rag, synthetic

PROPS = settings(max_examples=25, deadline=None, derandomize=True)
CAL = CalibrationProfile(mode="calibrated", matmul_efficiency_max=0.8, matmul_half_tokens=64.0,
                         attention_compute_efficiency=0.6, weight_bandwidth_efficiency=0.85,
                         kv_bandwidth_efficiency=0.7, step_overhead_s=4e-4, per_seq_overhead_s=2e-6,
                         per_token_overhead_s=1e-7, request_overhead_s=2e-3)


@pytest.fixture(scope="module")
def mistral() -> StepCost:
    """Step costs of Mistral 7B on a 3.35 TB/s, 989 TFLOP/s test GPU (ideal roofline)."""
    m, g = mistral_7b(), make_gpu()
    return StepCost.from_specs(m, g, Deployment.for_gpu(g))


def cfg(**kw) -> EngineConfig:
    kw.setdefault("kv_capacity_tokens", 500_000)
    return EngineConfig(**kw)


# ------------------------------------------------------------------------------------ step cost


@pytest.mark.parametrize("model_fn", [mistral_7b, gemma_3_27b, gpt_oss_120b, deepseek_v3])
@pytest.mark.parametrize("tp,pp", [(1, 1), (2, 1), (2, 2)])
@pytest.mark.parametrize("profile", ["ideal", "calibrated"])
def test_step_cost_equals_roofline_step_time(model_fn, tp, pp, profile):
    """StepCost is step_time reduced to floats: same seconds for mixed batches of prefill chunks
    and decodes (MoE, sliding window, MLA, TP, PP, calibrated efficiencies and overheads)."""
    m, g = model_fn(), make_gpu()
    dep = Deployment.for_gpu(g, num_gpus=tp * pp, tensor_parallel=tp, pipeline_parallel=pp)
    prof = CAL if profile == "calibrated" else CalibrationProfile()
    mc, hw = model_costs(m, dep), hw_coeffs(g, "bf16", prof)
    sc = StepCost(mc, hw)
    rng = np.random.default_rng(1)
    for _ in range(20):
        b = int(rng.integers(0, 300))
        ctx = rng.integers(1, 20000, b)
        s, c = float(rng.integers(0, 9000)), float(rng.integers(0, 4096))
        att_d = float(np.sum(attended_decode(mc, ctx + 1))) if b else 0.0
        att_p = float(attended_prefill(mc, s, c)) if c else 0.0
        kv_p = sc.prefill_kv_read(s) if c else 0.0
        sampled = b + (1 if c else 0)
        ref = step_time(mc, hw, prefill_tokens=c, prefill_attended=att_p, prefill_kv_read_tokens=kv_p,
                        decode_seqs=b, decode_attended=att_d, sampled_seqs=sampled).total_s
        got = sc.step_s(b + c, sampled, sc.attended_prefill(s, c) if c else 0.0, att_d, att_d + kv_p)
        assert got == pytest.approx(float(ref), rel=1e-12, abs=1e-15)


@given(st.floats(-1, 1), st.floats(-0.1, 0.1), st.floats(-1, 1), st.floats(-0.1, 0.1), st.integers(0, 400))
@PROPS
def test_sum_max_linear_matches_brute_force(a1, b1, a2, b2, n):
    brute = sum(max(a1 + b1 * j, a2 + b2 * j) for j in range(n))
    assert sum_max_linear(a1, b1, a2, b2, n) == pytest.approx(brute, rel=1e-9, abs=1e-9)


# ----------------------------------------------------------------------------- speculative decoding


def test_spec_expected_tokens_by_hand():
    """(1 − α^(k+1))/(1 − α): k=4, α=0.8 → (1 − 0.32768)/0.2 = 3.3616; α=0 → 1; α=1 → k+1;
    k=3, α=0.5 → 1 + .5 + .25 + .125 = 1.875."""
    assert spec_expected_tokens(4, 0.8) == pytest.approx(3.3616)
    assert spec_expected_tokens(3, 0.5) == pytest.approx(1.875)
    assert spec_expected_tokens(5, 0.0) == 1.0
    assert spec_expected_tokens(5, 1.0) == 6.0
    # Leviathan et al. Thm 3.8 with a free verify: 3.3616 / (0.05 × 4 + 1) = 2.8013
    assert spec_speedup(4, 0.8, 0.05) == pytest.approx(3.3616 / 1.2)
    with pytest.raises(ValueError, match="spec_acceptance"):
        spec_expected_tokens(4, 1.5)


def test_spec_presets_have_sources():
    for p in SPEC_PRESETS.values():
        assert "arXiv" in p.source and 0 < p.acceptance_rate < 1 and p.num_speculative_tokens >= 1


def test_spec_decoding_tpot_matches_formula_alone(mistral):
    """One request alone: each verify step costs T_verify(k+1 tokens) + c·k·T_decode and yields
    E tokens, so TPOT ≈ (T_verify + c·k·T_decode) / E (contexts drift by a few tokens: ±1 %)."""
    cost = mistral
    sp = SpecDecode(4, 0.8, 0.05)
    P, O = 1000, 400
    res = simulate(make_requests(P, O), cost, cfg(spec=sp))
    lf = cost.full_layers
    ctx = P + O / 2  # mid-run context
    a = lf * ctx
    t_ver = cost.step_s(5, 5, 0.0, 5 * a + lf * 4 * 5 / 2, a)
    t_dec = cost.step_s(1, 1, 0.0, a, a)
    expect = (t_ver + 0.05 * 4 * t_dec) / sp.expected_tokens_per_step
    assert res.tpot_s[0] == pytest.approx(expect, rel=0.01)
    plain = simulate(make_requests(P, O), cost, cfg())
    assert plain.tpot_s[0] / res.tpot_s[0] > 2.5  # memory-bound decode: ~E / (1 + c·k) = 2.8×


# ------------------------------------------------------------------------------ hand-checked runs


def test_one_request_alone_ttft_is_prefill_step_and_tpot_is_decode_steps(mistral):
    """Prompt 512, output 4: TTFT = one prefill step of 512 tokens; then 3 decode steps at contexts
    513, 514, 515 (each attends its own position); TPOT = their mean; E2E = TTFT + 3 × TPOT."""
    cost = mistral
    res = simulate(make_requests(512, 4, [1.0]), cost, cfg())
    prefill = cost.step_s(512, 1, cost.attended_prefill(0, 512), 0.0, 0.0)
    lf = cost.full_layers
    decodes = [cost.step_s(1, 1, 0.0, lf * c, lf * c) for c in (513, 514, 515)]
    assert res.ttft_s[0] == pytest.approx(prefill, rel=1e-12)
    assert res.tpot_s[0] == pytest.approx(np.mean(decodes), rel=1e-12)
    assert res.e2e_s[0] == pytest.approx(prefill + sum(decodes), rel=1e-12)
    assert res.arrival_s[0] == 1.0 and res.num_steps == 4


def test_same_as_roofline_prefill_and_decode(mistral):
    """The simulator's single-request TTFT is phases.prefill_time (one step) and its decode step
    at context c is phases.decode_step_costs(1, c + 1)."""
    from planner.phases import decode_step_costs, prefill_time_costs

    cost = mistral
    res = simulate(make_requests(2000, 2), cost, cfg())
    assert res.ttft_s[0] == pytest.approx(float(prefill_time_costs(cost.mc, cost.hw, 2000).time_s), rel=1e-12)
    assert res.tpot_s[0] == pytest.approx(float(decode_step_costs(cost.mc, cost.hw, 1, 2001).time_s), rel=1e-12)


def test_two_simultaneous_requests_share_one_prefill_step(mistral):
    """Both prompts go through one step of 2 × 300 tokens: equal TTFT = that step's time."""
    cost = mistral
    res = simulate(make_requests(300, 3, [0.0, 0.0]), cost, cfg())
    att = 2 * cost.attended_prefill(0, 300)
    step = cost.step_s(600, 2, att, 0.0, 0.0)
    assert res.ttft_s == pytest.approx([step, step], rel=1e-12)


def test_chunked_prefill_splits_a_long_prompt(mistral):
    """Prompt 10,000 with max_num_batched_tokens 4,096: chunks 4,096 + 4,096 + 1,808; chunk i
    attends its prior context and reads it from the cache."""
    cost = mistral
    res = simulate(make_requests(10_000, 2), cost, cfg(max_num_batched_tokens=4096))
    t = 0.0
    for s, c in ((0, 4096), (4096, 4096), (8192, 1808)):
        t += cost.step_s(c, 1, cost.attended_prefill(s, c), 0.0, cost.prefill_kv_read(s))
    assert res.ttft_s[0] == pytest.approx(t, rel=1e-12)
    assert res.prefill_tokens_computed == 10_000


def test_request_overhead_adds_to_ttft_and_e2e_not_tpot():
    m, g = mistral_7b(), make_gpu()
    dep = Deployment.for_gpu(g)
    a = simulate(make_requests(256, 8), StepCost.from_specs(m, g, dep), cfg())
    prof = CalibrationProfile(mode="calibrated", request_overhead_s=0.01)
    b = simulate(make_requests(256, 8), StepCost.from_specs(m, g, dep, prof), cfg())
    assert b.ttft_s[0] - a.ttft_s[0] == pytest.approx(0.01)
    assert b.e2e_s[0] - a.e2e_s[0] == pytest.approx(0.01)
    assert b.tpot_s[0] == pytest.approx(a.tpot_s[0])


def test_sequential_baseline_is_fcfs_one_at_a_time(mistral):
    """A burst of 5 equal requests served one at a time: request i's first token comes after i
    whole services plus its own prefill; its service = prefill + 7 decode steps."""
    cost = mistral
    reqs = make_requests(400, 8, np.zeros(5))
    res = simulate_sequential(reqs, cost)
    alone = simulate(make_requests(400, 8), cost, cfg())
    service = alone.e2e_s[0]
    assert res.ttft_s == pytest.approx([i * service + alone.ttft_s[0] for i in range(5)], rel=1e-9)
    assert res.e2e_s[-1] == pytest.approx(5 * service, rel=1e-9)


def test_batching_beats_the_sequential_baseline_many_fold(mistral):
    """The seeds' '~15× over a naive baseline': a burst of 256 chat requests; continuous batching
    serves them many times faster than one-at-a-time (memory-bound decode shares the weights)."""
    cost = mistral
    reqs = batch(256, seed=3)
    fast, slow = simulate(reqs, cost, cfg()), simulate_sequential(reqs, cost)
    assert fast.output_tokens_per_s / slow.output_tokens_per_s > 15
    assert fast.output_tokens.sum() == slow.output_tokens.sum()


def test_fast_forward_equals_step_by_step(mistral):
    """The closed-form runs of decode steps give the same timings as simulating every step."""
    cost = mistral
    for reqs, c in ((chat(150, rate_per_s=20, seed=4), cfg()),
                    (chat(150, rate_per_s=40, seed=5), cfg(kv_capacity_tokens=12_000, max_num_seqs=64)),
                    (synthetic(60, 200, 50, rate_per_s=30, shared_prefix_tokens=1000), cfg()),
                    (agentic(12, turns=3, rate_per_s=2, seed=1), cfg(kv_capacity_tokens=20_000))):
        a = simulate(reqs, cost, c)
        b = simulate(reqs, cost, c, fast_forward=False)
        assert a.num_steps == b.num_steps
        assert a.num_preemptions == b.num_preemptions
        np.testing.assert_allclose(a.first_token_s, b.first_token_s, rtol=1e-9)
        np.testing.assert_allclose(a.finish_s, b.finish_s, rtol=1e-9)


def test_fast_forward_equals_step_by_step_sliding_window():
    m, g = gemma_3_27b(), make_gpu()
    cost = StepCost.from_specs(m, g, Deployment.for_gpu(g))
    reqs = rag(40, rate_per_s=2, seed=2)
    a, b = simulate(reqs, cost, cfg()), simulate(reqs, cost, cfg(), fast_forward=False)
    np.testing.assert_allclose(a.finish_s, b.finish_s, rtol=1e-9)


# ------------------------------------------------------------------------------ load behaviour


def test_littles_law(mistral):
    """Time-averaged requests in the system = throughput × mean time in the system (±5 %)."""
    cost = mistral
    res = simulate(chat(3000, rate_per_s=30, seed=7), cost, cfg())
    lam_w = res.requests_per_s * np.mean(res.e2e_s)
    assert res.mean_in_system == pytest.approx(lam_w, rel=0.05)


def test_tiny_pool_preempts_and_still_completes(mistral):
    """A 6,000-token pool for ~50 concurrent chat requests: recompute preemptions happen, every
    request still finishes with all its tokens, and the block accounting holds after every event."""
    cost = mistral
    res = simulate(chat(300, rate_per_s=40, seed=1), cost, cfg(kv_capacity_tokens=6000, max_num_seqs=64), debug=True)
    assert res.num_preemptions > 0 and res.preemptions_per_request.max() >= 1
    assert res.completed.all()
    assert res.summary()["kv_usage_max"] <= 1.0
    big = simulate(chat(300, rate_per_s=40, seed=1), cost, cfg())
    assert big.num_preemptions == 0
    assert np.mean(res.e2e_s) > np.mean(big.e2e_s)


def test_requests_larger_than_the_pool_are_rejected(mistral):
    cost = mistral
    res = simulate(make_requests([100, 5000, 100], 10, [0.0, 0.1, 0.2]), cost, cfg(kv_capacity_tokens=4096))
    assert res.num_rejected == 1 and np.isnan(res.finish_s[1]) and res.completed[[0, 2]].all()
    assert res.summary()["rejected"] == 1


def test_closed_loop_keeps_concurrency(mistral):
    cost = mistral
    res = simulate(synthetic(400, 256, 64, concurrency=16), cost, cfg())
    assert res.series_running.max() <= 16
    assert res.series_waiting.max() + res.series_running.max() <= 16
    assert res.mean_in_system == pytest.approx(16, rel=0.05)


def test_prefix_caching_lowers_ttft_and_prefill_tokens(mistral):
    """2,048 shared + 256 unique prompt tokens: with caching every request after the first hits
    the 128 shared blocks: hit rate = (N − 1)·2048 / (N·2304); prefill computes 2304 + (N−1)·256."""
    cost = mistral
    n = 200
    reqs = synthetic(n, 256, 64, rate_per_s=5, shared_prefix_tokens=2048, seed=2)
    on = simulate(reqs, cost, cfg(enable_prefix_caching=True))
    off = simulate(reqs, cost, cfg(enable_prefix_caching=False))
    assert on.prefix_cache_hit_rate == pytest.approx((n - 1) * 2048 / (n * 2304))
    assert on.prefill_tokens_computed == 2304 + (n - 1) * 256
    assert off.prefill_tokens_computed == n * 2304 and off.prefix_cache_hit_rate == 0
    assert np.mean(on.ttft_s) < 0.5 * np.mean(off.ttft_s)
    assert on.cached_prompt_tokens[0] == 0 and (on.cached_prompt_tokens[1:] == 2048).all()


def test_prefix_cache_hit_capped_below_the_whole_prompt(mistral):
    """An identical 2,048-token prompt hits at most 127 blocks: vLLM recomputes the last token."""
    cost = mistral
    reqs = make_requests(2048, 4, [0.0, 1.0], prefix_group=0, prefix_tokens=2048)
    res = simulate(reqs, cost, cfg())
    assert res.cached_prompt_tokens.tolist() == [0, 2032]


def test_agentic_multi_turn_benefits_from_prefix_caching(mistral):
    cost = mistral
    reqs = agentic(60, turns=5, rate_per_s=1, seed=3)
    on = simulate(reqs, cost, cfg(), debug=True)
    off = simulate(reqs, cost, cfg(enable_prefix_caching=False))
    assert on.prefix_cache_hit_rate > 0.7
    assert np.mean(on.ttft_s) < 0.5 * np.mean(off.ttft_s)
    # turn i+1 arrives after turn i finished (think time >= 0)
    par = reqs.parent
    kids = par >= 0
    assert (on.arrival_s[kids] >= on.finish_s[par[kids]] - 1e-12).all()


def test_follow_up_turn_of_a_short_turn_still_hits(mistral):
    """Turn 1: 40 prompt + 3 output tokens with a 32-token shared prefix (2 blocks) and no full
    block of its own beyond it; turn 2 (73 tokens: turn 1 + 30 new) still reuses the 2 shared blocks."""
    cost = mistral
    first = make_requests([40], [3], [0.0], prefix_group=0, prefix_tokens=32)
    res = simulate(first, cost, cfg())
    assert res.completed.all()
    reqs = make_requests([40, 73], [3, 5], [0.0, np.nan], prefix_group=[0, 0], prefix_tokens=[32, 0],
                         parent=[-1, 0])
    res = simulate(reqs, cost, cfg(), debug=True)
    assert res.cached_prompt_tokens.tolist() == [0, 32]


def test_determinism_under_a_seed(mistral):
    cost = mistral
    a = simulate(chat(300, rate_per_s=30, seed=11), cost, cfg())
    b = simulate(chat(300, rate_per_s=30, seed=11), cost, cfg())
    c = simulate(chat(300, rate_per_s=30, seed=12), cost, cfg())
    np.testing.assert_array_equal(a.finish_s, b.finish_s)
    assert a.summary()["ttft_s"] == b.summary()["ttft_s"]
    assert not np.array_equal(a.finish_s, c.finish_s)


@given(st.floats(2.0, 60.0), st.floats(1.5, 4.0))
@settings(max_examples=12, deadline=None, derandomize=True)
def test_higher_rate_never_lowers_p50_ttft(rate, factor):
    """Averaged over 3 fixed seeds (the same arrival pattern compressed in time), p50 TTFT at
    ``factor`` × the rate is not lower (2 % slack for the discreteness of which prefills coincide)."""
    m, g = mistral_7b(), make_gpu()
    cost = StepCost.from_specs(m, g, Deployment.for_gpu(g))

    def p50(r):
        return np.mean([np.median(simulate(synthetic(150, 512, 64, rate_per_s=r, seed=s), cost, cfg()).ttft_s)
                        for s in (0, 1, 2)])

    assert p50(rate * factor) >= 0.98 * p50(rate)


@given(n=st.integers(1, 40), p=st.integers(1, 3000), o=st.integers(1, 300), rate=st.floats(0.5, 200),
       shared=st.integers(0, 1500), cap=st.integers(4000, 60000), mns=st.integers(1, 64),
       mnbt=st.integers(64, 8192), pc=st.booleans(), spec=st.booleans())
@PROPS
def test_no_nan_and_sane_summary(n, p, o, rate, shared, cap, mns, mnbt, pc, spec):
    m, g = mistral_7b(), make_gpu()
    cost = StepCost.from_specs(m, g, Deployment.for_gpu(g))
    c = EngineConfig(cap, max(1, min(mns, mnbt)), mnbt, 16, pc, SpecDecode(3, 0.7, 0.05) if spec else None)
    res = simulate(synthetic(n, p, o, rate_per_s=rate, shared_prefix_tokens=shared, seed=1), cost, c, debug=True)
    s = res.summary()
    done = res.completed
    assert done.sum() + res.num_rejected == n
    for key in ("ttft_s", "e2e_s"):
        if done.any():
            assert all(math.isfinite(v) and v > 0 for v in s[key].values())
    if done.any() and o > 1:
        assert all(math.isfinite(v) and v > 0 for v in s["tpot_s"].values())
    assert 0 <= s["kv_usage_max"] <= 1 and s["queue_max"] >= 0
    assert math.isfinite(s["output_tokens_per_s"]) and s["output_tokens_per_s"] >= 0
    assert (res.ttft_s[done] <= res.e2e_s[done] + 1e-12).all()
    json.dumps(s, allow_nan=False)


# ------------------------------------------------------------------------------------ workloads


def test_presets_shapes():
    c = chat(2000, rate_per_s=5, seed=0)
    assert 100 < c.prompt_tokens.mean() < 220 and 250 < c.output_tokens.mean() < 420  # ShareGPT means 161 / 338
    assert np.all(np.diff(c.arrival_s) > 0)
    assert c.arrival_s[-1] == pytest.approx(2000 / 5, rel=0.1)
    r = rag(300, seed=0)
    assert r.prompt_tokens.mean() > 3000 and (r.prefix_group == 0).all()
    a = agentic(10, turns=4)
    assert len(a) == 40 and (a.prompt_tokens.reshape(10, 4)[:, 1:] > a.prompt_tokens.reshape(10, 4)[:, :-1]).all()
    b = batch(50)
    assert (b.arrival_s == 0).all()


def test_bursty_arrivals_have_the_asked_cv():
    from planner.workloads import gamma_arrivals

    gaps = np.diff(gamma_arrivals(20000, 10.0, cv=3.0, seed=1))
    assert gaps.mean() == pytest.approx(0.1, rel=0.1)
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.1)


def test_trace_csv_and_jsonl(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens\n0.5,100,10\n0.1,200,20\n")
    r = load_trace(p)
    assert r.arrival_s.tolist() == [0.1, 0.5] and r.prompt_tokens.tolist() == [200, 100]
    j = tmp_path / "t.jsonl"
    j.write_text('{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 2}\n{"type": "header"}\n')
    assert len(load_trace(j)) == 1
    bad = tmp_path / "b.csv"
    bad.write_text("arrival_s,prompt_tokens\n0,1\n")
    with pytest.raises(ValueError, match="output_tokens"):
        load_trace(bad)


def test_bad_workload_input_names_the_field():
    with pytest.raises(ValueError, match="output_tokens"):
        make_requests(10, 0)
    with pytest.raises(ValueError, match="rate"):
        synthetic(10, 10, 10, rate_per_s=-1)
    with pytest.raises(ValueError, match="num_requests"):
        make_requests([10, 20], [1, 2, 3])
    with pytest.raises(ValueError, match="whole numbers"):
        make_requests(10.5, 2)
    with pytest.raises(ValueError, match="kv_capacity_tokens"):
        EngineConfig(kv_capacity_tokens=8)


# ------------------------------------------------------------------------------------ SLO search


def test_slo_search_meets_targets_and_is_deterministic(mistral):
    cost = mistral

    def make(rate):
        return synthetic(300, 512, 128, rate_per_s=rate, seed=0)

    c = cfg()
    a = slo_search(make, cost, c, 0.5, 0.05, price_usd_per_gpu_hour=3.5)
    b = slo_search(make, cost, c, 0.5, 0.05, price_usd_per_gpu_hour=3.5)
    assert a == b and a.max_rate_per_s > 0
    assert a.ttft_p99_s <= 0.5 and a.tpot_p99_s <= 0.05
    assert a.max_rate_per_s <= 1.5 * a.saturation_rate_per_s
    # $/Mtok = price per second / output tokens per second × 1e6
    assert a.usd_per_million_output_tokens == pytest.approx(3.5 / 3600 / a.output_tokens_per_s * 1e6)
    assert a.replicas_for(10 * a.max_rate_per_s) == 10
    # an impossible TTFT (below one prefill step) gives rate 0
    z = slo_search(make, cost, c, 1e-5, 0.05)
    assert z.max_rate_per_s == 0


def test_rate_sweep_shows_the_knee(mistral):
    """Latency rises with the rate and explodes past saturation; throughput tracks the rate below it."""
    cost = mistral
    rows = rate_sweep(lambda r: synthetic(300, 512, 128, rate_per_s=r, seed=0), cost, cfg(), [2, 20, 200])
    assert [r["rate_per_s"] for r in rows] == [2, 20, 200]
    assert rows[0]["ttft_p99_s"] <= rows[1]["ttft_p99_s"] < rows[2]["ttft_p99_s"]
    assert rows[0]["tpot_p50_s"] < rows[2]["tpot_p50_s"]
    assert 0.8 * 20 < rows[1]["requests_per_s"] < 1.1 * 20  # a 300-request Poisson sample plus the drain
    assert rows[2]["requests_per_s"] < 0.6 * 200 and rows[2]["queue_max"] > 0


# ------------------------------------------------------------------------------------------ replay


def _records_from_sim(res, name, engine_id, pc, shared=0):
    recs = [{"type": "run", "run": name, "engine_id": engine_id, "rate_per_s": 5.0}]
    for i in range(len(res.arrival_s)):
        recs.append({"type": "request", "run": name, "index": i, "arrival_offset_s": float(res.arrival_s[i]),
                     "prompt_tokens": int(res.prompt_tokens[i]), "output_tokens": int(res.output_tokens[i]),
                     "shared_prefix_tokens": shared, "prefix_group": 0, "ttft_s": float(res.ttft_s[i]),
                     "tpot_s": float(res.tpot_s[i]), "e2e_s": float(res.e2e_s[i]),
                     "num_output_tokens": int(res.output_tokens[i])})
    return recs


def test_replay_of_simulated_records_reproduces_them():
    """Records written from a simulation replay with ~0 error (the pipeline, not the model, is tested)."""
    m, g = catalog.model("mistral-7b-v0.3"), catalog.gpu("h200-sxm")
    dep = Deployment.for_gpu(g, max_num_seqs=256, max_num_batched_tokens=2048)
    cost = StepCost.from_specs(m, g, dep)
    engines = [{"type": "engine", "engine_id": "e-on", "max_num_seqs": 256, "max_num_batched_tokens": 2048,
                "block_size": 16, "num_gpu_blocks": 40001, "enable_prefix_caching": True},
               {"type": "engine", "engine_id": "e-off", "max_num_seqs": 256, "max_num_batched_tokens": 2048,
                "block_size": 16, "num_gpu_blocks": 40001, "enable_prefix_caching": False}]
    recs = list(engines)
    reqs = synthetic(100, 256, 32, rate_per_s=5, shared_prefix_tokens=1024, seed=1)
    for eid, pc in (("e-on", True), ("e-off", False)):
        res = simulate(reqs, cost, EngineConfig(40000 * 16, 256, 2048, 16, pc))
        recs += _records_from_sim(res, f"shared-{eid}", eid, pc, shared=1024)
    rep = replay(recs, m, g)
    assert len(rep.rows) == 2
    for row in rep.rows:
        for k in ("output_tokens_per_s", "ttft_p50_s", "tpot_p99_s"):
            assert abs(row.error_pct(k)) < 1e-6
    gain = rep.prefix_caching_gain
    assert gain["measured_ttft_mean_ratio_off_over_on"] == pytest.approx(gain["predicted_ttft_mean_ratio_off_over_on"])
    assert gain["predicted_ttft_mean_ratio_off_over_on"] > 1.5
    json.dumps(rep.as_dict())


# --------------------------------------------------------------------------------------------- CLI

runner = CliRunner()


def _cli(*args):
    from planner.cli import app

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


def test_cli_simulate_variants(tmp_path):
    base = ("simulate", "--model", "mistral-7b-v0.3", "--gpu", "h200-sxm", "--profile", "none", "-n", "100")
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
    args = ("slo-search", "--model", "mistral-7b-v0.3", "--gpus", "h200-sxm,l4", "--profile", "none",
            "--ttft-p99-ms", "500", "--tpot-p99-ms", "50", "--target-rate", "40", "-n", "200")
    r = _cli(*args, "--csv")
    assert r.exit_code == 0, r.output
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("model,gpu,weight_dtype") and len(lines) == 3
    j = _cli(*args, "--json")
    d = json.loads(j.stdout)
    best = d["candidates"][0]
    assert best["gpu"] == "h200-sxm" and best["fits"] and best["replicas_for_target"] >= 1
    assert best["ttft_p99_s"] <= 0.5 and best["tpot_p99_s"] <= 0.05
    r = _cli("slo-search", "--model", "llama-3.1-70b", "--gpus", "l4", "--tp", "1", "--profile", "none",
             "--ttft-p99-ms", "500", "--tpot-p99-ms", "50", "-n", "50", "--json")
    row = json.loads(r.stdout)["candidates"][0]
    assert r.exit_code == 0 and row["fits"] is False and "does not fit" in row["note"]
    bad = _cli("slo-search", "--model", "mistral-7b-v0.3", "--ttft-p99-ms", "-1", "--tpot-p99-ms", "50")
    assert bad.exit_code == 2 and "--ttft-p99-ms" in bad.output


def test_engine_setup_uses_the_memory_budget():
    from planner.memory import memory_budget

    m, g = catalog.model("mistral-7b-v0.3"), catalog.gpu("h200-sxm")
    dep = Deployment.for_gpu(g)
    _, c = engine_setup(m, g, dep)
    assert c.kv_capacity_tokens == memory_budget(m, g, dep).kv_capacity_tokens
    with pytest.raises(ValueError, match="gpu"):
        engine_setup(catalog.model("llama-3.1-405b"), g, dep)
