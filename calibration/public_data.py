"""Reader of calibration/data/public/public_measurements.csv (see its README for the columns): every row
validated, or a :class:`PublicDataError` naming the file, line and column of the first bad field; and the
writer of comparison.csv (:func:`calibration.public_check.compare`'s rows)."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, fields
from pathlib import Path

from planner.io import catalog
from planner.dtypes import WEIGHT_BITS

CSV_PATH = Path(__file__).resolve().parent / "data" / "public" / "public_measurements.csv"
OUT_PATH = CSV_PATH.parent / "comparison.csv"

SCENARIOS = ("offline_throughput", "fixed_batch", "fixed_concurrency", "request_rate", "single_request_latency")
REGIME = {"decode_tokens_per_s_per_seq": "decode", "tpot_s": "decode", "itl_s": "decode", "e2e_latency_s": "decode",
          "ttft_s": "prefill", "output_tokens_per_s": "throughput", "output_tokens_per_s_per_gpu": "throughput",
          "total_tokens_per_s": "throughput", "requests_per_s": "throughput"}
STATISTICS = ("value", "mean", "median", "p99", "")
DTYPES = (*WEIGHT_BITS, "nvfp4", "")
KV_DTYPES = ("bf16", "fp16", "fp8", "")


class PublicDataError(ValueError):
    """The public CSV is unreadable; the message names the file, line and column."""


@dataclass(frozen=True)
class PublicRow:
    """One published measurement (one data line of public_measurements.csv; ``line`` counts the header)."""

    line: int
    gpu: str
    engine: str
    engine_version: str
    model: str
    weight_dtype: str
    kv_cache_dtype: str
    tensor_parallel: int | None
    num_gpus: int
    scenario: str
    batch_size_or_concurrency: int | None
    request_rate_per_s: float | None
    input_tokens: int | None
    output_tokens: int | None
    metric: str
    statistic: str
    value: float
    source_url: str
    source_title: str
    source_date: str
    note: str


COLUMNS = tuple(f.name for f in fields(PublicRow) if f.name != "line")
INTS = ("tensor_parallel", "num_gpus", "batch_size_or_concurrency", "input_tokens", "output_tokens")
FLOATS = ("request_rate_per_s", "value")
REQUIRED = ("gpu", "engine", "model", "num_gpus", "scenario", "metric", "value", "source_url")


def read_public(path: str | Path = CSV_PATH) -> list[PublicRow]:
    """Every row, validated; a :class:`PublicDataError` names the line and column of the first bad field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise PublicDataError(f"{path}: cannot read ({err.strerror})") from None
    reader = csv.DictReader(text.splitlines(keepends=True))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise PublicDataError(f"{path.name} line 1: missing column(s) {', '.join(missing)}")
    rows, start = [], 2
    for rec in reader:
        rows.append(_parse(rec, path.name, start))
        start = reader.line_num + 1
    if not rows:
        raise PublicDataError(f"{path.name}: no data rows")
    return rows


def _parse(rec: dict, name: str, line: int) -> PublicRow:
    def bad(col: str, why: str) -> PublicDataError:
        return PublicDataError(f"{name} line {line}, column '{col}': {why}")

    if None in rec:
        raise bad(COLUMNS[-1], f"{len(rec[None])} field(s) more than the header")
    out: dict = {"line": line}
    for col in COLUMNS:
        v = (rec.get(col) or "").strip()
        if col in REQUIRED and not v:
            raise bad(col, "empty")
        if col in INTS or col in FLOATS:
            if not v:
                out[col] = None
                continue
            try:
                x = float(v)
            except ValueError:
                raise bad(col, f"not a number ({v!r})") from None
            if not math.isfinite(x) or x < 0 or (col in INTS and x != int(x)):
                raise bad(col, f"expected a {'whole ' if col in INTS else ''}number >= 0, got {v!r}")
            if col in ("num_gpus", "tensor_parallel", "value") and x <= 0:
                raise bad(col, f"must be > 0, got {v!r}")
            out[col] = int(x) if col in INTS else x
        else:
            out[col] = v
    for col, allowed in (("scenario", SCENARIOS), ("metric", tuple(REGIME)), ("statistic", STATISTICS),
                         ("weight_dtype", DTYPES), ("kv_cache_dtype", KV_DTYPES)):
        if out[col] not in allowed:
            raise bad(col, f"unknown {col} {out[col]!r}; expected one of {', '.join(a for a in allowed if a)}")
    if out["gpu"] not in catalog.gpus():
        raise bad("gpu", f"unknown GPU id {out['gpu']!r}; known: {', '.join(sorted(catalog.gpus()))}")
    if out["tensor_parallel"] and out["tensor_parallel"] > out["num_gpus"]:
        raise bad("tensor_parallel", f"{out['tensor_parallel']} exceeds num_gpus {out['num_gpus']}")
    return PublicRow(**out)


OUT_COLUMNS = ("line", "gpu", "engine", "engine_version", "model", "catalog_model", "weight_dtype", "kv_cache_dtype",
               "tensor_parallel", "num_gpus", "scenario", "batch_size_or_concurrency", "request_rate_per_s",
               "input_tokens", "output_tokens", "metric", "statistic", "family", "regime", "measured", "predicted",
               "error_pct", "comparable", "not_comparable_reason", "profile_mode", "assumptions", "source_url",
               "source_date")


def write_comparison(comparison_rows: list, path: str | Path = OUT_PATH) -> Path:
    """comparison.csv: one line per public row (the public row's line number in ``line``)."""
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(OUT_COLUMNS)
        for c in comparison_rows:
            r = c.row
            extra = {"catalog_model": c.catalog_model, "family": c.family, "regime": c.regime, "measured": r.value,
                     "predicted": "" if c.predicted is None else f"{c.predicted:.6g}",
                     "error_pct": "" if c.error_pct is None else f"{c.error_pct:+.1f}",
                     "comparable": "yes" if c.comparable else "no", "not_comparable_reason": c.reason,
                     "profile_mode": c.profile_mode, "assumptions": c.assumptions}
            w.writerow(["" if (v := extra.get(k, getattr(r, k, ""))) is None else v for k in OUT_COLUMNS])
    return path
