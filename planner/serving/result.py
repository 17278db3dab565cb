"""What a simulation run returns: :class:`SimResult` (per-request timings, time series, totals) and
the percentile helper every summary uses."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.serving.config import EngineConfig


def error_pct(measured: float | None, predicted: float | None) -> float:
    """Signed error of a prediction against a measurement, percent of the measurement; NaN when either is
    missing or the measurement is 0 or not finite (a replayed run's metric that was not measured)."""
    if measured is None or predicted is None or not measured or not np.isfinite(measured):
        return float("nan")
    return 100.0 * (predicted - measured) / measured


class MeasuredVsPredicted:
    """A measured run beside the simulator's prediction of it: ``measured`` and ``predicted`` (dicts of the
    same metric keys) and the signed error of each (:func:`error_pct`)."""

    measured: dict
    predicted: dict

    def error_pct(self, key: str) -> float:
        return error_pct(self.measured.get(key), self.predicted.get(key))


def percentiles(x: np.ndarray) -> dict:
    """Mean, p50, p90 and p99 of the finite values of ``x`` (numpy's linear interpolation); all None
    if there are none."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {"mean": None, "p50": None, "p90": None, "p99": None}
    p50, p90, p99 = np.percentile(x, [50, 90, 99])
    return {"mean": float(x.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99)}


#: a run is over capacity (its queue still growing when its arrivals ended: no steady state, so its latency percentiles
#: depend on how long it ran) when the requests in the system over the last quarter of its arrival window average at
#: least OVER_CAPACITY_GROWTH times those over the second quarter, and OVER_CAPACITY_MIN_REQUESTS more (a Poisson
#: run of a few requests in flight moves by more than half by chance).  Over the 87 recorded vllm bench runs of
#: calibration/data the ratio was <= 1.42 on every run whose in-flight count levelled off and >= 1.61 where it climbed
#: until the arrivals stopped (issue #21).
OVER_CAPACITY_GROWTH = 1.5
OVER_CAPACITY_MIN_REQUESTS = 10.0


def in_system_quarters(arrival, e2e) -> dict:
    """``in_system_q2``/``in_system_q4``: the mean number of requests in the system (arrived, not yet finished; one
    that never finished stays in) over the second and the last quarter of the arrival window, at 200 instants each
    (None for a run of fewer than 8 requests or whose arrivals share one instant: a closed loop's first wave)."""
    arrival, e2e = np.asarray(arrival, dtype=float), np.asarray(e2e, dtype=float)
    ok = np.isfinite(arrival)
    a = np.sort(arrival[ok])
    if a.size < 8 or not a[-1] > a[0]:
        return {"in_system_q2": None, "in_system_q4": None}
    done = np.sort(np.where(np.isfinite(e2e[ok]), arrival[ok] + e2e[ok], np.inf))
    span = a[-1] - a[0]

    def mean_in_system(lo: float, hi: float) -> float:
        t = a[0] + span * np.linspace(lo, hi, 200)
        return float(np.mean(np.searchsorted(a, t, "right") - np.searchsorted(done, t, "right")))

    return {"in_system_q2": mean_in_system(0.25, 0.5), "in_system_q4": mean_in_system(0.75, 1.0)}


def over_capacity(stats: dict) -> bool:
    """Whether a run's summary (with :func:`in_system_quarters`' keys) says its queue kept growing to the end of its
    arrivals (:data:`OVER_CAPACITY_GROWTH`)."""
    q2, q4 = stats.get("in_system_q2"), stats.get("in_system_q4")
    return q2 is not None and q4 is not None and q4 >= OVER_CAPACITY_GROWTH * q2 \
        and q4 - q2 >= OVER_CAPACITY_MIN_REQUESTS


@dataclass(frozen=True)
class SimResult:
    """Per-request timings (seconds from the run's start) and the run's time series.

    Percentiles are numpy's linear-interpolation percentiles over completed requests; TPOT is a
    request's mean inter-token time after the first token, (finish − first token) / (outputs − 1)
    (requests with one output token have none).  Throughputs divide by the makespan from the first
    arrival to the last finish.
    """

    arrival_s: np.ndarray
    first_token_s: np.ndarray  # NaN: rejected (does not fit the KV pool)
    finish_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    cached_prompt_tokens: np.ndarray  # prompt tokens served from the prefix cache at first admission
    preemptions_per_request: np.ndarray
    request_overhead_s: float
    # time series, sampled at every simulated event (step or run of decode steps)
    series_t_s: np.ndarray
    series_kv_usage: np.ndarray  # fraction of KV blocks in use (cached-but-free blocks count as free)
    series_waiting: np.ndarray
    series_running: np.ndarray
    # totals
    num_steps: int
    num_events: int
    num_preemptions: int
    prefill_tokens_computed: int  # prompt tokens actually run through the model (recomputes included)
    prefix_cache_queries_tokens: int
    prefix_cache_hits_tokens: int
    kv_capacity_tokens: int
    config: EngineConfig
    mode: str = "ideal"
    sequential: bool = False
    wall_s: float = 0.0
    num_compile_stalls: int = 0  # steps that paid StepCost.shape_compile_s (EngineConfig.cold_step_shapes)
    compiled_step_keys: frozenset = frozenset()  # the compile keys the engine had at the end (ditto)
    # the OpenAI server's time per prompt token before the engine (EngineConfig.frontend_token_overhead_s): each
    # request's latencies carry it for its own prompt, on top of request_overhead_s
    request_overhead_per_prompt_token_s: float = 0.0

    @property
    def request_overhead_each_s(self) -> np.ndarray:
        """Each request's time outside the simulated engine: the per-request overhead and its prompt's share."""
        return self.request_overhead_s + self.request_overhead_per_prompt_token_s * self.prompt_tokens

    @property
    def completed(self) -> np.ndarray:
        return np.isfinite(self.finish_s)

    @property
    def num_rejected(self) -> int:
        return int((~self.completed).sum())

    @property
    def ttft_s(self) -> np.ndarray:
        return self.first_token_s - self.arrival_s + self.request_overhead_each_s

    @property
    def e2e_s(self) -> np.ndarray:
        return self.finish_s - self.arrival_s + self.request_overhead_each_s

    @property
    def tpot_s(self) -> np.ndarray:
        n = self.output_tokens - 1
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, (self.finish_s - self.first_token_s) / np.maximum(n, 1), np.nan)

    @property
    def duration_s(self) -> float:
        done = self.completed
        if not done.any():
            return 0.0
        return float(self.finish_s[done].max() + self.request_overhead_s - self.arrival_s.min())

    @property
    def output_tokens_per_s(self) -> float:
        d = self.duration_s
        return float(self.output_tokens[self.completed].sum() / d) if d > 0 else 0.0

    @property
    def requests_per_s(self) -> float:
        d = self.duration_s
        return float(self.completed.sum() / d) if d > 0 else 0.0

    @property
    def prefix_cache_hit_rate(self) -> float:
        q = self.prefix_cache_queries_tokens
        return self.prefix_cache_hits_tokens / q if q else 0.0

    def _time_avg(self, y: np.ndarray) -> float:
        t = self.series_t_s
        if t.size < 2:
            return float(y.mean()) if y.size else 0.0
        dt = np.diff(t)
        tot = dt.sum()
        return float((y[:-1] * dt).sum() / tot) if tot > 0 else float(y.mean())

    @property
    def mean_in_system(self) -> float:
        """Time-averaged requests waiting or running (Little's law: ≈ requests/s × mean E2E)."""
        return self._time_avg(self.series_waiting + self.series_running)

    @property
    def mean_running(self) -> float:
        """Time-averaged running requests (the effective batch size)."""
        return self._time_avg(self.series_running.astype(float))

    def summary(self) -> dict:
        done = self.completed
        return {
            "ttft_s": percentiles(self.ttft_s[done]),
            "tpot_s": percentiles(self.tpot_s[done]),
            "e2e_s": percentiles(self.e2e_s[done]),
            "output_tokens_per_s": self.output_tokens_per_s,
            "requests_per_s": self.requests_per_s,
            "num_requests": len(self.arrival_s),
            "completed": int(done.sum()),
            "rejected": self.num_rejected,
            "duration_s": self.duration_s,
            "preemptions": self.num_preemptions,
            "prefix_cache_hit_rate": self.prefix_cache_hit_rate,
            "prefill_tokens_computed": self.prefill_tokens_computed,
            "kv_usage_max": float(self.series_kv_usage.max()) if self.series_kv_usage.size else 0.0,
            "kv_usage_mean": self._time_avg(self.series_kv_usage),
            "queue_max": int(self.series_waiting.max()) if self.series_waiting.size else 0,
            "queue_mean": self._time_avg(self.series_waiting.astype(float)),
            "running_mean": self.mean_running,
            "running_max": int(self.series_running.max()) if self.series_running.size else 0,
            "kv_capacity_tokens": self.kv_capacity_tokens,
            "max_num_seqs": self.config.max_num_seqs,
            "max_num_batched_tokens": self.config.max_num_batched_tokens,
            "prefix_caching": self.config.enable_prefix_caching,
            "spec_decode": None if self.config.spec is None else {
                "k": self.config.spec.num_speculative_tokens, "acceptance_rate": self.config.spec.acceptance_rate,
                "draft_cost_ratio": self.config.spec.draft_cost_ratio,
                "expected_tokens_per_step": self.config.spec.expected_tokens_per_step},
            "sequential": self.sequential,
            "mode": self.mode,
            "num_steps": self.num_steps,
            "simulator_wall_s": self.wall_s,
        }
