"""The fleet answer: replicas, GPUs, $/hour and $/month for a demand, with its error band.

**Demand in** — a request rate (requests/s), or ``users`` and their think time: a user sends a request,
waits for the whole response (E2E) and thinks ``think_time_s`` before the next one, so by the interactive
response-time law (Little's law on the closed loop; Lazowska et al., *Quantitative System Performance*,
1984, ch. 3: R = N / X − Z) the users send ``rate = users / (think_time_s + E2E)`` requests/s and
``rate × E2E`` of them are in flight.  32 users who think 30 s between answers of 10 s each send
32 / 40 = 0.8 requests/s with 8 in flight; with no think time all 32 are in flight, 3.2 requests/s.

**Out** — replicas = max(⌈rate ÷ requests/s per replica⌉, ⌈in flight ÷ batch per replica⌉) (what
:func:`planner.cost.fleet_for` says for :func:`planner.plan.plan`'s replica), GPUs = replicas × TP × PP,
$/hour = GPUs × price per GPU-hour, $/month = $/hour × :data:`HOURS_PER_MONTH`.

**Error band** — a replica's throughput carries the error of the latency it is computed from: the band of
the target that holds its batch, the wider of the TTFT and TPOT bands where neither or both do
(:mod:`planner.bands`, :func:`throughput_band`).  ``replicas_low`` / ``replicas_high`` are the fleet if
each replica served (1 ± band) × the predicted requests/s (the band moves the rate term; the
requests-in-flight term does not depend on throughput).  Where a band has no measured basis there is no
range, and ``band_basis`` says why.

:func:`plan_for_demand` plans a deployment for a demand (the users' E2E depends on the batch, which
depends on the requests in flight: it iterates to the fixed point, two plans when there is no think time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import planner.plan as planning  # called as planning.plan (one place to patch in tests)
from planner.cost import fleet_for
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.report import SizingReport
from planner.specs import Deployment, GpuSpec, ModelSpec, Workload
from planner.units import fmt_layout, fmt_usd

__all__ = ["HOURS_PER_MONTH", "FleetAnswer", "e2e_s", "fleet_answer", "plan_for_demand", "users_rate_per_s"]

#: Hours in an average month: 365 × 24 / 12 = 730.
HOURS_PER_MONTH = 365 * 24 / 12


def e2e_s(report: SizingReport) -> float:
    """One request's end-to-end time at the planned batch: TTFT joining the batch + TPOT × (output − 1)."""
    if not report.batch_size:
        return math.nan
    return float(report.slo.ttft_s) + float(report.tpot_effective_s) * (report.workload.output_tokens - 1)


def users_rate_per_s(users: int, think_time_s: float, e2e: float) -> float:
    """Requests/s that ``users`` send when each waits ``e2e`` seconds for an answer and thinks ``think_time_s``."""
    return users / (think_time_s + e2e)


class WholeFleet:
    """GPUs and money of ``replicas`` whole replicas of ``gpus_per_replica`` GPUs at ``price_usd_per_gpu_hour``
    (a mixin of :class:`FleetAnswer` and :class:`planner.fleet.FleetCandidate`)."""

    replicas: int
    gpus_per_replica: int
    price_usd_per_gpu_hour: float

    def usd_per_month_of(self, replicas: int | None) -> float | None:
        """$/month of ``replicas`` whole replicas (this fleet's or a band edge's); None for None (no such edge)."""
        if replicas is None:
            return None
        return replicas * self.gpus_per_replica * self.price_usd_per_gpu_hour * HOURS_PER_MONTH

    @property
    def num_gpus(self) -> int:
        """GPUs of the whole fleet."""
        return self.replicas * self.gpus_per_replica

    @property
    def usd_per_hour(self) -> float:
        """The whole fleet's $/hour."""
        return self.num_gpus * self.price_usd_per_gpu_hour

    @property
    def usd_per_month(self) -> float:
        """The whole fleet's $/month (:data:`HOURS_PER_MONTH` hours)."""
        return self.usd_per_month_of(self.replicas)


@dataclass(frozen=True)
class FleetAnswer(WholeFleet):
    """What a demand needs: replicas and GPUs, $/hour and $/month, with the error band (SI units, USD)."""

    request_rate_per_s: float | None  # given, or what the users send; None: no demand given
    users: int | None
    think_time_s: float
    e2e_s: float  # one request, end to end, at the planned batch
    requests_in_flight: float | None  # rate × E2E (users with no think time: the users)
    replicas: int
    gpus_per_replica: int
    tensor_parallel: int
    pipeline_parallel: int
    batch_size_per_replica: int
    requests_per_s_per_replica: float
    price_usd_per_gpu_hour: float
    gpu_name: str
    throughput_band_pct: float | None
    band_basis: str
    replicas_low: int | None
    replicas_high: int | None
    sized: bool  # False: no rate or users given, the deployment as it is

    @property
    def utilization(self) -> float | None:
        """Share of the fleet's request capacity the rate uses (None without a rate)."""
        cap = self.replicas * self.requests_per_s_per_replica
        return None if not self.request_rate_per_s or cap <= 0 else self.request_rate_per_s / cap

    def as_dict(self) -> dict:
        """JSON-safe: every field, the derived GPUs and costs, the band's range (None where there is none)."""
        def safe(v):
            return None if isinstance(v, float) and not math.isfinite(v) else v

        return {k: safe(v) for k, v in {
            "replicas": self.replicas, "num_gpus": self.num_gpus, "gpus_per_replica": self.gpus_per_replica,
            "usd_per_hour": self.usd_per_hour, "usd_per_month": self.usd_per_month,
            "request_rate_per_s": self.request_rate_per_s, "users": self.users, "think_time_s": self.think_time_s,
            "e2e_s": self.e2e_s, "requests_in_flight": self.requests_in_flight,
            "batch_size_per_replica": self.batch_size_per_replica,
            "requests_per_s_per_replica": self.requests_per_s_per_replica, "utilization": self.utilization,
            "price_usd_per_gpu_hour": self.price_usd_per_gpu_hour, "hours_per_month": HOURS_PER_MONTH,
            "throughput_error_band_pct": self.throughput_band_pct, "error_band_basis": self.band_basis,
            "replicas_low": self.replicas_low, "replicas_high": self.replicas_high,
            "usd_per_month_low": self.usd_per_month_of(self.replicas_low),
            "usd_per_month_high": self.usd_per_month_of(self.replicas_high),
            "sized_for_demand": self.sized,
        }.items()}

    def band_text(self) -> str:
        if self.throughput_band_pct is None:
            return f"no error band: {self.band_basis}"
        lo, hi = self.replicas_low, self.replicas_high
        if lo is None or hi is None:
            return f"±{self.throughput_band_pct:.0f} % throughput band; no replica serves the targets"
        reps = f"{lo:,} replica(s)" if lo == hi else f"{lo:,}–{hi:,} replicas"
        money = (fmt_usd(self.usd_per_month_of(lo), 0) if lo == hi
                 else f"{fmt_usd(self.usd_per_month_of(lo), 0)}–{fmt_usd(self.usd_per_month_of(hi), 0)}")
        return f"±{self.throughput_band_pct:.0f} % throughput band: {reps}, {money}/month"

    def lines(self) -> list[str]:
        """The headline: the fleet and its cost first, then the demand it was sized for."""
        layout = fmt_layout(self.tensor_parallel, self.pipeline_parallel)
        head = (f"Fleet: {self.replicas:,} replica(s) × {self.gpus_per_replica} GPU(s) ({layout}) = {self.num_gpus:,} × "
                f"{self.gpu_name} — {fmt_usd(self.usd_per_hour)}/hour, {fmt_usd(self.usd_per_month, 0)}/month "
                f"({self.band_text()})")
        per = (f"{self.batch_size_per_replica:,} in flight and {self.requests_per_s_per_replica:,.3g} req/s per "
               f"replica")
        if not self.sized:
            return [head, f"  the deployment as given (no --rate or --users): {per}; E2E {self.e2e_s:,.2f} s"]
        if self.users is not None:
            think = f"thinking {self.think_time_s:g} s" if self.think_time_s else "with no think time"
            demand = (f"  for {self.users:,} users {think}: {_num(self.request_rate_per_s)} "
                      f"req/s, {_num(self.requests_in_flight)} in flight (E2E {self.e2e_s:,.2f} s); {per}")
        else:
            demand = f"  for {_num(self.request_rate_per_s)} req/s (E2E {self.e2e_s:,.2f} s); {per}"
        u = self.utilization
        return [head, demand + (f"; {u:.0%} of the fleet's capacity" if u is not None else "")]


def _num(x: float | None) -> str:
    """3 significant figures, or "—" for a value the plan could not give (an infeasible plan's rate)."""
    return "—" if x is None or not math.isfinite(x) else f"{x:,.3g}"


#: The latency whose error moves a replica's rate, by what stopped its batch (``LargestBatch.binding``): the target
#: that binds; both where both or neither do (memory, max_num_seqs: the rate is batch ÷ E2E, E2E both of them).
BAND_OF_BINDING = {"tpot": ("tpot",), "ttft": ("ttft",)}


def throughput_band(report: SizingReport) -> tuple[float | None, str]:
    """The error band of a replica's requests/s (module docstring): the band of the latency target that holds its
    batch, the wider of the TTFT and TPOT bands otherwise.  A TTFT far inside its target does not move a
    TPOT-bound rate: gpt-oss-120b at TPOT <= 50 ms takes the MXFP4 family's TPOT band (±11 %), not its single-prompt
    TTFT band (±67 %, the launch of prompts beyond the CUDA graphs, whose time the TPOT band's mixed steps hold)."""
    names = BAND_OF_BINDING.get(report.slo.binding, ("ttft", "tpot"))
    parts = [(name, report.bands.get(name)) for name in names]
    missing = [f"{name}: {b.basis}" if b is not None else f"{name}: no band" for name, b in parts
               if b is None or b.pct is None]
    if missing:
        return None, "; ".join(missing)
    name, b = max(parts, key=lambda nb: nb[1].pct)
    if len(parts) == 1:
        return float(b.pct), f"the {name.upper()} band: its target holds the batch ({b.basis})"
    return float(b.pct), f"the wider of the TTFT and TPOT bands ({name}: {b.basis})"


def fleet_answer(report: SizingReport, *, users: int | None = None, think_time_s: float = 0.0) -> FleetAnswer:
    """The fleet ``report`` (planned for its workload's rate / requests in flight) needs, priced, with its band.
    ``users`` / ``think_time_s``: the users the workload's rate and requests in flight came from (labels only)."""
    f, w, d = report.fleet, report.workload, report.deployment
    sized = bool(w.request_rate_per_s or w.concurrency)
    replicas = f.replicas if sized else max(1, d.replicas)
    e2e = e2e_s(report)
    pct, basis = throughput_band(report)
    lo = hi = None
    if pct is not None and f.requests_per_s_per_replica > 0:
        b = min(pct / 100.0, 0.99)

        def at(scale: float) -> int:
            g = fleet_for(w.request_rate_per_s, f.requests_per_s_per_replica * scale, f.gpus_per_replica,
                          f.batch_size_per_replica, w.concurrency)
            return g.replicas if sized else replicas

        lo, hi = at(1 + b), at(1 - b)
    in_flight = None
    if sized:
        in_flight = float(w.request_rate_per_s * e2e) if w.request_rate_per_s and math.isfinite(e2e) else w.concurrency
    return FleetAnswer(
        request_rate_per_s=w.request_rate_per_s, users=users, think_time_s=float(think_time_s), e2e_s=e2e,
        requests_in_flight=in_flight, replicas=replicas, gpus_per_replica=d.gpus_per_replica,
        tensor_parallel=d.tensor_parallel, pipeline_parallel=d.pipeline_parallel,
        batch_size_per_replica=report.batch_size, requests_per_s_per_replica=f.requests_per_s_per_replica,
        price_usd_per_gpu_hour=report.price_usd_per_hour, gpu_name=report.gpu_name, throughput_band_pct=pct,
        band_basis=basis, replicas_low=lo, replicas_high=hi, sized=sized)


def plan_for_demand(model: ModelSpec, gpu: GpuSpec, deployment: Deployment, workload: Workload,
                    profile: CalibrationProfile = IDEAL_PROFILE, *, rate_per_s: float | None = None,
                    users: int | None = None, think_time_s: float = 0.0,
                    size_deployment: bool = False) -> tuple[SizingReport, FleetAnswer]:
    """:func:`planner.plan.plan` for a demand: ``rate_per_s``, or ``users`` thinking ``think_time_s`` (module
    docstring; the report's workload then carries the rate and requests in flight they make), with its
    :class:`FleetAnswer`.  ``size_deployment``: the deployment's GPU count becomes the fleet's (for a
    deployment whose GPU count nobody chose), so its report carries no shortfall warning.
    Raises ValueError naming the field for a contradictory demand."""
    if rate_per_s is not None and users is not None:
        raise ValueError("users: give either a request rate or users (with their think time), not both")
    if think_time_s < 0 or not math.isfinite(think_time_s):
        raise ValueError(f"think_time_s: must be a finite number >= 0, got {think_time_s}")
    if think_time_s and users is None:
        raise ValueError("think_time_s: a think time needs users")
    update = {}
    if rate_per_s is not None:
        update["request_rate_per_s"] = rate_per_s
    if users is not None:
        update.update(concurrency=users, request_rate_per_s=None)
    wl = Workload(**{**workload.model_dump(), **update})
    report = planning.plan(model, gpu, deployment, wl, profile)
    if users is not None and report.batch_size:
        for _ in range(8):  # the in-flight count caps the batch, which sets E2E, which sets the in-flight count
            e2e = e2e_s(report)
            rate = users_rate_per_s(users, think_time_s, e2e)
            in_flight = max(1, min(users, math.ceil(rate * e2e - 1e-9)))
            nxt = planning.plan(model, gpu, deployment, Workload(**{**wl.model_dump(), "request_rate_per_s": rate,
                                                           "concurrency": in_flight}), profile)
            done = nxt.batch_size == report.batch_size and in_flight == report.workload.concurrency
            report = nxt
            if done or not report.batch_size:
                break
    if size_deployment and report.batch_size and report.fleet.num_gpus > deployment.num_gpus:
        bigger = deployment.replace(num_gpus=report.fleet.num_gpus)
        report = planning.plan(model, gpu, bigger, report.workload, profile)
    return report, fleet_answer(report, users=users, think_time_s=think_time_s)
