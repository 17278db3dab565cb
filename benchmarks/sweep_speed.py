"""How many configurations ``planner.sweep.sweep`` ranks per second on this machine.

A configuration is one (GPU × weight dtype × KV dtype × tensor parallel × prompt length × batch) row of
the ranked DataFrame.  Two scenarios, each the best of several runs after a warm-up:

* ``default``  the CLI's default sweep: every catalog GPU × 7 weight dtypes × 2 KV dtypes × TP 1-8 ×
               one prompt length × 11 batch sizes, with TTFT/TPOT targets;
* ``wide``     the same with 4 prompt lengths and 16 batch sizes (what a dashboard heat map asks for).

Prints the figures and exits non-zero when the *lower* of the two is below the target (100,000/s).
Usage: ``python benchmarks/sweep_speed.py [--model ID] [--repeats N] [--target N]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.io import catalog
from planner.specs import Workload
from planner.sweep import sweep

TARGET_PER_S = 100_000


def measure(model, workload, repeats: int, **kw) -> tuple[int, float]:
    sweep(model, workload, **kw)  # warm-up (imports, caches)
    best = float("inf")
    rows = 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        df = sweep(model, workload, **kw)
        best = min(best, time.perf_counter() - t0)
        rows = len(df)
    return rows, best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3.1-70b")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--target", type=float, default=TARGET_PER_S)
    args = ap.parse_args()

    model = catalog.model(args.model)
    wl = Workload(prompt_tokens=4096, output_tokens=512, ttft_slo_s=1.0, tpot_slo_s=0.05)
    scenarios = {
        "default": {},
        "wide": {"contexts": [1024, 4096, 16384, 32768],
                     "batch_sizes": [1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 384, 512, 1024]},
    }
    rates = {}
    print(f"sweep speed: model {model.id}, {len(catalog.gpus())} GPUs in the catalog")
    for name, kw in scenarios.items():
        rows, secs = measure(model, wl, args.repeats, **kw)
        rates[name] = rows / secs
        print(f"  {name:<8} {rows:>8,} configurations in {secs * 1e3:8.1f} ms = {rates[name]:>12,.0f} configurations/s")
    worst = min(rates.values())
    ok = worst >= args.target
    print(f"configurations ranked per second: {worst:,.0f} (target {args.target:,.0f}) -> {'OK' if ok else 'MISS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
