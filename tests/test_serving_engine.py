"""planner.serving.engine: hand-checkable runs, the closed-form fast-forward against step-by-step,
the sequential baseline, speculative decoding, determinism and invariants under random inputs.

Step times come from the ideal roofline (IDEAL_PROFILE) unless a test says otherwise, so every
expected number below is ``StepCost.step_s`` of a batch one can write down by hand.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from conftest import gemma_3_27b, make_gpu, mistral_7b
from serving_helpers import PROPS, cfg

from planner.serving import EngineConfig, SpecDecode, StepCost, simulate, simulate_sequential
from planner.profile import CalibrationProfile
from planner.specs import Deployment
from planner.serving.workloads import agentic, batch, chat, make_requests, rag, synthetic

# ------------------------------------------------------------------------------ hand-checked runs


def test_one_request_alone_ttft_is_prefill_step_and_tpot_is_decode_steps(mistral):
    """Prompt 512, output 4: TTFT = one prefill step of 512 tokens; then 3 decode steps at contexts
    513, 514, 515 (each attends its own position); TPOT = their mean; E2E = TTFT + 3 × TPOT."""
    cost = mistral
    res = simulate(make_requests(512, 4, [1.0]), cost, cfg())
    prefill = cost.step_s(512, 1, cost.attended_prefill(0, 512), 0.0, 0.0)
    lf = cost.num_full_layers
    decodes = [cost.step_s(1, 1, 0.0, lf * c, lf * c) for c in (513, 514, 515)]
    assert res.ttft_s[0] == pytest.approx(prefill, rel=1e-12)
    assert res.tpot_s[0] == pytest.approx(np.mean(decodes), rel=1e-12)
    assert res.e2e_s[0] == pytest.approx(prefill + sum(decodes), rel=1e-12)
    assert res.arrival_s[0] == 1.0 and res.num_steps == 4


def test_same_as_roofline_prefill_and_decode(mistral):
    """The simulator's single-request TTFT is roofline.prefill_time (one step) and its decode step
    at context c is roofline.decode_step_costs(1, c + 1)."""
    from planner.phases import decode_step_costs, prefill_time_costs

    cost = mistral
    res = simulate(make_requests(2000, 2), cost, cfg())
    assert res.ttft_s[0] == pytest.approx(float(prefill_time_costs(cost.model_costs, cost.hw_coeffs, 2000).time_s), rel=1e-12)
    assert res.tpot_s[0] == pytest.approx(float(decode_step_costs(cost.model_costs, cost.hw_coeffs, 1, 2001).time_s), rel=1e-12)


def test_two_simultaneous_requests_share_one_prefill_step(mistral):
    """Both prompts go through one step of 2 × 300 tokens: equal TTFT = that step's time."""
    cost = mistral
    res = simulate(make_requests(300, 3, [0.0, 0.0]), cost, cfg())
    att = 2 * cost.attended_prefill(0, 300)
    step = cost.step_s(600, 2, att, 0.0, 0.0)
    assert res.ttft_s == pytest.approx([step, step], rel=1e-12)


def test_request_overhead_adds_to_ttft_and_e2e_not_tpot():
    m, g = mistral_7b(), make_gpu()
    dep = Deployment.for_gpu(g)
    a = simulate(make_requests(256, 8), StepCost.from_specs(m, g, dep), cfg())
    prof = CalibrationProfile(mode="calibrated", request_overhead_s=0.01)
    b = simulate(make_requests(256, 8), StepCost.from_specs(m, g, dep, prof), cfg())
    assert b.ttft_s[0] - a.ttft_s[0] == pytest.approx(0.01)
    assert b.e2e_s[0] - a.e2e_s[0] == pytest.approx(0.01)
    assert b.tpot_s[0] == pytest.approx(a.tpot_s[0])


def test_spec_decoding_tpot_matches_formula_alone(mistral):
    """One request alone: each verify step costs T_verify(k+1 tokens) + c·k·T_decode and yields
    E tokens, so TPOT ≈ (T_verify + c·k·T_decode) / E (contexts drift by a few tokens: ±1 %)."""
    cost = mistral
    sp = SpecDecode(4, 0.8, 0.05)
    P, O = 1000, 400
    res = simulate(make_requests(P, O), cost, cfg(spec=sp))
    lf = cost.num_full_layers
    ctx = P + O / 2  # mid-run context
    a = lf * ctx
    t_ver = cost.step_s(5, 5, 0.0, 5 * a + lf * 4 * 5 / 2, a)
    t_dec = cost.step_s(1, 1, 0.0, a, a)
    expect = (t_ver + 0.05 * 4 * t_dec) / sp.expected_tokens_per_step
    assert res.tpot_s[0] == pytest.approx(expect, rel=0.01)
    plain = simulate(make_requests(P, O), cost, cfg())
    assert plain.tpot_s[0] / res.tpot_s[0] > 2.5  # memory-bound decode: ~E / (1 + c·k) = 2.8×


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


# ------------------------------------------------------------------------------ fast-forward


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


# ------------------------------------------------------------------------------ properties


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


def test_fast_forward_equals_step_by_step_with_eager_decode_steps():
    """Decode batches above the largest CUDA graph (512) carry the CPU launch floor (Qwen3-30B-A3B, committed
    profile: 48 MoE layers x ~1 ms): the engine steps them one by one, so both paths still agree."""
    from planner.io import catalog

    g = catalog.gpu("h200-sxm")
    cost = StepCost.from_specs(catalog.model("qwen3-30b-a3b"), g, Deployment.for_gpu(g),
                               catalog.profile_for("h200-sxm", "0.26.0"))
    assert cost.launch_s(600.0, 600.0) > 0.04 and cost.launch_s(512.0, 512.0) == 0.0
    reqs = synthetic(600, 64, 40, rate_per_s=6000, shared_prefix_tokens=0)
    c = cfg(kv_capacity_tokens=200_000, max_num_seqs=1024)
    a, b = simulate(reqs, cost, c), simulate(reqs, cost, c, fast_forward=False)
    assert a.num_steps == b.num_steps
    np.testing.assert_allclose(a.finish_s, b.finish_s, rtol=1e-9)


def test_a_cold_mxfp4_engine_compiles_each_new_step_size_key_once():
    """vLLM 0.26's Triton MXFP4 MoE (gpt-oss) stalls on the first eager step of each new compile key (tokens // 32,
    a multiple of 16 or not: calibration/trace_points.shape_compiles): prompts of 2,001 and 2,010 tokens (62, no)
    compile once, 2,050 (64, no) and 2,048 (64, yes) once each, 8,192 (the start-up profiling run's key) and 900
    (inside the CUDA graphs) never; a warm engine (plans) none.  Each stall is StepCost.shape_compile_s = the
    profile's s per expert × (its offset + 32 experts)."""
    from planner.io import catalog

    g, m = catalog.gpu("h200-sxm"), catalog.model("gpt-oss-20b")
    prof = catalog.profile_for("h200-sxm", "0.26.0")
    dep = Deployment.for_gpu(g, weight_dtype="mxfp4")
    cost = StepCost.from_specs(m, g, dep, prof)
    mx = prof.moe_variants["mxfp4"]
    assert cost.shape_compile_s == pytest.approx(mx.shape_compile_expert_s * (mx.shape_compile_offset_experts + 32))
    assert cost.shape_compile_s > 0.5
    prompts = np.array([2001, 2010, 2050, 2048, 8192, 900])
    reqs = make_requests(prompts, np.full(6, 4), np.arange(6) * 10.0)  # 10 s apart: each prefills alone
    c = cost.shape_compile_s
    warm = simulate(reqs, cost, EngineConfig(200_000, max_num_batched_tokens=8192))
    cold = simulate(reqs, cost, EngineConfig(200_000, max_num_batched_tokens=8192, cold_step_shapes=True))
    assert (warm.num_compile_stalls, cold.num_compile_stalls) == (0, 3)
    assert cold.ttft_s - warm.ttft_s == pytest.approx([c, 0, c, c, 0, 0])
    # after a warm-up that ran the key (62, False) (serve_bench --size-sweep: calibration/serving_points.replay_folder)
    swept = simulate(reqs, cost, EngineConfig(200_000, max_num_batched_tokens=8192, cold_step_shapes=True,
                                              compiled_step_keys=frozenset({(62, False)})))
    assert swept.num_compile_stalls == 2 and swept.ttft_s - warm.ttft_s == pytest.approx([0, 0, c, c, 0, 0])
    dense = StepCost.from_specs(catalog.model("llama-3.1-8b"), g, Deployment.for_gpu(g), prof)
    assert dense.shape_compile_s == 0.0  # no other kernel family compiles per step size
    assert simulate(reqs, dense, EngineConfig(200_000, cold_step_shapes=True)).num_compile_stalls == 0
