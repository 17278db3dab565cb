"""planner.serving.load: the highest rate under the SLOs, latency vs rate."""

from __future__ import annotations

import pytest
from serving_helpers import cfg

from planner.serving import load_curve, max_rate_under_slo, rate_sweep
from planner.serving.load import LOAD_GRID, LOAD_GRID_EXTENSION, UPPER_BRACKET
from planner.serving.workloads import synthetic


def test_max_rate_under_slo_meets_targets_and_is_deterministic(mistral):
    cost = mistral

    def make(rate):
        return synthetic(300, 512, 128, rate_per_s=rate, seed=0)

    c = cfg()
    a = max_rate_under_slo(make, cost, c, 0.5, 0.05, price_usd_per_gpu_hour=3.5)
    b = max_rate_under_slo(make, cost, c, 0.5, 0.05, price_usd_per_gpu_hour=3.5)
    assert a == b and a.max_rate_per_s > 0
    assert a.ttft_p99_s <= 0.5 and a.tpot_p99_s <= 0.05
    assert a.max_rate_per_s <= 1.5 * a.saturation_rate_per_s
    # $/Mtok = price per second / output tokens per second × 1e6
    assert a.usd_per_million_output_tokens == pytest.approx(3.5 / 3600 / a.output_tokens_per_s * 1e6)
    assert a.replicas_for(10 * a.max_rate_per_s) == 10
    # an impossible TTFT (below one prefill step) gives rate 0
    z = max_rate_under_slo(make, cost, c, 1e-5, 0.05)
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


def test_search_limit_is_reported(mistral):
    """Targets met even at the top of the bracket: the answer is that rate, flagged as a lower bound."""
    def make(rate):
        return synthetic(200, 512, 128, rate_per_s=rate, seed=0)

    loose = max_rate_under_slo(make, mistral, cfg(), 100.0, 10.0)
    assert loose.at_search_limit and loose.iterations == 1
    assert loose.max_rate_per_s == UPPER_BRACKET * loose.saturation_rate_per_s
    assert not max_rate_under_slo(make, mistral, cfg(), 1e-5, 0.05).at_search_limit


def test_load_curve_uses_the_slo_search_knee(mistral):
    """The dashboard's curve: the knee is max_rate_under_slo's (the CLI's), the rates a grid over the
    burst throughput, extended when the knee lies above the search range."""
    def make(rate):
        return synthetic(200, 512, 128, rate_per_s=rate, seed=0)

    for ttft_s, tpot_s in ((0.05, 0.02), (100.0, 10.0)):  # a knee inside the range, and above it
        curve = load_curve(make, mistral, cfg(), ttft_s, tpot_s)
        knee = max_rate_under_slo(make, mistral, cfg(), ttft_s, tpot_s)
        assert curve.knee == knee
        grid = LOAD_GRID + (LOAD_GRID_EXTENSION if knee.at_search_limit else ())
        assert [r["rate_per_s"] for r in curve.rows] == [knee.saturation_rate_per_s * x for x in grid]
        assert curve.rows == rate_sweep(make, mistral, cfg(), [r["rate_per_s"] for r in curve.rows])
