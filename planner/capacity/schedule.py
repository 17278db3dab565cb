"""Replicas per hour for a demand curve, and what static and autoscaled fleets cost.

For hour ``h`` with mean rate λ_h and a replica planned to carry ``target`` req/s (its knee less the
headroom, :class:`planner.capacity.engine.ReplicaKnee`):

* autoscaled replicas n_h = clip(⌈λ_h ÷ target⌉, min_replicas, max_replicas);
* static replicas = max_h ⌈λ_h ÷ target⌉ (sized for the peak, paid every hour);
* GPU-hours: autoscaled Σ_h n_h × GPUs per replica, plus the boot time of every replica added
  (Σ_h max(0, n_h − n_{h−1}) × lead time ÷ 3,600: a booting replica is paid before it serves);
  static = replicas × GPUs × hours;
* $/month = GPU-hours ÷ hours of the curve × :data:`planner.fleet.HOURS_PER_MONTH` × $/GPU-hour;
* utilisation = requests served ÷ what the paid replica-hours could serve at the knee
  (Σ_h λ_h ÷ Σ_h n_h × knee): the share of the SLO capacity the fleet uses.

Worked example: 24 hours alternating 10 and 30 req/s (12 of each), target 8 req/s: autoscaled
n = 2 and 4 (⌈10/8⌉, ⌈30/8⌉), 12 × 2 + 12 × 4 = 72 replica-hours, plus 12 scale-ups of 2 replicas ×
120 s = 0.8 h → 72.8; static 4 × 24 = 96 replica-hours.  Hours where even ``max_replicas`` fall short are
listed in ``short_hours`` (their demand is beyond the fleet: not served within the targets).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.capacity.demand import DemandCurve
from planner.capacity.engine import ReplicaKnee
from planner.fleet import HOURS_PER_MONTH

__all__ = ["Schedule", "plan_schedule", "replicas_per_hour"]


def replicas_per_hour(rate_per_s: np.ndarray, target_rate_per_s: float, min_replicas: int = 1,
                      max_replicas: int | None = None) -> np.ndarray:
    """clip(⌈λ_h ÷ target⌉, min, max) for every hour (the 1e-9 keeps 16/8 at 2, not 3, in floating point)."""
    if not target_rate_per_s > 0:
        raise ValueError("infeasible: no replica meets the targets at any rate")
    n = np.ceil(np.asarray(rate_per_s, dtype=float) / target_rate_per_s - 1e-9).astype(np.int64)
    n = np.maximum(n, 0)
    hi = np.iinfo(np.int64).max if max_replicas is None else max_replicas
    return np.clip(n, min_replicas, hi)


@dataclass(frozen=True)
class Schedule:
    """A demand curve planned hour by hour on one replica type (parts kept for the UI to explain)."""

    demand: DemandCurve
    knee: ReplicaKnee
    replicas: np.ndarray  # autoscaled, per hour
    needed: np.ndarray  # ⌈λ ÷ target⌉ before min/max
    static_replicas: int
    min_replicas: int
    max_replicas: int
    lead_time_s: float

    @property
    def hours(self) -> int:
        return self.demand.hours

    @property
    def short_hours(self) -> np.ndarray:
        """Hours whose demand needs more than ``max_replicas``."""
        return np.flatnonzero(self.needed > self.max_replicas)

    @property
    def scale_ups(self) -> int:
        prev = np.concatenate([[self.replicas[0]], self.replicas[:-1]])
        return int(np.maximum(self.replicas - prev, 0).sum())

    @property
    def gpu_hours_autoscaled(self) -> float:
        boots = self.scale_ups * self.lead_time_s / 3600.0
        return float((self.replicas.sum() + boots) * self.knee.gpus_per_replica)

    @property
    def gpu_hours_static(self) -> float:
        return float(self.static_replicas * self.hours * self.knee.gpus_per_replica)

    def _per_month(self, gpu_hours: float) -> float:
        return gpu_hours / self.hours * HOURS_PER_MONTH * self.knee.price_usd_per_gpu_hour

    @property
    def usd_per_month_autoscaled(self) -> float:
        return self._per_month(self.gpu_hours_autoscaled)

    @property
    def usd_per_month_static(self) -> float:
        return self._per_month(self.gpu_hours_static)

    def _utilisation(self, replica_hours: float) -> float:
        cap = replica_hours * self.knee.knee_rate_per_s
        served = np.minimum(self.demand.rate_per_s, self.replicas * self.knee.knee_rate_per_s).sum()
        return float(served / cap) if cap > 0 else 0.0

    @property
    def utilisation_autoscaled(self) -> float:
        return self._utilisation(float(self.replicas.sum()))

    @property
    def utilisation_static(self) -> float:
        return self._utilisation(float(self.static_replicas * self.hours))

    @property
    def savings_fraction(self) -> float:
        s = self.usd_per_month_static
        return 1.0 - self.usd_per_month_autoscaled / s if s > 0 else 0.0

    def as_dict(self, hourly: bool = False) -> dict:
        out = {"static_replicas": self.static_replicas, "min_replicas": self.min_replicas,
               "max_replicas": self.max_replicas, "peak_autoscaled_replicas": int(self.replicas.max()),
               "gpus_per_replica": self.knee.gpus_per_replica, "lead_time_s": self.lead_time_s,
               "scale_ups": self.scale_ups, "gpu_hours_autoscaled": self.gpu_hours_autoscaled,
               "gpu_hours_static": self.gpu_hours_static, "usd_per_month_autoscaled": self.usd_per_month_autoscaled,
               "usd_per_month_static": self.usd_per_month_static, "savings_fraction": self.savings_fraction,
               "utilisation_autoscaled": self.utilisation_autoscaled, "utilisation_static": self.utilisation_static,
               "short_hours": [int(h) for h in self.short_hours[:100]], "short_hours_count": int(self.short_hours.size)}
        if hourly:
            out["hourly"] = [{"hour": h, "rate_per_s": float(r), "replicas": int(n)}
                             for h, (r, n) in enumerate(zip(self.demand.rate_per_s, self.replicas))]
        return out


def plan_schedule(demand: DemandCurve, knee: ReplicaKnee, *, min_replicas: int = 1, max_replicas: int | None = None,
                  lead_time_s: float = 0.0) -> Schedule:
    """Replicas per hour for ``demand`` on ``knee``'s replica type (module docstring).  ``max_replicas`` None:
    no upper bound (the autoscaler's max is then the peak's need).  ValueError naming the flag for bounds that
    contradict; ``infeasible:`` when no replica meets the targets."""
    if min_replicas < 0:
        raise ValueError(f"--min-replicas: must be ≥ 0, got {min_replicas}")
    if max_replicas is not None and max_replicas < max(1, min_replicas):
        raise ValueError(f"--max-replicas: must be ≥ --min-replicas and ≥ 1, got {max_replicas}")
    if not lead_time_s >= 0:
        raise ValueError(f"lead_time_s: must be ≥ 0, got {lead_time_s}")
    needed = replicas_per_hour(demand.rate_per_s, knee.target_rate_per_s, 0, None)
    hi = int(max(needed.max(), min_replicas, 1)) if max_replicas is None else int(max_replicas)
    reps = np.clip(needed, min_replicas, hi)
    static = int(max(min(needed.max(), hi), min_replicas, 1))
    return Schedule(demand, knee, reps, needed, static, int(min_replicas), hi, float(lead_time_s))
