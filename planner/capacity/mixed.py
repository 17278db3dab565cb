"""The cheapest mix of GPU types and price bases for a demand curve: a reserved base for the trough and an
on-demand or spot burst for the peak.

**Prices.**  Each GPU's catalog price (``hardware/*.yaml``, with its source, basis and date) is the
on-demand reference; reserved = catalog × (1 − ``reserved_discount``), paid every hour; spot = catalog ×
(1 − ``spot_discount``), paid for the hours used.  Both discounts are inputs; their defaults
(:data:`DEFAULT_RESERVED_DISCOUNT`, :data:`DEFAULT_SPOT_DISCOUNT`) are our assumptions, not quotes.

**A mix** (base type A, R reserved replicas; burst type B on a basis): burst replicas in hour h
b_h = ⌈max(0, λ_h − R × target_A) ÷ target_B⌉.  Cost = (R × GPUs_A × reserved $/GPU-h × hours +
Σ_h b_h × GPUs_B × burst $/GPU-h + boots) ÷ hours × 730 per month.  R is tried at 0 and every distinct hourly
need of type A (the optimum sits at one of them: between two needs the cost is linear in R), thinned to
at most :data:`MAX_BASE_CANDIDATES` quantiles.

**Spot interruptions.**  A spot replica is reclaimed with probability ``p`` per hour and is back after the
lead time, so it is away a share q = p × lead ÷ 3,600 of its hours.  With N spot replicas up in an hour,
k of them away ~ Binomial(N, q); the requests the fleet serves within the targets are at most its
capacity at the knee, so the hour's expected attainment is Σ_k P(k) × min(1, C_k ÷ λ_h), C_k = R ×
knee_A + (N − k) × knee_B.  Spare spot replicas are added (bisection) until the expected attainment
reaches the target, per group of hours with the same burst need (at most :data:`MAX_SPOT_GROUPS` groups,
each at its busiest hour and largest need: conservative).  Example: λ = 100 req/s, knee 29.3, target
23.5, p = 0.05/h, lead 164 s → q = 0.00228; 5 spot replicas (⌈100/23.5⌉) have capacity 146.6 at the
knee: losing up to 1 still serves all; P(k ≥ 2) ≈ 5e-5: attainment ≈ 1.0 with no spare.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from planner.capacity.demand import DemandCurve
from planner.capacity.engine import ReplicaKnee
from planner.capacity.schedule import replicas_per_hour
from planner.fleet import HOURS_PER_MONTH

__all__ = ["DEFAULT_RESERVED_DISCOUNT", "DEFAULT_SPOT_DISCOUNT", "DEFAULT_SPOT_INTERRUPTION_PER_HOUR", "MixOption",
           "Prices", "cheapest_mixes"]

#: Our assumptions (2026-12-01), not quotes: a 1-year commitment at ~35 % off on-demand, spot at ~60 % off, a
#: spot replica reclaimed with probability 2 % in any hour.  Give your own with the CLI's flags.
DEFAULT_RESERVED_DISCOUNT = 0.35
DEFAULT_SPOT_DISCOUNT = 0.60
DEFAULT_SPOT_INTERRUPTION_PER_HOUR = 0.02
MAX_BASE_CANDIDATES = 24
#: Spot spares are sized per group of hours with the same burst need, at most this many groups.
MAX_SPOT_GROUPS = 64
BURST_BASES = ("on-demand", "spot")


@dataclass(frozen=True)
class Prices:
    """How the catalog price becomes each basis."""

    reserved_discount: float = DEFAULT_RESERVED_DISCOUNT
    spot_discount: float = DEFAULT_SPOT_DISCOUNT
    spot_interruption_per_hour: float = DEFAULT_SPOT_INTERRUPTION_PER_HOUR
    basis_note: str = "discounts are the planner's assumptions (2026-12-01), not quotes"

    def __post_init__(self):
        for name, flag in (("reserved_discount", "--reserved-discount-pct"), ("spot_discount", "--spot-discount-pct"),
                           ("spot_interruption_per_hour", "--spot-interruption-rate")):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and 0 <= v <= 1):
                shown = f"{100 * v:g} %" if isinstance(v, (int, float)) and flag.endswith("-pct") else repr(v)
                raise ValueError(f"{flag}: must be from 0 to 100 %, got {shown}" if flag.endswith("-pct")
                                 else f"{flag}: must be a fraction in [0, 1], got {shown}")
        if self.reserved_discount >= 1 or self.spot_discount >= 1:
            raise ValueError("--spot-discount-pct: a discount of 100 % makes GPUs free: give less")

    def factor(self, basis: str) -> float:
        return {"on-demand": 1.0, "reserved": 1.0 - self.reserved_discount, "spot": 1.0 - self.spot_discount}[basis]

    def as_dict(self) -> dict:
        return {"reserved_discount": self.reserved_discount, "spot_discount": self.spot_discount,
                "spot_interruption_per_hour": self.spot_interruption_per_hour, "basis_note": self.basis_note}


@dataclass(frozen=True)
class MixOption:
    """One fleet for the curve: a reserved base and a burst, priced, with the attainment spot costs."""

    base: ReplicaKnee | None
    base_replicas: int
    burst: ReplicaKnee | None
    burst_basis: str
    burst_replicas: np.ndarray  # per hour, spares included
    spare_replicas: np.ndarray  # spot spares per hour
    usd_per_month: float
    expected_attainment: float  # request-weighted, from spot interruptions (1 without spot)
    gpu_hours: float

    @property
    def label(self) -> str:
        parts = []
        if self.base is not None and self.base_replicas:
            parts.append(f"{self.base_replicas} × {self.base.label()} reserved")
        if self.burst is not None and self.burst_replicas.max() > 0:
            parts.append(f"up to {int(self.burst_replicas.max())} × {self.burst.label()} {self.burst_basis}")
        return " + ".join(parts) or "nothing"

    @property
    def risk(self) -> str:
        if self.burst_basis == "spot" and self.burst_replicas.max() > 0:
            return f"spot reclaims: expected attainment {self.expected_attainment:.2%} with spares"
        if self.base_replicas and (self.burst is None or self.burst_replicas.max() == 0):
            return "a commitment for the whole term, paid through the trough"
        return "on-demand capacity must be available at the peak"

    def as_dict(self) -> dict:
        return {"label": self.label, "usd_per_month": self.usd_per_month, "risk": self.risk,
                "base_gpu": self.base.gpu_id if self.base else None, "base_replicas": self.base_replicas,
                "burst_gpu": self.burst.gpu_id if self.burst else None, "burst_basis": self.burst_basis,
                "burst_replicas_max": int(self.burst_replicas.max()),
                "spare_replicas_max": int(self.spare_replicas.max()),
                "expected_attainment": self.expected_attainment, "gpu_hours": self.gpu_hours}


#: interruption probabilities within this of 0 or 1 are taken as 0 or 1
Q_EPS = 1e-12


@functools.lru_cache(maxsize=65536)
def _pmf(n: int, q: float) -> tuple[np.ndarray, np.ndarray]:
    """(k, P(k of n away)) over mean − 12 σ … mean + 12 σ + 40 of Binomial(n, q): the +40 keeps the upper tail of a
    skewed binomial (n·q ≪ 1, σ tiny) inside the window, so what lies outside is < 1e-30 for every q."""
    if q <= Q_EPS or n == 0:  # below 1e-12 an hour, no replica is away (scipy's pmf overflows near 1e-308)
        return np.zeros(1), np.ones(1)
    if q >= 1 - Q_EPS:
        return np.array([float(n)]), np.ones(1)
    from scipy.stats import binom  # here: importing scipy.stats takes ~1 s (the dashboard imports this module)

    mean, sd = n * q, math.sqrt(n * q * (1 - q))
    k = np.arange(max(0, math.floor(mean - 12 * sd - 1)), min(n, math.ceil(mean + 12 * sd + 40)) + 1)
    return k.astype(float), binom.pmf(k, n, q)


def _spot_attainment(lam: float, base_cap: float, n: int, knee_b: float, q: float) -> float:
    """Σ_k P(k of n spot replicas away) × min(1, (base + (n − k) × knee) ÷ λ); the mass outside the window is
    counted as if every spot replica were away (conservative)."""
    if lam <= 0:
        return 1.0
    k, pmf = _pmf(int(n), float(q))
    cap = base_cap + (n - k) * knee_b
    return float((pmf * np.minimum(1.0, cap / lam)).sum() + max(0.0, 1.0 - pmf.sum()) * min(1.0, base_cap / lam))


def _spares_for(lam: float, b: int, base_cap: float, knee_b: float, q: float, target: float) -> tuple[int, float]:
    """The fewest spare spot replicas (0 … b) whose expected attainment at λ reaches ``target``, and it."""
    def att(s):
        return _spot_attainment(lam, base_cap, b + s, knee_b, q)

    a0 = att(0)
    if a0 >= target or b == 0:
        return 0, a0
    hi, a_hi = b, att(b)
    if a_hi < target:
        return b, a_hi
    lo = 0
    while hi - lo > 1:  # attainment rises with s: bisect
        mid = (lo + hi) // 2
        a = att(mid)
        lo, hi, a_hi = (lo, mid, a) if a >= target else (mid, hi, a_hi)
    return hi, a_hi


def _spares(lam: np.ndarray, need: np.ndarray, base_cap: float, knee_b: float, q: float, target: float):
    """Spare spot replicas per hour for an expected attainment ≥ ``target``, and the attainment per hour.  Hours
    are grouped by their burst need and, beyond :data:`MAX_SPOT_GROUPS` groups, into quantile groups of need;
    a group's spares are those of its busiest hour at its largest need (conservative)."""
    spare = np.zeros(need.size, dtype=np.int64)
    att = np.ones(need.size)
    if q <= 0:
        return spare, att
    live = need > 0
    values = np.unique(need[live])
    edges = values if values.size <= MAX_SPOT_GROUPS else \
        np.unique(np.quantile(values, np.linspace(0, 1, MAX_SPOT_GROUPS)).round().astype(np.int64))
    group = np.searchsorted(edges, need)  # hours with need in (edges[i-1], edges[i]] share group i
    for g in np.unique(group[live]):
        hours = np.flatnonzero(live & (group == g))
        b = int(need[hours].max())
        s, a = _spares_for(float(lam[hours].max()), b, base_cap, knee_b, q, target)
        spare[hours] = s + (b - need[hours])  # every hour of the group holds the group's b + s replicas
        att[hours] = a
    return spare, att


def _option(demand: DemandCurve, base: ReplicaKnee | None, r: int, burst: ReplicaKnee | None, basis: str,
            prices: Prices, lead_time_s: float, target: float) -> MixOption:
    lam = demand.rate_per_s
    hours = demand.hours
    base_rate = r * base.target_rate_per_s if base is not None else 0.0
    usd = r * base.usd_per_replica_hour * prices.factor("reserved") * hours if base is not None else 0.0
    gpu_h = r * base.gpus_per_replica * hours if base is not None else 0.0
    need = np.zeros(hours, dtype=np.int64)
    spare = np.zeros(hours, dtype=np.int64)
    att = np.ones(hours)
    if burst is not None:
        need = replicas_per_hour(np.maximum(lam - base_rate, 0.0), burst.target_rate_per_s, 0)
        if basis == "spot":
            q = min(1.0, prices.spot_interruption_per_hour * lead_time_s / 3600.0)
            base_knee = r * base.knee_rate_per_s if base is not None else 0.0
            spare, att = _spares(lam, need, base_knee, burst.knee_rate_per_s, q, target)
        total = need + spare
        prev = np.concatenate([[total[0]], total[:-1]])
        burst_h = total.sum() + np.maximum(total - prev, 0).sum() * lead_time_s / 3600.0
        usd += burst_h * burst.usd_per_replica_hour * prices.factor(basis)
        gpu_h += burst_h * burst.gpus_per_replica
    else:
        total = need
    weight = lam.sum()
    attainment = float((att * lam).sum() / weight) if weight > 0 else 1.0
    return MixOption(base, int(r), burst, basis, total, spare, usd / hours * HOURS_PER_MONTH, attainment, float(gpu_h))


def cheapest_mixes(demand: DemandCurve, knees: list[ReplicaKnee], prices: Prices, *, lead_time_s: float,
                   target_attainment: float = 0.99, top: int = 5) -> list[MixOption]:
    """Every GPU type as base × every type as burst × on-demand/spot, R over the base's hourly needs; the
    ``top`` cheapest whose expected attainment reaches the target (the cheapest R per base type, burst type
    and basis), cheapest first.  Also the pure fleets: all reserved (static peak) and all burst (R = 0)."""
    if not 0 < target_attainment <= 1:
        raise ValueError(f"--target-attainment: must be in (0, 1], got {target_attainment}")
    ok = [k for k in knees if k.knee_rate_per_s > 0]
    if not ok:
        raise ValueError("infeasible: no GPU type meets the targets at any rate")
    found: dict[tuple, MixOption] = {}

    def keep(o: MixOption):
        used_burst = o.burst is not None and o.burst_replicas.max() > 0
        key = (o.base.gpu_id if o.base is not None and o.base_replicas else None,
               o.burst.gpu_id if used_burst else None, o.burst_basis if used_burst else None)
        if o.expected_attainment + 1e-12 >= target_attainment and (key not in found
                                                                    or o.usd_per_month < found[key].usd_per_month):
            found[key] = o

    for a in ok:
        needs = np.unique(np.concatenate([[0], replicas_per_hour(demand.rate_per_s, a.target_rate_per_s, 0)]))
        if needs.size > MAX_BASE_CANDIDATES:
            needs = np.unique(np.quantile(needs, np.linspace(0, 1, MAX_BASE_CANDIDATES)).round().astype(int))
        keep(_option(demand, a, int(needs.max()), None, "on-demand", prices, lead_time_s, target_attainment))
        for b in ok:
            for basis in BURST_BASES:
                for r in needs:
                    keep(_option(demand, a, int(r), b, basis, prices, lead_time_s, target_attainment))
    return sorted(found.values(), key=lambda o: o.usd_per_month)[:top]
