"""The dashboard's headline: the fleet a demand needs (replicas, GPUs, $/hour, $/month, with its error band),
and whether the model fits each GPU at the scenario's context.

Demand is a request rate, or users with a think time: a user sends a request, waits for the whole
answer (TTFT + TPOT × output tokens), reads for ``think_s`` and sends the next, so by Little's law each
user sends 1 / (think + latency) requests per second.  A replica serves ``requests_per_s`` at the
scenario's SLO-feasible batch (:func:`planner.plan.plan`); the fleet is ⌈rate ÷ that⌉ replicas
(:func:`planner.cost.fleet_for`).  The band: a replica's request rate is batch ÷ (prefill + decode busy
time), so its error is the wider of the TTFT and TPOT bands (:mod:`planner.bands`); the fleet's range is
⌈rate ÷ (rate per replica × (1 ± band))⌉.

2,000 users thinking 30 s between requests, each answer 2.1 s: 2,000 / 32.1 = 62.3 requests/s; at 2.6
requests/s per 1-GPU replica: ⌈23.96⌉ = 24 replicas = 24 GPUs; at $4.54/GPU-hour: $108.96/hour,
× 730 hours = $79,540.80 per month.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pandas as pd

from planner.bands import Band
from planner.cost import fleet_for
from planner.memory import kv_pool_concurrency, memory_budget, request_kv_bytes_per_gpu
from planner.profile import CalibrationProfile
from planner.report import SizingReport
from planner.specs import Deployment, GpuSpec, ModelSpec
from planner.units import fmt_gib, fmt_ms, fmt_usd

#: Hours in an average month (8,760 hours a year ÷ 12), what cloud price sheets multiply by.
HOURS_PER_MONTH = 730.0
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

    def rate(self, latency_s: float) -> float:
        """Requests per second (users: Little's law over think time + the answer's latency)."""
        if self.mode == DEMAND_MODES[0]:
            return float(self.rate_per_s)
        cycle = self.think_s + latency_s
        return self.active_users / cycle if cycle > 0 and math.isfinite(cycle) else math.inf

    def describe(self, latency_s: float) -> str:
        if self.mode == DEMAND_MODES[0]:
            return f"{self.rate_per_s:,.4g} requests/s"
        return (f"{self.active_users:,} users × 1 request per ({self.think_s:,.4g} s think + {latency_s:,.2f} s answer)"
                f" = {self.rate(latency_s):,.2f} requests/s")


def throughput_band(report: SizingReport) -> Band:
    """The error of one replica's request rate: the wider of its TTFT and TPOT bands (module docstring)."""
    parts = [report.bands.get(k) for k in ("ttft", "tpot")]
    if any(b is None or b.pct is None for b in parts):
        why = next((b.basis for b in parts if b is not None and b.pct is None), "no band computed")
        return Band(None, why)
    return Band(max(b.pct for b in parts), f"wider of TTFT ±{parts[0].pct:.0f} % and TPOT ±{parts[1].pct:.0f} %")


@dataclass(frozen=True)
class FleetAnswer:
    """Replicas, GPUs and their cost for a demand; ``replicas_range`` under the error band (None: no basis).
    ``reason`` says why there is no fleet (no batch meets the targets); then the counts are 0."""

    rate_per_s: float
    latency_s: float  # one answer: TTFT + TPOT × output tokens
    requests_per_s_per_replica: float
    batch_size: int
    gpus_per_replica: int
    replicas: int
    price_usd_per_gpu_hour: float
    band: Band
    replicas_range: tuple[int, int] | None
    in_flight: float  # requests in flight across the fleet (Little's law: rate × latency)
    reason: str | None = None
    demand: Demand | None = None

    def demand_text(self) -> str:
        return self.demand.describe(self.latency_s if math.isfinite(self.latency_s) else 0.0) if self.demand else ""

    @property
    def gpus(self) -> int:
        return self.replicas * self.gpus_per_replica

    @property
    def usd_per_hour(self) -> float:
        return self.gpus * self.price_usd_per_gpu_hour

    @property
    def usd_per_month(self) -> float:
        return self.usd_per_hour * HOURS_PER_MONTH

    def gpus_range(self) -> tuple[int, int] | None:
        return None if self.replicas_range is None else tuple(r * self.gpus_per_replica for r in self.replicas_range)

    def band_sentence(self) -> str:
        """The fleet's range under the band, or why there is none."""
        if self.reason:
            return self.reason
        g = self.gpus_range()
        if g is None:
            return f"Error band: {self.band.text()} ({self.band.basis})."
        lo_usd, hi_usd = (x * self.price_usd_per_gpu_hour * HOURS_PER_MONTH for x in g)
        return (f"Error band ±{self.band.pct:.0f} % on a replica's throughput ({self.band.basis}): "
                f"{g[0]:,}–{g[1]:,} GPUs, {fmt_usd(lo_usd, 0)}–{fmt_usd(hi_usd, 0)} per month.")


def _ceil(need: float, per: float) -> int:
    return math.ceil(need / per - 1e-9) if per > 0 else 0


def fleet_answer(report: SizingReport, demand: Demand) -> FleetAnswer:
    """The fleet ``demand`` needs with the scenario's replica (``report``: one deployment's plan)."""
    d, w = report.deployment, report.workload
    latency = float(report.slo.ttft_s + report.tpot_effective_s * w.output_tokens) if report.batch_size else math.nan
    rate = demand.rate(latency if math.isfinite(latency) else 0.0)
    per = float(report.throughput.requests_per_s) if report.batch_size else 0.0
    band = throughput_band(report)
    gpr = d.gpus_per_replica
    if not report.batch_size or per <= 0:
        why = "; ".join(report.reasons) or "no batch meets the targets"
        return FleetAnswer(rate, latency, 0.0, 0, gpr, 0, report.price_usd_per_hour, band, None, 0.0,
                           f"No fleet: a replica serves nothing under the targets ({why}).", demand)
    fleet = fleet_for(rate, per, gpr, report.batch_size)
    rng = None
    if band.pct is not None:
        b = min(band.pct, 95.0) / 100.0
        rng = (max(1, _ceil(rate, per * (1 + b))), max(1, _ceil(rate, per * (1 - b))))
    return FleetAnswer(rate, latency, per, report.batch_size, gpr, fleet.replicas, report.price_usd_per_hour, band,
                       rng, rate * latency, None, demand)


# ---------------------------------------------------------------------------------------- fits per GPU


def fits_per_gpu(model: ModelSpec, gpus: Iterable[GpuSpec], base: Deployment, context_tokens: int,
                 profile_for: Callable[[str], CalibrationProfile]) -> pd.DataFrame:
    """Per catalog GPU, at the scenario's TP, dtypes and memory utilisation: does the model fit, and how many
    requests of ``context_tokens`` one replica holds.  Columns: gpu_id, fits, max_users_per_replica,
    needs_bytes (weights + overhead + one request's KV, per GPU), usable_bytes, sentence."""
    rows = []
    for g in gpus:
        dep = Deployment.for_gpu(g, num_gpus=base.tensor_parallel, tensor_parallel=base.tensor_parallel,
                                 weight_dtype=base.weight_dtype, kv_cache_dtype=base.kv_cache_dtype,
                                 gpu_memory_utilization=base.gpu_memory_utilization)
        m = memory_budget(model, g, dep, profile_for(g.id))
        per_req = request_kv_bytes_per_gpu(model, dep, context_tokens)
        users = kv_pool_concurrency(m.kv_pool_bytes, per_req, m.fits)
        needs = m.weight_bytes + m.overhead_bytes + per_req
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


def fleet_metrics(fa: FleetAnswer, gpu_name: str, price_url: str) -> list[tuple[str, str, str]]:
    """The headline's fleet row: (label, value, help) for replicas, GPUs, $/hour and $/month."""
    band = f" Error band: {fa.band.text()} ({fa.band.basis})."
    per = f"a replica = {fa.gpus_per_replica} × {gpu_name} at batch {fa.batch_size:,}"
    why = f"⌈{fa.rate_per_s:,.2f} requests/s ÷ {fa.requests_per_s_per_replica:,.3f} per replica⌉; {per}.{band}"
    return [
        ("Replicas", f"{fa.replicas:,}", why),
        ("GPUs", f"{fa.gpus:,}", f"replicas × {fa.gpus_per_replica} GPU(s).{band}"),
        ("$ / hour", fmt_usd(fa.usd_per_hour, 0),
         f"GPUs × {fmt_usd(fa.price_usd_per_gpu_hour)}/GPU-hour ({price_url})"),
        ("$ / month", fmt_usd(fa.usd_per_month, 0), f"$/hour × {HOURS_PER_MONTH:g} hours (8,760 a year ÷ 12)"),
    ]


def fleet_sentence(fa: FleetAnswer, gpu_name: str) -> str:
    """The fleet in words under its metrics (or why there is none)."""
    if fa.reason:
        return (f"**No fleet can be sized for {fa.demand.describe(0.0) if fa.demand else 'the demand'}**: a replica "
                "serves nothing under the targets (see above).")
    return (f"**{fa.demand_text()}** → {fa.replicas:,} replica(s) of {fa.gpus_per_replica} × {gpu_name}, "
            f"each serving {fa.requests_per_s_per_replica:,.2f} requests/s within the targets (≈ {fa.in_flight:,.0f} "
            f"in flight). {fa.band_sentence()}")


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
