"""What ``planner size``, ``report`` and ``deploy`` share: their :class:`planner.cli.flags.PlanFlags` turned
into the fleet engine's answer (:func:`planner.fleet.plan_fleet`) and the chosen replica's explanation.

No command here; the commands call :func:`plan_from_flags`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from planner.cli.common import build, error_exit, today
from planner.units import fmt_layout


@dataclass(frozen=True)
class FlagPlan:
    """The fleet plan for the flags, and for its best candidate: the specs, the steady-state report (the first
    guess and explanation of one replica) and the calibration sentence.  ``best`` None: nothing meets the
    targets (``gpu``, ``deployment`` and ``report`` are then None)."""

    flags: object  # PlanFlags
    model: object  # ModelSpec
    fleet: object  # planner.fleet.FleetPlan
    best: object | None  # planner.fleet.FleetCandidate
    gpu: object | None  # GpuSpec, the price the fleet used applied
    deployment: object | None  # one replica's Deployment
    profile: object | None
    mode_line: str
    report: object | None  # SizingReport of one replica at the steady state

    @property
    def replicas(self) -> int:
        return self.best.replicas if self.best else 0


def check_demand(rate: float | None, users: int | None, think_time_s: float) -> None:
    """One demand: a rate, or users (with a think time)."""
    if rate is not None and users is not None:
        raise error_exit("--users", "give either --rate or --users (with --think-time-s), not both")
    if think_time_s and users is None:
        raise error_exit("--think-time-s", "a think time needs --users")


def infeasible_reason(fleet) -> str:
    """The first reason no fleet serves, naming the flag that makes it impossible (``--tp: TP 3 does not …``,
    ``--tpot-slo-ms: … misses the TPOT target …``), for ``error: infeasible: <flag>: <reason>``."""
    from planner.cli.common import FLAG_OF_FIELD

    reason = fleet.reasons()[0]
    field, _, rest = reason.partition(": ")
    if rest and (field in FLAG_OF_FIELD or field == "max_model_len"):
        return f"{FLAG_OF_FIELD.get(field, '--max-model-len')}: {rest}"
    for target, flag in (("TPOT target", "--tpot-slo-ms"), ("TTFT target", "--ttft-slo-ms")):
        if target in reason:
            return f"{flag}: {reason}"
    return reason


def plan_from_flags(flags, **question) -> FlagPlan:
    """The fleet engine's answer for ``flags`` (``question``: engine fields the command adds, e.g. deploy's
    ``max_model_len``) and its best candidate's replica, explained."""
    from planner.cost import with_price
    from planner.fleet import plan_fleet
    from planner.fleet_eval import deployment_for
    from planner.io import catalog
    from planner.plan import plan
    from planner.specs import Source, Workload

    m = catalog.model(flags.model)
    if flags.gpu is not None:
        catalog.gpu(flags.gpu)  # an unknown id exits 2 naming it
    catalog.resolve_profile(flags.profile, flags.gpu or "h200-sxm", field="--profile")  # a bad path: exit 2
    if flags.num_gpus is not None and flags.tp and flags.num_gpus < flags.tp * (flags.pp or 1):
        raise error_exit("--num-gpus", f"{flags.num_gpus} GPUs hold no replica of "
                                       f"{fmt_layout(flags.tp, flags.pp or 1, always_pp=True)}")
    fp = plan_fleet(flags.question(**question))
    best = fp.best
    if best is None:
        return FlagPlan(flags, m, fp, None, None, None, None, "", None)
    g = catalog.gpu(best.gpu_id)
    if abs(best.price_usd_per_gpu_hour - g.price_usd_per_hour) > 1e-12:
        g = with_price(g, best.price_usd_per_gpu_hour, Source(
            url=best.price_source or "command line", date=today(),
            note="--price-basis, --price-provider, --price-usd-per-hour or --discount-pct"))
    # the engine the fleet engine sized this candidate with (one map from the question to the engine)
    dep = build(functools.partial(deployment_for, fp.question, g), {
        "tp": best.tensor_parallel, "pp": best.pipeline_parallel, "dtype": best.weight_dtype}, "--tp")
    prof, mode_line = catalog.resolve_profile(flags.profile, g.id, field="--profile")
    wl = build(Workload, {"prompt_tokens": flags.prompt_tokens, "output_tokens": flags.output_tokens,
                          "ttft_slo_s": fp.question.ttft_slo_s, "tpot_slo_s": fp.question.tpot_slo_s},
               "--prompt-tokens")
    return FlagPlan(flags, m, fp, best, g, dep, prof, mode_line, plan(m, g, dep, wl, prof))


def gpus_given_note(fp: FlagPlan) -> str | None:
    """With --num-gpus: whether the GPUs given hold the fleet the demand needs (a warning when they do not)."""
    n = fp.flags.num_gpus
    if n is None or fp.best is None:
        return None
    held = n // fp.best.gpus_per_replica
    if held >= fp.best.replicas:
        return None
    return (f"--num-gpus {n:,} holds {held:,} replica(s) of {fp.best.gpus_per_replica} GPU(s); the demand needs "
            f"{fp.best.replicas:,} ({fp.best.num_gpus:,} GPUs)")
