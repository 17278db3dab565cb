"""``planner`` command line: the typer app and the list of its commands.

Each command lives in a module by job and imports only :mod:`planner.cli.common` (the one-line
errors, option types, JSON and table output), never this module; the commands are registered here,
in the order ``planner --help`` lists them:

    cli_catalog    models, gpus, import-hf
    cli_size       size, sweep (cli_plan: the flags -> a plan for a demand, shared with report)
    cli_report     report (the plan report: Markdown, HTML, CSV in human units)
    cli_calibrate  calibrate, verify (import calibration -- torch, vLLM -- inside the command), validate
    cli_simulate   simulate, slo-search
    cli_replay     replay (real load-test results: vllm bench serve, GuideLLM, multi-turn records)
    cli_deploy     deploy (a vllm serve command and Kubernetes/Helm/Ray manifests for a plan)
    cli_capacity   capacity (demand over time: autoscaling, mixed fleets, price bases, break-even)

Exit codes: 0 ok, 2 bad input (one line ``error: <flag>: <reason>`` on stderr), 1 an infeasible plan
(``error: infeasible: <reason>``, after the plan is printed) or an internal error.  Every command takes
``--json`` for machine-readable output on stdout; the flags' vocabulary is :mod:`planner.cli.options`.
"""

from __future__ import annotations

import typer

from planner.cli import calibrate as cli_calibrate, capacity as cli_capacity, catalog as cli_catalog
from planner.cli import deploy as cli_deploy, replay as cli_replay
from planner.cli import report as cli_report, simulate as cli_simulate, size as cli_size
from planner.cli.options import PlannerGroup

app = typer.Typer(
    name="planner",
    help="LLM inference capacity planner: memory, latency, throughput and cost of serving a model.",
    cls=PlannerGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

#: (command name, function), in help order.
COMMANDS = (
    ("models", cli_catalog.models_cmd), ("gpus", cli_catalog.gpus_cmd), ("size", cli_size.size_cmd),
    ("sweep", cli_size.sweep_cmd), ("report", cli_report.report_cmd), ("import-hf", cli_catalog.import_hf_cmd),
    ("calibrate", cli_calibrate.calibrate_cmd), ("validate", cli_calibrate.validate_cmd),
    ("verify", cli_calibrate.verify_cmd), ("simulate", cli_simulate.simulate_cmd),
    ("slo-search", cli_simulate.slo_search_cmd), ("replay", cli_replay.replay_cmd), ("deploy", cli_deploy.deploy_cmd),
    ("capacity", cli_capacity.capacity_cmd),
)
for _name, _fn in COMMANDS:
    app.command(_name)(_fn)


def main() -> None:  # pragma: no cover - console entry point alias
    app()


if __name__ == "__main__":  # pragma: no cover - `python -m planner.cli.app`
    app()
