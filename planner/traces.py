"""Recorded workloads: a trace file (CSV or JSON lines) as a :class:`planner.workloads.Requests` table.

A row is one request: ``arrival_s`` (seconds from the start), ``prompt_tokens``, ``output_tokens``, and
optionally ``prefix_group``/``prefix_tokens`` (requests of one group share their first prefix tokens).
JSON lines may mix record types (the serve probe's files): only ``"type": "request"`` rows (or rows
without a type) are read.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from planner.workloads import Requests, make_requests

TRACE_FIELDS = ("arrival_s", "prompt_tokens", "output_tokens")
TRACE_OPTIONAL = ("prefix_group", "prefix_tokens")


def load_trace(path: str | Path) -> Requests:
    """A trace file: CSV with a header, or JSON lines, with ``arrival_s``, ``prompt_tokens``,
    ``output_tokens`` (and optionally ``prefix_group``, ``prefix_tokens``).  Rows are sorted by arrival."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ValueError(f"trace: cannot read {path} ({err.strerror})") from None
    rows: list[dict] = []
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        for k, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"trace: {path.name} line {k}: not JSON ({err.msg})") from None
            if isinstance(rec, dict) and rec.get("type", "request") == "request":
                rows.append(rec)
    else:
        rows = list(csv.DictReader(text.splitlines()))
    if not rows:
        raise ValueError(f"trace: {path.name} has no request rows")
    cols: dict[str, list] = {f: [] for f in TRACE_FIELDS + TRACE_OPTIONAL}
    for k, rec in enumerate(rows, 1):
        for f in TRACE_FIELDS:
            if f not in rec or rec[f] in ("", None):
                raise ValueError(f"trace: {path.name} row {k}: missing field '{f}'")
        for f in TRACE_FIELDS + TRACE_OPTIONAL:
            v = rec.get(f, None)
            try:
                cols[f].append(float(v) if v not in ("", None) else float("nan"))
            except (TypeError, ValueError):
                raise ValueError(f"trace: {path.name} row {k}: field '{f}' is not a number ({v!r})") from None
    a = np.asarray(cols["arrival_s"])
    order = np.argsort(a, kind="stable")
    g = np.nan_to_num(np.asarray(cols["prefix_group"]), nan=-1.0)
    pt = np.nan_to_num(np.asarray(cols["prefix_tokens"]), nan=0.0)
    for f in ("prompt_tokens", "output_tokens"):
        v = np.asarray(cols[f])
        if np.any(v != np.rint(v)):
            raise ValueError(f"trace: {path.name}: field '{f}' must hold whole numbers")
    return make_requests(np.asarray(cols["prompt_tokens"])[order], np.asarray(cols["output_tokens"])[order],
                         a[order] - 0.0, prefix_group=g[order], prefix_tokens=pt[order], name=f"trace:{path.name}")
