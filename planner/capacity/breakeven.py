"""Self-hosting against an API price: $/Mtok of the planned fleet at its real utilisation, and the monthly
volume above which self-hosting is cheaper.

* Self-hosted $/month: the autoscaled fleet of :func:`planner.capacity.schedule.plan_schedule` (its
  replicas per hour, their boots, the minimum replicas kept through the trough).
* Tokens per month: the curve's requests per month × the workload's mean prompt and output tokens.
* Self $/Mtok (output): all the fleet's cost charged to output tokens, as ``planner slo-search``'s
  $/Mtok (here at the real utilisation, not at the knee).
* API $/month: input Mtok × the API's input price + output Mtok × its output price.
* Break-even: the same curve scaled by s (up to the planned 1e6 req/s at its peak); self-hosting "wins"
  at s when its $/month ≤ the API's.  The
  break-even volume is the smallest s of a fixed log grid (:data:`SCALES`, 48 points a decade: ±2.4 %)
  from which it wins at every larger grid point.  Because the grid does not depend on the prices and
  the API's cost rises with its price at every s, a higher API price never raises the break-even volume
  and never lowers self-hosting's advantage.

Example: 1,000 output Mtok a month from a fleet costing $6,628/month is $6.63/Mtok; at an API price of
$10/Mtok output the API costs $10,000 and self-hosting saves $3,372 a month.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.capacity.demand import MAX_RATE_PER_S, DemandCurve
from planner.capacity.engine import ReplicaKnee
from planner.capacity.schedule import plan_schedule
from planner.units import MILLION

__all__ = ["SCALES", "BreakEven", "break_even"]

#: Volume multiples tried for the break-even: 1e-4 … 1e4 × the curve, 48 per decade.
SCALES = 10.0 ** (np.arange(-4 * 48, 4 * 48 + 1) / 48.0)


@dataclass(frozen=True)
class BreakEven:
    """Self-hosted vs API for the curve (USD, tokens per month)."""

    self_usd_per_month: float
    input_tokens_per_month: float
    output_tokens_per_month: float
    api_usd_per_mtok_input: float
    api_usd_per_mtok_output: float
    breakeven_scale: float | None  # None: self-hosting never wins on the grid
    requests_per_month: float

    @property
    def self_usd_per_mtok_output(self) -> float:
        out = self.output_tokens_per_month / MILLION
        return self.self_usd_per_month / out if out > 0 else math.inf

    @property
    def api_usd_per_month(self) -> float:
        return (self.input_tokens_per_month * self.api_usd_per_mtok_input
                + self.output_tokens_per_month * self.api_usd_per_mtok_output) / MILLION

    @property
    def advantage_usd_per_month(self) -> float:
        """What self-hosting saves a month (negative: the API is cheaper)."""
        return self.api_usd_per_month - self.self_usd_per_month

    @property
    def breakeven_requests_per_month(self) -> float | None:
        return None if self.breakeven_scale is None else self.breakeven_scale * self.requests_per_month

    @property
    def breakeven_output_tokens_per_month(self) -> float | None:
        if self.breakeven_scale is None:
            return None
        return self.breakeven_scale * self.output_tokens_per_month

    def verdict(self) -> str:
        if self.advantage_usd_per_month >= 0:
            return (f"self-hosting saves ${self.advantage_usd_per_month:,.0f}/month at this volume "
                    f"(${self.self_usd_per_mtok_output:,.2f} vs the API's "
                    f"${self.api_usd_per_mtok_output:,.2f}/Mtok output)")
        return (f"the API is cheaper by ${-self.advantage_usd_per_month:,.0f}/month at this volume "
                f"(${self.self_usd_per_mtok_output:,.2f}/Mtok self-hosted)")

    def as_dict(self) -> dict:
        def f(x):
            return None if x is None or not math.isfinite(x) else x

        return {"self_usd_per_month": self.self_usd_per_month, "api_usd_per_month": self.api_usd_per_month,
                "advantage_usd_per_month": self.advantage_usd_per_month,
                "self_usd_per_mtok_output": f(self.self_usd_per_mtok_output),
                "api_usd_per_mtok_input": self.api_usd_per_mtok_input,
                "api_usd_per_mtok_output": self.api_usd_per_mtok_output,
                "input_tokens_per_month": self.input_tokens_per_month,
                "output_tokens_per_month": self.output_tokens_per_month, "requests_per_month": self.requests_per_month,
                "breakeven_scale": self.breakeven_scale,
                "breakeven_requests_per_month": f(self.breakeven_requests_per_month),
                "breakeven_output_tokens_per_month": f(self.breakeven_output_tokens_per_month),
                "verdict": self.verdict()}


def _api_cost(demand: DemandCurve, knee: ReplicaKnee, p_in: float, p_out: float) -> float:
    req = demand.requests_per_month
    return req * (knee.prompt_tokens_per_request * p_in + knee.output_tokens_per_request * p_out) / MILLION


def break_even(demand: DemandCurve, knee: ReplicaKnee, api_usd_per_mtok_output: float,
               api_usd_per_mtok_input: float = 0.0, *, min_replicas: int = 1, lead_time_s: float = 0.0) -> BreakEven:
    """Self-hosted (autoscaled, ``min_replicas`` through the trough) vs an API at these prices per Mtok."""
    for flag, v in (("--api-usd-per-mtok", api_usd_per_mtok_output),
                    ("--api-usd-per-mtok-input", api_usd_per_mtok_input)):
        if not (math.isfinite(v) and 0 <= v <= 10_000):
            raise ValueError(f"{flag}: must be from 0 to 10,000 $/Mtok, got {v:g}")
    if api_usd_per_mtok_output + api_usd_per_mtok_input <= 0:
        raise ValueError("--api-usd-per-mtok: give the API's price per million output tokens (> 0)")

    def self_cost(s: float) -> float:
        return plan_schedule(demand.scaled(s), knee, min_replicas=min_replicas,
                             lead_time_s=lead_time_s).usd_per_month_autoscaled

    api_at_1 = _api_cost(demand, knee, api_usd_per_mtok_input, api_usd_per_mtok_output)
    scales = SCALES[SCALES * demand.peak_rate_per_s <= MAX_RATE_PER_S]
    wins = np.array([self_cost(s) <= s * api_at_1 for s in scales])
    scale = None
    if wins.size and wins[-1]:
        losing = np.flatnonzero(~wins)
        scale = float(scales[0] if losing.size == 0 else scales[losing[-1] + 1])
    sched = plan_schedule(demand, knee, min_replicas=min_replicas, lead_time_s=lead_time_s)
    req = demand.requests_per_month
    return BreakEven(sched.usd_per_month_autoscaled, req * knee.prompt_tokens_per_request,
                     req * knee.output_tokens_per_request, float(api_usd_per_mtok_input),
                     float(api_usd_per_mtok_output), scale, req)
