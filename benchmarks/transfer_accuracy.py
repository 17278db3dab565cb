"""How well the H200 calibration transfers to other GPUs, against published measurements.

Predicts every row of calibration/data/public/public_measurements.csv with the planner (the H200 vLLM 0.26
profile transferred to the row's GPU; calibrated on the h200-sxm control rows; calibration/public_check.py
says how each scenario is predicted) and prints the median and p90 |error| and the number of points per
GPU × regime (decode, prefill, throughput) and per GPU × family, separately for vLLM rows and for other
engines (TensorRT-LLM, NIM, TGI, llama.cpp), then the H200 control and the transfer error relative to it.

This is a report, not a gate: it exits 0 whatever the errors are.  There is no accuracy target here — the
planner models vLLM 0.26, and most of these numbers come from other engines or old vLLM releases that we
did not calibrate, so their gaps are mostly engine differences, not transfer errors (the H200 control rows
show how big those are on the calibrated GPU itself).  It exits 2 only if the CSV is unreadable.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np

from calibration.public_check import (
    CSV_PATH,
    PublicDataError,
    compare,
    control_pairs,
    error_table,
    read_public,
    transfer_bands,
)


def show(title: str, table: list[dict]) -> None:
    print(title)
    if not table:
        print("  (no comparable points)")
    for r in table:
        keys = [str(v) for k, v in r.items() if k not in ("n", "median_abs_pct", "p90_abs_pct", "median_signed_pct")]
        print(f"  {' / '.join(keys):38s} n={r['n']:3d}  median |err| {r['median_abs_pct']:6.1f}%  "
              f"p90 {r['p90_abs_pct']:6.1f}%  median signed {r['median_signed_pct']:+6.1f}%")


def main() -> int:
    try:
        rows = compare(read_public(CSV_PATH))
    except PublicDataError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    ok = [c for c in rows if c.comparable]
    print(f"{len(rows)} published rows: {len(ok)} compared, {len(rows) - len(ok)} not comparable")
    for why, n in Counter(c.reason for c in rows if not c.comparable).most_common():
        print(f"  {n:3d} not comparable: {why}")
    transferred = [c for c in ok if c.profile_mode == "transferred"]
    control = [c for c in ok if c.profile_mode == "calibrated"]
    vllm = [c for c in transferred if c.row.engine == "vllm"]
    other = [c for c in transferred if c.row.engine != "vllm"]
    show("\nvLLM rows (old releases and ROCm builds included), transferred profile, per GPU / regime:",
         error_table(vllm, ("gpu", "regime")))
    show("\nother engines (TensorRT-LLM, NIM, TGI, llama.cpp), transferred profile, per GPU / regime:",
         error_table(other, ("gpu", "regime")))
    show("\nper GPU / family / engine (transferred):", error_table(transferred, ("gpu", "family", "engine")))
    show("\nH200 control (calibrated profile, engines other than our vLLM 0.26 box):",
         error_table(control, ("engine", "regime")))
    pairs = control_pairs(rows)
    print("\ntransfer error relative to the H200 control (same engine, model and setup measured on both):")
    for gpu in sorted({p["gpu"] for p in pairs}):
        rel = np.array([p["relative_error_pct"] for p in pairs if p["gpu"] == gpu])
        print(f"  {gpu:14s} n={rel.size:2d}  median {np.median(rel):+6.1f}%  max |.| {np.abs(rel).max():5.1f}%")
    print("\nbands written into the profile (transfer_error_bands, p90 |error|):")
    for k, b in transfer_bands(rows).items():
        print(f"  {k:26s} ±{b.pct:6.1f}%  (median {b.median_pct:5.1f}%, n={b.n}, {b.basis})")
    print("\nno target: a report of engines and releases we did not calibrate (see the docstring)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
