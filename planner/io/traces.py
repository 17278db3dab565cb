"""Recorded workloads: a trace file (CSV or JSON lines) as a :class:`planner.serving.workloads.Requests` table.

A row is one request: ``arrival_s`` (seconds from the start), ``prompt_tokens``, ``output_tokens``, and
optionally ``prefix_group``/``prefix_tokens`` (requests of one group share their first prefix tokens).
JSON lines may mix record types (the serve probe's files): only ``"type": "request"`` rows (or rows
without a type) are read.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from planner.io.files import csv_rows, loads_json, read_text
from planner.serving.workloads import MAX_REQUESTS, Requests, make_requests

#: Largest token count of one request and the latest arrival a trace may hold (a typo beyond them, not a trace).
MAX_TRACE_TOKENS = 10**9
MAX_TRACE_ARRIVAL_S = 1e9

TRACE_FIELDS = ("arrival_s", "prompt_tokens", "output_tokens")
TRACE_OPTIONAL = ("prefix_group", "prefix_tokens")


def load_trace(path: str | Path) -> Requests:
    """A trace file: CSV with a header, or JSON lines, with ``arrival_s``, ``prompt_tokens``,
    ``output_tokens`` (and optionally ``prefix_group``, ``prefix_tokens``).  Rows are sorted by arrival.
    The file is read as :mod:`planner.io.files` reads every input (regular, UTF-8 with or without a BOM, at most
    256 MiB, at most 1,000,000 requests); every error names the file and the line."""
    path = Path(path)
    text = read_text(path)
    rows: list[tuple[int, dict]] = []
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        for k, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            rec = loads_json(line, f"{path.name} line {k}")
            if isinstance(rec, dict) and rec.get("type", "request") == "request":
                rows.append((k, rec))
            if len(rows) > MAX_REQUESTS:
                break
    else:
        for k, rec in csv_rows(text, path.name)[1]:
            rows.append((k, rec))
            if len(rows) > MAX_REQUESTS:
                break
    if not rows:
        raise ValueError(f"trace: {path.name} has no request rows")
    if len(rows) > MAX_REQUESTS:
        raise ValueError(f"trace: {path.name} holds more than {MAX_REQUESTS:,} requests (the most one simulation "
                         f"takes); split it")
    cols: dict[str, list] = {f: [] for f in TRACE_FIELDS + TRACE_OPTIONAL}
    for k, rec in rows:
        for f in TRACE_FIELDS:
            if f not in rec or rec[f] in ("", None):
                raise ValueError(f"trace: {path.name} line {k}: missing field '{f}'")
        for f in TRACE_FIELDS + TRACE_OPTIONAL:
            v = rec.get(f, None)
            try:
                x = float(v) if v not in ("", None) and not isinstance(v, bool) else float("nan")
            except (TypeError, ValueError, OverflowError):
                raise ValueError(f"trace: {path.name} line {k}: field '{f}' is not a number "
                                 f"({str(v)[:40]!r})") from None
            if isinstance(v, bool) or (v not in ("", None) and not math.isfinite(x)):
                raise ValueError(f"trace: {path.name} line {k}: field '{f}' must be a finite number, "
                                 f"got {str(v)[:40]!r}")
            if abs(x) > (MAX_TRACE_ARRIVAL_S if f == "arrival_s" else MAX_TRACE_TOKENS):
                raise ValueError(f"trace: {path.name} line {k}: field '{f}' = {str(v)[:40]} is out of range")
            cols[f].append(x)
    a = np.asarray(cols["arrival_s"])
    order = np.argsort(a, kind="stable")
    g = np.nan_to_num(np.asarray(cols["prefix_group"]), nan=-1.0)
    pt = np.nan_to_num(np.asarray(cols["prefix_tokens"]), nan=0.0)
    for f in ("prompt_tokens", "output_tokens", "prefix_group", "prefix_tokens"):
        v = np.nan_to_num(np.asarray(cols[f]))
        if np.any(v != np.rint(v)):
            raise ValueError(f"trace: {path.name}: field '{f}' must hold whole numbers")
    try:
        return make_requests(np.asarray(cols["prompt_tokens"])[order], np.asarray(cols["output_tokens"])[order],
                             a[order] - 0.0, prefix_group=g[order], prefix_tokens=pt[order], name=f"trace:{path.name}")
    except ValueError as err:
        raise ValueError(f"trace: {path.name}: {err}") from None
