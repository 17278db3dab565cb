"""TP and PP left to the fleet engine: the sidebar's "auto" choices and the concrete layout they resolve to.

"auto" (the default) is what ``planner size --gpu X`` does without ``--tp``: the fleet engine
(:func:`planner.fleet.plan_fleet` on the sidebar's GPU, :func:`planner.dashboard.headline.scenario_fleet`)
tries every TP a node runs (and more pipeline stages across nodes when none starts) and keeps the cheapest
whole fleet for the headline's demand.  The views that draw one replica (Memory, Latency, Roofline, Deploy…)
use the TP × PP it chose; :func:`resolve_layout` says so in one line.

In a :class:`~planner.dashboard.scenario.Scenario`, ``tensor_parallel`` or ``pipeline_parallel`` 0 means "auto".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from planner.dashboard.headline import Demand, scenario_fleet
from planner.dashboard.inputs import tp_choices
from planner.dashboard.scenario import Scenario
from planner.fleet import FleetCandidate, FleetPlan
from planner.startup import PIPELINE_STAGES
from planner.specs import ModelSpec
from planner.units import cdiv, fmt_layout, fmt_usd

AUTO = "auto"
#: The pipeline-parallel sizes the sidebar offers after "auto" (the engine's stage counts).
PP_CHOICES = [1, *PIPELINE_STAGES]


def tp_options(gpus: Iterable) -> list:
    """The sidebar's tensor-parallel choices: "auto", then the sizes one node of some catalog GPU holds."""
    return [AUTO, *tp_choices(gpus)]


def pp_options() -> list:
    return [AUTO, *PP_CHOICES]


def as_int(choice) -> int:
    """A TP/PP choice as the scenario holds it: 0 for "auto", else the size."""
    return 0 if choice == AUTO else int(choice)


class Layout(NamedTuple):
    """The scenario with a concrete TP and PP, the line that says where they came from (None: as chosen), and
    the engine's plan on the sidebar's GPU behind the choice (None: none was needed)."""

    scenario: Scenario
    note: str | None
    plan: FleetPlan | None


def _pick(plan: FleetPlan) -> tuple[FleetCandidate | None, str]:
    """The candidate whose layout the views use, and why: the cheapest fleet, else the first that starts (None:
    no layout starts)."""
    if plan.best is not None:
        b = plan.best
        return b, (f"its cheapest whole fleet for the demand: {b.replicas:,} replica(s), "
                   f"{fmt_usd(b.usd_per_month, 0)}/month")
    starts = next((c for c in plan.candidates if c.status != "does not start"), None)
    return starts, "no layout meets the targets for the demand; the first in rank that starts"


def resolve_layout(sc: Scenario, demand: Demand, model: ModelSpec | None = None) -> Layout:
    """``sc`` with its "auto" TP and/or PP (0) replaced by the fleet engine's choice on ``sc.gpu_id`` for
    ``demand``; its GPU count rounded up to whole replicas of that layout (one at least).  ``model``: a spec
    that is not in the catalog (an upload)."""
    tp, pp = sc.tensor_parallel, sc.pipeline_parallel
    if tp and pp:
        return Layout(sc, None, None)
    plan = scenario_fleet(sc, demand, across_gpus=False, model=model)
    c, why = _pick(plan)
    if c is None:  # no layout starts: the views show the smallest one and say why it does not
        tp, pp, why = tp or 1, pp or 1, "no layout of this GPU starts"
    else:
        tp, pp = c.tensor_parallel, c.pipeline_parallel
    per = tp * pp
    n = max(per, cdiv(sc.num_gpus, per) * per)
    asked = " and ".join(x for x, v in (("TP", sc.tensor_parallel), ("PP", sc.pipeline_parallel)) if not v)
    note = (f"{asked} auto: the fleet engine chose {fmt_layout(tp, pp, always_pp=True)} on {sc.gpu_id} ({why}); "
            "the views use it, "
            f"{n:,} GPU(s) = {n // per:,} replica(s).")
    return Layout(sc._replace(tensor_parallel=tp, pipeline_parallel=pp, num_gpus=n), note, plan)
