"""Sizing-report writers: CSV and JSON of raw SI numbers in unit-suffixed columns.

No formatted strings go into a file: bytes are bytes, seconds are seconds, prices are USD.  Every
file says which price it used (``price_source``, ``price_date``) and which model produced it
(``calibration_mode``: 'ideal' roofline, 'calibrated' profile, or 'transferred' from another GPU).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from planner.plan import SizingReport

#: Columns every exported file must carry.
PROVENANCE_COLUMNS: tuple[str, ...] = ("price_source", "price_date", "calibration_mode")


def reports_frame(reports: Iterable[SizingReport]) -> pd.DataFrame:
    """One row per report (the columns of :meth:`SizingReport.to_dict`)."""
    frames = [r.to_frame() for r in reports]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def memory_frame(report: SizingReport) -> pd.DataFrame:
    """Per-GPU memory split (part, bytes_per_gpu) — what the KV pool is left from, for a bar chart."""
    m = report.memory
    rows = [
        ("weights", m.weight_bytes),
        ("activations", m.activation_bytes),
        ("non_torch", m.non_torch_bytes),
        ("cuda_graphs", m.cudagraph_bytes),
        ("kv_pool", max(m.kv_pool_bytes, 0.0)),
        ("reserved_headroom", m.gpu_memory_bytes - m.usable_bytes),
    ]
    return pd.DataFrame(rows, columns=["part", "bytes_per_gpu"])


def latency_frame(report: SizingReport) -> pd.DataFrame:
    """TTFT (batch 1) and TPOT (chosen batch) split into compute/memory/comm/overhead seconds."""
    rows = []
    for name, ph in (("ttft", report.ttft), ("tpot", report.tpot)):
        rows.append({"phase": name, "time_s": float(ph.time_s), "compute_s": float(ph.compute_s),
                     "memory_s": float(ph.memory_s), "comm_s": float(ph.comm_s),
                     "overhead_s": float(ph.overhead_s), "bound": str(ph.bound)})
    return pd.DataFrame(rows)


def _check_raw(df: pd.DataFrame) -> None:
    missing = [c for c in PROVENANCE_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"report: missing provenance column(s) {', '.join(missing)}")


def write_csv(data: SizingReport | Iterable[SizingReport] | pd.DataFrame, path: str | Path) -> Path:
    """Write a sizing report (one report, several, or a :func:`planner.plan.sweep` frame) as CSV."""
    if isinstance(data, SizingReport):
        df = data.to_frame()
    elif isinstance(data, pd.DataFrame):
        df = data
    else:
        df = reports_frame(data)
    _check_raw(df)
    path = Path(path)
    df.to_csv(path, index=False, float_format="%.10g")
    return path


def report_json(data: SizingReport | Iterable[SizingReport]) -> str:
    """JSON text: an object for one report, a list for several (raw SI numbers, null for nan/inf)."""
    if isinstance(data, SizingReport):
        return json.dumps(data.to_dict(), indent=2, allow_nan=False)
    return json.dumps([r.to_dict() for r in data], indent=2, allow_nan=False)


def frame_json(df: pd.DataFrame) -> str:
    """JSON list of row objects from a DataFrame (nan → null)."""
    return df.to_json(orient="records", double_precision=10)


def write_json(data: SizingReport | Iterable[SizingReport] | pd.DataFrame, path: str | Path) -> Path:
    path = Path(path)
    text = frame_json(data) if isinstance(data, pd.DataFrame) else report_json(data)
    path.write_text(text + "\n", encoding="utf-8")
    return path
