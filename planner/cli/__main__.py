"""``python -m planner.cli``: the same app as the ``planner`` console script."""
from planner.cli.app import app

app()
