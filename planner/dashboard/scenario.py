"""The dashboard's scenario: what the sidebar chose (:class:`Scenario`, ids and numbers, hashable: the key of
every cache), whether it can be planned (:func:`scenario_problems`), the catalog GPU and profile it names,
and its planner objects (:func:`plan_scenario` -> :class:`Planned`), which :mod:`planner.dashboard.views` draws from.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import NamedTuple

from planner.io import catalog
from planner.cost import with_price
from planner.plan import plan
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.report import SizingReport
from planner.specs import PLAUSIBLE_GPU, Deployment, GpuSpec, ModelSpec, Source, Workload
from planner.startup import startup_check
from planner.units import MS

#: How a start-up problem's field reads on the dashboard.
_FIELD_WORDS = {"tensor_parallel": "tensor parallel", "pipeline_parallel": "pipeline parallel",
                "max_num_batched_tokens": "max_num_batched_tokens", "max_model_len": "context"}


class Scenario(NamedTuple):
    """Everything the sidebar chose, as ids and numbers (hashable: the key of every cache)."""

    model_key: str
    gpu_id: str
    num_gpus: int
    tensor_parallel: int
    weight_dtype: str
    kv_cache_dtype: str
    gpu_memory_utilization: float
    prompt_tokens: int
    output_tokens: int
    target_users: int
    ttft_slo_s: float
    tpot_slo_s: float
    price_usd_per_hour: float  # 0 = catalog price
    calibrated: bool
    price_basis: str = "on-demand"  # the one basis the headline prices every GPU on (planner.prices)
    pipeline_parallel: int = 1  # stages per replica (across nodes when TP fills one)

    # tensor_parallel / pipeline_parallel 0: "auto", left to the fleet engine (planner.dashboard.layout resolves it)

    @property
    def context_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens


def scenario_problems(sc: Scenario, model: ModelSpec | None = None) -> list[str]:
    """Plain-language problems that stop the planner from running (zero, negative, contradictory), then the
    layout problems of the one start-up rule (:func:`planner.startup.startup_check`: TP beyond a node or not
    dividing the heads, PP beyond the layers), which vLLM refuses outright.  The context and memory problems
    of the same rule are the plan's own ``reasons`` (the dashboard still draws how far off they are).
    ``model``: the scenario's model when it is not a catalog id (an upload); a catalog id is looked up."""
    errs = []
    for label, v in (("prompt length", sc.prompt_tokens), ("output length", sc.output_tokens),
                     ("target concurrent users", sc.target_users), ("GPU count", sc.num_gpus)):
        if v < 1:
            errs.append(f"{label} must be at least 1 (got {v:,})")
    for label, v in (("TTFT target", sc.ttft_slo_s), ("TPOT target", sc.tpot_slo_s)):
        if not v > 0:
            errs.append(f"{label} must be above 0 ms (got {v / MS:,.1f} ms)")
    per, what = sc.tensor_parallel * sc.pipeline_parallel, _layout_words(sc)
    if sc.num_gpus >= 1 and per > sc.num_gpus:
        errs.append(f"{what} needs at least {per} GPUs; the deployment has {sc.num_gpus}")
    if sc.num_gpus >= per >= 1 and sc.num_gpus % per:
        errs.append(f"GPU count {sc.num_gpus:,} is not a whole number of {what} replicas")
    if not 0 < sc.gpu_memory_utilization <= 1:
        errs.append(f"gpu_memory_utilization must be in (0, 1], got {sc.gpu_memory_utilization}")
    lo, hi, _ = PLAUSIBLE_GPU["price_usd_per_hour"]
    if sc.price_usd_per_hour and not lo <= sc.price_usd_per_hour <= hi:  # 0 = the catalog's price
        errs.append(f"price override must be 0 (the catalog's price) or {lo:g}–{hi:,.0f} $ per GPU-hour "
                    f"(got {sc.price_usd_per_hour:,.4g})")
    if errs:
        return errs
    if model is None and sc.model_key in catalog.models():
        model = catalog.model(sc.model_key)
    if model is not None and sc.gpu_id in catalog.gpus():
        gpu = scenario_gpu(sc.gpu_id, 0.0)
        dep = Deployment.for_gpu(gpu, num_gpus=sc.num_gpus, tensor_parallel=sc.tensor_parallel,
                                 pipeline_parallel=sc.pipeline_parallel, weight_dtype=sc.weight_dtype,
                                 kv_cache_dtype=sc.kv_cache_dtype, gpu_memory_utilization=sc.gpu_memory_utilization)
        check = startup_check(model, gpu, dep, sc.context_tokens, scenario_profile(sc.gpu_id, sc.calibrated))
        errs += [f"{_FIELD_WORDS.get(p.field, p.field)}: {p.reason}" for p in check.problems if p.kind == "layout"]
    return errs


def _layout_words(sc: Scenario) -> str:
    pp = f" × pipeline parallel {sc.pipeline_parallel}" if sc.pipeline_parallel > 1 else ""
    return f"tensor parallel {sc.tensor_parallel}{pp}"


def scenario_gpu(gpu_id: str, price_usd_per_hour: float) -> GpuSpec:
    """The catalog GPU, with the sidebar's price override (0 = catalog price) and its source."""
    gpu = catalog.gpu(gpu_id)
    if price_usd_per_hour <= 0:
        return gpu
    return with_price(gpu, price_usd_per_hour, Source(url="price override (dashboard sidebar)",
                                                      date=dt.date.today().isoformat(),
                                                      note=f"catalog price {gpu.price_usd_per_hour:g} USD/h replaced"))


def scenario_profile(gpu_id: str, calibrated: bool = True) -> CalibrationProfile:
    """``--profile auto`` (or ``none`` when not ``calibrated``) for the GPU; the ideal roofline if its profile
    cannot be read."""
    try:
        return catalog.resolve_profile("auto" if calibrated else "none", gpu_id)[0]
    except catalog.SpecError:
        return IDEAL_PROFILE


@dataclass(frozen=True)
class Planned:
    """The planner's objects for a scenario and the :class:`SizingReport` of :func:`planner.plan.plan`."""

    model: ModelSpec
    gpu: GpuSpec
    profile: CalibrationProfile
    deployment: Deployment
    workload: Workload
    report: SizingReport


def plan_scenario(sc: Scenario, model: ModelSpec, gpu: GpuSpec, profile: CalibrationProfile) -> Planned:
    """The scenario's deployment (vLLM serve's scheduler limits for the GPU) and workload, planned."""
    dep = Deployment.for_gpu(gpu, num_gpus=sc.num_gpus, tensor_parallel=sc.tensor_parallel,
                             pipeline_parallel=sc.pipeline_parallel, weight_dtype=sc.weight_dtype,
                             kv_cache_dtype=sc.kv_cache_dtype, gpu_memory_utilization=sc.gpu_memory_utilization)
    wl = Workload(prompt_tokens=sc.prompt_tokens, output_tokens=sc.output_tokens, concurrency=sc.target_users,
                  ttft_slo_s=sc.ttft_slo_s, tpot_slo_s=sc.tpot_slo_s)
    return Planned(model, gpu, profile, dep, wl, plan(model, gpu, dep, wl, profile))
