"""planner.capacity arithmetic: demand curves, the hourly schedule, mixes and break-even (no simulation: a
replica type is given by its knee), pinned with the hand arithmetic and checked as properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from planner.capacity.breakeven import break_even
from planner.capacity.demand import DemandCurve, demand_from_csv, demand_from_shape, with_growth
from planner.capacity.engine import ReplicaKnee
from planner.capacity.mixed import Prices, _spot_attainment, cheapest_mixes
from planner.capacity.schedule import plan_schedule, replicas_per_hour


def knee(rate=10.0, price=2.0, gpu="g", tp=1, headroom=0.2, sat=None) -> ReplicaKnee:
    return ReplicaKnee("m", gpu, gpu.upper(), "bf16", "bf16", tp, rate, sat or rate * 1.5, headroom, price, "src",
                       "calibrated", "high", 0.3, 0.04, 0.5, 0.05, 256.0, 1024.0)


# ---------------------------------------------------------------------------------------------- demand


def test_diurnal_shape_arithmetic():
    """Peak 40, trough 4, peak hour 14: hour 14 (midpoint 14.5 → h − 0.5 = 14) is 40, hour 2 is 4, hour 8 is
    4 + 36 × (1 + cos(−π/2)) / 2 = 22."""
    d = demand_from_shape(40, 4, shape="diurnal", peak_hour=14)
    assert d.hours == 24
    assert d.rate_per_s[14] == pytest.approx(40) and d.rate_per_s[2] == pytest.approx(4)
    assert d.rate_per_s[8] == pytest.approx(22)


def test_business_ramps_and_weekend():
    """Open 8, close 20, ramp 2 h, trough 1, peak 11: hour 8 (midpoint 8.5) is 1 + 10 × 0.25 = 3.5; hour 12 is
    11; hour 21 is 1.  A week: Saturday's hour 12 × 0.5 = 5.5."""
    d = demand_from_shape(11, 1, shape="business", days=7, ramp_hours=2, weekend_factor=0.5)
    assert d.hours == 168
    assert d.rate_per_s[8] == pytest.approx(3.5) and d.rate_per_s[12] == 11 and d.rate_per_s[21] == 1
    assert d.rate_per_s[5 * 24 + 12] == pytest.approx(5.5)


def test_growth_compounds_per_month():
    """10 % a month over 365 days: the last hour × 1.1^(8,759 / 730) ≈ 3.138."""
    d = with_growth(demand_from_shape(10, 10, shape="flat", days=365), 0.1)
    assert d.rate_per_s[-1] == pytest.approx(10 * 1.1 ** (8759 / 730))
    assert d.rate_per_s[0] == 10


@pytest.mark.parametrize("kwargs,flag", [
    ({"shape": "business", "ramp_hours": 0}, "--ramp-hours: a zero-length ramp"),
    ({"peak_rate_per_s": -1}, "--peak-rate"),
    ({"trough_rate_per_s": 50}, "--trough-rate"),
    ({"shape": "square"}, "--shape"),
    ({"days": 0}, "--days"),
    ({"growth_per_month": float("nan")}, "--growth-per-month"),
])
def test_bad_shapes_name_the_flag(kwargs, flag):
    args = {"peak_rate_per_s": 10, "trough_rate_per_s": 1, **kwargs}
    with pytest.raises(ValueError, match=flag):
        demand_from_shape(args.pop("peak_rate_per_s"), args.pop("trough_rate_per_s"), **args)


def test_csv_reads_rates_and_refuses_holes(tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("hour,requests_per_hour\n0,3600\n1,7200\n")
    d = demand_from_csv(f)
    assert list(d.rate_per_s) == [1.0, 2.0]  # 3,600 requests in an hour = 1 req/s
    for body, msg in (("hour,rate_per_s\n0,1\n2,1\n", "line 3: hour: expected hour 1"),
                      ("rate_per_s\n1\n\n", None), ("rate_per_s\n1\n-2\n", "line 3: rate_per_s: must be"),
                      ("rate_per_s\n1\n,\n", "line 3: rate_per_s: missing hour 1"),
                      ("rate_per_s\nabc\n", "not a number"),
                      ("rate\n1\n", "needs a column named"), ("rate_per_s\n", "no hours"),
                      ("rate_per_s,x\n1,\n,2\n", "line 3: rate_per_s: missing hour 1")):
        f.write_text(body)
        if msg is None:
            demand_from_csv(f)  # a blank line is no row
            continue
        with pytest.raises(ValueError, match=msg):
            demand_from_csv(f)


def test_curve_refuses_negative_and_missing_hours():
    with pytest.raises(ValueError, match="hour 1 has a negative rate"):
        DemandCurve(np.array([1.0, -1.0]), "x")
    with pytest.raises(ValueError, match="hour 0 is missing"):
        DemandCurve(np.array([np.nan, 1.0]), "x")


# -------------------------------------------------------------------------------------------- schedule


def test_schedule_worked_example():
    """24 hours alternating 10 and 30 req/s, target 8 (knee 10, 20 % headroom): n = 2 and 4; 12 × 2 + 12 × 4
    = 72 replica-hours + 12 scale-ups × 2 replicas × 120 s = 0.8 h → 72.8 GPU-hours; static 4 × 24 = 96.
    $/month at $2: 72.8 / 24 × 730 × 2 = 4,428.67 vs 96 / 24 × 730 × 2 = 5,840.  Utilisation at the knee:
    (12 × 10 + 12 × 30) / (72 × 10) = 0.667 vs 480 / 960 = 0.5."""
    d = DemandCurve(np.tile([10.0, 30.0], 12), "test")
    s = plan_schedule(d, knee(10), lead_time_s=120)
    assert list(s.replicas[:2]) == [2, 4] and s.static_replicas == 4
    assert s.gpu_hours_autoscaled == pytest.approx(72.8) and s.gpu_hours_static == 96
    assert s.usd_per_month_autoscaled == pytest.approx(72.8 / 24 * 730 * 2)
    assert s.usd_per_month_static == pytest.approx(5840)
    assert s.utilisation_autoscaled == pytest.approx(480 / 720) and s.utilisation_static == pytest.approx(0.5)


def test_schedule_bounds_and_short_hours():
    d = DemandCurve(np.array([0.0, 5.0, 100.0]), "t")
    s = plan_schedule(d, knee(10), min_replicas=2, max_replicas=5)
    assert list(s.replicas) == [2, 2, 5] and list(s.short_hours) == [2]  # 100 / 8 needs 13
    with pytest.raises(ValueError, match="--max-replicas"):
        plan_schedule(d, knee(10), min_replicas=3, max_replicas=2)


rates = st.lists(st.floats(0, 500, allow_nan=False), min_size=1, max_size=48).filter(lambda r: max(r) > 0)


@settings(max_examples=60, deadline=None)
@given(rates, st.floats(0, 3, allow_nan=False), st.floats(0.5, 50))
def test_more_demand_never_fewer_replicas(r, extra, target):
    a = np.array(r)
    assert np.all(replicas_per_hour(a * (1 + extra), target) >= replicas_per_hour(a, target))


@settings(max_examples=60, deadline=None)
@given(rates, st.floats(1, 40), st.integers(0, 3), st.floats(0, 3600))
def test_autoscaled_gpu_hours_never_above_static(r, k, min_r, lead):
    """A booting replica is paid for at most one hour before it serves (lead ≤ 1 h), in the hour before the
    one that needs it, so autoscaled GPU-hours ≤ static (peak × hours)."""
    s = plan_schedule(DemandCurve(np.array(r), "t"), knee(k, tp=2), min_replicas=min_r, lead_time_s=lead)
    assert s.gpu_hours_autoscaled <= s.gpu_hours_static + 1e-9
    assert s.usd_per_month_autoscaled <= s.usd_per_month_static + 1e-6


# ------------------------------------------------------------------------------------------- mixes


def test_spot_attainment_docstring_example():
    """λ 100, 5 spot replicas of knee 29.3, q = 0.05 × 164 / 3,600 = 0.00228: losing one still leaves 117 ≥ 100;
    losing two (P ≈ 10 × q² = 5.2e-5) leaves 87.9 → 88 % → attainment ≈ 1 − 5.2e-5 × 0.12."""
    q = 0.05 * 164 / 3600
    a = _spot_attainment(100, 0.0, 5, 29.3, q)
    assert a == pytest.approx(1 - 10 * q**2 * (1 - 87.9 / 100), rel=1e-4)


def test_cheapest_mix_uses_reserved_base_and_burst():
    """Trough 8 for 18 h, peak 40 for 6 h on one type (knee 10, target 8): all on-demand costs 18 × 1 + 6 × 5 =
    48 replica-hours × $2; a reserved base of 1 (35 % off, 24 h: 24 × 1.3 = 31.2) + 4 on-demand for 6 h (24 × 2 =
    48) = $79.2 < $96."""
    d = DemandCurve(np.array([8.0] * 18 + [40.0] * 6), "t")
    mixes = cheapest_mixes(d, [knee(10)], Prices(spot_interruption_per_hour=0.0, spot_discount=0.0), lead_time_s=0)
    best = mixes[0]
    assert best.usd_per_month == pytest.approx(79.2 / 24 * 730)
    assert best.base_replicas == 1 and int(best.burst_replicas.max()) == 4


@settings(max_examples=25, deadline=None)
@given(rates, st.floats(0, 0.9), st.floats(0, 0.9), st.floats(0, 0.5))
def test_cheapest_mix_never_costlier_than_plain_autoscaling(r, rd, sd, p):
    d = DemandCurve(np.array(r), "t")
    k = knee(12)
    prices = Prices(rd, sd, p)
    best = cheapest_mixes(d, [k, knee(5, 0.8, "h")], prices, lead_time_s=120, target_attainment=0.95)[0]
    plain = plan_schedule(d, k, min_replicas=0, lead_time_s=120)
    assert best.usd_per_month <= plain.usd_per_month_autoscaled + 1e-6
    assert best.expected_attainment >= 0.95 - 1e-9


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40), st.floats(0, 1), st.floats(0, 1))
@example(24, 0.25, 0.001953125)  # the window of ±12 σ dropped 1.2e-9 of the tail at n·q = 0.05 (found by hypothesis)
def test_more_spot_interruptions_never_raise_attainment(n, p1, p2):
    lo, hi = sorted((p1, p2))
    assert _spot_attainment(100, 0.0, n, 30.0, hi) <= _spot_attainment(100, 0.0, n, 30.0, lo) + 1e-9  # float noise ~1e-11


def test_prices_refuse_rates_outside_unit_interval():
    with pytest.raises(ValueError, match="--spot-interruption-rate"):
        Prices(spot_interruption_per_hour=1.5)
    with pytest.raises(ValueError, match="--reserved-discount"):
        Prices(reserved_discount=-0.1)


# ---------------------------------------------------------------------------------------------- break-even


def test_breakeven_arithmetic():
    """A flat 1 req/s, 256 output tokens: 730 h × 3,600 × 256 = 672.8 M output tokens a month; one replica ($2/h)
    costs 1,460 $/month = $2.17/Mtok.  At $10/Mtok the API costs $6,728: self-hosting saves $5,268."""
    d = DemandCurve(np.full(24, 1.0), "t")
    b = break_even(d, knee(10), 10.0)
    assert b.output_tokens_per_month == pytest.approx(730 * 3600 * 256)
    assert b.self_usd_per_month == pytest.approx(1460)
    assert b.self_usd_per_mtok_output == pytest.approx(1460 / 672.768)
    assert b.advantage_usd_per_month == pytest.approx(6727.68 - 1460)
    assert b.breakeven_scale is not None and b.breakeven_scale < 1


@settings(max_examples=20, deadline=None)
@given(st.lists(st.floats(0.01, 50), min_size=1, max_size=24), st.floats(0.01, 50), st.floats(0.01, 50))
def test_higher_api_price_never_lowers_the_advantage(r, p1, p2):
    d = DemandCurve(np.array(r), "t")
    lo, hi = sorted((p1, p2))
    a, b = break_even(d, knee(8), lo), break_even(d, knee(8), hi)
    assert b.advantage_usd_per_month >= a.advantage_usd_per_month - 1e-9
    if a.breakeven_scale is not None:
        assert b.breakeven_scale is not None and b.breakeven_scale <= a.breakeven_scale


def test_breakeven_never_when_the_api_is_cheaper_than_a_full_replica():
    """Knee 10 req/s × 256 tokens = 9.2 Mtok an hour at full load for $2: $0.22/Mtok at best; an API at
    $0.01/Mtok always wins."""
    b = break_even(DemandCurve(np.full(24, 5.0), "t"), knee(10, headroom=0.0), 0.01)
    assert b.breakeven_scale is None and b.advantage_usd_per_month < 0
    assert math.isfinite(b.self_usd_per_mtok_output)


def test_subnormal_interruption_rate_is_no_interruption():
    """Found by the property above: p = 2.2e-308 overflowed scipy's binomial pmf.  Below 1e-12 an hour no replica
    is away: 5 spot replicas of 30 req/s at 100 req/s hold 150 / 100 -> attainment 1."""
    assert _spot_attainment(100, 0.0, 5, 30.0, 2.2e-308) == _spot_attainment(100, 0.0, 5, 30.0, 0.0) == 1.0
