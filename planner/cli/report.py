"""``planner report``: the plan report of one configuration (:mod:`planner.plan_report`) as Markdown, HTML and a
CSV in human units.

Command function only; :mod:`planner.cli.app` registers it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.cli.common import JsonOpt, cli_errors, emit_json
from planner.cli.flags import plan_flags
from planner.cli.options import infeasible_exit, make_dir

#: The files ``--out DIR`` writes.
FILES = {"markdown": "plan.md", "html": "plan.html", "csv_text": "plan.csv"}


@cli_errors
@plan_flags
def report_cmd(
    flags,
    out: Annotated[Path | None, typer.Option("--out", help=(
        "Write plan.md, plan.html and plan.csv (human units) into this directory; without it the Markdown is "
        "printed."))] = None,
    json_out: JsonOpt = False,
) -> None:
    """A plan report of the fleet `planner size` answers: model, GPU, TP/PP, dtypes, the vllm serve command,
    the demand, the fleet (replicas, GPUs, $/hour, $/month with the error band and its basis), the knee and
    the TTFT/TPOT tails at the operating rate from the simulator, $/Mtok, quality, and the calibration mode.

    Takes `planner size`'s options.  When nothing meets the targets the command exits 1 with one line
    `error: infeasible: <reason>`.
    """
    from planner.cli.plan import plan_from_flags
    from planner.cli.size import fleet_json
    from planner.io.files import write_text
    from planner.plan_report import plan_report

    fp = plan_from_flags(flags)
    if fp.best is None:
        typer.echo("\n".join(fp.fleet.lines()))
        if json_out:
            emit_json({**fleet_json(fp), "feasible": False})
        raise infeasible_exit(fp.fleet.reasons())
    pr = plan_report(fp.model, fp.gpu, fp.report, fp.fleet, fp.profile, calibration_note=fp.mode_line)
    written = []
    if out is not None:
        d = make_dir(out)
        for method, name in FILES.items():
            write_text(d / name, getattr(pr, method)(), "--out")
            written.append(d / name)
    if json_out:
        emit_json({**pr.as_dict(), **fleet_json(fp), "files": [str(p) for p in written]})
    elif out is not None:
        typer.echo("\n".join(pr.headline) + f"\nWrote {', '.join(str(p) for p in written)}")
    else:
        typer.echo(pr.markdown())
    if not pr.feasible:
        raise infeasible_exit(pr.reasons)
