"""Demand over time: an hourly request-rate curve (:class:`DemandCurve`), from a CSV file
(:func:`demand_from_csv`) or from peak / trough / shape parameters (:func:`demand_from_shape`), with a
monthly growth (:func:`with_growth`).

Every value is the *mean* request rate of one hour, requests/s (SI).  Every refusal is a ValueError whose
message starts with the flag (or the CSV file and line) it comes from, so the CLI's one-line ``error:``
names it (exit 2).

Shapes (hour of day ``h`` in 0..23, local time of the users):

* ``diurnal`` — a cosine from the trough at ``peak_hour − 12`` to the peak at ``peak_hour``:
  rate(h) = trough + (peak − trough) × (1 + cos(2π (h − peak_hour) / 24)) / 2.  Peak 40, trough 4,
  peak hour 14: hour 14 → 40, hour 2 → 4, hour 8 → 4 + 36 × (1 + cos(−π/2)) / 2 = 22 req/s.
* ``business`` — the trough outside ``open_hour``..``close_hour``, a linear ramp of ``ramp_hours`` up
  from the open and down to the close, the peak in between.  A zero-length ramp is refused (a step
  of demand is not something an autoscaler can follow: use ``--ramp-hours`` ≥ 0.25).
* ``flat`` — the peak every hour (static sizing's own assumption).

Weekends (days 5 and 6 of each week, counting the first day as a Monday) are multiplied by
``weekend_factor``.  Growth compounds per month of :data:`planner.fleet.HOURS_PER_MONTH` hours:
rate × (1 + g)^(hour / 730); 10 % a month over a 365-day year multiplies the last hour by 1.1^12 ≈ 3.14.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from planner.fleet import HOURS_PER_MONTH
from planner.io.files import csv_rows, read_text
from planner.units import positive_number
from planner.validate import _num as csv_number

__all__ = ["MAX_HOURS", "SHAPES", "DemandCurve", "demand_from_csv", "demand_from_shape", "with_growth"]

SHAPES = ("diurnal", "business", "flat")
#: Longest curve planned: three years of hours.
MAX_HOURS = 3 * 366 * 24
#: Largest rate accepted, requests/s (a million requests per second is a typo, not a service).
MAX_RATE_PER_S = 1e6
#: The shortest ramp a business-hours curve may have, hours.
MIN_RAMP_HOURS = 0.25
RATE_COLUMNS = {"rate_per_s": 1.0, "requests_per_hour": 1.0 / 3600.0}


@dataclass(frozen=True)
class DemandCurve:
    """Hourly mean request rates, requests/s; ``source`` says where they came from (a file, the shape)."""

    rate_per_s: np.ndarray
    source: str
    growth_per_month: float = 0.0
    description: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        r = np.asarray(self.rate_per_s, dtype=float)
        if r.ndim != 1 or r.size == 0:
            raise ValueError("demand: the curve needs at least one hour")
        if r.size > MAX_HOURS:
            raise ValueError(f"demand: {r.size:,} hours is more than the {MAX_HOURS:,} (three years) planned")
        bad = np.flatnonzero(~np.isfinite(r))
        if bad.size:
            raise ValueError(f"demand: hour {int(bad[0])} is missing (not a number)")
        neg = np.flatnonzero(r < 0)
        if neg.size:
            raise ValueError(f"demand: hour {int(neg[0])} has a negative rate ({r[neg[0]]:g} req/s)")
        if r.max() > MAX_RATE_PER_S:
            raise ValueError(f"demand: {r.max():g} req/s is above the {MAX_RATE_PER_S:g} req/s planned")
        if r.max() <= 0:
            raise ValueError("demand: every hour is zero: nothing to serve")
        object.__setattr__(self, "rate_per_s", r)

    @property
    def hours(self) -> int:
        return int(self.rate_per_s.size)

    @property
    def peak_rate_per_s(self) -> float:
        return float(self.rate_per_s.max())

    @property
    def mean_rate_per_s(self) -> float:
        return float(self.rate_per_s.mean())

    @property
    def requests(self) -> float:
        """Requests over the whole curve: Σ rate × 3,600 s."""
        return float(self.rate_per_s.sum() * 3600.0)

    @property
    def requests_per_month(self) -> float:
        """The curve's mean rate over an average month of 730 hours."""
        return self.mean_rate_per_s * 3600.0 * HOURS_PER_MONTH

    def scaled(self, factor: float) -> DemandCurve:
        """The same shape at ``factor`` × the volume (break-even searches)."""
        return DemandCurve(self.rate_per_s * float(factor), f"{self.source} × {factor:g}", self.growth_per_month,
                           self.description)

    def as_dict(self) -> dict:
        return {"hours": self.hours, "source": self.source, "peak_rate_per_s": self.peak_rate_per_s,
                "mean_rate_per_s": self.mean_rate_per_s, "requests": self.requests,
                "requests_per_month": self.requests_per_month, "growth_per_month": self.growth_per_month,
                **{k: v for k, v in self.description.items() if k not in ("hours", "source")}}


def _shape_day(shape: str, peak: float, trough: float, peak_hour: float, open_hour: float, close_hour: float,
               ramp_hours: float) -> np.ndarray:
    """One day's 24 hourly means of a shape (each hour's value at its midpoint, h + 0.5)."""
    h = np.arange(24) + 0.5
    if shape == "flat":
        return np.full(24, peak)
    if shape == "diurnal":
        return trough + (peak - trough) * (1 + np.cos(2 * np.pi * (h - 0.5 - peak_hour) / 24)) / 2
    up = np.clip((h - open_hour) / ramp_hours, 0, 1)
    down = np.clip((close_hour - h) / ramp_hours, 0, 1)
    return trough + (peak - trough) * np.minimum(up, down)


def demand_from_shape(peak_rate_per_s: float, trough_rate_per_s: float = 0.0, *, shape: str = "diurnal",
                      days: int = 1, peak_hour: float = 14.0, open_hour: float = 8.0, close_hour: float = 20.0,
                      ramp_hours: float = 2.0, weekend_factor: float = 1.0,
                      growth_per_month: float = 0.0) -> DemandCurve:
    """``days`` × 24 hourly rates of ``shape`` (module docstring) between the trough and the peak."""
    peak = positive_number("--peak-rate", peak_rate_per_s)
    trough = positive_number("--trough-rate", trough_rate_per_s, allow_zero=True)
    if trough > peak:
        raise ValueError(f"--trough-rate: {trough:g} req/s is above the peak ({peak:g} req/s)")
    if shape not in SHAPES:
        raise ValueError(f"--shape: unknown shape {shape!r}; known: {', '.join(SHAPES)}")
    if not isinstance(days, (int, np.integer)) or not 1 <= days <= MAX_HOURS // 24:
        raise ValueError(f"--days: must be a whole number of days from 1 to {MAX_HOURS // 24:,}, got {days}")
    for name, v in (("--peak-hour", peak_hour), ("--open-hour", open_hour), ("--close-hour", close_hour)):
        if not (math.isfinite(v) and 0 <= v <= 24):
            raise ValueError(f"{name}: must be an hour of the day from 0 to 24, got {v:g}")
    ramp = float(ramp_hours)
    if shape == "business":
        if not math.isfinite(ramp) or ramp <= 0:
            raise ValueError(f"--ramp-hours: a zero-length ramp is a step of demand no autoscaler can follow; "
                             f"give at least {MIN_RAMP_HOURS:g} h, got {ramp:g}")
        if ramp < MIN_RAMP_HOURS:
            raise ValueError(f"--ramp-hours: at least {MIN_RAMP_HOURS:g} h, got {ramp:g}")
        if close_hour - open_hour < 2 * ramp:
            raise ValueError(f"--close-hour: the day ({open_hour:g}–{close_hour:g} h) is shorter than its two "
                             f"ramps of {ramp:g} h")
    wf = positive_number("--weekend-factor", weekend_factor, allow_zero=True)
    day = _shape_day(shape, peak, trough, peak_hour, open_hour, close_hour, ramp)
    weekday = np.arange(days) % 7
    factor = np.where(weekday >= 5, wf, 1.0)
    rates = (factor[:, None] * day[None, :]).ravel()
    curve = DemandCurve(rates, f"{shape} shape", 0.0, {
        "shape": shape, "days": int(days), "peak_input_rate_per_s": peak, "trough_input_rate_per_s": trough,
        "peak_hour": peak_hour, "ramp_hours": ramp if shape == "business" else None, "weekend_factor": wf})
    return with_growth(curve, growth_per_month)


def with_growth(curve: DemandCurve, growth_per_month: float) -> DemandCurve:
    """Hour ``h`` × (1 + g)^(h / 730): demand growing ``g`` per month (compounded hourly)."""
    g = float(growth_per_month)
    if not math.isfinite(g) or not -0.99 <= g <= 10:
        raise ValueError(f"--growth-per-month: must be a fraction from -0.99 to 10 (0.1 = 10 % a month), got {g:g}")
    if g == 0:
        return curve
    h = np.arange(curve.hours, dtype=float)
    return DemandCurve(curve.rate_per_s * (1.0 + g) ** (h / HOURS_PER_MONTH), curve.source, g, curve.description)


def demand_from_csv(path, *, growth_per_month: float = 0.0) -> DemandCurve:
    """Hourly rates from a CSV file: a ``rate_per_s`` (or ``requests_per_hour``) column, one row per hour in
    order, and optionally an ``hour`` column (0, 1, 2, …: a gap or a repeat is refused as a missing hour).
    An empty, non-numeric, negative or non-finite rate is refused naming the file and line."""
    from pathlib import Path

    name = Path(path).name
    header, rows = csv_rows(read_text(path), name)
    col = next((c for c in RATE_COLUMNS if c in header), None)
    if col is None:
        raise ValueError(f"{name}: needs a column named {' or '.join(RATE_COLUMNS)} (found: "
                         f"{', '.join(map(str, header)) or 'no header'})")
    scale = RATE_COLUMNS[col]
    has_hour = "hour" in header
    rates = []
    for line, row in rows:
        if len(rates) >= MAX_HOURS:
            raise ValueError(f"{name}: more than {MAX_HOURS:,} hours (three years)")
        if has_hour:
            h = (row.get("hour") or "").strip()
            if h != str(len(rates)):
                raise ValueError(f"{name} line {line}: hour: expected hour {len(rates)}, got {h or 'nothing'} "
                                 f"(a missing or repeated hour)")
        try:
            v = csv_number(row, col, float, None, line)  # validate's reader of a number ≥ 0 in a CSV cell
        except ValueError as err:
            raise ValueError(f"{name} {err}") from None
        if v is None:
            raise ValueError(f"{name} line {line}: {col}: missing hour {len(rates)}")
        rates.append(v * scale)
    if not rates:
        raise ValueError(f"{name}: no hours (a header and no rows)")
    curve = DemandCurve(np.array(rates), name, 0.0, {"file": name, "column": col})
    return with_growth(curve, growth_per_month)
