"""The one rule for "can this deployment start" lives in :mod:`planner.startup` (every command and the
dashboard use it; :func:`planner.plan.plan` too, which this package imports); re-exported here."""

from planner.startup import MIN_HEADROOM_BYTES, StartupCheck, StartupProblem, startup_check

__all__ = ["MIN_HEADROOM_BYTES", "StartupCheck", "StartupProblem", "startup_check"]
