"""planner.serving.step_cost: StepCost is roofline.step_time reduced to floats; the closed-form sums."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import deepseek_v3, gemma_3_27b, gpt_oss_120b, granite_4_h_small, make_gpu, mistral_7b
from hypothesis import given
from hypothesis import strategies as st
from serving_helpers import CAL, PROPS

from planner.attention_sums import attended_decode, attended_prefill
from planner.profile import CalibrationProfile
from planner.roofline import hw_coeffs, model_costs, step_time
from planner.serving import StepCost, sum_max_linear
from planner.specs import Deployment


@pytest.mark.parametrize("model_fn", [mistral_7b, gemma_3_27b, gpt_oss_120b, deepseek_v3, granite_4_h_small])
@pytest.mark.parametrize("tp,pp", [(1, 1), (2, 1), (2, 2)])
@pytest.mark.parametrize("profile", ["ideal", "calibrated"])
def test_step_cost_equals_roofline_step_time(model_fn, tp, pp, profile):
    """StepCost is step_time on floats: the same seconds, bit for bit, for mixed batches of prefill chunks
    and decodes (MoE, sliding window, MLA on either attention pathway, Mamba-2 state, TP, PP, calibrated efficiencies
    and overheads)."""
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
        # the engine's split (StepCost.chunk_sums): a chunk on MLA's decode pathway (<= 512 tokens) brings its
        # context in the decode sum; a longer one also up-projects its cached context
        long_sum, short_sum, kv, longest = sc.chunk_sums([(s, c)] if c else [], att_d)
        assert kv == att_d + kv_p and longest == c
        got = sc.step_s(b + c, sampled, long_sum, att_d + short_sum, kv, longest)
        assert got == float(ref)  # the same formula, terms and order: equal to the last bit


@pytest.mark.parametrize("tp", [1, 2])
def test_each_sequence_reads_and_writes_its_recurrent_state_every_step(tp):
    """A Mamba-2 / Gated DeltaNet step updates each sequence's state in place: 36 layers x 2,147,840 B = 77.3 MB a
    sequence of Granite-4.0-H-Small, read and written back, split over TP.  64 decodes at 2,000 tokens: 9.9 GB more in
    the attention memory roof (2.2 ms at 4.8 TB/s x the KV efficiency) than its 4 attention layers' KV read, 2.1 GB."""
    from planner.roofline import attention_parts

    m, g = granite_4_h_small(), make_gpu()
    dep = Deployment.for_gpu(g, num_gpus=tp, tensor_parallel=tp)
    mc, hw = model_costs(m, dep), hw_coeffs(g, "bf16", CAL)
    assert mc.state_bytes_per_seq == 36 * 2_147_840 / tp
    att = 64 * 4 * 2000.0  # layer-weighted: 64 decodes x 4 attention layers x 2,000 tokens
    _, m0, _, b0 = attention_parts(mc, hw, 64, 0.0, att, att)
    _, m1, _, b1 = attention_parts(mc, hw, 64, 0.0, att, att, 64)
    assert b1 - b0 == 2 * 64 * 36 * 2_147_840 / tp
    assert m1 - m0 == pytest.approx((b1 - b0) / (g.hbm_bandwidth_bytes_per_s * CAL.kv_bandwidth_efficiency))
    sc = StepCost(mc, hw)  # and the simulator's step: a decode step pays it, the same batch without state does not
    plain = StepCost(model_costs(m.model_copy(update={"linear_state_bytes_per_layer": 0}), dep), hw)
    assert sc.step_s(64, 64, 0.0, att, att) > plain.step_s(64, 64, 0.0, att, att)


@given(st.floats(-1, 1), st.floats(-0.1, 0.1), st.floats(-1, 1), st.floats(-0.1, 0.1), st.integers(0, 400))
@PROPS
def test_sum_max_linear_matches_brute_force(a1, b1, a2, b2, n):
    brute = sum(max(a1 + b1 * j, a2 + b2 * j) for j in range(n))
    assert sum_max_linear(a1, b1, a2, b2, n) == pytest.approx(brute, rel=1e-9, abs=1e-9)


@given(st.floats(1e-4, 0.1), st.floats(0, 0.1), st.floats(0, 1e-3), st.floats(0, 0.1), st.floats(0, 1e-3),
       st.floats(1e-4, 50.0), st.integers(1, 3000))
@PROPS
def test_steps_to_reach_is_the_first_step_at_the_target(c0, ac0, acs, am0, ams, target, n):
    """engine.steps_to_reach (quadratic estimate, then walks) = the brute-force smallest m in [1, n] with
    run_s(m) >= target, for a run of decode steps c0 + max(ac0 + acs·j, am0 + ams·j)."""
    from planner.serving.engine import steps_to_reach

    def run_s(m: int) -> float:
        return m * c0 + sum_max_linear(ac0, acs, am0, ams, m)

    if run_s(n) <= target:
        return  # the engine asks only when the whole run passes the target
    m = steps_to_reach(run_s, c0 + max(ac0, am0), max(acs, ams), target, n)
    brute = next(k for k in range(1, n + 1) if run_s(k) >= target)
    assert m == brute
