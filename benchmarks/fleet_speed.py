"""How long the fleet engine (planner.fleet.plan_fleet, behind `planner size`) takes: cold (a fresh process
cache: every saturation burst and knee trial simulated) and warm (the same question again, and the same
candidates at another demand), for questions a user asks.

Targets (this is what keeps `size` interactive): cold ≤ COLD_TARGET_S for a question across the whole
catalog, warm (another demand on the same question) ≤ WARM_TARGET_S.  Prints one line per question, exits 1
on a miss.  Timings depend on the machine's load: the figures printed are the ones taken.

    .venv/bin/python benchmarks/fleet_speed.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.fleet import FleetQuestion, plan_fleet  # noqa: E402
from planner.fleet_eval import clear_cache  # noqa: E402

COLD_TARGET_S = 30.0
WARM_TARGET_S = 1.0

QUESTIONS = [
    ("8B, one GPU, 32 users", FleetQuestion(model_id="llama-3.1-8b", gpu_ids=("h200-sxm",), users=32,
                                            ttft_slo_s=0.5, tpot_slo_s=0.05)),
    ("Mistral 7B, catalog, 1 req/s", FleetQuestion(model_id="mistral-7b-v0.3", rate_per_s=1.0, ttft_slo_s=2.0,
                                                   tpot_slo_s=0.05)),
    ("70B, catalog, 200 users thinking 30 s", FleetQuestion(model_id="llama-3.1-70b", users=200, think_time_s=30,
                                                            ttft_slo_s=1.0, tpot_slo_s=0.05)),
    ("8B, catalog, 40 req/s", FleetQuestion(model_id="llama-3.1-8b", rate_per_s=40, ttft_slo_s=0.5,
                                            tpot_slo_s=0.05)),
]


def main() -> int:
    miss = False
    for name, q in QUESTIONS:
        clear_cache()
        t0 = time.perf_counter()
        p = plan_fleet(q)
        cold = time.perf_counter() - t0
        other = q.model_copy(update={"rate_per_s": q.rate_per_s * 1.5} if q.rate_per_s else {"users": q.users * 2})
        t0 = time.perf_counter()
        plan_fleet(other)
        warm = time.perf_counter() - t0
        b = p.best
        ok = cold <= COLD_TARGET_S and warm <= WARM_TARGET_S
        miss |= not ok
        print(f"{name:40s} cold {cold:6.1f} s  warm {warm:5.2f} s  "
              f"{'—' if b is None else f'{b.replicas} × {b.layout()} = {b.num_gpus} GPUs'}  {'ok' if ok else 'MISS'}")
    print(f"targets: cold ≤ {COLD_TARGET_S:g} s, warm ≤ {WARM_TARGET_S:g} s")
    return 1 if miss else 0


if __name__ == "__main__":
    sys.exit(main())
