"""The fleet engine's per-candidate work (:mod:`planner.fleet` ranks and sizes; this simulates and caches).

* :func:`candidate_layouts` — the GPU × TP × PP layouts of one GPU that vLLM would start (the others listed
  with their reasons);
* :func:`first_guess` — the steady-state batch formula (:func:`planner.plan.plan`): the first guess, the
  explanation and the error band;
* :func:`saturation_bound` — the replica's simulated saturation (a burst), the upper bound of its knee;
* :class:`KneeRun` — the knee at the stated tail and the operating point below it (:class:`Evaluated`).

Simulations are cached per process, keyed by everything they depend on (model, GPU datasheet, deployment,
profile, request lengths and seed; the knee also by the targets, tail and headroom) — not by the demand
or the price, which do not change them.  So every surface asking the same question pays once.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace

import numpy as np

from planner.serving.load import (
    MIN_TRIAL_REQUESTS,
    WARMUP_FRACTION,
    knee_search,
    measured_window,
    meets_slo,
    run_trial,
    steady_saturation,
)
from planner.specs import Deployment, tensor_parallel_candidates
from planner.startup import pipeline_stages, startup_check

__all__ = ["Evaluated", "KneeRun", "candidate_layouts", "clear_cache", "first_guess", "gpu_price", "resolve",
           "saturation_bound"]

CONFIDENCE = {"calibrated": "measured", "transferred": "transferred", "ideal": "none"}
_CACHE: dict = {}
_CACHE_MAX = 512  # entries: engines, saturations, knees, and per replica its trials (SimResults) by rate


def clear_cache() -> None:
    _CACHE.clear()


def _remember(key, compute):
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = compute()
    return _CACHE[key]


def _digest(*parts) -> str:
    return hashlib.sha1("\x1f".join(str(p) for p in parts).encode()).hexdigest()


@dataclass(frozen=True)
class Setup:
    """One layout that starts: its specs, its simulator cost and config, and the cache key of its replica."""

    model: object
    gpu: object
    deployment: Deployment
    profile: object
    key: str
    prefix_caching: bool | None = None  # None: vLLM's default for the model (serving.config.prefix_caching_for)


@dataclass(frozen=True)
class Evaluated:
    """A replica's knee at the tail and its operating point (the usable rate), from the simulator (SI)."""

    knee_rate_per_s: float
    usable_rate_per_s: float
    confidence: str  # the knee search's: high | low | none
    ttft_tail_at_knee_s: float
    tpot_tail_at_knee_s: float
    ttft_tail_s: float  # at the operating rate
    tpot_tail_s: float
    ttft_p50_s: float
    tpot_p50_s: float
    e2e_mean_s: float
    in_flight: float  # requests in the replica at the operating rate (Little's law)
    output_tokens_per_s: float
    iterations: int
    trial_requests: int


@dataclass(frozen=True)
class OperatingPoint:
    """One replica as the fleet engine runs it (SI): the rate it is given (``headroom`` below its knee at the
    ``tail`` targets), the requests in flight then, and the tails the serving simulator gives there."""

    tail: str
    ttft_slo_s: float | None
    tpot_slo_s: float | None
    knee_rate_per_s: float
    rate_per_s: float
    in_flight: float
    ttft_tail_s: float
    tpot_tail_s: float

    def as_dict(self) -> dict:
        return {"tail": self.tail, "ttft_slo_s": self.ttft_slo_s, "tpot_slo_s": self.tpot_slo_s,
                "knee_rate_per_s_per_replica": self.knee_rate_per_s, "rate_per_s_per_replica": self.rate_per_s,
                "in_flight_per_replica": self.in_flight, "ttft_tail_s": self.ttft_tail_s,
                "tpot_tail_s": self.tpot_tail_s}

    def sentence(self) -> str:
        """'0.811 req/s per replica (knee 1.01), 16.7 in flight: p99 TTFT 2,351 ms, TPOT 42.3 ms (targets ...)'."""
        targets = [f"{n} {v * 1e3:,.4g} ms" for n, v in (("TTFT", self.ttft_slo_s), ("TPOT", self.tpot_slo_s)) if v]
        return (f"{self.rate_per_s:,.3g} req/s per replica (knee {self.knee_rate_per_s:,.3g}), {self.in_flight:,.1f} "
                f"in flight: {self.tail} TTFT {self.ttft_tail_s * 1e3:,.0f} ms, TPOT {self.tpot_tail_s * 1e3:,.1f} ms"
                + (f" (targets: {', '.join(targets)})" if targets else ""))


def operating_point(q, c) -> OperatingPoint | None:
    """The operating point of the fleet engine's sized candidate ``c`` (:class:`planner.fleet.FleetCandidate`) for
    the question ``q``; None for a candidate without a knee."""
    k = c.knee if c is not None else None
    if k is None:
        return None
    return OperatingPoint(tail=q.tail, ttft_slo_s=q.ttft_slo_s, tpot_slo_s=q.tpot_slo_s,
                          knee_rate_per_s=k.knee_rate_per_s, rate_per_s=k.usable_rate_per_s, in_flight=k.in_flight,
                          ttft_tail_s=k.ttft_tail_s, tpot_tail_s=k.tpot_tail_s)


@dataclass(frozen=True)
class LaunchRange:
    """The operating point's tails (s) with the CPU launch of the steps above the CUDA graphs at the ends of how far
    served hosts and runs launched from the profile (:attr:`planner.profile.CalibrationProfile.launch_call_spread`,
    ``factors``: its p10 and p90)."""

    factors: tuple[float, float]
    ttft_tail_s: tuple[float, float]
    tpot_tail_s: tuple[float, float]

    def sentence(self, tail: str, ttft_s: float, tpot_s: float) -> str:
        """The ranges in words, the tails at the profile's own launch (``ttft_s``, ``tpot_s``) included."""
        t, p = (*self.ttft_tail_s, ttft_s), (*self.tpot_tail_s, tpot_s)
        lo, hi = self.factors
        return (f"with the CPU launch of the steps above the CUDA graphs at {lo:.2f}-{hi:.2f}× the profile's"
                f" (as measured on other hosts and runs) {tail} TTFT {min(t) * 1e3:,.0f}-"
                f"{max(t) * 1e3:,.0f} ms, TPOT {min(p) * 1e3:,.1f}-{max(p) * 1e3:,.1f} ms")


def launch_range(q, setup: Setup, make, rate_per_s: float) -> LaunchRange | None:
    """:class:`LaunchRange` of one replica at ``rate_per_s``: the same trial with the profile's launch terms at its
    spread's p10 and p90 (None where the profile has no spread or the replica serves nothing)."""
    spread = setup.profile.launch_call_spread
    if spread is None or not rate_per_s > 0 or not math.isfinite(rate_per_s):
        return None

    def tails(factor: float) -> tuple[float, float]:
        scaled = replace(setup, profile=setup.profile.with_launch_scaled(factor), key=f"{setup.key}@launch{factor!r}")
        cost, cfg = _engine(scaled)
        _, ttft, tpot = meets_slo(run_trial(make, cost, cfg, rate_per_s), math.inf, math.inf, WARMUP_FRACTION, q.tail)
        return ttft, tpot

    lo, hi = _remember(("launch", setup.key, _make_key(make), rate_per_s, q.tail, spread.p10, spread.p90),
                       lambda: (tails(spread.p10), tails(spread.p90)))
    return LaunchRange((spread.p10, spread.p90), (lo[0], hi[0]), (lo[1], hi[1]))


def resolve(q, model, gpus, profile_for, make_requests):
    """The question's specs: (model, GPUs, profile_for, make_requests), the catalog's unless given."""
    from planner.io import catalog
    from planner.serving import workloads as wl

    m = model if model is not None else catalog.model(q.model_id)
    if gpus is None:
        gpus = [catalog.gpu(x) for x in (q.gpu_ids or sorted(catalog.gpus()))]
    if profile_for is None:
        def profile_for(gid):
            return catalog.resolve_profile(q.profile, gid, field="profile")[0]
    if make_requests is None:
        def make_requests(rate=None, num_requests=MIN_TRIAL_REQUESTS):
            return wl.synthetic(num_requests, q.prompt_tokens, q.output_tokens, rate_per_s=rate, seed=q.seed)
        make_requests.cache_key = ("synthetic", q.prompt_tokens, q.output_tokens, q.seed)
    return m, list(gpus), profile_for, make_requests


def gpu_price(q, g) -> tuple[float | None, str]:
    """``(USD per GPU-hour after the discount, where it comes from)`` for GPU ``g`` on the question's price basis
    (:func:`planner.prices.price_for`): ``--price-usd-per-hour`` overrides; ``(None, why)`` when ``g`` has no price
    of that basis (it is then left out of the comparison, not priced on another basis)."""
    from planner.prices import describe, price_for

    if q.price_usd_per_gpu_hour is not None:
        base, where = q.price_usd_per_gpu_hour, "--price-usd-per-hour (command line)"
    else:
        entry, why = price_for(g, q.price_basis, q.price_provider)
        if entry is None:
            return None, why
        base, where = entry.usd_per_hour, describe(entry)
    if q.discount_pct:
        where += f", less {q.discount_pct:g} %"
    return base * (1 - q.discount_pct / 100), where


def deployment_for(q, g, tp: int, pp: int, dtype: str) -> Deployment:
    """The engine of one replica of question ``q`` on GPU ``g`` at TP ``tp`` × PP ``pp`` and weights ``dtype``: the
    question's engine settings where given, else vLLM's defaults for the GPU (the one map from a question to an engine:
    the fleet engine's candidates and the plan a command explains both take it)."""
    extra = {k: v for k, v in (("gpu_memory_utilization", q.gpu_memory_utilization),
                               ("max_num_seqs", q.max_num_seqs),
                               ("max_num_batched_tokens", q.max_num_batched_tokens),
                               ("max_cudagraph_capture_tokens", q.max_cudagraph_capture_tokens)) if v is not None}
    return Deployment.for_gpu(g, num_gpus=tp * pp, tensor_parallel=tp, pipeline_parallel=pp, weight_dtype=dtype,
                              kv_cache_dtype=q.kv_cache_dtype, **extra)


def candidate_layouts(q, m, g, prof, FleetCandidate):
    """``[(FleetCandidate, Setup | None)]`` for GPU ``g``: every TP × PP asked (default: TP 1, 2, 4, 8 within
    the node at PP 1, and — PP left to the engine — the first PP of :func:`~planner.startup.pipeline_stages` that starts when none does, at
    the node's largest TP or at each TP asked);
    Setup None for a layout vLLM would not start (its reasons in the note); ``FleetCandidate`` the class
    (:class:`planner.fleet.FleetCandidate`, passed in: this module does not import the engine)."""

    dtype = q.weight_dtype or m.native_dtype
    price, where = gpu_price(q, g)
    # TPs asked are tried as asked (the start-up rule says why one cannot run); the default: those a node can run
    tps = list(q.tensor_parallels) if q.tensor_parallels else tensor_parallel_candidates(m, g)
    pps = q.pipeline_parallels or (1,)
    longest = q.max_model_len or q.prompt_tokens + q.output_tokens
    mkey = _digest(q.enable_prefix_caching, m.model_dump_json(), prof.model_dump_json(),
                   g.model_dump_json(exclude={"price_usd_per_hour", "prices", "sources"}))
    out = []

    def not_started(tp, pp, note=""):
        return FleetCandidate(
            gpu_id=g.id, gpu_name=g.name, vendor=getattr(g, "vendor", ""), tensor_parallel=tp, pipeline_parallel=pp,
            weight_dtype=dtype, kv_cache_dtype=q.kv_cache_dtype, price_usd_per_gpu_hour=price, price_source=where,
            status="does not start", note=note, calibration_mode=prof.mode,
            confidence=CONFIDENCE.get(prof.mode, "none"), band_pct=None, band_basis="")

    def one(tp, pp):
        dep = deployment_for(q, g, tp, pp, dtype)
        base = not_started(tp, pp)
        check = startup_check(m, g, dep, longest, prof)
        if not check.ok:
            return replace(base, note="does not start: " + "; ".join(check.reasons())), None
        return replace(base, status="sized"), Setup(m, g, dep, prof, _digest(mkey, dep.model_dump_json()),
                                                 q.enable_prefix_caching)

    for pp in pps:
        for tp in tps:
            out.append(one(tp, pp))
    # PP left to the engine and no node holds the model (nothing starts at PP 1, not even at the node's largest
    # TP): the first stage count that starts, at the node's largest TP (TP left to the engine too) or at each TP
    # asked within a node (`--tp 8` alone plans 8 x PP 2 where no node holds the model, as `--pp`'s help says:
    # "more only when no node holds the model"; `--tp 1` where TP 8 would hold it stays "does not fit")
    in_node = [t for t in tps if t <= g.max_gpus_per_node]

    def node_holds_model() -> bool:  # at PP 1 at the node's largest TP (already tried, and failed, when asked)
        node_tps = tensor_parallel_candidates(m, g)
        return bool(node_tps) and max(node_tps) not in tps and one(max(node_tps), 1)[1] is not None

    if q.pipeline_parallels is None and in_node and not any(s for _, s in out) and not node_holds_model():
        for tp in (in_node if q.tensor_parallels else [max(in_node)]):
            for pp in pipeline_stages(m.num_layers):
                out.append(one(tp, pp))
                if out[-1][1] is not None:
                    break
    if not tps:
        out.append((not_started(1, 1, "does not start: no TP asked divides the attention heads within a node"), None))
    return out


def first_guess(q, m, c, setup: Setup):
    """``c`` with the steady-state formula's batch and requests/s per replica (the first guess) and its band."""
    from planner.plan import plan
    from planner.specs import Workload
    from planner.steady_fleet import throughput_band

    def compute():
        wl = Workload(prompt_tokens=q.prompt_tokens, output_tokens=q.output_tokens, ttft_slo_s=q.ttft_slo_s,
                      tpot_slo_s=q.tpot_slo_s)
        r = plan(m, setup.gpu, setup.deployment, wl, setup.profile)
        pct, basis = throughput_band(r)
        return r.batch_size, float(r.fleet.requests_per_s_per_replica or 0.0), pct, basis, r.slo.binding

    batch, rate, pct, basis, binding = _remember(("guess", setup.key, q.prompt_tokens, q.output_tokens, q.ttft_slo_s,
                                         q.tpot_slo_s), compute)
    if pct is not None and c.confidence == "transferred":
        basis = f"transferred calibration; {basis}"
    # measured: calibrated on this GPU *and* a band with a measured basis; a calibrated GPU whose band has none
    # (e.g. a weight format never measured) is 'none' like the ideal roofline
    confidence = "none" if (pct is None and c.confidence == "measured") else c.confidence
    return replace(c, first_guess_batch=int(batch), first_guess_rate_per_s=rate, band_pct=pct, band_basis=basis,
                   confidence=confidence, first_guess_binding=binding)


def _engine(setup: Setup):
    from planner.serving.config import engine_setup

    return _remember(("engine", setup.key), lambda: engine_setup(setup.model, setup.gpu, setup.deployment,
                                                                  setup.profile,
                                                                  enable_prefix_caching=setup.prefix_caching))


def _make_key(make) -> object:
    return getattr(make, "cache_key", None) or id(make)


def saturation_bound(q, m, setup: Setup, make) -> float:
    """The replica's simulated saturation, requests/s (:func:`planner.serving.load.steady_saturation`)."""
    cost, cfg = _engine(setup)
    return _remember(("sat", setup.key, _make_key(make)),
                     lambda: float(steady_saturation(make, cost, cfg, MIN_TRIAL_REQUESTS)))


class KneeRun:
    """The knee search of one replica, one trial at a time (:func:`planner.serving.load.knee_search`):
    ``bound`` is an upper bound of its knee until ``result`` (an :class:`Evaluated`) is set; cached when done."""

    def __init__(self, q, setup: Setup, make):
        self.q, self.make, self.setup = q, make, setup
        self.cost, self.cfg = _engine(setup)
        self.ttft = q.ttft_slo_s if q.ttft_slo_s is not None else math.inf
        self.tpot = q.tpot_slo_s if q.tpot_slo_s is not None else math.inf
        self.key = ("knee", setup.key, _make_key(make), self.ttft, self.tpot, q.tail, q.headroom)
        self.result: Evaluated | None = _CACHE.get(self.key)
        self.saturation = _CACHE.get(("sat", setup.key, _make_key(make)))
        self.bound = self.result.knee_rate_per_s if self.result else math.inf  # nothing known before saturation
        self._gen = None

    def step(self) -> None:
        """Advance by one simulation: the saturation burst first, then one trial of the knee search, then the
        operating point's trial (and the result is cached)."""
        if self.result is not None:
            return
        if self._gen is None:
            self.saturation = saturation_bound(self.q, None, self.setup, self.make)
            if self.saturation <= 0:
                self.result = Evaluated(0.0, 0.0, "none", *(math.inf,) * 7, 0.0, 0.0, 0, 0)
                self.bound = 0.0
                return
            trials = _remember(("trials", self.setup.key, _make_key(self.make)), dict)
            self._gen = knee_search(self.make, self.cost, self.cfg, self.ttft, self.tpot, tail=self.q.tail,
                                    saturation_rate_per_s=self.saturation, trials=trials)
        try:
            self.bound = next(self._gen)
        except StopIteration as done:
            knee = done.value  # the name `done` is unbound after this clause; the value is kept for the lambda
            self.result = _remember(self.key, lambda: self._finish(knee))
            self.bound = self.result.knee_rate_per_s

    def run(self) -> Evaluated:
        while self.result is None:
            self.step()
        return self.result

    def _finish(self, pt) -> Evaluated:
        if pt.max_rate_per_s <= 0:  # the tails at light load, for the sentence saying which target it misses
            return Evaluated(0.0, 0.0, pt.confidence, pt.ttft_p99_s, pt.tpot_p99_s, math.inf, math.inf, math.inf,
                             math.inf, math.inf, 0.0, 0.0, pt.iterations, pt.trial_requests)
        usable = (1 - self.q.headroom) * pt.max_rate_per_s
        res = run_trial(self.make, self.cost, self.cfg, usable)
        _, t, p = meets_slo(res, math.inf, math.inf, WARMUP_FRACTION, self.q.tail)
        _, t50, p50 = meets_slo(res, math.inf, math.inf, WARMUP_FRACTION, "p50")
        idx = measured_window(res)
        done = idx[res.completed[idx]]
        e2e = float(np.mean(res.e2e_s[done])) if done.size else math.inf
        per_request = float(res.output_tokens_per_s) / max(float(res.requests_per_s), 1e-12)
        return Evaluated(pt.max_rate_per_s, usable, pt.confidence, pt.ttft_p99_s, pt.tpot_p99_s, t, p, t50, p50,
                         e2e, usable * e2e, usable * per_request, pt.iterations, pt.trial_requests)


#: A replica holding at most this many requests at once can sit far below its steady-state rate at a tail target.
FEW_SLOTS = 16


def slot_note(q, c) -> tuple[str, ...]:
    """Why a replica (:class:`planner.fleet.FleetCandidate` ``c`` for the question ``q``) that holds only a few
    requests at once (its memory or max_num_seqs, not a target, holds the steady state's batch) has its knee far
    (under half) below the steady state's requests/s, when the TTFT target binds there: a request that arrives with
    every slot busy waits a whole response, so a TTFT tail target needs slots free (Erlang's delay formula: at the
    p99, under 1 % of arrivals may find them all busy; 2 slots of 5.7-s responses: about 0.15 of them busy on
    average, 9 slots: 3.5).  Empty unless so."""
    if (c is None or c.knee is None or not 0 < c.first_guess_batch <= FEW_SLOTS or q.ttft_slo_s is None
            or c.first_guess_binding not in ("memory", "max_num_seqs")):
        return ()
    k, fg = c.knee, c.first_guess_rate_per_s
    if not fg > 0 or k.knee_rate_per_s >= 0.5 * fg:
        return ()
    tpot_share = k.tpot_tail_at_knee_s / q.tpot_slo_s if q.tpot_slo_s else 0.0
    if k.ttft_tail_at_knee_s / q.ttft_slo_s < tpot_share:
        return ()
    return ((f"{c.layout()} holds {c.first_guess_batch:,} request(s) at once (the steady state's "
            f"{fg:,.3g} req/s keeps them all busy); a request that finds them all busy waits a whole response, "
            f"so holding the {q.tail} TTFT target keeps most of them free: the knee is {k.knee_rate_per_s:,.3g} "
            f"req/s, {k.knee_rate_per_s / fg:.0%} of it. More KV room per replica (more GPU memory, an fp8 KV cache, "
            "fewer GPUs' worth of weights) raises it"),)
