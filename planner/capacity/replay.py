"""The demand curve replayed with the autoscaling policy in the loop: SLO attainment per hour.

**How** (:func:`replay_policy`), minute by minute (``tick_s``):

* the rate λ(t) is the hourly curve interpolated linearly between hour midpoints; the requests of a
  minute are a Poisson draw (seeded) of mean λ × 60 — a day at 11.6 req/s is ~1M requests;
* every ``polling_interval_s`` the policy (:meth:`~planner.capacity.autoscale.Policy.desired`) reads its two
  metrics — the completed-request rate of the last tick (at most the ready replicas' saturation) and the
  running + waiting (each ready replica's in-system count at its rate λ ÷ ready, from
  :class:`~planner.capacity.autoscale.RateTable`, plus the fleet's backlog); replicas asked for become
  ready after the lead time less the polling part (the loop's own polling is that part); scale-down takes
  the highest request of the last ``cooldown_s`` (HPA's stabilisation window), one replica a minute,
  booting replicas first;
* a minute's requests meet the targets in the share one replica meets them at λ ÷ ready (the same table:
  a simulation of one replica at that steady rate, so each rate is simulated once, not each request);
  past the fleet's saturation the excess piles up as a backlog, drained at the spare capacity, and a
  request arriving behind a backlog longer than the TTFT target misses it.

This is why a day of ~1M requests replays in seconds: the simulator runs once per grid rate
(≤ 40 rates × ≤ 6,000 requests), the day's requests are counted, not simulated one by one.
:func:`replay_direct` checks it: one representative replica simulated request by request through the
replay's own timeline of ready replicas (λ ÷ ready arrivals; equal split, as a round-robin router gives).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from planner.capacity.autoscale import Policy, RateTable
from planner.capacity.demand import DemandCurve
from planner.serving.engine import simulate
from planner.serving.workloads import make_requests

__all__ = ["PolicyReplay", "replay_direct", "replay_policy"]

MAX_REPLAY_HOURS = 31 * 24


@dataclass(frozen=True)
class PolicyReplay:
    """Per hour: requests, requests meeting the targets, replicas ready (mean, min), replicas paid, the
    worst estimated p99 TTFT; and the ready-replica timeline per tick."""

    requests: np.ndarray
    met: np.ndarray
    ready_mean: np.ndarray
    ready_min: np.ndarray
    paid_replica_hours: np.ndarray
    ttft_p99_max_s: np.ndarray
    ready_per_tick: np.ndarray
    tick_s: float
    target_attainment: float

    @property
    def hours(self) -> int:
        return int(self.requests.size)

    @property
    def attainment(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.requests > 0, self.met / np.maximum(self.requests, 1), 1.0)

    @property
    def overall_attainment(self) -> float:
        tot = self.requests.sum()
        return float(self.met.sum() / tot) if tot else 1.0

    @property
    def hours_below_target(self) -> np.ndarray:
        return np.flatnonzero(self.attainment < self.target_attainment)

    @property
    def total_requests(self) -> int:
        return int(self.requests.sum())

    def as_dict(self, hourly: bool = True) -> dict:
        out = {"hours": self.hours, "total_requests": self.total_requests,
               "overall_attainment": self.overall_attainment, "target_attainment": self.target_attainment,
               "hours_below_target": [int(h) for h in self.hours_below_target[:100]],
               "paid_replica_hours": float(self.paid_replica_hours.sum()),
               "worst_ttft_p99_s": _finite(float(self.ttft_p99_max_s.max()))}
        if hourly:
            att = self.attainment
            out["hourly"] = [{"hour": h, "requests": int(self.requests[h]), "attainment": float(att[h]),
                              "ready_replicas_mean": float(self.ready_mean[h]),
                              "ready_replicas_min": int(self.ready_min[h]),
                              "ttft_p99_max_s": _finite(float(self.ttft_p99_max_s[h]))} for h in range(self.hours)]
        return out


def _finite(x: float):
    return x if math.isfinite(x) else None


def rate_per_tick(demand: DemandCurve, tick_s: float, hours: int) -> np.ndarray:
    """λ at each tick's midpoint, linear between hour midpoints (flat before the first and after the last)."""
    t = (np.arange(int(hours * 3600 / tick_s)) + 0.5) * tick_s / 3600.0
    return np.interp(t, np.arange(demand.hours) + 0.5, demand.rate_per_s)


def replay_policy(demand: DemandCurve, policy: Policy, table: RateTable, *, hours: int | None = None,
                  tick_s: float = 60.0, target_attainment: float = 0.99, seed: int = 0) -> PolicyReplay:
    """The first ``hours`` of ``demand`` (default all, at most 31 days) with ``policy`` in the loop."""
    hours = min(demand.hours, MAX_REPLAY_HOURS) if hours is None else int(hours)
    if not 1 <= hours <= min(demand.hours, MAX_REPLAY_HOURS):
        raise ValueError(f"--replay-hours: must be from 1 to {min(demand.hours, MAX_REPLAY_HOURS):,}, got {hours}")
    lam = rate_per_tick(demand, tick_s, hours)
    counts = np.random.default_rng(seed).poisson(lam * tick_s)
    per_hour = int(round(3600 / tick_s))
    sat = table.knee.saturation_rate_per_s
    ttft_slo = table.knee.ttft_slo_s
    boot_s = policy.lead.total_s - policy.polling_interval_s
    poll_every = max(1, int(round(policy.polling_interval_s / tick_s)))
    ready = int(np.clip(math.ceil(lam[0] / policy.target_rate_per_s - 1e-9), policy.min_replicas, policy.max_replicas))
    pending: deque[float] = deque()
    history: deque[tuple[float, int]] = deque()
    backlog = 0.0
    completed_rate = float(lam[0])  # the rate metric: last tick's completions per second
    n_ticks = lam.size
    met = np.zeros(n_ticks)
    p99 = np.zeros(n_ticks)
    ready_tick = np.zeros(n_ticks, dtype=np.int64)
    paid_tick = np.zeros(n_ticks)
    for k in range(n_ticks):
        t = k * tick_s
        while pending and pending[0] <= t:
            pending.popleft()
            ready += 1
        rate = lam[k]
        cap = ready * sat
        completed_rate = min(rate + backlog / tick_s, cap)
        backlog = max(0.0, backlog + (rate - cap) * tick_s)
        wait = backlog / cap if cap > 0 else math.inf
        pt = table.at(rate / ready) if ready else None
        ok = 0.0 if pt is None or wait > ttft_slo else pt.met_fraction
        met[k] = counts[k] * ok
        p99[k] = math.inf if pt is None else pt.ttft_p99_s + wait
        ready_tick[k] = ready
        paid_tick[k] = ready + len(pending)
        if k % poll_every:
            continue
        in_system = (ready * pt.in_system if pt else 0.0) + backlog
        current = ready + len(pending)
        want = policy.desired(completed_rate, in_system, current)
        history.append((t, want))
        while history and history[0][0] < t - policy.cooldown_s:
            history.popleft()
        if want > current:
            pending.extend([t + boot_s] * (want - current))
            continue
        drop = min(current - max(w for _, w in history), max(1, int(tick_s * poll_every // 60)))
        while drop > 0 and pending:  # HPA's scale-down policy here: one pod a minute, booting ones first
            pending.pop()
            drop -= 1
        ready -= max(0, drop)
    shape = (hours, per_hour)
    return PolicyReplay(counts.reshape(shape).sum(1).astype(float), met.reshape(shape).sum(1),
                        ready_tick.reshape(shape).mean(1), ready_tick.reshape(shape).min(1),
                        paid_tick.reshape(shape).sum(1) * tick_s / 3600.0, p99.reshape(shape).max(1),
                        ready_tick, float(tick_s), float(target_attainment))


def replay_direct(demand: DemandCurve, replay: PolicyReplay, table: RateTable, *, seed: int = 0,
                  max_requests: int = 200_000) -> np.ndarray:
    """Attainment per hour of one representative replica simulated request by request: arrivals at
    λ(t) ÷ ready(t) from ``replay``'s timeline (Poisson per tick), lengths from the workload.  Slower
    (every request simulated); the check on :func:`replay_policy`'s per-rate shortcut."""
    k = table.knee
    hours = replay.hours
    lam = rate_per_tick(demand, replay.tick_s, hours) / np.maximum(replay.ready_per_tick, 1)
    rng = np.random.default_rng(seed)
    counts = rng.poisson(lam * replay.tick_s)
    n = int(counts.sum())
    if n > max_requests:
        raise ValueError(f"replay_direct: {n:,} requests is above the {max_requests:,} simulated directly")
    if n == 0:
        return np.ones(hours)
    starts = np.repeat(np.arange(counts.size) * replay.tick_s, counts)
    arrivals = np.sort(starts + rng.uniform(0, replay.tick_s, n))
    base = k.make_requests(1.0, num_requests=n)
    reqs = make_requests(base.prompt_tokens, base.output_tokens, arrivals, prefix_group=base.prefix_group,
                         prefix_tokens=base.prefix_tokens)
    res = simulate(reqs, k.cost, k.config)
    ok = res.completed & (res.ttft_s <= k.ttft_slo_s) & ~(res.tpot_s > k.tpot_slo_s)
    hour = np.minimum((res.arrival_s // 3600).astype(int), hours - 1)
    tot = np.bincount(hour, minlength=hours)
    good = np.bincount(hour, weights=ok.astype(float), minlength=hours)
    return np.where(tot > 0, good / np.maximum(tot, 1), 1.0)
