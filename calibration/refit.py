"""Refit the committed H200 profile and rebuild the validation CSV from the committed raw records.

    python -m calibration.refit

(what produced calibration/profiles/h200-sxm-vllm-0.26.0.yaml and calibration/data/h200-validation.csv;
the device commands that produced the raw files are in calibration/data/README.md)."""

from __future__ import annotations

import sys
from pathlib import Path

from calibration.fit import fit_and_write, measurement_rows, points_from_records
from calibration.records import read_records
from planner.validate import write_measurements

DATA = Path(__file__).resolve().parent / "data"
PROFILES = Path(__file__).resolve().parent / "profiles"
RAW = ["h200-fit.jsonl", "h200-fit2.jsonl", "h200-fit3.jsonl", "h200-validate.jsonl"]
COMMAND = "python -m calibration.refit  # fit on the 'fit'-role records of " + ", ".join(RAW)


def main() -> int:
    paths = [DATA / r for r in RAW]
    path, prof = fit_and_write(paths, PROFILES, command=COMMAND)
    rows = []
    for p in paths:
        pts = points_from_records(read_records(p), f"calibration/data/{p.name}")
        rows += measurement_rows([x for x in pts if x.role == "validate"])
    write_measurements(rows, DATA / "h200-validation.csv")
    print(f"wrote {path} (fitted on {', '.join(prof.models_used)}) and {DATA / 'h200-validation.csv'} ({len(rows)} rows)")
    for k, v in {**prof.residuals, **prof.validation}.items():
        print(f"  {k:45s} n={v.n:3d}  median |err| {v.median_abs_error_pct:5.1f}%  p90 {v.p90_abs_error_pct:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
