"""The fleet engine: the cheapest *whole* fleet for a demand, sized on the latency tail the user states.

One function, :func:`plan_fleet` ``(FleetQuestion) -> FleetPlan``, behind ``planner size``, ``report``,
``deploy``, ``slo-search`` and the dashboard (headline, Cost view, presets, Compare).

**Candidates** — every GPU (the catalog's, or those asked) × the weight format (the model's native one by
default: gpt-oss-120b is mxfp4) × TP (1, 2, 4, 8 within a node) × PP (1; more stages, TP = the node, only
when no single-node layout starts) that vLLM would start (:func:`planner.startup.startup_check` at prompt +
output tokens).

**The knee** — per candidate, the highest request rate one replica sustains with the TTFT and TPOT targets
met at the stated tail (p99 by default; p95, p50) over a simulated Poisson stream in steady state
(:func:`planner.serving.load.max_rate_under_slo`).  The steady-state batch formula
(:func:`planner.plan.plan`) is the fast first guess and the explanation (``first_guess_*``), never the answer.

**The fleet** — a replica is run at most at ``(1 − headroom) × knee`` (default 20 % below it); replicas
= ⌈demand rate ÷ that⌉ (+1 with ``n_plus_one``).  Users who each wait for an answer and think ``Z`` s
send ``users ÷ (Z + E2E)`` requests/s, E2E the mean end-to-end time simulated at that operating rate (the
interactive response-time law, Lazowska et al. 1984 ch. 3).  GPUs = replicas × TP × PP; $/month = GPUs ×
price × :data:`HOURS_PER_MONTH`.

**Ranking** — feasible fleets first, then by $/month (``rank_by="pessimistic"``: the $/month if each
replica served (1 − band) × its rate; a candidate with no measured band ranks after those with one), then
fewer GPUs, lower tail TPOT, TTFT, the ids.  $/Mtok stays a column.

**Monotone by construction** — a candidate's knee does not depend on the demand, and its replicas are
⌈demand ÷ a constant⌉, so more users or a higher rate never give any candidate fewer replicas, a longer think
time never more, and the cheapest fleet (the minimum over candidates) never gets cheaper with more demand;
within one GPU type (one price) the cheapest fleet is the one with fewest GPUs, so GPUs never fall either.
A looser target or a lower tail never lowers a knee (:func:`planner.serving.load.max_rate_under_slo`).

**Speed** — a candidate's saturation (one burst simulation, ~0.1 s) bounds its knee from above, so its
fleet can cost no less than ⌈demand ÷ ((1 − headroom) × saturation)⌉ replicas; candidates are searched
cheapest bound first and the search stops when the next bound costs more than the best fleet found
(those are listed as ``pruned``).  Saturations, knees and operating points are cached per process.

**Confidence** — each candidate carries its error band (:mod:`planner.bands`, the wider of TTFT and TPOT)
and its basis: ``measured`` (a profile calibrated on this GPU), ``transferred`` (another GPU's profile on
this one's datasheet), ``none`` (the ideal roofline).  A best fleet without a measured basis names the
cheapest measured alternative beside it (:attr:`FleetPlan.best_measured`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.fleet_eval import Evaluated, first_guess, gpu_price
from planner.prices import PriceBasis
from planner.steady_fleet import HOURS_PER_MONTH, WholeFleet
from planner.units import fmt_layout, fmt_usd

__all__ = ["DEFAULT_HEADROOM", "HOURS_PER_MONTH", "FleetCandidate", "FleetPlan", "FleetQuestion", "plan_fleet"]

#: A replica runs at most this far below its knee (the default headroom).
DEFAULT_HEADROOM = 0.2
Tail = Literal["p50", "p95", "p99"]


class FleetQuestion(BaseModel):
    """What the fleet must do.  Frozen and hashable (a cache key); SI units."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_id: str
    rate_per_s: float | None = Field(None, gt=0, allow_inf_nan=False, description="requests/s to serve")
    users: int | None = Field(None, ge=1, description="users who each wait for their answer, then think")
    think_time_s: float = Field(0.0, ge=0, allow_inf_nan=False, description="a user's pause between requests")
    prompt_tokens: int = Field(4096, ge=1)
    output_tokens: int = Field(512, ge=1)
    ttft_slo_s: float | None = Field(None, gt=0, allow_inf_nan=False, description="TTFT target at the tail")
    tpot_slo_s: float | None = Field(None, gt=0, allow_inf_nan=False, description="TPOT target at the tail")
    tail: Tail = Field("p99", description="the percentile the targets are stated at")
    headroom: float = Field(DEFAULT_HEADROOM, ge=0, lt=1, description="run a replica this far below its knee")
    n_plus_one: bool = Field(False, description="one replica more than the demand needs")
    gpu_ids: tuple[str, ...] | None = Field(None, description="GPUs to consider (None: the catalog)")
    tensor_parallels: tuple[int, ...] | None = Field(None, description="TPs (None: 1, 2, 4, 8 in a node)")
    pipeline_parallels: tuple[int, ...] | None = Field(None, description="PPs (None: 1, more only if needed)")
    weight_dtype: str | None = Field(None, description="None: the model's native checkpoint format")
    kv_cache_dtype: str = "bf16"
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1, description="None: Deployment's default")
    max_num_seqs: int | None = Field(None, ge=1)
    max_num_batched_tokens: int | None = Field(None, ge=1)
    max_cudagraph_capture_tokens: int | None = Field(None, ge=1, description="None: vLLM's default CUDA graphs")
    price_usd_per_gpu_hour: float | None = Field(None, gt=0, allow_inf_nan=False,
                                                 description="override (one GPU only)")
    discount_pct: float = Field(0.0, ge=0, lt=100, description="off every GPU's price (on top of the basis)")
    price_basis: PriceBasis = Field("on-demand", description="the one basis every GPU is priced on (planner.prices)")
    price_provider: str | None = Field(None, min_length=1, description="None: the catalog default (on-demand) or the "
                                       "cheapest entry of the basis; a provider's name; 'cheapest': of any provider")
    rank_by: Literal["expected", "pessimistic"] = "expected"
    profile: str = Field("auto", description="auto | none | a profile path (planner.io.catalog.resolve_profile)")
    seed: int = 0
    enable_prefix_caching: bool | None = Field(None, description="None: vLLM's default for the model (off for "
                                               "Mamba / linear-attention hybrids: serving.config.prefix_caching_for)")
    max_model_len: int | None = Field(None, ge=1, description="vLLM's; None: prompt + output tokens")
    search_all: bool = Field(False, description="simulate every candidate's knee (no pruning; slo-search's table)")

    @model_validator(mode="after")
    def _one_demand(self):
        if self.rate_per_s is not None and self.users is not None:
            raise ValueError("users: give either a request rate or users (with their think time), not both")
        if self.think_time_s and self.users is None:
            raise ValueError("think_time_s: a think time needs users")
        if self.price_usd_per_gpu_hour is not None and (self.gpu_ids is None or len(self.gpu_ids) != 1):
            raise ValueError("price_usd_per_gpu_hour: a price override needs exactly one GPU")
        return self

    @property
    def has_demand(self) -> bool:
        return self.rate_per_s is not None or self.users is not None


@dataclass(frozen=True)
class FleetCandidate(WholeFleet):
    """One GPU × dtype × TP × PP: whether it starts, its knee, and the whole fleet it needs (SI, USD)."""

    gpu_id: str
    gpu_name: str
    vendor: str
    tensor_parallel: int
    pipeline_parallel: int
    weight_dtype: str
    kv_cache_dtype: str
    price_usd_per_gpu_hour: float
    price_source: str
    status: str  # "sized" | "pruned" | "does not start" | "misses the targets"
    note: str
    calibration_mode: str  # ideal | calibrated | transferred
    confidence: str  # measured | transferred | none
    band_pct: float | None
    band_basis: str
    first_guess_batch: int = 0
    first_guess_binding: str = ""  # what holds the steady state's batch (planner.batching.LargestBatch.binding)
    first_guess_rate_per_s: float = 0.0
    saturation_rate_per_s: float = 0.0
    knee: Evaluated | None = None
    demand_rate_per_s: float | None = None
    replicas: int = 0
    replicas_high: int | None = None  # each replica at (1 − band) × its rate; None: no band or no knee
    lower_bound_usd_per_month: float = 0.0

    @property
    def feasible(self) -> bool:
        return self.status == "sized"

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def usd_per_month_high(self) -> float | None:
        return self.usd_per_month_of(self.replicas_high)

    @property
    def usable_rate_per_s(self) -> float:
        return self.knee.usable_rate_per_s if self.knee else 0.0

    @property
    def usd_per_million_output_tokens(self) -> float | None:
        """All GPU time of a replica at its operating rate over the tokens it generates, × 10⁶."""
        k = self.knee
        if not k or k.output_tokens_per_s <= 0:
            return None
        return self.gpus_per_replica * self.price_usd_per_gpu_hour / 3600 / k.output_tokens_per_s * 1e6

    def layout(self) -> str:
        return f"{self.gpu_id} {fmt_layout(self.tensor_parallel, self.pipeline_parallel)} {self.weight_dtype}"

    def as_dict(self) -> dict:
        """JSON-safe: every field, the knee's numbers flattened, the derived GPUs and costs."""
        k = self.knee
        d = {"gpu_id": self.gpu_id, "gpu": self.gpu_name, "vendor": self.vendor,
             "tensor_parallel": self.tensor_parallel, "pipeline_parallel": self.pipeline_parallel,
             "gpus_per_replica": self.gpus_per_replica, "weight_dtype": self.weight_dtype,
             "kv_cache_dtype": self.kv_cache_dtype, "status": self.status, "feasible": self.feasible,
             "note": self.note, "calibration_mode": self.calibration_mode, "confidence": self.confidence,
             "error_band_pct": self.band_pct, "error_band_basis": self.band_basis,
             "price_usd_per_gpu_hour": self.price_usd_per_gpu_hour, "price_source": self.price_source,
             "first_guess_batch": self.first_guess_batch, "first_guess_rate_per_s": self.first_guess_rate_per_s,
             "first_guess_binding": self.first_guess_binding, "saturation_rate_per_s": self.saturation_rate_per_s,
             "knee_rate_per_s": k.knee_rate_per_s if k else None,
             "usable_rate_per_s": k.usable_rate_per_s if k else None,
             "knee_confidence": k.confidence if k else None,
             "ttft_tail_at_knee_s": k.ttft_tail_at_knee_s if k else None,
             "tpot_tail_at_knee_s": k.tpot_tail_at_knee_s if k else None,
             "ttft_tail_s": k.ttft_tail_s if k else None, "tpot_tail_s": k.tpot_tail_s if k else None,
             "ttft_p50_s": k.ttft_p50_s if k else None, "tpot_p50_s": k.tpot_p50_s if k else None,
             "e2e_mean_s": k.e2e_mean_s if k else None, "in_flight_per_replica": k.in_flight if k else None,
             "output_tokens_per_s_per_replica": k.output_tokens_per_s if k else None,
             "demand_rate_per_s": self.demand_rate_per_s, "replicas": self.replicas, "num_gpus": self.num_gpus,
             "usd_per_hour": self.usd_per_hour, "usd_per_month": self.usd_per_month,
             "replicas_high": self.replicas_high, "usd_per_month_high": self.usd_per_month_high,
             "usd_per_million_output_tokens": self.usd_per_million_output_tokens,
             "lower_bound_usd_per_month": self.lower_bound_usd_per_month}
        return {key: (None if isinstance(v, float) and not math.isfinite(v) else v) for key, v in d.items()}


@dataclass(frozen=True)
class FleetPlan:
    """:func:`plan_fleet`'s answer: every candidate in ranking order, the best, and the best measured one."""

    question: FleetQuestion
    model_name: str
    candidates: tuple[FleetCandidate, ...]
    hours_per_month: float = HOURS_PER_MONTH
    notes: tuple[str, ...] = field(default_factory=tuple)
    # the best fleet's launch-spread trial (planner.fleet_eval.launch_range), run when :attr:`launch_range` is asked
    launch_trial: object = field(default=None, compare=False, repr=False)

    @property
    def launch_range(self):
        """The best fleet's tails with the launch at both ends of its hosts' and runs' spread
        (:class:`planner.fleet_eval.LaunchRange`, simulated on first use and cached there); None without one."""
        return self.launch_trial() if self.launch_trial is not None else None

    @property
    def best(self) -> FleetCandidate | None:
        return self.candidates[0] if self.candidates and self.candidates[0].feasible else None

    @property
    def best_measured(self) -> FleetCandidate | None:
        """The cheapest feasible candidate with a measured basis (calibrated on its own GPU, with a band), when the
    best has none (else None)."""
        b = self.best
        if b is None or b.confidence == "measured":
            return None
        return next((c for c in self.candidates if c.feasible and c.confidence == "measured"), None)

    def reasons(self) -> list[str]:
        """Why no candidate serves (empty when one does): each distinct note of the candidates, in rank order."""
        if self.best is not None:
            return []
        notes = [c.note.removeprefix("does not start: ") for c in self.candidates if c.note] + list(self.notes)
        return list(dict.fromkeys(notes)) or [self.sentence()]

    def sentence(self) -> str:
        """How the fleet was chosen, in one line."""
        q, n = self.question, len(self.candidates)
        sized = sum(c.status in ("sized", "misses the targets") for c in self.candidates)
        pruned = sum(c.status == "pruned" for c in self.candidates)
        head = (f"sized on the {q.tail} from the serving simulator with {q.headroom:.0%} headroom below each knee"
                + (" and N+1" if q.n_plus_one else ""))
        if self.best is None:
            return f"no fleet meets the targets: {head}; {n} candidate(s), {sized} simulated"
        key = "the pessimistic edge of its band" if q.rank_by == "pessimistic" else "$/month"
        key += f" at {q.price_basis} prices" if q.price_usd_per_gpu_hour is None else " at the price given"
        return (f"the cheapest whole fleet of {n} candidate(s) (GPU × dtype × TP × PP) by {key}: {head}; "
                f"{sized} simulated, {pruned} pruned (their lower bound already costs more)")

    def lines(self) -> list[str]:
        """The headline: the fleet and its cost, then how it was sized, then the measured alternative."""
        b = self.best
        if b is None:
            return [f"{self.model_name}: {self.sentence()}"]
        out = [_fleet_line(b), f"  {demand_line(self.question, b)}", f"  {self.sentence()}"]
        alt = self.best_measured
        if (lr := self.launch_range) is not None:
            out.append(f"  note: {lr.sentence(self.question.tail, b.knee.ttft_tail_s, b.knee.tpot_tail_s)}")
        if b.confidence != "measured":
            out.append(f"  note: {b.layout()} has no measured basis ({b.confidence}: {b.band_basis})"
                       + (f"; the cheapest measured fleet: {_fleet_line(alt)}" if alt else
                          "; no candidate with a measured basis meets the targets"))
        return out + [f"  note: {x}" for x in self.notes]

    def as_dict(self) -> dict:
        b, alt = self.best, self.best_measured
        return {"question": self.question.model_dump(mode="json"), "model": self.model_name,
                "feasible": b is not None, "reasons": self.reasons(), "best": b.as_dict() if b else None,
                "best_measured": alt.as_dict() if alt else None, "sentence": self.sentence(),
                "hours_per_month": self.hours_per_month, "notes": list(self.notes),
                "launch_range": None if (lr := self.launch_range) is None else {
                    "factors": list(lr.factors), "ttft_tail_s": list(lr.ttft_tail_s),
                    "tpot_tail_s": list(lr.tpot_tail_s)},
                "candidates": [c.as_dict() for c in self.candidates]}


def _fleet_line(c: FleetCandidate) -> str:
    band = (f"±{c.band_pct:.0f} % band: up to {c.replicas_high:,} replica(s), "
            f"{fmt_usd(c.usd_per_month_high, 0)}/month" if c.replicas_high is not None
            else f"no error band: {c.band_basis}")
    return (f"Fleet: {c.replicas:,} replica(s) × {c.gpus_per_replica} GPU(s) ({c.layout()}) = {c.num_gpus:,} × "
            f"{c.gpu_name} — {fmt_usd(c.usd_per_hour)}/hour, {fmt_usd(c.usd_per_month, 0)}/month ({band}; "
            f"{c.confidence})")


def demand_line(q: FleetQuestion, c: FleetCandidate, detail: bool = True) -> str:
    """The demand and the knee behind a fleet, in one line (the CLI's second line; the dashboard's caption without
    ``detail``: the tails at the operating rate are in its Replicas metric's help)."""
    k = c.knee
    per = (f"knee {k.knee_rate_per_s:,.3g} req/s per replica at {q.tail} TTFT {k.ttft_tail_at_knee_s * 1e3:,.0f} ms"
           f" / TPOT {k.tpot_tail_at_knee_s * 1e3:,.1f} ms, run at {k.usable_rate_per_s:,.3g} req/s")
    if detail:
        per += (f" ({q.tail} TTFT {k.ttft_tail_s * 1e3:,.0f} ms, TPOT {k.tpot_tail_s * 1e3:,.1f} ms, "
                f"{k.in_flight:,.1f} in flight)")
    if q.users is not None:
        think = f"thinking {q.think_time_s:g} s" if q.think_time_s else "with no think time"
        return (f"for {q.users:,} users {think}: {c.demand_rate_per_s:,.3g} req/s (E2E {k.e2e_mean_s:,.2f} s); "
                f"{per}")
    if q.rate_per_s is not None:
        return f"for {q.rate_per_s:,.3g} req/s; {per}"
    return f"one replica (no demand given); {per}"


# ------------------------------------------------------------------------------------------- the engine


def _replicas(q: FleetQuestion, rate: float | None, per_replica: float) -> int | None:
    """⌈rate ÷ per_replica⌉ (+1 with N+1); one replica without a demand; None when nothing is served."""
    if per_replica <= 0:
        return None
    n = 1 if rate is None else max(1, math.ceil(rate / per_replica - 1e-9))
    return n + (1 if q.n_plus_one else 0)


def _demand_rate(q: FleetQuestion, e2e_s: float) -> float | None:
    if q.users is not None:
        return q.users / (q.think_time_s + e2e_s)
    return q.rate_per_s


#: Added to the pessimistic score of a fleet with no error band: it ranks after every fleet with one.
NO_BAND_PENALTY = 1e15


def _score(c: FleetCandidate, rank_by: str) -> float:
    """The number the ranking sorts feasible fleets by: $/month, or its pessimistic edge (module docstring)."""
    if not c.feasible:
        return math.inf
    if rank_by == "pessimistic":
        hi = c.usd_per_month_high
        return hi if hi is not None else NO_BAND_PENALTY + c.usd_per_month
    return c.usd_per_month


def _lower_bound(q: FleetQuestion, c: FleetCandidate, knee_bound: float) -> float:
    """The least :func:`_score` ``c`` can reach when its knee is at most ``knee_bound`` requests/s.  Users send
    at least ``users ÷ (think + E2E_max)`` requests/s, E2E_max = 2 × (TTFT target + TPOT target × (output − 1))
    (a request's E2E is its TTFT + TPOT × (output − 1), and at the operating point the means sit below the
    tail targets the knee met; 2× leaves room for the mean of a long tail); without both targets, one replica."""
    usable = (1 - q.headroom) * knee_bound
    if usable <= 0:
        return math.inf
    rate = q.rate_per_s
    if q.users is not None:
        rate = None
        if q.ttft_slo_s is not None and q.tpot_slo_s is not None:
            rate = q.users / (q.think_time_s + 2 * (q.ttft_slo_s + q.tpot_slo_s * (q.output_tokens - 1)))
    money = c.usd_per_month_of(1)  # one replica's $/month
    if q.rank_by == "pessimistic":
        if c.band_pct is None:
            return NO_BAND_PENALTY + _replicas(q, rate, usable) * money
        usable *= max(0.01, 1 - c.band_pct / 100)
    return _replicas(q, rate, usable) * money


def _rank_key(c: FleetCandidate, rank_by: str) -> tuple:
    k = c.knee
    order = {"sized": 0, "pruned": 1, "misses the targets": 2, "does not start": 3}[c.status]
    return (order, _score(c, rank_by), c.lower_bound_usd_per_month, c.num_gpus, k.tpot_tail_s if k else math.inf,
            k.ttft_tail_s if k else math.inf, c.gpu_id, c.weight_dtype, c.tensor_parallel, c.pipeline_parallel)


def _size(q: FleetQuestion, c: FleetCandidate, knee: Evaluated) -> FleetCandidate:
    """``c`` with its knee: the demand it sees, its replicas, its pessimistic replicas."""
    if knee.knee_rate_per_s <= 0:
        t, p = knee.ttft_tail_at_knee_s, knee.tpot_tail_at_knee_s
        missed = [f"{name} target {limit * 1e3:,.4g} ms ({q.tail} {v * 1e3:,.4g} ms)" for name, v, limit in
                  (("TTFT", t, q.ttft_slo_s), ("TPOT", p, q.tpot_slo_s)) if limit is not None and v > limit]
        return replace(c, status="misses the targets", knee=knee, note=(
            f"{c.layout()}: misses the {' and the '.join(missed) or 'targets'} even at light load "
            f"(1 % of its saturation)"))
    rate = _demand_rate(q, knee.e2e_mean_s)
    reps = _replicas(q, rate, knee.usable_rate_per_s)
    high = None
    if c.band_pct is not None:
        high = _replicas(q, rate, knee.usable_rate_per_s * max(0.01, 1 - c.band_pct / 100))
    return replace(c, status="sized", knee=knee, demand_rate_per_s=rate, replicas=reps, replicas_high=high)


def plan_fleet(question: FleetQuestion, *, model=None, gpus=None, profile_for=None, make_requests=None) -> FleetPlan:
    """The cheapest whole fleet for ``question`` (module docstring), every candidate in ranking order.

    ``model`` (a ModelSpec), ``gpus`` (GpuSpecs) and ``profile_for(gpu_id) -> CalibrationProfile`` replace the
    catalog's; ``make_requests(rate, num_requests=n)`` replaces the fixed-length Poisson stream (a workload
    preset; fixed seed).  Raises ValueError naming the field for a question that cannot be asked.

    The knee searches advance one trial at a time, always the candidate whose lower bound (its fleet at the
    knee's current upper bracket) is lowest; a candidate whose bound exceeds the best finished fleet is left
    (``pruned``) — the answer is the one a full search of every candidate gives.  When the best has no
    calibration of its own, the search goes on among the measured candidates for :attr:`FleetPlan.best_measured`.
    """
    from planner.fleet_eval import KneeRun, candidate_layouts, launch_range, resolve, slot_note

    q = question
    m, gs, prof_of, make = resolve(q, model, gpus, profile_for, make_requests)
    done: list[FleetCandidate] = []
    live: list[list] = []  # [candidate, KneeRun]
    unpriced = [p[1] for g in gs if (p := gpu_price(q, g))[0] is None]
    for g in (g for g in gs if gpu_price(q, g)[0] is not None):  # one basis for all: a GPU without it is left out
        for c, setup in candidate_layouts(q, m, g, prof_of(g.id), FleetCandidate):
            if setup is None:
                done.append(c)
                continue
            live.append([first_guess(q, m, c, setup), KneeRun(q, setup, make)])

    def search(pool: list[list]) -> None:
        best = math.inf
        while True:
            pending = [e for e in pool if e[1].result is None]
            finished = [e[0] for e in pool if e[1].result is not None]
            best = min((_score(c, q.rank_by) for c in finished), default=math.inf)
            if not pending:
                return
            e = min(pending, key=lambda x: (_lower_bound(q, x[0], x[1].bound), x[0].gpus_per_replica, x[0].gpu_id,
                                            x[0].tensor_parallel, x[0].pipeline_parallel))
            if not q.search_all and _lower_bound(q, e[0], e[1].bound) > best:
                return
            e[1].step()
            if e[1].result is not None:
                e[0] = _size(q, replace(e[0], saturation_rate_per_s=e[1].saturation or 0.0), e[1].result)

    for e in live:  # cached knees cost nothing: size them first
        if e[1].result is not None:
            e[0] = _size(q, replace(e[0], saturation_rate_per_s=e[1].saturation or 0.0), e[1].result)
    search(live)
    ranked = sorted((e[0] for e in live if e[1].result is not None), key=lambda c: _rank_key(c, q.rank_by))
    if ranked and ranked[0].feasible and ranked[0].confidence != "measured":
        search([e for e in live if e[0].confidence == "measured"])
    for c, run in live:
        if run.result is None:
            lb = _lower_bound(q, c, run.bound)
            known = f"its knee is at most {run.bound:,.3g} req/s per replica, so " if math.isfinite(run.bound) else ""
            c = replace(c, status="pruned", lower_bound_usd_per_month=lb, saturation_rate_per_s=run.saturation or 0.0,
                        note=f"not simulated to the end: {known}its fleet costs at least {fmt_usd(lb, 0)}/month, "
                             "more than the best")
        done.append(c)
    done.sort(key=lambda c: _rank_key(c, q.rank_by))
    best = done[0] if done and done[0].feasible else None
    run = next((r for c, r in live if c is best), None) if best is not None and best.knee is not None else None
    trial = functools.partial(launch_range, q, run.setup, make, best.knee.usable_rate_per_s) if run else None
    return FleetPlan(q, m.name, tuple(done), notes=tuple(unpriced) + slot_note(q, best), launch_trial=trial)

