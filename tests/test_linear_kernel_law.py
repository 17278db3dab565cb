"""The dense linear kernel law: vLLM 0.26's fp8 linear layers (per-token activation quantisation + CUTLASS
``cutlass_scaled_mm``) and bf16 ones (cuBLAS) timed alone on one H200 over the qkv/o/gate_up/down shapes of four dense
models (calibration/data/h200-2026-12-03-linear-kernel, COMMAND.md), the knots fitted on the two Llama models and held
out on the two Qwen2.5 ones (calibration/linear_kernel_fit.py), and the step formula's fp8 weight streaming on them
(planner.kernel_families.linear_kernel_factor), checked on two dense fp8 engines no stage was fitted on."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.fit import points_from_records
from calibration.linear_kernel_bench import SHAPES, TOKENS
from calibration.linear_kernel_fit import (
    FIT_MODELS,
    LINEAR_KERNEL_DATA,
    SM90_GPUS,
    fit_linear_kernel,
    layer_times,
    ratios,
)
from calibration.records import read_records
from calibration.refit import DATA
from planner.attention_sums import attended_prefill
from planner.io import catalog
from planner.kernel_families import linear_kernel_factor, linear_kernel_knots
from planner.phases import decode_step_costs
from planner.profile import LinearKernelDtype, LinearKernelLaw
from planner.roofline import hw_coeffs, model_costs, step_time
from planner.serving import StepCost
from planner.specs import Deployment
from planner.validate import error_pct, predict

PROF = catalog.profile_for("h200-sxm", "0.26.0")
RECORDS = read_records(DATA / LINEAR_KERNEL_DATA)
ENGINES = "h200-2026-12-03-linear-kernel/lc/h200-families.jsonl"


def test_the_timings_are_all_there():
    """16 layer shapes x 21 token counts x three calls (fp8 as the engine runs it, the fp8 GEMM alone, bf16): 1,008
    timings, none failed; the bench's shapes are the catalog models' (hidden, q/kv heads, intermediate)."""
    recs = [r for r in RECORDS if r.get("type") == "linear_kernel"]
    assert len(recs) == 16 * 21 * 3 == 1008 and not [r for r in RECORDS if r.get("type") == "linear_kernel_error"]
    for model, layer, n, k in SHAPES:
        m = catalog.model(model)
        head = m.hidden_size // m.attention.num_heads
        want = {"qkv": ((m.attention.num_heads + 2 * m.attention.num_kv_heads) * head, m.hidden_size),
                "o": (m.hidden_size, m.hidden_size), "gate_up": (2 * m.intermediate_size, m.hidden_size),
                "down": (m.hidden_size, m.intermediate_size)}[layer]
        assert (n, k) == want, (model, layer)
    assert len(TOKENS) == 21


def test_fp8_streams_slower_at_24_32_and_160_256_tokens_than_at_1_16():
    """The measured shape of the curve on every model, fit and held out: a layer at 24 tokens takes 1.15-1.45x its
    1-16-token time, at 48 within 12 % of it, at 160 1.6-2.2x; bf16 stays within 8 % up to 64 tokens."""
    for dtype in ("fp8", "fp8mm", "bf16"):
        for model, times in layer_times(RECORDS, dtype).items():
            r = ratios(times)
            if dtype == "bf16":
                assert all(abs(r[c] - 1.0) < 0.08 for c in r if c <= 64), (model, r)
                continue
            assert 1.15 <= r[24] <= 1.45 and abs(r[48] - 1.0) < 0.12 and 1.6 <= r[160] <= 2.2, (dtype, model, r)


def test_the_committed_law_is_the_fit_of_the_committed_timings():
    """Refitting gives the committed knots (a mean of ratios: no solver, nothing a CPU or BLAS moves; the YAML keeps
    12 digits); the held-out models' layer times at 1-512 tokens are within a median 3 % and p90 8 % (measured: 1.9 /
    6.6 %)."""
    law = fit_linear_kernel(RECORDS)
    committed = PROF.linear_kernel
    assert law.dtypes["fp8"].tokens == committed.dtypes["fp8"].tokens
    assert law.dtypes["fp8"].factor == pytest.approx(committed.dtypes["fp8"].factor, rel=1e-10)
    assert (law.gpu_ids, law.bucket_edges_tokens, law.source) == (committed.gpu_ids, committed.bucket_edges_tokens,
                                                                   committed.source)
    assert law.fitted_on == sorted(FIT_MODELS) and law.held_out == ["qwen2.5-32b", "qwen2.5-7b"]
    held = law.residuals["held out/fp8"]
    assert held.n == 34 and held.median_abs_error_pct < 3.0 and held.p90_abs_error_pct < 8.0
    d = law.dtypes["fp8"]
    # knot 24: (Llama-3.1-8B 87/62.6... its fp8 layer sum at 24 tokens over its 1-16 median) averaged with 70B's
    assert d.tokens[:8] == [1.0, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0, 32.0] and d.factor[6] == pytest.approx(1.269, abs=2e-3)
    assert d.tokens[-1] == 512.0 and list(law.bucket_edges_tokens) == [16.0, 64.0, 128.0]


def test_the_knots_hold_each_bucket_flat_to_its_edges():
    """Inside a dispatch bucket the factor is interpolated; across an edge it jumps: 17 tokens run the (16, 64]
    configuration, so they take the 24-token knot; 40 lies between 32 and 48; 65 takes 96's; above 512 it stays."""
    knots = linear_kernel_knots(PROF.linear_kernel, "fp8", "h200-sxm")
    d = PROF.linear_kernel.dtypes["fp8"]
    f = dict(zip(d.tokens, d.factor))
    hw = hw_coeffs(catalog.gpu("h200-sxm"), "fp8", PROF)
    assert hw.linear_knots == knots
    assert linear_kernel_factor(hw, 16.0, None) == f[16.0] and linear_kernel_factor(hw, 17.0, None) == f[24.0]
    assert linear_kernel_factor(hw, 40.0, None) == pytest.approx((f[32.0] + f[48.0]) / 2)
    assert linear_kernel_factor(hw, 65.0, None) == f[96.0] and linear_kernel_factor(hw, 64.0, None) == f[64.0]
    assert linear_kernel_factor(hw, 8192.0, None) == f[512.0]
    got = linear_kernel_factor(hw, np.array([1.0, 17.0, 40.0]))
    assert isinstance(got, np.ndarray) and got.tolist() == [f[1.0], f[24.0], pytest.approx((f[32.0] + f[48.0]) / 2)]


def test_the_law_applies_to_fp8_weights_on_the_gpus_of_its_dispatch_only():
    """bf16 and MXFP4 weights, a GPU of another architecture (A100, L40S) and a profile without the law: factor 1."""
    law = PROF.linear_kernel
    assert law.gpu_ids == list(SM90_GPUS)
    assert linear_kernel_knots(law, "bf16", "h200-sxm") == () and linear_kernel_knots(law, "fp8", "l40s") == ()
    assert linear_kernel_knots(None, "fp8", "h200-sxm") == ()
    assert linear_kernel_knots(law, "fp8", "h100-sxm") == linear_kernel_knots(law, "fp8", "h200-sxm")
    oss = catalog.model("gpt-oss-20b")
    assert hw_coeffs(catalog.gpu("h200-sxm"), "mxfp4", PROF, oss).linear_knots == ()
    assert linear_kernel_factor(hw_coeffs(catalog.gpu("h200-sxm"), "bf16", PROF), 24.0, None) == 1.0


def test_the_bench_as_planner_calibrate_runs_it_on_a_later_machine():
    """kernel_benches for an fp8 job, run for real on a later lent H200 (le/: micro-benchmark + 1,008 timings, none
    failed): its knots within 3.5 % of the committed ones at every count (largest at 384 / 512 tokens: 3.25 / 2.59
    against 3.32 / 2.67), its held-out layers within a median 3 %."""
    recs = read_records(DATA / "h200-2026-12-03-linear-kernel/le/h200-sxm-vllm0.26.0-2026-12-03.jsonl")
    assert [r["type"] for r in recs[:2]] == ["env", "microbench"] and len(recs) == 1011
    law = fit_linear_kernel(recs, "h200-sxm")
    mine, committed = law.dtypes["fp8"], PROF.linear_kernel.dtypes["fp8"]
    assert mine.tokens == committed.tokens
    assert np.max(np.abs(np.array(mine.factor) / np.array(committed.factor) - 1.0)) < 0.035
    assert law.residuals["held out/fp8"].median_abs_error_pct < 3.0


def test_a_law_timed_on_another_architecture_holds_for_that_gpu_alone():
    """`planner calibrate` on a GPU outside the sm90 dispatch (an L40S): its own knots, for it alone, interpolated
    throughout (the sm90 bucket edges are not its kernel's); on an H100 (sm90) the law holds for the H100s and H200."""
    other = fit_linear_kernel(RECORDS, "l40s")
    assert other.gpu_ids == ["l40s"] and other.bucket_edges_tokens == []
    xs, ys = linear_kernel_knots(other, "fp8", "l40s")
    d = other.dtypes["fp8"]
    assert list(xs) == d.tokens and list(ys) == d.factor and linear_kernel_knots(other, "fp8", "h200-sxm") == ()
    assert fit_linear_kernel(RECORDS, "h100-sxm").gpu_ids == list(SM90_GPUS)


def test_a_damaged_law_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="tokens and factor"):
        LinearKernelDtype(tokens=[1.0, 2.0, 3.0], factor=[1.0, 1.0])
    with pytest.raises(ValueError, match="ascending"):
        LinearKernelDtype(tokens=[1.0, 4.0, 2.0], factor=[1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="factor"):
        LinearKernelLaw(dtypes={"fp8": {"tokens": [1.0, 2.0], "factor": [1.0, -1.0]}})


def _decode_s(model: str, dtype: str, batch: int) -> float:
    d = Deployment.for_gpu(catalog.gpu("h200-sxm"), num_gpus=1, weight_dtype=dtype)
    m = catalog.model(model)
    mc, hw = model_costs(m, d), hw_coeffs(catalog.gpu("h200-sxm"), dtype, PROF, m)
    return float(decode_step_costs(mc, hw, batch, 1024.0).time_s)


def test_the_step_formula_carries_the_kernel_s_steps():
    """Qwen2.5-32B fp8 decode: 24 sequences cost more than 16 and 48 about what 24 do (measured 12.22 / 16.67 /
    15.48 ms); in bf16 the step grows smoothly.  The quantised linear weights carry the factor, the bf16 lm_head
    and norms do not: the 24-token step's weight streaming rises by (f24 - f16) x quantised bytes."""
    f16, f24, f48 = (_decode_s("qwen2.5-32b", "fp8", b) for b in (16, 24, 48))
    assert f24 / f16 > 1.2 and abs(f48 / f24 - 1.0) < 0.05
    b16, b24 = (_decode_s("qwen2.5-32b", "bf16", b) for b in (16, 24))
    assert 1.0 < b24 / b16 < 1.05
    m = catalog.model("qwen2.5-32b")
    mc = model_costs(m, Deployment.for_gpu(catalog.gpu("h200-sxm"), num_gpus=1, weight_dtype="fp8"))
    assert 0.9 * mc.dense_weight_bytes < mc.linear_kernel_bytes < mc.dense_weight_bytes


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=1, max_value=2048), st.booleans())
def test_the_simulator_s_floats_equal_the_arrays(tokens: int, prefill: bool):
    """StepCost (xp=SCALAR) and step_time (numpy) agree bit for bit with the law's factor in the GEMM terms."""
    d = Deployment.for_gpu(catalog.gpu("h200-sxm"), num_gpus=1, weight_dtype="fp8")
    m = catalog.model("llama-3.1-8b")
    cost = StepCost(model_costs(m, d), hw_coeffs(catalog.gpu("h200-sxm"), "fp8", PROF, m))
    if prefill:
        att = float(attended_prefill(cost.model_costs, 0.0, float(tokens)))
        arr = step_time(cost.model_costs, cost.hw_coeffs, prefill_tokens=float(tokens), prefill_attended=att)
        assert cost.step_s(tokens, 1, att, 0.0, 0.0) == float(arr.total_s)
    else:
        arr = step_time(cost.model_costs, cost.hw_coeffs, decode_seqs=float(tokens), decode_attended=0.0)
        assert cost.step_s(tokens, tokens, 0.0, 0.0, 0.0) == float(arr.total_s)


def test_two_dense_fp8_engines_held_out_decode_within_the_family_target():
    """Qwen2.5-32B and Qwen2.5-7B fp8 in-process, decode at every CUDA-graph batch 1-256 (h200-2026-12-03-linear-kernel
    lc/, held out of every stage): each within 12 %, median under 5 % (measured 3.7 / 11.4 % worst, batch 24 of both
    -10 and -11 %: with the per-layer step term the fp8 stage's streaming moved, Qwen2.5-7B's small batches -4..-6 %;
    3.0 / 8.1 % before it; without the law b160 was -28.0 %, b24 -20.4 %, median 6.5 %)."""
    pts = [p for p in points_from_records(read_records(DATA / ENGINES), ENGINES) if p.metric == "decode_step_s"]
    assert {p.model.id for p in pts} == {"qwen2.5-32b", "qwen2.5-7b"} and len(pts) == 23
    errs = np.array([error_pct(predict(p, PROF), p.measured) for p in pts])
    assert np.abs(errs).max() < 12.0 and np.median(np.abs(errs)) < 5.0
