"""calibration.serve_floor.piecewise_terms: the launch of a prompt step inside the CUDA graphs (piecewise) fitted on
traced dense engines, each brought to the profile host's speed by its eager launch floor."""

from __future__ import annotations

import pytest

from calibration.serve_floor import piecewise_terms
from calibration.trace_points import LaunchFloor
from planner.io import catalog

PROF = catalog.profile_for("h200-sxm", "0.26.0")


def engine(model_id: str, layers: int, per_layer_ms: float, call_ms: float) -> tuple[LaunchFloor, float]:
    """A traced engine whose eager floor is ``per_layer_ms`` a layer and whose piecewise call is ``call_ms``."""
    floor = LaunchFloor(model_id, layers * per_layer_ms / 1e3, 100, 1000, 0.0, 0.0, "test")
    return floor, call_ms / 1e3


def test_the_committed_terms_are_the_line_through_the_origin_of_the_three_traced_engines():
    """At the Llama host's speed (0.749 ms a layer): 32 layers 7.42 ms, 64 layers 8.33 / 0.835 = 9.98 ms, 80 layers
    18.26 / 0.934 = 19.56 ms.  The least-squares line starts below 0 (-1.1 ms), so it goes through the origin:
    (32 x 7.42 + 64 x 9.98 + 80 x 19.56) / (32² + 64² + 80²) = 2,440.9 / 11,520 = 0.2119 ms a layer."""
    assert PROF.piecewise_step_launch_s == 0.0
    assert 1e3 * PROF.piecewise_layer_launch_s == pytest.approx(2440.9 / 11520, rel=2e-3)


def test_two_layer_counts_give_a_line_and_host_speed_is_taken_out():
    """Engines at 32 and 64 layers calling for 7 + 0.1 ms a layer on a host 2x as slow as the profile's: 3.5 ms a
    step + 0.05 ms a layer here."""
    per = 1e3 * PROF.eager_layer_launch_s
    eng = [engine("llama-3.1-8b", 32, 2 * per, 2 * (3.5 + 32 * 0.05)),
           engine("qwen2.5-32b", 64, 2 * per, 2 * (3.5 + 64 * 0.05))]
    t = piecewise_terms(PROF, eng, PROF.eager_layer_launch_s)
    assert 1e3 * t["piecewise_step_launch_s"] == pytest.approx(3.5)
    assert 1e3 * t["piecewise_layer_launch_s"] == pytest.approx(0.05)


def test_one_engine_scales_the_profiles_line_and_none_scales_with_the_eager_launch():
    """One traced engine (a `+serve` job on its host): the profile's line × its call over the line's; no engine but a
    host floor 0.8x the profile's: both terms × 0.8.  Never negative."""
    p = PROF.model_copy(update={"piecewise_step_launch_s": 0.002, "piecewise_layer_launch_s": 0.0001})
    per = 1e3 * p.eager_layer_launch_s
    t = piecewise_terms(p, [engine("llama-3.1-8b", 32, per, 2.6)], p.eager_layer_launch_s)
    assert 1e3 * t["piecewise_step_launch_s"] == pytest.approx(1.0) and 1e3 * t["piecewise_layer_launch_s"] == \
        pytest.approx(0.05)
    t = piecewise_terms(p, [], 0.8 * p.eager_layer_launch_s)
    assert t["piecewise_step_launch_s"] == pytest.approx(0.0016) and t["piecewise_layer_launch_s"] == \
        pytest.approx(0.00008)
    t = piecewise_terms(p, [engine("llama-3.1-8b", 32, per, 1.0), engine("qwen2.5-32b", 64, per, 0.5)],
                        p.eager_layer_launch_s)
    assert t["piecewise_step_launch_s"] >= 0.0 and t["piecewise_layer_launch_s"] >= 0.0


def test_an_engine_without_a_floor_is_left_out():
    """A traced engine whose floor came out 0 says nothing of its host's speed: the terms as with no engine."""
    zero = (engine("llama-3.1-8b", 32, 0.0, 7.0),)
    per = PROF.eager_layer_launch_s
    assert piecewise_terms(PROF, zero, per) == piecewise_terms(PROF, (), per)
