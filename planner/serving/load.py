"""One replica under load: latency against the request rate (:func:`rate_sweep`), the highest rate
that meets p99 TTFT and TPOT targets (:func:`max_rate_under_slo`, the one knee search the CLI and the
dashboard share), the dashboard's latency-vs-rate curve (:func:`load_curve`) and the fleet candidates
of ``planner slo-search`` (:func:`fleet_candidates`).

Not :class:`planner.batching.LargestBatch`: that one finds the largest *batch* meeting the targets from the
roofline alone; this one finds the largest *request rate* by simulating the queue.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import numpy as np

from planner.serving.config import EngineConfig, engine_setup
from planner.serving.engine import simulate
from planner.serving.result import SimResult, percentiles
from planner.serving.step_cost import StepCost
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.specs import Deployment, GpuSpec, ModelSpec, tensor_parallel_candidates
from planner.startup import startup_check
from planner.units import MILLION, SECONDS_PER_HOUR

INF = float("inf")

#: The knee search stays below the replica's steady-state saturation by construction: its upper bracket is
#: this fraction of it (queues grow without bound at and above saturation, whatever a finite trial shows).
UPPER_BRACKET = 0.999
LOWER_BRACKET = 0.01  # light load: if even this misses, the SLO is unreachable on this replica
#: A trial simulates at least this long a stretch of arrivals (or this many requests), and its first
#: WARMUP_FRACTION of requests (arriving into an empty engine) is left out of the percentiles.
MIN_TRIAL_S = 120.0
MIN_TRIAL_REQUESTS = 2000
MAX_TRIAL_REQUESTS = 20000
WARMUP_FRACTION = 0.1
#: p99 TTFT of the trial's second half over its first: above this the queue was still growing (low confidence)
STABLE_P99_RATIO = 1.25
#: The tails a latency target can be stated at (percent of requests at or below the target).
TAILS = {"p50": 50.0, "p95": 95.0, "p99": 99.0}
DEFAULT_TAIL = "p99"


def tail_of(x: np.ndarray, tail: str = DEFAULT_TAIL) -> float | None:
    """The ``tail`` percentile (:data:`TAILS`) of the finite values of ``x`` (numpy's linear interpolation),
    None if there are none."""
    if tail not in TAILS:
        raise ValueError(f"tail: expected one of {', '.join(TAILS)}, got '{tail}'")
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(np.percentile(x, TAILS[tail])) if x.size else None


@dataclass(frozen=True)
class SloPoint:
    """The highest request rate one replica sustains within the SLOs, and what it costs.

    ``saturation_rate_per_s`` is the steady-state completion rate of an overloaded replica (the middle
    80 % of completions of a large burst); ``max_rate_per_s`` is always below it.  ``confidence`` is
    'high' when the winning trial's p99 TTFT was the same (within 25 %) in its first and second halves
    after warm-up, 'low' when it was still rising (the answer may be optimistic), 'none' when no rate met
    the targets."""

    max_rate_per_s: float  # per replica; 0 if even the lightest load misses
    ttft_p99_s: float
    tpot_p99_s: float
    output_tokens_per_s: float
    mean_in_system: float  # concurrency at that rate (Little's law)
    mean_running: float
    gpus_per_replica: int
    price_usd_per_gpu_hour: float
    iterations: int
    saturation_rate_per_s: float  # steady-state completed req/s at overload: the replica's capacity
    at_search_limit: bool = False  # the targets held up to the saturation bracket (the knee is saturation)
    trial_requests: int = 0
    confidence: str = "none"
    p99_half_ratio: float = float("nan")  # p99 TTFT, second half of the measured window ÷ first half
    search_tolerance: float = 0.02  # the bracket's relative width when the search stopped

    @property
    def max_rate_per_gpu(self) -> float:
        return self.max_rate_per_s / self.gpus_per_replica

    @property
    def usd_per_million_output_tokens(self) -> float:
        """All GPU time charged to output tokens at the SLO rate."""
        if self.output_tokens_per_s <= 0:
            return INF
        return self.price_usd_per_gpu_hour * self.gpus_per_replica / SECONDS_PER_HOUR / self.output_tokens_per_s \
            * MILLION

    def replicas_for(self, target_rate_per_s: float | None) -> int | None:
        if target_rate_per_s is None:
            return None
        if self.max_rate_per_s <= 0:
            return None
        return math.ceil(target_rate_per_s / self.max_rate_per_s - 1e-9)


def trial_requests(rate_per_s: float, min_trial_s: float = MIN_TRIAL_S) -> int:
    """Requests a trial at ``rate_per_s`` simulates: ``max(rate × min_trial_s, 2,000)``, at most 20,000."""
    return int(min(MAX_TRIAL_REQUESTS, max(MIN_TRIAL_REQUESTS, math.ceil(rate_per_s * min_trial_s))))


def run_trial(make_requests, cost: StepCost, config: EngineConfig, rate_per_s: float,
              min_trial_s: float = MIN_TRIAL_S) -> SimResult:
    """One trial at ``rate_per_s``: :func:`trial_requests` requests of ``make_requests`` (fixed seed)."""
    return simulate(_make(make_requests, rate_per_s, trial_requests(rate_per_s, min_trial_s)), cost, config)


def measured_window(res: SimResult, warmup_fraction: float = WARMUP_FRACTION) -> np.ndarray:
    """Indices of the requests measured in a trial: all but the first ``warmup_fraction`` by arrival."""
    order = np.argsort(res.arrival_s, kind="stable")
    return order[int(len(order) * warmup_fraction):]


def meets_slo(res: SimResult, ttft_p99_s: float, tpot_p99_s: float,
              warmup_fraction: float = 0.0, tail: str = DEFAULT_TAIL) -> tuple[bool, float, float]:
    """(whether the run meets both targets at ``tail`` (p99 by default) with nothing rejected, that tail's TTFT,
    that tail's TPOT), over the requests after the warm-up."""
    if res.num_rejected:
        return False, INF, INF
    idx = measured_window(res, warmup_fraction)
    done = idx[res.completed[idx]]
    if not done.size:
        return False, INF, INF
    t = tail_of(res.ttft_s[done], tail)
    p = tail_of(res.tpot_s[done], tail)
    t = INF if t is None else t
    p = 0.0 if p is None else p
    return (t <= ttft_p99_s and p <= tpot_p99_s), t, p


def p99_half_ratio(res: SimResult, warmup_fraction: float = WARMUP_FRACTION) -> float:
    """p99 TTFT of the second half of the measured window over the first (≈ 1 in steady state)."""
    idx = measured_window(res, warmup_fraction)
    half = idx.size // 2
    a, b = (percentiles(res.ttft_s[x[res.completed[x]]])["p99"] for x in (idx[:half], idx[half:]))
    return float(b / a) if a and b else float("nan")


def steady_saturation(make_requests, cost: StepCost, config: EngineConfig, num_requests: int | None = None) -> float:
    """The replica's steady-state capacity, requests/s: a burst of requests (all at t = 0; the engine runs at
    its largest batch) and the completion rate over the middle 80 % of completions (the ramp-up and the
    draining tail, where the batch is not full, left out)."""
    res = simulate(_make(make_requests, None, num_requests), cost, config)
    fin = np.sort(res.finish_s[res.completed])
    if fin.size < 10:
        return res.requests_per_s
    lo, hi = int(0.1 * fin.size), int(0.9 * fin.size)
    span = fin[hi] - fin[lo]
    return float((hi - lo) / span) if span > 0 else res.requests_per_s


def _make(make_requests, rate, num_requests):
    """Call a workload maker with a request count when it takes one (``num_requests=``)."""
    if num_requests is not None and "num_requests" in inspect.signature(make_requests).parameters:
        return make_requests(rate, num_requests=num_requests)
    return make_requests(rate)


def max_rate_under_slo(
    make_requests,
    cost: StepCost,
    config: EngineConfig,
    ttft_p99_s: float,
    tpot_p99_s: float,
    *,
    price_usd_per_gpu_hour: float = 0.0,
    gpus_per_replica: int = 1,
    rel_tol: float = 0.02,
    max_iter: int = 20,
    min_trial_s: float = MIN_TRIAL_S,
    tail: str = DEFAULT_TAIL,
    saturation_rate_per_s: float | None = None,
) -> SloPoint:
    """The highest request rate whose p99 TTFT and p99 TPOT meet the targets, right by construction:

    * never at or above the replica's steady-state saturation (:func:`steady_saturation`): the upper
      bracket is 0.999 × it, the lower 1 % of it (if that misses, the answer is 0);
    * each trial is long enough to reach steady state — ``max(rate × min_trial_s, 2,000)`` requests (at
      most 20,000) when ``make_requests(rate, num_requests=n)`` accepts a count — and its first 10 % of
      requests (arriving into an empty engine) are left out of the percentiles;
    * bisection to ``rel_tol``; the answer carries its confidence (:class:`SloPoint`).

    ``make_requests(rate)`` must return the workload at a rate with a *fixed seed* (the same arrival
    pattern scaled in time), so the search is deterministic.  ``tail``: the percentile the targets are
    stated at (p99, p95 or p50; the ``*_p99_*`` names are kept for the p99 default).
    ``saturation_rate_per_s``: :func:`steady_saturation`'s answer when the caller has it already.
    :func:`knee_search` is the same search one trial at a time.

    **Monotone in the targets by construction**: a trial at a rate does not depend on the targets (its
    length and seed depend on the rate only), so a looser target (or a lower tail) passes every trial a
    tighter one passes; two searches test the same rates until the first trial where they disagree, where
    the looser one moves its lower bracket up to that rate and the tighter one its upper bracket down to it
    — the looser knee is never below the tighter one.
    """
    search = knee_search(make_requests, cost, config, ttft_p99_s, tpot_p99_s,
                         price_usd_per_gpu_hour=price_usd_per_gpu_hour, gpus_per_replica=gpus_per_replica,
                         rel_tol=rel_tol, max_iter=max_iter, min_trial_s=min_trial_s, tail=tail,
                         saturation_rate_per_s=saturation_rate_per_s)
    while True:
        try:
            next(search)
        except StopIteration as done:
            return done.value


def knee_search(make_requests, cost: StepCost, config: EngineConfig, ttft_p99_s: float, tpot_p99_s: float, *,
                price_usd_per_gpu_hour: float = 0.0, gpus_per_replica: int = 1, rel_tol: float = 0.02,
                max_iter: int = 20, min_trial_s: float = MIN_TRIAL_S, tail: str = DEFAULT_TAIL,
                saturation_rate_per_s: float | None = None, trials: dict | None = None):
    """:func:`max_rate_under_slo` as a generator: before each trial it yields an upper bound of the knee
    (the upper bracket, requests/s), and it returns the :class:`SloPoint`.  A caller searching many replicas
    can advance the one whose bound still matters (:mod:`planner.fleet`).  ``trials``: a dict of earlier
    trials of this replica and workload by rate (read and filled), so another target's search reuses them."""
    if not (ttft_p99_s > 0 and tpot_p99_s > 0):
        raise ValueError("ttft_p99_ms/tpot_p99_ms: SLO targets must be > 0")
    if tail not in TAILS:
        raise ValueError(f"tail: expected one of {', '.join(TAILS)}, got '{tail}'")
    cap = (steady_saturation(make_requests, cost, config, MIN_TRIAL_REQUESTS) if saturation_rate_per_s is None
           else saturation_rate_per_s)
    if cap <= 0:
        return SloPoint(0.0, INF, INF, 0.0, 0.0, 0.0, gpus_per_replica, price_usd_per_gpu_hour, 1, 0.0)
    it = 0

    def trial(rate):
        nonlocal it
        it += 1
        res = trials.get((rate, min_trial_s)) if trials is not None else None
        if res is None:
            res = run_trial(make_requests, cost, config, rate, min_trial_s)
            if trials is not None:
                trials[(rate, min_trial_s)] = res
        ok, t, p = meets_slo(res, ttft_p99_s, tpot_p99_s, WARMUP_FRACTION, tail)
        return ok, (rate, res, t, p)

    lo, hi = cap * LOWER_BRACKET, cap * UPPER_BRACKET
    yield hi
    ok, best = trial(hi)
    at_limit = ok
    if not ok:
        yield hi
        ok, best = trial(lo)
        if not ok:  # the answer is 0; the light-load tails say which target it misses
            light = best
            best = None
        while best is not None and it < max_iter and (hi - lo) > rel_tol * hi:
            mid = 0.5 * (lo + hi)
            yield hi
            ok, cand = trial(mid)
            if ok:
                lo, best = mid, cand
            else:
                hi = mid
    if best is None:
        t, p = (light[2], light[3]) if not at_limit and it >= 2 else (INF, INF)
        return SloPoint(0.0, t, p, 0.0, 0.0, 0.0, gpus_per_replica, price_usd_per_gpu_hour, it, cap)
    rate, res, t, p = best
    ratio = p99_half_ratio(res)
    confidence = "high" if math.isfinite(ratio) and ratio <= STABLE_P99_RATIO else "low"
    return SloPoint(rate, t, p, res.output_tokens_per_s, res.mean_in_system, res.mean_running, gpus_per_replica,
                    price_usd_per_gpu_hour, it, cap, at_limit, len(res.arrival_s), confidence, ratio,
                    (hi - lo) / hi if hi > 0 else 0.0)


def rate_sweep(make_requests, cost: StepCost, config: EngineConfig, rates) -> list[dict]:
    """Latency percentiles and throughput against the request rate (a dashboard's "Load" view):
    one simulation per rate of ``make_requests(rate)`` (fixed seed), one row per rate."""
    rows = []
    for rate in rates:
        res = simulate(make_requests(float(rate)), cost, config)
        s = res.summary()
        rows.append({"rate_per_s": float(rate),
                     "ttft_p50_s": s["ttft_s"]["p50"], "ttft_p90_s": s["ttft_s"]["p90"], "ttft_p99_s": s["ttft_s"]["p99"],
                     "tpot_p50_s": s["tpot_s"]["p50"], "tpot_p90_s": s["tpot_s"]["p90"], "tpot_p99_s": s["tpot_s"]["p99"],
                     "e2e_p50_s": s["e2e_s"]["p50"], "e2e_p99_s": s["e2e_s"]["p99"],
                     "output_tokens_per_s": s["output_tokens_per_s"], "requests_per_s": s["requests_per_s"],
                     "concurrency_mean": res.mean_in_system, "running_mean": s["running_mean"],
                     "kv_usage_max": s["kv_usage_max"], "queue_max": s["queue_max"], "preemptions": s["preemptions"],
                     "prefix_cache_hit_rate": s["prefix_cache_hit_rate"], "rejected": s["rejected"]})
    return rows


#: The dashboard's rates, as multiples of the burst throughput; the extension only when the knee
#: search found no miss (the knee lies above its range).
LOAD_GRID = tuple(float(x) for x in np.linspace(0.2, 1.6, 8))
LOAD_GRID_EXTENSION = (2.0, 2.6, 3.2)


@dataclass(frozen=True)
class LoadCurve:
    """Latency against the request rate (:func:`rate_sweep` rows) and the knee (:func:`max_rate_under_slo`)."""

    rows: list
    knee: SloPoint


def load_curve(make_requests, cost: StepCost, config: EngineConfig, ttft_p99_s: float, tpot_p99_s: float) -> LoadCurve:
    """The dashboard's Load view: the knee, and the latency percentiles over :data:`LOAD_GRID` × the
    burst throughput (beyond it if the knee lies above the search range)."""
    knee = max_rate_under_slo(make_requests, cost, config, ttft_p99_s, tpot_p99_s)
    cap = knee.saturation_rate_per_s
    grid = LOAD_GRID + (LOAD_GRID_EXTENSION if knee.at_search_limit else ())
    return LoadCurve(rate_sweep(make_requests, cost, config, [cap * x for x in grid]), knee)


# ------------------------------------------------------------------------------------ fleet candidates

#: The columns of a fleet candidate row (``planner slo-search``; unit-suffixed, raw SI values).
FLEET_COLUMNS = (
    "model", "gpu", "weight_dtype", "kv_cache_dtype", "tensor_parallel", "fits", "note", "mode",
    "max_rate_per_s", "max_rate_per_gpu_per_s", "concurrency_mean", "running_mean", "ttft_p99_s", "tpot_p99_s",
    "output_tokens_per_s", "output_tokens_per_s_per_gpu", "saturation_rate_per_s", "usd_per_million_output_tokens",
    "price_usd_per_gpu_hour", "kv_capacity_tokens", "target_rate_per_s", "replicas_for_target", "gpus_for_target",
    "confidence", "trial_requests", "p99_half_ratio", "usd_per_hour_for_target",
)


def _finite_or_none(x):
    return x if (x is not None and math.isfinite(x)) else None


def fleet_candidates(model: ModelSpec, gpus: list[tuple[GpuSpec, CalibrationProfile | None]], weight_dtypes,
                     kv_cache_dtype: str, tensor_parallel: list[int] | None, make_requests, ttft_p99_s: float,
                     tpot_p99_s: float, *, target_rate_per_s: float | None = None,
                     enable_prefix_caching: bool | None = None,
                     max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None,
                     max_model_len: int | None = None) -> list[dict]:
    """One row (:data:`FLEET_COLUMNS`) per GPU (with its calibration profile) × weight dtype × TP:
    the highest rate per replica meeting the SLOs, its $/Mtok and the replicas a target rate needs.
    ``tensor_parallel`` None: the smallest of 1, 2, 4, 8 that fits (one row, or one saying why none
    fits).  A deployment :func:`planner.startup.startup_check` rejects at ``max_model_len`` (the workload's
    longest request; default the model's context limit, vLLM's own default) does not fit, its problems in
    ``note``.  Sorted: feasible rows first, cheapest per output token first."""
    rows = []
    for gpu, profile in gpus:
        for weight_dtype in weight_dtypes:
            for row in _candidates(model, gpu, weight_dtype, kv_cache_dtype, tensor_parallel, profile, make_requests,
                                   ttft_p99_s, tpot_p99_s, target_rate_per_s, enable_prefix_caching, max_num_seqs,
                                   max_num_batched_tokens, max_model_len or model.max_context_tokens):
                row["mode"] = profile.mode
                rows.append(row)
    rows.sort(key=lambda r: (not r["fits"] or not r["max_rate_per_s"],
                             r["usd_per_million_output_tokens"] if r["usd_per_million_output_tokens"] is not None
                             else math.inf))
    return rows


def _candidates(m, g, wd, kv_dtype, tps, prof, make, ttft_s, tpot_s, target_rate, prefix_caching, mns, mnbt,
                max_model_len):
    options = tps if tps is not None else tensor_parallel_candidates(m, g)
    base = {"model": m.id, "gpu": g.id, "weight_dtype": wd, "kv_cache_dtype": kv_dtype,
            "price_usd_per_gpu_hour": g.price_usd_per_hour, "target_rate_per_s": target_rate}
    empty = {k: None for k in FLEET_COLUMNS if k not in base}
    out = []
    last_note = ""
    for t in options:
        row = {**empty, **base, "tensor_parallel": t, "fits": False, "note": ""}
        dep = Deployment.for_gpu(g, num_gpus=t, tensor_parallel=t, weight_dtype=wd, kv_cache_dtype=kv_dtype,
                                 **({"max_num_seqs": mns} if mns else {}),
                                 **({"max_num_batched_tokens": mnbt} if mnbt else {}))
        check = startup_check(m, g, dep, max_model_len, prof)
        if not check.ok:
            row["note"] = "does not start: " + "; ".join(check.reasons())
        else:
            cost, cfg = engine_setup(m, g, dep, prof, enable_prefix_caching=prefix_caching,
                                     kv_capacity_tokens=check.kv_capacity_tokens)
            pt = max_rate_under_slo(make, cost, cfg, ttft_s, tpot_s, price_usd_per_gpu_hour=g.price_usd_per_hour,
                                    gpus_per_replica=t)
            row.update({
                "fits": True, "kv_capacity_tokens": cfg.pool_tokens,
                "max_rate_per_s": pt.max_rate_per_s, "max_rate_per_gpu_per_s": pt.max_rate_per_gpu,
                "concurrency_mean": pt.mean_in_system, "running_mean": pt.mean_running,
                "ttft_p99_s": _finite_or_none(pt.ttft_p99_s), "tpot_p99_s": _finite_or_none(pt.tpot_p99_s),
                "output_tokens_per_s": pt.output_tokens_per_s,
                "output_tokens_per_s_per_gpu": pt.output_tokens_per_s / t,
                "saturation_rate_per_s": pt.saturation_rate_per_s,
                "confidence": pt.confidence, "trial_requests": pt.trial_requests,
                "p99_half_ratio": _finite_or_none(pt.p99_half_ratio),
                "usd_per_million_output_tokens": _finite_or_none(pt.usd_per_million_output_tokens),
                "note": "" if pt.max_rate_per_s > 0 else "misses the SLO even at light load",
            })
            reps = pt.replicas_for(target_rate)
            row["replicas_for_target"] = reps
            row["gpus_for_target"] = reps * t if reps is not None else None
            row["usd_per_hour_for_target"] = reps * t * g.price_usd_per_hour if reps is not None else None
        if tps is None:  # auto: the smallest TP that fits
            last_note = row["note"] or last_note
            if row["fits"]:
                out.append(row)
                return out
            continue
        out.append(row)
    if tps is None:
        row = {**empty, **base, "tensor_parallel": options[-1] if options else 1, "fits": False,
               "note": last_note or "does not fit at any TP"}
        out.append(row)
    return out
