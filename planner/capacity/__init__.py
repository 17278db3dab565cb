"""Capacity over time and money (issue #22): demand curves, autoscaling, mixed fleets, break-even.

* :mod:`~planner.capacity.demand` — hourly request rates from a CSV or a shape, with monthly growth;
* :mod:`~planner.capacity.engine` — what one replica serves within the targets (the one adapter to the
  fleet engine: the simulator's knee less a headroom);
* :mod:`~planner.capacity.schedule` — replicas per hour, GPU-hours, $/month static vs autoscaled, utilisation;
* :mod:`~planner.capacity.autoscale` — the signal and thresholds, the lead time from measured boots;
* :mod:`~planner.capacity.replay` — the curve replayed with the policy in the loop: SLO attainment per hour;
* :mod:`~planner.capacity.mixed` — the cheapest mix of GPU types and price bases (reserved base, on-demand
  or spot burst) with the spot interruption rate's effect on attainment;
* :mod:`~planner.capacity.breakeven` — $/Mtok at the fleet's real utilisation vs an API price;
* :mod:`~planner.capacity.plan` — all of it for one question (:func:`plan_capacity`);
* :mod:`~planner.capacity.summary` — the one-page executive summary, HTML and PDF.
"""
