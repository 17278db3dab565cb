"""Speed of capacity planning over time (issue #22): a year of hourly demand (8,760 points) must plan in
under 10 s, and the policy replay of a day of ~1M requests in under 60 s.

* **year**: Llama-3.1-8B on an H200 (calibrated), a diurnal curve with weekends at half and 5 % growth a
  month over 365 days: the knee search, the hourly schedule, the mixes of two GPU types and price bases, the
  break-even against an API price (no replay) — :func:`planner.capacity.plan.plan_capacity` end to end.
* **replay day**: the same replica, a business day peaking at 24 req/s (a 1-hour ramp; ≈ 1.0M requests),
  replayed minute by minute with the policy in the loop (:func:`planner.capacity.replay.replay_policy`).  Fast
  because each per-replica rate is simulated once (a grid of ≤ 40 rates × ≤ 6,000 requests: the
  :class:`~planner.capacity.autoscale.RateTable`), and the day's requests are counted through it rather
  than simulated one by one; the table's own simulations are inside the timed span.

Prints the figures (the year's own work apart from the simulator's: 0.4 s of ~3.3 s on an idle 2-core machine,
7.7 s under a load average of 16); exits 1 on a miss.

    python benchmarks/capacity_speed.py [--year-budget-s 10] [--replay-budget-s 60]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.capacity.autoscale import RateTable, derive_policy, lead_time  # noqa: E402
from planner.capacity.breakeven import break_even  # noqa: E402
from planner.capacity.demand import demand_from_shape  # noqa: E402
from planner.capacity.engine import replica_knee, workload_maker  # noqa: E402
from planner.capacity.mixed import cheapest_mixes  # noqa: E402
from planner.capacity.plan import plan_capacity  # noqa: E402
from planner.capacity.replay import replay_policy  # noqa: E402
from planner.capacity.schedule import plan_schedule  # noqa: E402
from planner.io import catalog  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--year-budget-s", type=float, default=10.0)
    ap.add_argument("--replay-budget-s", type=float, default=60.0)
    ns = ap.parse_args()
    m = catalog.model("llama-3.1-8b")
    gpus = [(catalog.gpu(g), catalog.resolve_profile("auto", g)[0]) for g in ("h200-sxm", "h100-sxm")]
    make = workload_maker(1024, 128)

    year = demand_from_shape(60, 4, shape="diurnal", days=365, weekend_factor=0.5, growth_per_month=0.05)
    t0 = time.perf_counter()
    plan = plan_capacity(m, gpus, year, make, 0.5, 0.05, api_usd_per_mtok_output=0.6, replay_hours=0)
    year_s = time.perf_counter() - t0
    s = plan.schedule
    print(f"year: {year.hours:,} hourly points, {year.requests:,.0f} requests, 2 GPU types -> planned in "
          f"{year_s:.2f} s "
          f"(budget {ns.year_budget_s:g} s): {s.knee.gpu_id} {s.min_replicas}-{s.max_replicas} replicas, "
          f"${s.usd_per_month_autoscaled:,.0f}/month autoscaled vs ${s.usd_per_month_static:,.0f} static; "
          f"cheapest mix {plan.mixes[0].label} ${plan.mixes[0].usd_per_month:,.0f}/month")

    # the part that grows with the curve (schedule, mixes, break-even) on the knees already found
    t0 = time.perf_counter()
    sched_y = [plan_schedule(year, k, lead_time_s=plan.lead.total_s) for k in plan.knees]
    mixes_y = cheapest_mixes(year, list(plan.knees), plan.prices, lead_time_s=plan.lead.total_s)
    break_even(year, plan.knee, 0.6, lead_time_s=plan.lead.total_s)
    curve_s = time.perf_counter() - t0
    print(f"      of which the curve's own work (schedules, {len(mixes_y)} best mixes, break-even; no simulation): "
          f"{curve_s:.2f} s for {len(sched_y)} GPU types; the rest is the simulator (knees, the policy's thresholds)")

    g, prof = gpus[0]
    knee = replica_knee(m, g, prof, make, 0.5, 0.05)
    day = demand_from_shape(24, 2, shape="business", ramp_hours=1.0)
    lt = lead_time(m)
    sched = plan_schedule(day, knee, lead_time_s=lt.total_s)
    t0 = time.perf_counter()
    table = RateTable(knee)
    pol = derive_policy(knee, table, lt, min_replicas=1, max_replicas=sched.max_replicas)
    r = replay_policy(day, pol, table)
    replay_s = time.perf_counter() - t0
    print(f"replay: {r.hours} h, {r.total_requests:,} requests, {len(table._points)} rates simulated "
          f"({table.simulated_requests:,} requests) -> {replay_s:.2f} s (budget {ns.replay_budget_s:g} s); "
          f"attainment {r.overall_attainment:.3%}, worst hour {r.attainment.min():.3%}")
    miss = []
    if year_s > ns.year_budget_s:
        miss.append(f"year plan {year_s:.2f} s > {ns.year_budget_s:g} s")
    if replay_s > ns.replay_budget_s:
        miss.append(f"replay {replay_s:.2f} s > {ns.replay_budget_s:g} s")
    if r.total_requests < 900_000:
        miss.append(f"the replayed day has {r.total_requests:,} requests, not ~1M")
    for x in miss:
        print("MISS:", x)
    return 1 if miss else 0


if __name__ == "__main__":
    sys.exit(main())
