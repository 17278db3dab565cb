"""Autoscaling that works: the signals and their thresholds from the simulator, the replica bounds, and the
scale-up lead time from measured boots.

**Signals.**  HPA (and KEDA, which drives an HPA) asks for desired = ⌈Σ metric ÷ threshold⌉ replicas per
metric and takes the largest (Kubernetes HPA algorithm, kubernetes.io/docs/tasks/run-application/
horizontal-pod-autoscale, read 2026-12-01).  That rule assumes the metric is *proportional* to the load
a replica carries.  vLLM's gauges are not: requests running + waiting (``vllm:num_requests_running``,
``vllm:num_requests_waiting``) grow faster than the rate (by Little's law, rate × E2E, and E2E grows
with the batch).  One replica of Llama-3.1-8B on an H100 holds 69.5 requests at 25 req/s but 2 × 16.0 =
32 at 12.5 req/s each on two: a threshold of 45.7 (its count at the target rate) asks for 2 replicas
at one and 1 at two — the policy flaps every cooldown (our replay showed it: 72 % attainment in a ramp
hour).  So the policy scales on two metrics:

* **the rate** (proportional): completed requests per second, ``rate(vllm:request_success_total[1m])``
  (a counter of vLLM 0.26's /metrics: in our own dumps, ``calibration/data/h200x2-2026-12-01/*/
  serve_bench.jsonl``), threshold = the target rate per replica (the knee less the headroom):
  desired = ⌈λ ÷ target⌉, the schedule's own rule;
* **the alarm** (overload): running + waiting per replica, threshold = one replica's count *at the knee*
  (from a simulation of one replica there, :class:`RateTable`).  Below the knee it asks for fewer
  replicas than the rate; past it (completions saturate, the queue grows) it takes over.

KV-cache usage (``vllm:kv_cache_usage_perc``, 0–1) at the target and the knee is reported: a signal for
long-context workloads whose batch is KV-bound (metric names: vLLM docs design/metrics.md, read 2026-12-01).

**Lead time** (:func:`lead_time`) = the metric's delay (Prometheus scrape + KEDA polling) + node provisioning
(an input: 0 when GPU nodes wait in the pool) + the engine's boot to ``/health`` + reading the checkpoint.
The boot is *measured*: :data:`MEASURED_BOOTS` (:mod:`planner.boots`) are our vLLM 0.26.0 boots on H200s and
H100s with dummy weights (``boot_s`` of each ``serve_bench.jsonl`` boot record; the engine's own log line
"init engine (profile, create kv cache, warmup model) took … s" is ``init_engine_s``); the slowest boot of the
same model is used, else the slowest of all.  Dummy weights read nothing, so the checkpoint's bytes at
:data:`planner.deploy.layout.WEIGHT_LOAD_BYTES_PER_S` are added.  Llama-3.1-8B, one node, KEDA polling 30 s +
scrape 15 s: 45 + 0 + 144.1 + 16.06 = 205.2 s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.boots import MEASURED_BOOTS, BootRecord, default_graph_boots
from planner.capacity.engine import ReplicaKnee
from planner.deploy.layout import WEIGHT_LOAD_BYTES_PER_S, checkpoint_bytes
from planner.serving.engine import simulate
from planner.serving.load import WARMUP_FRACTION, measured_window
from planner.specs import ModelSpec

__all__ = ["MEASURED_BOOTS", "BootRecord", "LeadTime", "Policy", "RatePoint", "RateTable", "derive_policy",
           "lead_time"]

RATE_METRIC = "vllm:request_success_total"
SIGNAL_METRICS = ("vllm:num_requests_running", "vllm:num_requests_waiting")
KV_METRIC = "vllm:kv_cache_usage_perc"
#: KEDA's default pollingInterval and cooldownPeriod, s (keda.sh/docs/2.15/reference/scaledobject-spec).
KEDA_POLLING_INTERVAL_S = 30
KEDA_COOLDOWN_S = 300
#: HPA's default scale-down stabilisation window and tolerance (kubernetes.io HPA docs, read 2026-12-01).
HPA_SCALE_DOWN_WINDOW_S = 300
HPA_TOLERANCE = 0.1
#: How often Prometheus scrapes vLLM's /metrics: 15 s, a common ServiceMonitor interval (our assumption;
#: Prometheus's own default scrape_interval is 1 min).
SCRAPE_INTERVAL_S = 15.0


@dataclass(frozen=True)
class LeadTime:
    """Seconds from demand rising to a new replica serving, in its parts."""

    detection_s: float  # scrape + polling
    node_provision_s: float
    boot_s: float  # measured, dummy weights
    weight_load_s: float
    boot_basis: str

    @property
    def total_s(self) -> float:
        return self.detection_s + self.node_provision_s + self.boot_s + self.weight_load_s

    def as_dict(self) -> dict:
        return {"total_s": self.total_s, "detection_s": self.detection_s, "node_provision_s": self.node_provision_s,
                "boot_s": self.boot_s, "weight_load_s": self.weight_load_s, "boot_basis": self.boot_basis}


def lead_time(model: ModelSpec, *, nodes: int = 1, node_provision_s: float = 0.0,
              polling_interval_s: float = KEDA_POLLING_INTERVAL_S,
              scrape_interval_s: float = SCRAPE_INTERVAL_S) -> LeadTime:
    """The scale-up lead time of one replica of ``model`` (module docstring)."""
    if not (math.isfinite(node_provision_s) and 0 <= node_provision_s <= 3600):
        raise ValueError(f"--node-provision-s: must be from 0 to 3,600 s, got {node_provision_s:g}")
    if not (math.isfinite(polling_interval_s) and 1 <= polling_interval_s <= 600):
        raise ValueError(f"--polling-interval-s: must be from 1 to 600 s, got {polling_interval_s:g}")
    default = default_graph_boots()  # the plan's engines: vLLM's graphs
    own = [b for b in default if b.model_id == model.id]
    pool = own or default
    worst = max(pool, key=lambda b: b.boot_s)
    basis = (f"slowest of {len(own)} measured boot(s) of {model.id} (vLLM 0.26.0, {worst.gpu_id}, dummy weights; "
             f"{worst.source})"
             if own else f"no boot of {model.id} measured: the slowest of all {len(pool)} measured boots "
                         f"({worst.model_id}, {worst.source})")
    load = checkpoint_bytes(model) / max(1, nodes) / WEIGHT_LOAD_BYTES_PER_S
    return LeadTime(float(polling_interval_s + scrape_interval_s), float(node_provision_s), worst.boot_s, load, basis)


# ------------------------------------------------------------------------------------- one replica by rate


@dataclass(frozen=True)
class RatePoint:
    """One replica at a steady rate, from one simulation (after warm-up)."""

    rate_per_s: float
    met_fraction: float  # requests meeting both the TTFT and TPOT targets
    ttft_p99_s: float
    in_system: float  # time-averaged running + waiting
    running: float
    kv_usage: float  # time-averaged fraction of KV blocks in use


def _time_avg(t: np.ndarray, y: np.ndarray) -> float:
    if t.size < 2:
        return float(y.mean()) if y.size else 0.0
    dt = np.diff(t)
    tot = dt.sum()
    return float((y[:-1] * dt).sum() / tot) if tot > 0 else float(y.mean())


class RateTable:
    """One replica simulated at steady rates on a grid of ``step`` × its saturation (at most 0.999 of it),
    each grid point once (lazily, then cached), linear in between: how the policy replay reads a
    replica-minute at any per-replica rate without simulating its requests one by one."""

    def __init__(self, knee: ReplicaKnee, step: float = 0.025, min_requests: int = 2000, max_requests: int = 6000):
        if knee.cost is None or knee.saturation_rate_per_s <= 0:
            raise ValueError("infeasible: the replica does not start or serves nothing")
        self.knee, self.step = knee, float(step)
        self.min_requests, self.max_requests = min_requests, max_requests
        self._points: dict[int, RatePoint] = {}
        self.simulated_requests = 0

    @property
    def max_index(self) -> int:
        return int(math.floor(0.999 / self.step))

    def _point(self, i: int) -> RatePoint:
        if i not in self._points:
            k = self.knee
            rate = i * self.step * k.saturation_rate_per_s
            n = int(min(self.max_requests, max(self.min_requests, math.ceil(rate * 120))))
            res = simulate(k.make_requests(rate, num_requests=n), k.cost, k.config)
            self.simulated_requests += n
            idx = measured_window(res, WARMUP_FRACTION)
            ttft, tpot = res.ttft_s[idx], res.tpot_s[idx]
            ok = res.completed[idx] & (ttft <= k.ttft_slo_s) & ~(tpot > k.tpot_slo_s)
            done = idx[res.completed[idx]]
            p99 = float(np.percentile(res.ttft_s[done], 99)) if done.size else math.inf
            self._points[i] = RatePoint(rate, float(ok.mean()), p99, res.mean_in_system, res.mean_running,
                                        _time_avg(res.series_t_s, res.series_kv_usage))
        return self._points[i]

    def at(self, rate_per_s: float) -> RatePoint:
        """The replica at ``rate_per_s`` (capped at 0.999 × saturation), interpolated between grid points."""
        sat = self.knee.saturation_rate_per_s
        x = min(max(rate_per_s, 0.0) / sat, self.max_index * self.step) / self.step
        lo = max(1, int(math.floor(x)))
        hi = min(self.max_index, lo + 1)
        a, b = self._point(lo), self._point(hi)
        w = 0.0 if hi == lo else min(1.0, max(0.0, x - lo))
        mix = [(1 - w) * getattr(a, f) + w * getattr(b, f) for f in ("met_fraction", "ttft_p99_s", "in_system",
                                                                     "running", "kv_usage")]
        return RatePoint(rate_per_s, *mix)


# ----------------------------------------------------------------------------------------------- policy


@dataclass(frozen=True)
class Policy:
    """When to scale: the rate threshold, the overload alarm, the bounds and the timing."""

    target_rate_per_s: float  # completed requests/s per replica: the proportional trigger's threshold
    threshold_in_system: float  # running + waiting per replica at the knee: the alarm's threshold
    in_system_at_target: float
    running_at_target: float
    kv_usage_at_target: float
    kv_usage_at_knee: float
    min_replicas: int
    max_replicas: int
    polling_interval_s: float
    cooldown_s: float
    lead: LeadTime
    tolerance: float = HPA_TOLERANCE

    @property
    def signal(self) -> str:
        return f"rate({RATE_METRIC}[1m]), and {' + '.join(SIGNAL_METRICS)} as the overload alarm"

    def desired(self, completed_rate_per_s: float, in_system: float, ready: int) -> int:
        """HPA's answer for the two metrics (each left at ``ready`` within the tolerance), the larger one,
        clipped to [min, max]."""
        def one(total: float, threshold: float) -> int:
            if ready and abs(total / (threshold * ready) - 1) <= self.tolerance:
                return ready
            return math.ceil(total / threshold - 1e-9)

        want = max(one(completed_rate_per_s, self.target_rate_per_s), one(in_system, self.threshold_in_system))
        return int(min(max(want, self.min_replicas), self.max_replicas))

    def as_dict(self) -> dict:
        return {"signal": self.signal, "rate_metric": RATE_METRIC,
                "threshold_rate_per_s_per_replica": self.target_rate_per_s,
                "alarm_metrics": list(SIGNAL_METRICS),
                "threshold_requests_in_system_per_replica": self.threshold_in_system,
                "requests_in_system_per_replica_at_target": self.in_system_at_target,
                "running_per_replica_at_target": self.running_at_target,
                "kv_cache_usage_at_target": self.kv_usage_at_target, "kv_cache_usage_at_knee": self.kv_usage_at_knee,
                "kv_metric": KV_METRIC, "min_replicas": self.min_replicas, "max_replicas": self.max_replicas,
                "polling_interval_s": self.polling_interval_s, "cooldown_s": self.cooldown_s,
                "tolerance": self.tolerance, "lead_time": self.lead.as_dict()}


def derive_policy(knee: ReplicaKnee, table: RateTable, lead: LeadTime, *, min_replicas: int, max_replicas: int,
                  polling_interval_s: float = KEDA_POLLING_INTERVAL_S, cooldown_s: float = KEDA_COOLDOWN_S) -> Policy:
    """The rate threshold is the knee less the headroom; the alarm is one replica's time-averaged running +
    waiting at the knee (module docstring)."""
    if not (math.isfinite(cooldown_s) and 0 <= cooldown_s <= 86400):
        raise ValueError(f"--cooldown-s: must be from 0 to 86,400 s, got {cooldown_s:g}")
    at_target, at_knee = table.at(knee.target_rate_per_s), table.at(knee.knee_rate_per_s)
    return Policy(knee.target_rate_per_s, max(at_knee.in_system, 1.0), at_target.in_system, at_target.running,
                  at_target.kv_usage, at_knee.kv_usage, int(min_replicas), int(max_replicas),
                  float(polling_interval_s), float(cooldown_s), lead)
