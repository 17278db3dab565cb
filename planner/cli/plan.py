"""What ``planner size`` and ``planner report`` share: their flags turned into a planned deployment for a demand.

No command here; :mod:`planner.cli.size` and :mod:`planner.cli.report` call :func:`plan_from_flags`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from planner.cli.common import build, error_exit, today
from planner.units import MS


@dataclass(frozen=True)
class FlagPlan:
    """The specs the flags named (or the choice made for them), the plan and its fleet answer."""

    model: object  # ModelSpec
    gpu: object  # GpuSpec (with a --price-usd-per-hour override applied)
    profile: object  # CalibrationProfile
    mode_line: str
    report: object  # SizingReport
    fleet: object  # FleetAnswer
    choice: object | None  # planner.choose.Choice when no --gpu was given
    users: int | None
    think_time_s: float


def check_demand(rate: float | None, users: int | None, think_time_s: float) -> None:
    """One demand: a rate, or users (with a think time)."""
    if rate is not None and users is not None:
        raise error_exit("--users", "give either --rate or --users (with --think-time-s), not both")
    if think_time_s and users is None:
        raise error_exit("--think-time-s", "a think time needs --users")


def _check_dtypes(weight_dtype: str, kv_dtype: str) -> None:
    from planner.dtypes import KV_BYTES, WEIGHT_BITS

    if weight_dtype not in WEIGHT_BITS:
        raise error_exit("--weight-dtype", f"unknown dtype '{weight_dtype}'; known: {', '.join(WEIGHT_BITS)}")
    if kv_dtype not in KV_BYTES:
        raise error_exit("--kv-dtype", f"unknown dtype '{kv_dtype}'; known: {', '.join(KV_BYTES)}")


def plan_from_flags(*, model: str, gpu: str | None, num_gpus: int | None, tp: int | None, pp: int,
                    weight_dtype: str, kv_dtype: str, prompt_tokens: int, output_tokens: int,
                    ttft_slo_ms: float | None, tpot_slo_ms: float | None, rate: float | None, users: int | None,
                    think_time_s: float, gpu_memory_utilization: float, max_num_batched_tokens: int | None,
                    max_num_seqs: int | None, price_usd_per_hour: float | None, profile: str) -> FlagPlan:
    """Plan ``model`` for the flags' demand.  Without ``gpu`` the configuration (GPU × TP, the dtypes as given)
    is :func:`planner.choose.choose_configuration`'s; the returned plan's ``choice.row`` is None when no
    configuration meets every target (``report`` and ``fleet`` are then None)."""
    from planner.io import catalog
    from planner.choose import choose_configuration
    from planner.cost import with_price
    from planner.steady_fleet import plan_for_demand
    from planner.specs import Deployment, Source, Workload

    check_demand(rate, users, think_time_s)
    m = catalog.model(model)
    _check_dtypes(weight_dtype, kv_dtype)
    wl = build(Workload, {
        "prompt_tokens": prompt_tokens, "output_tokens": output_tokens, "concurrency": users,
        "ttft_slo_s": ttft_slo_ms * MS if ttft_slo_ms is not None else None,
        "tpot_slo_s": tpot_slo_ms * MS if tpot_slo_ms is not None else None,
    }, "--prompt-tokens")
    sched = {**({"max_num_batched_tokens": max_num_batched_tokens} if max_num_batched_tokens is not None else {}),
             **({"max_num_seqs": max_num_seqs} if max_num_seqs is not None else {})}
    choice = None
    if gpu is None:
        for flag, given in (("--pp", pp > 1), ("--num-gpus", num_gpus is not None),
                            ("--price-usd-per-hour", price_usd_per_hour is not None)):
            if given:
                raise error_exit(flag, "give --gpu with it (without --gpu the cheapest GPU × TP is chosen)")
        choice = choose_configuration(
            m, wl, weight_dtypes=[weight_dtype], kv_dtypes=[kv_dtype], tensor_parallels=[tp] if tp else None,
            profile_for=lambda g: catalog.resolve_profile(profile, g, field="--profile")[0],
            deployment_defaults={"gpu_memory_utilization": gpu_memory_utilization, **sched})
        if choice.row is None:
            return FlagPlan(m, None, None, "", None, None, choice, users, think_time_s)
        gpu, tp = str(choice.row["gpu_id"]), int(choice.row["tensor_parallel"])
    tp = tp or 1
    g = catalog.gpu(gpu)
    if price_usd_per_hour is not None:
        g = with_price(g, price_usd_per_hour, Source(url="--price-usd-per-hour (command line)", date=today(),
                                                     note="user override"))
    dep = build(functools.partial(Deployment.for_gpu, g), {
        "num_gpus": num_gpus if num_gpus is not None else tp * pp, "tensor_parallel": tp,
        "pipeline_parallel": pp, "weight_dtype": weight_dtype, "kv_cache_dtype": kv_dtype,
        "gpu_memory_utilization": gpu_memory_utilization, **sched,
    }, "--num-gpus")
    prof, mode_line = catalog.resolve_profile(profile, g.id, field="--profile")
    report, fleet = plan_for_demand(m, g, dep, wl, prof, rate_per_s=rate, users=users, think_time_s=think_time_s,
                                    size_deployment=num_gpus is None)
    return FlagPlan(m, g, prof, mode_line, report, fleet, choice, users, think_time_s)
