"""One capacity question answered end to end (:func:`plan_capacity`): the knee of each GPU type, the
hourly schedule of the cheapest autoscaled type, its autoscaling policy and the policy replay, the
cheapest mixes of types and price bases, and the break-even against an API price.  The CLI
(``planner capacity``), the dashboard's Capacity view and the executive summary all read this object."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.capacity.autoscale import KEDA_COOLDOWN_S, KEDA_POLLING_INTERVAL_S, LeadTime, Policy, RateTable, \
    derive_policy, lead_time
from planner.capacity.breakeven import BreakEven, break_even
from planner.capacity.demand import DemandCurve
from planner.capacity.engine import DEFAULT_HEADROOM, ReplicaKnee, replica_knee
from planner.capacity.mixed import MixOption, Prices, cheapest_mixes
from planner.capacity.replay import PolicyReplay, replay_policy
from planner.capacity.schedule import Schedule, plan_schedule
from planner.profile import CalibrationProfile
from planner.specs import GpuSpec, ModelSpec

__all__ = ["CapacityPlan", "plan_capacity"]


@dataclass(frozen=True)
class CapacityPlan:
    """Every part, kept so a surface can explain its numbers."""

    model_id: str
    model_name: str
    demand: DemandCurve
    knees: tuple[ReplicaKnee, ...]
    schedules: tuple[Schedule, ...]  # one per GPU type that meets the targets
    schedule: Schedule  # the cheapest autoscaled
    lead: LeadTime
    policy: Policy
    replay: PolicyReplay | None
    mixes: tuple[MixOption, ...]
    breakeven: BreakEven | None
    prices: Prices
    workload: str
    date: str

    def ramp(self) -> dict | None:
        """The replayed hour whose demand rose most over the one before, and the tail the replay saw there."""
        r = self.replay
        if r is None or r.hours < 2:
            return None
        rise = np.diff(self.demand.rate_per_s[:r.hours])
        h = int(np.argmax(rise)) + 1
        p99 = float(r.ttft_p99_max_s[h])
        return {"hour": h, "rise_rate_per_s": float(rise[h - 1]), "attainment": float(r.attainment[h]),
                "ttft_p99_max_s": p99 if np.isfinite(p99) else None}

    @property
    def knee(self) -> ReplicaKnee:
        """The recommended (cheapest autoscaled) schedule's replica knee."""
        return self.schedule.knee

    def as_dict(self, hourly: bool = False) -> dict:
        return {
            "model": self.model_id, "workload": self.workload, "date": self.date, "demand": self.demand.as_dict(),
            "ttft_p99_slo_s": self.knee.ttft_slo_s, "tpot_p99_slo_s": self.knee.tpot_slo_s,
            "candidates": [k.as_dict() for k in self.knees],
            "schedules": [{"gpu": s.knee.gpu_id, **s.as_dict()} for s in self.schedules],
            "recommended": {"gpu": self.knee.gpu_id, **self.schedule.as_dict(hourly)},
            "autoscaling": self.policy.as_dict(),
            "replay": None if self.replay is None else self.replay.as_dict(hourly), "steepest_ramp": self.ramp(),
            "mixes": [m.as_dict() for m in self.mixes], "prices": self.prices.as_dict(),
            "breakeven": None if self.breakeven is None else self.breakeven.as_dict(),
        }


def plan_capacity(model: ModelSpec, gpus: list[tuple[GpuSpec, CalibrationProfile]], demand: DemandCurve,
                  make_requests, ttft_slo_s: float, tpot_slo_s: float, *, weight_dtype: str | None = None,
                  kv_cache_dtype: str = "bf16", tensor_parallel: int | None = None,
                  headroom: float = DEFAULT_HEADROOM, min_replicas: int = 1, max_replicas: int | None = None,
                  prices: Prices | None = None, api_usd_per_mtok_output: float | None = None,
                  api_usd_per_mtok_input: float = 0.0, node_provision_s: float = 0.0,
                  polling_interval_s: float = KEDA_POLLING_INTERVAL_S, cooldown_s: float = KEDA_COOLDOWN_S,
                  replay_hours: int | None = 24, target_attainment: float = 0.99, seed: int = 0,
                  date: str = "") -> CapacityPlan:
    """The whole answer (module docstring).  ``replay_hours``: the first hours replayed with the policy in
    the loop (None: the whole curve, at most 31 days; 0: no replay).  Raises ValueError naming the flag for bad
    input and
    ``infeasible: …`` when no GPU type meets the targets."""
    prices = prices or Prices()
    if not 0 < target_attainment <= 1:
        raise ValueError(f"--target-attainment: must be in (0, 1], got {target_attainment}")
    knees = tuple(replica_knee(model, g, prof, make_requests, ttft_slo_s, tpot_slo_s, weight_dtype=weight_dtype,
                               kv_cache_dtype=kv_cache_dtype, tensor_parallel=tensor_parallel, headroom=headroom)
                  for g, prof in gpus)
    ok = [k for k in knees if k.knee_rate_per_s > 0]
    if not ok:
        why = "; ".join(f"{k.gpu_id}: {k.confidence.removeprefix('none: ')}" for k in knees)
        raise ValueError(f"infeasible: no GPU meets p99 TTFT and TPOT at any rate ({why})")
    lead = lead_time(model, node_provision_s=node_provision_s, polling_interval_s=polling_interval_s)
    schedules = tuple(plan_schedule(demand, k, min_replicas=min_replicas, max_replicas=max_replicas,
                                    lead_time_s=lead.total_s) for k in ok)
    best = min(schedules, key=lambda s: s.usd_per_month_autoscaled)
    table = RateTable(best.knee)
    policy = derive_policy(best.knee, table, lead, min_replicas=best.min_replicas, max_replicas=best.max_replicas,
                           polling_interval_s=polling_interval_s, cooldown_s=cooldown_s)
    replay = None
    if replay_hours != 0:
        replay = replay_policy(demand, policy, table, hours=None if replay_hours is None else min(replay_hours,
                                                                                                demand.hours),
                               target_attainment=target_attainment, seed=seed)
    mixes = tuple(cheapest_mixes(demand, ok, prices, lead_time_s=lead.total_s, target_attainment=target_attainment))
    be = None
    if api_usd_per_mtok_output is not None:
        be = break_even(demand, best.knee, api_usd_per_mtok_output, api_usd_per_mtok_input,
                        min_replicas=min_replicas, lead_time_s=lead.total_s)
    desc = getattr(make_requests, "description", "")
    return CapacityPlan(model.id, model.name, demand, knees, schedules, best, lead, policy, replay, mixes, be, prices,
                        desc, date)
