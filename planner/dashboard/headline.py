"""The dashboard's headline: the fleet a demand needs (replicas, GPUs, $/hour, $/month, with its error band), as
``planner size`` answers it (:func:`planner.fleet.plan_for_demand`: the same plan, the same fleet, the same band),
and whether the model fits each GPU at the scenario's context.

Demand is a request rate, or users with a think time (each user waits for the whole answer, reads for the
think time and asks again: :mod:`planner.fleet` turns them into a rate and requests in flight).
:func:`fleet_command` is the CLI call that gives the same fleet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pandas as pd

from planner.fleet import DEFAULT_HEADROOM, FleetPlan, FleetQuestion, demand_line, plan_fleet
from planner.steady_fleet import HOURS_PER_MONTH, FleetAnswer, plan_for_demand
from planner.memory import admission_kv_bytes_per_gpu, kv_pool_concurrency, memory_budget, request_kv_bytes_per_gpu
from planner.profile import CalibrationProfile
from planner.report import SizingReport
from planner.dashboard.scenario import Planned, Scenario
from planner.specs import Deployment, GpuSpec, ModelSpec
from planner.units import MS, fmt_gib, fmt_ms, fmt_usd

#: Weight formats of four bits or fewer (the quality corner's warning).
FOUR_BIT = ("int4", "nf4", "mxfp4")
DEMAND_MODES = ("requests/s", "users + think time")


@dataclass(frozen=True)
class Demand:
    """What the fleet must serve: a rate, or users with a think time between requests."""

    mode: str  # one of DEMAND_MODES
    rate_per_s: float = 0.0
    active_users: int = 0
    think_s: float = 0.0

    @property
    def by_users(self) -> bool:
        return self.mode == DEMAND_MODES[1]

    def describe(self) -> str:
        if self.by_users:
            return f"{self.active_users:,} users thinking {self.think_s:,.4g} s between answers"
        return f"{self.rate_per_s:,.4g} requests/s"


@dataclass(frozen=True)
class DemandAnswer:
    """A demand, the plan of the scenario's replica for it (its workload carries the rate, or the users' rate and
    requests in flight) and the fleet it needs."""

    demand: Demand
    report: SizingReport
    fleet: FleetAnswer  # the steady-state first guess for the scenario's replica (its explanation)
    own: FleetPlan | None = None  # the fleet engine: the sidebar's GPU and TP
    across: FleetPlan | None = None  # the fleet engine: every GPU (the headline)


def demand_fleet(p: Planned, demand: Demand, sc: Scenario | None = None,
                 pins: tuple[int, int] = (0, 0)) -> DemandAnswer:
    """The scenario's replica for ``demand`` at the steady state (:func:`planner.steady_fleet.plan_for_demand`),
    and, given the scenario ``sc``, the fleet engine's answers for its own GPU and across every GPU (at the
    sidebar's ``pins``: its TP and PP before "auto" was resolved, 0 = auto; :func:`scenario_fleet`)."""
    wl = p.workload.model_copy(update={"concurrency": None, "request_rate_per_s": None})
    if demand.by_users:
        r, f = plan_for_demand(p.model, p.gpu, p.deployment, wl, p.profile, users=int(demand.active_users),
                               think_time_s=float(demand.think_s))
    else:
        r, f = plan_for_demand(p.model, p.gpu, p.deployment, wl, p.profile, rate_per_s=float(demand.rate_per_s))
    if sc is None or not (demand.active_users if demand.by_users else demand.rate_per_s):
        return DemandAnswer(demand, r, f)
    spec = p.model if sc.model_key.startswith("upload:") else None  # an upload is not in the catalog
    return DemandAnswer(demand, r, f, scenario_fleet(sc, demand, across_gpus=False, model=spec),
                        scenario_fleet(sc, demand, model=spec, pins=pins))


def best_fleet_for(model_id: str, gpu_ids: tuple[str, ...] | None, demand: Demand, *, prompt_tokens: int,
                   model: ModelSpec | None = None,
                   output_tokens: int, ttft_slo_s: float | None, tpot_slo_s: float | None, tail: str = "p99",
                   headroom: float = DEFAULT_HEADROOM, n_plus_one: bool = False, weight_dtype: str | None = None,
                   kv_cache_dtype: str = "bf16", gpu_memory_utilization: float | None = None,
                   tensor_parallels: tuple[int, ...] | None = None, price_usd_per_gpu_hour: float | None = None,
                   calibrated: bool = True, rank_by: str = "expected", price_basis: str = "on-demand",
                   pipeline_parallels: tuple[int, ...] | None = None) -> FleetPlan:
    """The dashboard's headline: the fleet engine's answer (:func:`planner.fleet.plan_fleet`, what ``planner
    size`` prints) for ``demand`` across ``gpu_ids`` (None: every catalog GPU); ``model``: a spec that is not in
    the catalog (an upload)."""
    by_users = demand.by_users
    q = FleetQuestion(
        model_id=model_id, rate_per_s=None if by_users else float(demand.rate_per_s),
        users=int(demand.active_users) if by_users else None, think_time_s=float(demand.think_s) if by_users else 0.0,
        prompt_tokens=prompt_tokens, output_tokens=output_tokens, ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s,
        tail=tail, headroom=headroom, n_plus_one=n_plus_one, gpu_ids=gpu_ids, tensor_parallels=tensor_parallels,
        pipeline_parallels=pipeline_parallels, weight_dtype=weight_dtype, kv_cache_dtype=kv_cache_dtype,
        gpu_memory_utilization=gpu_memory_utilization,
        price_usd_per_gpu_hour=price_usd_per_gpu_hour, profile="auto" if calibrated else "none", rank_by=rank_by,
        price_basis=price_basis)
    return plan_fleet(q, model=model)


def scenario_fleet(sc: Scenario, demand: Demand, *, across_gpus: bool = True, tail: str = "p99",
                   headroom: float = DEFAULT_HEADROOM, n_plus_one: bool = False,
                   model: ModelSpec | None = None, pins: tuple[int, int] = (0, 0)) -> FleetPlan:
    """:func:`best_fleet_for` the sidebar's scenario: across every GPU (the first screen) at the TP and PP the
    sidebar pins (``pins``, 0 = auto: :func:`pinned_layouts`, what ``planner size --tp T --pp P`` without
    ``--gpu`` asks), or the sidebar's GPU at its TP and PP (the scenario's own fleet; a 0 is "auto": the engine
    chooses, :func:`layout_asked`)."""
    tps, pps = pinned_layouts(*pins) if across_gpus else layout_asked(sc.tensor_parallel, sc.pipeline_parallel)
    gmu = None if abs(sc.gpu_memory_utilization - Deployment.model_fields["gpu_memory_utilization"].default) < 1e-12 \
        else sc.gpu_memory_utilization
    return best_fleet_for(
        sc.model_key, None if across_gpus else (sc.gpu_id,), demand, prompt_tokens=sc.prompt_tokens,
        output_tokens=sc.output_tokens, ttft_slo_s=sc.ttft_slo_s, tpot_slo_s=sc.tpot_slo_s, tail=tail,
        headroom=headroom, n_plus_one=n_plus_one, weight_dtype=sc.weight_dtype, kv_cache_dtype=sc.kv_cache_dtype,
        gpu_memory_utilization=gmu, tensor_parallels=tps, pipeline_parallels=pps,
        price_usd_per_gpu_hour=sc.price_usd_per_hour if (sc.price_usd_per_hour > 0 and not across_gpus) else None,
        calibrated=sc.calibrated, model=model, price_basis=sc.price_basis)


def pinned_layouts(tp: int, pp: int) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """The engine's ``(tensor_parallels, pipeline_parallels)`` across GPUs for the sidebar's pinned TP and PP (0 =
    auto), as ``planner size`` maps ``--tp`` / ``--pp`` without ``--gpu``
    (:meth:`planner.cli.flags.PlanFlags.question`): a pin is the one size tried on every GPU; auto is the engine's
    default (TP 1–8 in a node; PP 1, more stages only when no node holds the model, at the pinned TP or the
    node's largest)."""
    return (tp,) if tp else None, (pp,) if pp else None


def pins_text(q: FleetQuestion) -> str:
    """The layout a fleet question pins (``"TP 8 × PP 2"``, ``"PP 2"``), or "" when TP and PP are both the engine's."""
    tp, pp = q.tensor_parallels, q.pipeline_parallels
    return " × ".join(f"{name} {'/'.join(map(str, v))}" for name, v in (("TP", tp), ("PP", pp)) if v)


def layout_asked(tp: int, pp: int) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """The engine's ``(tensor_parallels, pipeline_parallels)`` for a sidebar TP and PP, 0 meaning "auto": both auto
    is ``planner size --gpu X`` without ``--tp`` (TP 1–8 in a node, more stages only when none starts); a TP given
    with PP auto tries every stage count of :data:`planner.startup.PIPELINE_STAGES` (the cheapest fleet wins)."""
    from planner.startup import PIPELINE_STAGES

    tps, pps = pinned_layouts(tp, pp)
    return tps, (pps if pps is not None or tps is None else (1, *PIPELINE_STAGES))


def options_frame(plan: FleetPlan) -> pd.DataFrame:
    """One row per GPU: its cheapest whole fleet (layout, replicas, GPUs, $/month, $/Mtok, band, basis), in the
    engine's ranking order — the headline's "best fleet for this demand" across GPUs."""
    rows, seen = [], set()
    for c in plan.candidates:
        if c.gpu_id in seen or c.status not in ("sized", "pruned"):
            continue
        seen.add(c.gpu_id)
        rows.append({"GPU": c.gpu_name, "layout": c.layout(), "replicas": c.replicas if c.feasible else None,
                     "GPUs": c.num_gpus if c.feasible else None,
                     "$/month": round(c.usd_per_month) if c.feasible else None,
                     "$/month at least": None if c.feasible else round(c.lower_bound_usd_per_month),
                     "$/Mtok": c.usd_per_million_output_tokens, "band %": c.band_pct, "basis": c.confidence,
                     "status": c.status})
    return pd.DataFrame(rows)


def best_fleet_caption(plan: FleetPlan, demand: Demand) -> str:
    """The headline's sentence under the best fleet's metrics (or why there is none)."""
    if plan.best is None:
        why = "; ".join(plan.reasons()[:2])
        return f"**No fleet can be sized for {demand.describe()}**{_at_pins(plan)}: {why}."
    b = plan.best
    alt = plan.best_measured
    basis = "" if b.confidence == "measured" else (
        f" No measured basis ({b.confidence})" + (f"; the cheapest measured: {alt.replicas:,} × {alt.layout()}, "
                                                  f"{fmt_usd(alt.usd_per_month, 0)}/month." if alt else "."))
    band = (f" ±{b.band_pct:.0f} % throughput band: up to {b.replicas_high:,} replica(s)." if b.replicas_high
            is not None else f" No throughput band: {b.band_basis}.")
    notes = "".join(f" {n[0].upper()}{n[1:]}." for n in plan.notes)  # e.g. why a replica of few slots idles
    return f"{demand_line(plan.question, b, detail=False)}.{band}{basis}{_at_pins(plan, sentence=True)}{notes}"


def _at_pins(plan: FleetPlan, sentence: bool = False) -> str:
    """Where the headline's question pins the layout: what it answers for, and how to ask for the engine's choice."""
    pinned = pins_text(plan.question)
    if not pinned:
        return ""
    return (f" Every GPU at {pinned}, as the sidebar pins it (set TP and PP to auto for the engine's cheapest "
            "layout)." if sentence else f" at {pinned} (the sidebar's pin)")


def best_fleet_metrics(plan: FleetPlan) -> list[tuple[str, str, str]]:
    """The headline's row for the engine's best fleet: (label, value, help)."""
    b = plan.best
    if b is None:
        return [("Fleet", "none", plan.sentence())]
    k = b.knee
    why = (f"⌈{b.demand_rate_per_s or 0:,.2f} req/s ÷ {k.usable_rate_per_s:,.3f} per replica⌉ "
           f"({plan.question.headroom:.0%} below the knee {k.knee_rate_per_s:,.3f} req/s at {plan.question.tail}); "
           f"at that rate {plan.question.tail} TTFT {k.ttft_tail_s * 1e3:,.0f} ms, TPOT {k.tpot_tail_s * 1e3:,.1f} ms, "
           f"{k.in_flight:,.1f} in flight")
    if (lr := plan.launch_range) is not None:
        why += "; " + lr.sentence(plan.question.tail, k.ttft_tail_s, k.tpot_tail_s)
    return [("Best fleet", b.layout(), f"{plan.sentence()}. Basis: {b.confidence} ({b.band_basis})"),
            ("Replicas", f"{b.replicas:,}", why),
            ("GPUs", f"{b.num_gpus:,}", f"replicas × {b.gpus_per_replica}"),
            ("$ / month", fmt_usd(b.usd_per_month, 0), f"{fmt_usd(b.price_usd_per_gpu_hour)}/GPU-hour × "
                                                       f"{HOURS_PER_MONTH:g} h ({b.price_source})")]


def fleet_command(sc: Scenario, model_id: str, demand: Demand, pins: tuple[int, int] = (0, 0)) -> str:
    """The ``planner size`` call that prints the same best fleet across GPUs (same targets, demand and pinned TP /
    PP: ``pins``, 0 = auto, as :func:`scenario_fleet` takes them)."""
    first = (f"planner size -m {model_id} --weight-dtype "
             f"{sc.weight_dtype} --kv-dtype {sc.kv_cache_dtype} --prompt-tokens {sc.prompt_tokens} --output-tokens "
             f"{sc.output_tokens} --ttft-slo-ms {sc.ttft_slo_s / MS:g} --tpot-slo-ms {sc.tpot_slo_s / MS:g}")
    parts = [first, *(f"--{flag} {v}" for flag, v in zip(("tp", "pp"), pins) if v)]
    if demand.by_users:
        parts.append(f"--users {int(demand.active_users)} --think-time-s {demand.think_s:g}")
    else:
        parts.append(f"--rate {demand.rate_per_s:g}")
    if abs(sc.gpu_memory_utilization - Deployment.default("gpu_memory_utilization")) > 1e-9:
        parts.append(f"--gpu-memory-utilization {sc.gpu_memory_utilization:g}")
    parts.append(f"--profile {'auto' if sc.calibrated else 'none'}")
    return " ".join(parts)


# ---------------------------------------------------------------------------------------- fits per GPU


def fits_per_gpu(model: ModelSpec, gpus: Iterable[GpuSpec], base: Deployment, context_tokens: int,
                 profile_for: Callable[[str], CalibrationProfile]) -> pd.DataFrame:
    """Per catalog GPU, at the scenario's TP, dtypes and memory utilisation: does the model fit, and how many
    requests of ``context_tokens`` one replica holds.  Columns: gpu_id, fits, max_users_per_replica,
    needs_bytes (weights + overhead + what admitting one request asks free of its KV, per GPU), usable_bytes,
    sentence."""
    rows = []
    for g in gpus:
        dep = Deployment.for_gpu(g, num_gpus=base.gpus_per_replica, tensor_parallel=base.tensor_parallel,
                                 pipeline_parallel=base.pipeline_parallel, weight_dtype=base.weight_dtype,
                                 kv_cache_dtype=base.kv_cache_dtype,
                                 gpu_memory_utilization=base.gpu_memory_utilization)
        m = memory_budget(model, g, dep, profile_for(g.id))
        per_req, ask = (f(model, dep, context_tokens) for f in (request_kv_bytes_per_gpu, admission_kv_bytes_per_gpu))
        users = kv_pool_concurrency(m.kv_pool_bytes, per_req, m.fits, ask)
        needs = m.weight_bytes + m.overhead_bytes + ask  # >= per_req: a sliding-window model asks its whole prompt
        if users >= 1:
            text = (f"fits: {users:,} requests per replica (needs {fmt_gib(needs)} for one, has "
                    f"{fmt_gib(m.usable_bytes)})")
        else:
            text = f"does not fit: needs {fmt_gib(needs)} per GPU, has {fmt_gib(m.usable_bytes)}"
        rows.append({"gpu_id": g.id, "gpu": g.name, "fits": users >= 1, "max_users_per_replica": int(users),
                     "needs_bytes": needs, "usable_bytes": m.usable_bytes, "sentence": text})
    return pd.DataFrame(rows)


def quality_warning(preset_corner: tuple[str, ...] | None, weight_dtype: str, retention: float,
                    preset_name: str = "") -> str | None:
    """A sentence when a preset that keeps quality lands on a four-bit weight format."""
    if not preset_corner or "quality" not in preset_corner or weight_dtype not in FOUR_BIT:
        return None
    return (f"The {preset_name or 'quality'} preset keeps quality, but this configuration serves {weight_dtype} "
            f"weights: about {retention:.0%} of the published benchmark score (planner.quality). Keep bf16/fp8 "
            "weights for a premium tier.")


# ------------------------------------------------------------------------------------------ metric rows


def fleet_metrics(fa: FleetAnswer, price_url: str) -> list[tuple[str, str, str]]:
    """The headline's fleet row: (label, value, help) for replicas, GPUs, $/hour and $/month."""
    band = f" Error band: {fa.band_text()}."
    why = (f"⌈{fa.request_rate_per_s or 0:,.2f} requests/s ÷ {fa.requests_per_s_per_replica:,.3f} per replica⌉; a "
           f"replica = {fa.gpus_per_replica} × {fa.gpu_name} at batch {fa.batch_size_per_replica:,}.{band}")
    return [
        ("Replicas", f"{fa.replicas:,}", why),
        ("GPUs", f"{fa.num_gpus:,}", f"replicas × {fa.gpus_per_replica} GPU(s).{band}"),
        ("$ / hour", fmt_usd(fa.usd_per_hour, 0),
         f"GPUs × {fmt_usd(fa.price_usd_per_gpu_hour)}/GPU-hour ({price_url})"),
        ("$ / month", fmt_usd(fa.usd_per_month, 0), f"$/hour × {HOURS_PER_MONTH:g} hours (8,760 a year ÷ 12)"),
    ]


def fleet_sentence(fa: FleetAnswer, demand: Demand) -> str:
    """The fleet in words under its metrics (or why there is none)."""
    if not fa.batch_size_per_replica:
        return (f"**No fleet can be sized for {demand.describe()}**: a replica serves nothing under the targets "
                "(see above).")
    rate = (f"{demand.describe()} = {fa.request_rate_per_s:,.2f} requests/s" if demand.by_users
            else demand.describe())
    flight = f" (≈ {fa.requests_in_flight:,.0f} in flight, E2E {fa.e2e_s:,.2f} s)" if fa.requests_in_flight else ""
    return (f"**{rate}**{flight} → {fa.replicas:,} replica(s) of {fa.gpus_per_replica} × {fa.gpu_name}, each serving "
            f"{fa.requests_per_s_per_replica:,.2f} requests/s at batch {fa.batch_size_per_replica:,} within the "
            f"targets. Error band: {fa.band_text()}.")


def detail_metrics(r: SizingReport, replicas: int, mem) -> list[tuple[str, str, str]]:
    """The per-replica row under the fleet: (label, value, help); ``mem`` formats bytes (one way everywhere)."""
    w, served = r.workload, r.batch_size > 0
    ttft_help = f"prefill of {w.prompt_tokens:,} tokens, {r.ttft.bound}-bound; error band {r.bands['ttft'].text()}"
    batch_help = (f"largest batch per replica meeting TTFT ≤ {fmt_ms(w.ttft_slo_s)} and TPOT ≤ {fmt_ms(w.tpot_slo_s)} "
                  f"(stopped by: {r.slo.binding})")
    tpot_help = (f"with the other requests' prefills mixed in; the decode step alone is {fmt_ms(r.tpot.time_s)}, "
                 f"{r.tpot.bound}-bound; error band {r.bands['tpot'].text()}")
    cost_help = (f"all-in (all GPU time over the generated tokens) at {fmt_usd(r.price_usd_per_hour)}/GPU-hour "
                 f"({r.price_source}, {r.price_date})")
    return [
        ("Max concurrent users", f"{r.max_concurrency * replicas:,}",
         f"At {w.context_tokens:,} tokens of context, KV cache limit, {replicas} replica(s)"),
        ("KV cache pool / GPU", mem(max(r.memory.kv_pool_bytes, 0.0)),
         f"{r.memory.kv_capacity_tokens:,} tokens per GPU; {r.memory.explain()}"),
        ("TTFT (one prompt)", fmt_ms(r.ttft.time_s), ttft_help),
        ("SLO-feasible batch", f"{r.batch_size:,}", batch_help),
        ("TPOT at that batch", fmt_ms(r.tpot_effective_s) if served else "—", tpot_help),
        ("$ / M output tokens", fmt_usd(float(r.cost.usd_per_million_output_tokens_all_in), 3) if served else "—",
         cost_help),
    ]
