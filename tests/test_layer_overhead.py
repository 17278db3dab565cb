"""The per-layer step term (issue #21): a step pays `layer_overhead_s` for every layer, graphs or not, fitted on one
dense model built with 16, 32 and 64 layers (calibration/data/h200-2026-12-03-layers) and held out on another model of
three depths and an 80-layer one (h200-2026-12-04-layers-val); decode probes that overflowed the KV pool are left out
of every fit; a coefficient no point depends on is fixed at its start even where the solver left it on a bound."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from calibration.fit import points_from_records, preempted
from calibration.records import read_records
from calibration.solve import FitParam, _unidentified
from calibration.variants import probe_model
from planner.io import catalog
from planner.phases import decode_step_time
from planner.specs import Deployment
from planner.validate import error_pct, predict

DATA = Path(__file__).resolve().parent.parent / "calibration" / "data"
PROF = catalog.profile_for("h200-sxm", "0.26.0")
FIT = "h200-2026-12-03-layers/layers/h200-families.jsonl"
HELD = "h200-2026-12-04-layers-val/layers/h200-families.jsonl"


def _decode_b1(model_id: str, profile=PROF) -> float:
    gpu = catalog.gpu("h200-sxm")
    return float(decode_step_time(probe_model(model_id), gpu, Deployment.for_gpu(gpu), 1, 512, profile).time_s)


def test_a_layer_costs_the_term_on_every_step():
    """Mistral-7B with 64 and 32 layers at batch 1: the extra 32 layers add their weights' streaming and 32 x the layer
    term; with the term at 0 the difference shrinks by exactly that (both deployments the same, nothing else moves)."""
    without = PROF.model_copy(update={"layer_overhead_s": 0.0})
    with_term = _decode_b1("mistral-7b-v0.3-l64") - _decode_b1("mistral-7b-v0.3")
    bare = _decode_b1("mistral-7b-v0.3-l64", without) - _decode_b1("mistral-7b-v0.3", without)
    assert PROF.layer_overhead_s > 0
    assert with_term - bare == pytest.approx(32 * PROF.layer_overhead_s, rel=1e-9)


def test_the_committed_terms_put_the_constant_in_the_layers():
    """Fitted: 0.15 ms a step and 36.6 us a layer (one 32-layer model had given 0.94 ms a step and no layer term);
    32 layers x 36.6 us + 0.15 ms = 1.32 ms of fixed cost a Mistral-7B step, the rest its weights at 86 % of HBM."""
    assert PROF.step_overhead_s == pytest.approx(1.53e-4, rel=0.05)
    assert PROF.layer_overhead_s == pytest.approx(3.66e-5, rel=0.05)
    assert 1e3 * (PROF.step_overhead_s + 32 * PROF.layer_overhead_s) == pytest.approx(1.32, abs=0.03)


def test_held_out_depths_decode_within_the_family_target():
    """Llama-3.1-8B at 16, 32 and 64 layers and Llama-3.1-70B-i7168 (80), none in any fit: decode median |error|
    3.8 / 0.5 / 1.1 / 1.6 % (15.4 / 0.4 / 9.4 / 6.2 % with one model's 0.94 ms a step); the signed medians no longer
    follow the depth (+15.3 % at 16 layers and -9.4 % at 64 before)."""
    pts = [p for p in points_from_records(read_records(DATA / HELD), HELD) if p.metric == "decode_step_s"]
    assert {p.role for p in pts} == {"validate"}
    by_model: dict[str, list[float]] = {}
    for p in pts:
        by_model.setdefault(p.model.id, []).append(error_pct(predict(p, PROF), p.measured))
    med = {m: float(np.median(np.abs(e))) for m, e in by_model.items()}
    assert set(med) == {"llama-3.1-8b-l16", "llama-3.1-8b", "llama-3.1-8b-l64", "llama-3.1-70b-i7168"}
    assert max(med.values()) < 5.0 and med["llama-3.1-8b-l64"] < 2.0 and med["llama-3.1-70b-i7168"] < 2.5
    signed = [float(np.median(by_model[m])) for m in ("llama-3.1-8b-l16", "llama-3.1-8b-l64")]
    assert abs(signed[0]) < 5.0 and abs(signed[1]) < 2.0


def test_a_decode_probe_that_overflows_the_kv_pool_is_left_out():
    """Mistral-7B-l64's batch 256 at 2,048 + 64 tokens needs 256 x ceil(2,112 / 16) = 33,792 blocks of the engine's
    25,627: vLLM preempted (216 ms a step against 27 ms at 512 tokens), so the probe is excluded with its reason."""
    excluded: list[str] = []
    pts = points_from_records(read_records(DATA / FIT), FIT, excluded=excluded)
    assert len(excluded) == 1 and excluded[0].endswith(":40: batch 256 needs 33792 KV blocks, the engine has 25627: "
                                                       "preempted")
    assert not [p for p in pts
                if p.model.id == "mistral-7b-v0.3-l64" and p.batch_size == 256 and p.prompt_tokens == 2048]
    mistral = probe_model("mistral-7b-v0.3")
    probe = {"metric": "decode_step_s", "model": "mistral-7b-v0.3", "batch_size": 4, "prompt_tokens": 100,
             "output_tokens": 12}
    assert preempted(probe, {"num_gpu_blocks": 28, "block_size": 16}, mistral) is None  # 4 x ceil(112 / 16) = 28: fits
    assert preempted(probe, {"num_gpu_blocks": 27, "block_size": 16}, mistral).startswith("batch 4 needs 28 KV blocks")
    damaged = {"num_gpu_blocks": 27, "block_size": "x"}  # the block size falls back to vLLM's 16
    assert preempted(probe, damaged, mistral).startswith("batch 4 needs 28")
    assert preempted(probe, None, mistral) is None and preempted(probe, {"num_gpu_blocks": "many"}, mistral) is None
    assert preempted(dict(probe, metric="prefill_s"), {"num_gpu_blocks": 1, "block_size": 16}, mistral) is None
    gemma = dict(probe, model="gemma-3-12b")  # the hybrid KV manager counts blocks per KV group: not checked
    assert preempted(gemma, {"num_gpu_blocks": 1, "block_size": 16}, probe_model("gemma-3-12b")) is None


def test_a_flat_coefficient_on_a_bound_is_fixed_at_its_start():
    """Scaled coordinates: a fits the points, b (at its upper bound) moves nothing; a third, c, on its lower bound does
    move them.  b is fixed at its documented start (no point depends on it), c where the fit ended."""
    x = np.linspace(1.0, 4.0, 8)

    def f(zf):  # in [0, 1]-scaled coordinates, as solve() hands them over
        return np.log((1.0 + zf[0]) * x / (1.5 * x)) + 0.3 * zf[2]

    params = [FitParam("a", 0.0, 1.0, 0.5), FitParam("b", 0.0, 1.0, 0.25), FitParam("c", 0.0, 1.0, 0.5)]
    z = np.array([0.5, 1.0, 0.0])
    out = _unidentified(f, z, [0, 1, 2], params, "toy")
    assert out == {1: (0.25, "0.25 (its documented start): no toy fit point depends on it"),
                   2: (0.0, "0 (its lower bound): the toy fit ended there")}


def test_one_depth_holds_the_layer_term_and_says_so():
    """`planner calibrate`'s default plan fits the dense stage on Mistral-7B alone: one layer count cannot tell a
    per-step from a per-layer cost (only s + 32 l moves the points), so the term is held at the newest committed
    profile's and fit.fixed says so; the committed refit (16, 32 and 64 layers) fits it."""
    from calibration.families import layer_term_prior
    from calibration.fit import fit_profile

    one = [p for p in points_from_records(read_records(DATA / FIT), FIT) if p.model.id == "mistral-7b-v0.3"]
    value, why = layer_term_prior(one, PROF)
    assert value == PROF.layer_overhead_s and why.endswith("the dense fit points have one layer count")
    three = [p for p in points_from_records(read_records(DATA / FIT), FIT) if p.model.id.startswith("mistral")]
    assert layer_term_prior(three, PROF) is None
    assert "layer_overhead_s" not in PROF.fit.fixed
    recs = [r for r in read_records(DATA / FIT) if r.get("model") in (None, "mistral-7b-v0.3")]
    prof, _ = fit_profile(recs)
    assert prof.models_used == ["mistral-7b-v0.3"] and prof.layer_overhead_s == PROF.layer_overhead_s
    assert prof.fit.fixed["layer_overhead_s"] == why
