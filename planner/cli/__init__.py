"""The ``planner`` command line: :mod:`planner.cli.app` holds the typer app and registers one module per
command; :mod:`planner.cli.common` and :mod:`planner.cli.options` hold what the commands share."""
