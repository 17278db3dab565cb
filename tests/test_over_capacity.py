"""A run whose queue kept growing to the end of its arrivals is over capacity (planner.serving.result.over_capacity):
measured on a recorded run, simulated on its replay, shown by ``planner replay``, and what serving_accuracy calls
saturated."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from planner.cli.app import app
from planner.serving.loadtests import read_vllm_bench
from planner.serving.result import (OVER_CAPACITY_GROWTH, OVER_CAPACITY_MIN_REQUESTS, in_system_quarters,
                                    over_capacity)

CHAT = Path(__file__).resolve().parent.parent / "calibration/data/h200x2-2026-12-01/serve-llama-chat"


def brute_force(arrival, e2e, lo, hi):
    """The same mean, one instant and one request at a time."""
    a = np.asarray(arrival, float)
    done = np.where(np.isfinite(e2e), a + np.asarray(e2e, float), np.inf)
    t = a.min() + (a.max() - a.min()) * np.linspace(lo, hi, 200)
    return float(np.mean([sum(1 for x, d in zip(a, done) if x <= ti < d) for ti in t]))


def test_steady_traffic_levels_off():
    # one arrival a second for 100 s, each in the system for 2.5 s: 2-3 in flight at every instant, both quarters
    arrival, e2e = np.arange(100.0), np.full(100, 2.5)
    q = in_system_quarters(arrival, e2e)
    assert 2.0 <= q["in_system_q2"] <= 3.0 and 2.0 <= q["in_system_q4"] <= 3.0
    assert not over_capacity(q)


def test_a_queue_that_grows_is_over_capacity():
    # request i waits 0.5·i s (each one served later than the last): at instant t, i arrived and in flight while
    # t < 1.5·i, so i > t/1.5: t - t/1.5 = t/3 in flight -- 37.1/3 ~ 12.4 over the 2nd quarter (24.75-49.5 s),
    # 86.6/3 ~ 28.9 over the last (74.25-99 s)
    arrival = np.arange(100.0)
    q = in_system_quarters(arrival, 0.5 * arrival)
    assert q["in_system_q2"] == pytest.approx(12.4, abs=0.6) and q["in_system_q4"] == pytest.approx(28.9, abs=0.6)
    assert over_capacity(q)


def test_both_thresholds_must_hold():
    assert OVER_CAPACITY_GROWTH == 1.5 and OVER_CAPACITY_MIN_REQUESTS == 10
    assert over_capacity({"in_system_q2": 20.0, "in_system_q4": 30.0})      # 1.5x and 10 more
    assert not over_capacity({"in_system_q2": 20.0, "in_system_q4": 29.9})  # 1.495x
    assert not over_capacity({"in_system_q2": 2.0, "in_system_q4": 9.0})    # 4.5x but 7 more: Poisson noise
    assert not over_capacity({"in_system_q2": None, "in_system_q4": None})
    assert not over_capacity({})


def test_too_few_requests_or_one_instant_say_nothing():
    assert in_system_quarters(np.arange(7.0), np.ones(7)) == {"in_system_q2": None, "in_system_q4": None}
    assert in_system_quarters(np.zeros(50), np.ones(50))["in_system_q2"] is None  # a closed loop's first wave


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 100), st.one_of(st.floats(0, 50), st.just(float("nan")))), min_size=8,
                max_size=40), st.floats(0.01, 100))
def test_counts_match_a_brute_force_and_do_not_depend_on_the_time_unit(reqs, scale):
    arrival = np.array([a for a, _ in reqs])
    e2e = np.array([e for _, e in reqs])
    if not arrival.max() > arrival.min():
        return
    q = in_system_quarters(arrival, e2e)
    assert q["in_system_q2"] == pytest.approx(brute_force(arrival, e2e, 0.25, 0.5))
    assert q["in_system_q4"] == pytest.approx(brute_force(arrival, e2e, 0.75, 1.0))
    assert 0 <= q["in_system_q2"] <= len(reqs) and 0 <= q["in_system_q4"] <= len(reqs)
    # the same run in other units of time (ms, minutes): the same counts, up to the float grid of the instants
    s = in_system_quarters(arrival * scale, e2e * scale)
    assert s["in_system_q2"] == pytest.approx(q["in_system_q2"], abs=len(reqs) * 0.011)


def test_recorded_runs_on_one_h200():
    # Llama-3.1-8B, vllm serve, chat lengths: at 24 req/s the in-flight count levelled off (47 -> 44); at 36 req/s it
    # doubled (137 -> 282: 29 req/s completed of 36 offered)
    q24 = read_vllm_bench(CHAT / "bench-chat24.json").measured()
    q36 = read_vllm_bench(CHAT / "bench-chat36.json").measured()
    assert (round(q24["in_system_q2"]), round(q24["in_system_q4"])) == (47, 44) and not over_capacity(q24)
    assert (round(q36["in_system_q2"]), round(q36["in_system_q4"])) == (137, 282) and over_capacity(q36)


def test_replay_says_so_in_text_and_json():
    args = ["replay", str(CHAT / "bench-chat36.json"), str(CHAT / "bench-chat24.json"), "--model", "llama-3.1-8b",
            "--gpu", "h200-sxm"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    lines = [x for x in r.output.splitlines() if x.startswith("in flight")]
    assert len(lines) == 2
    assert "measured 137 -> 282, still growing" in lines[0] and "over capacity" in lines[0]
    assert "measured 47 -> 44, simulated" in lines[1] and "over capacity" not in lines[1]
    r = CliRunner().invoke(app, args + ["--json"])
    runs = json.loads(r.output)["runs"]
    assert runs[0]["over_capacity"]["measured"] is True and runs[1]["over_capacity"]["measured"] is False
    # the simulation sees the same: its queue grows at 36 req/s and not at 24
    assert runs[0]["over_capacity"]["predicted"] is True and runs[1]["over_capacity"]["predicted"] is False


def test_verify_says_which_run_outgrew_the_engine():
    # planner verify's text: its two runs replayed; the knee run's queue kept growing (here the recorded 36 req/s run
    # stands in for it), the half-knee run's levelled off
    from planner.cli.calibrate import verify_lines
    from planner.serving.loadtests import replay_load_test
    from planner.io import catalog
    from calibration.serving_points import serving_setup

    cost, cfg = serving_setup(CHAT, "llama-3.1-8b", catalog.profile_for("h200-sxm", "0.26.0"))
    runs = {}
    for name, run in (("half-knee", "bench-chat24"), ("knee", "bench-chat36")):
        c = replay_load_test(read_vllm_bench(CHAT / f"{run}.json"), cost, cfg)
        runs[name] = {"rate_per_s": 24.0 if name == "half-knee" else 36.0, "meets_targets_measured": name != "knee",
                      **c.as_dict()}
    summary = {"model": "llama-3.1-8b", "gpu": "h200-sxm", "predicted_knee_per_s": 29.3,
               "predicted_saturation_per_s": 33.0, "confidence": "high", "runs": runs}
    lines = verify_lines(summary)
    assert lines[0].startswith("llama-3.1-8b on h200-sxm: predicted knee 29.30 req/s")
    half, knee = lines[2], lines[4]
    assert half.strip().startswith("in flight") and "over capacity" not in half
    assert "measured 137 -> 282, still growing" in knee and knee.endswith("grow with the run's length)")
