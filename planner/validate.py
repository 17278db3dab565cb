"""Predictions against measurements: the engine behind ``planner validate`` and the calibration fit.

A measurement CSV has one row per measured point, columns (catalog ids for model and gpu, SI units,
empty = default):

    model, gpu, num_gpus, tensor_parallel, weight_dtype, kv_cache_dtype, gpu_memory_utilization,
    max_num_batched_tokens, batch_size, prompt_tokens, output_tokens, metric, measured, engine,
    engine_version, source

An empty max_num_batched_tokens takes vLLM serve's default for the GPU (8,192 on GPUs of >= 70 GiB other
than the A100, else 2,048); gpu_memory_utilization defaults to vLLM's (Deployment.default).

Metrics, as measured:
- ``prefill_s``: wall time of batch_size requests of prompt_tokens, submitted together to an idle
  engine, max_tokens=1;
- ``decode_step_s``: mean decode step of batch_size sequences whose contexts grow from prompt_tokens
  to prompt_tokens + output_tokens (predicted at the mean context);
- ``mixed_step_s``: one engine step that prefills a new prompt of ``chunk_tokens`` while ``batch_size``
  sequences decode at about ``prompt_tokens`` of context (what continuous batching runs under load);
- ``kv_cache_tokens``: the engine's KV pool in tokens;
- ``weights_bytes``: the engine's reported weight memory.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from planner.io import catalog
from planner.io.catalog import SpecError
from planner.io.files import csv_rows, read_text
from planner.memory import memory_budget
from planner.phases import decode_step_costs, mixed_step_time, prefill_time_costs
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.quoting import csv_cell
from planner.roofline import hw_coeffs, model_costs
from planner.specs import Deployment, ModelSpec
from planner.startup import startup_check

COLUMNS = [
    "model", "gpu", "num_gpus", "tensor_parallel", "weight_dtype", "kv_cache_dtype", "gpu_memory_utilization",
    "max_num_batched_tokens", "batch_size", "prompt_tokens", "output_tokens", "metric", "measured", "engine",
    "engine_version", "source", "chunk_tokens",
]
METRICS = ("prefill_s", "decode_step_s", "mixed_step_s", "kv_cache_tokens", "weights_bytes")
KV_ALIASES = {"": "bf16", "auto": "bf16", "bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "fp8_e4m3": "fp8"}


@dataclass(frozen=True)
class Measurement:
    """One measured point and what is needed to predict it."""

    model: ModelSpec
    deployment: Deployment
    metric: str
    batch_size: int
    prompt_tokens: int
    output_tokens: int
    measured: float
    engine_version: str = ""
    source: str = ""
    role: str = "validate"
    row: dict | None = None
    chunk_tokens: int = 0  # mixed_step_s: the new prompt prefilled in the step

    @property
    def regime(self) -> str:
        if self.metric == "prefill_s":
            return "prefill_small" if self.batch_size * self.prompt_tokens <= 2048 else "prefill_large"
        if self.metric == "decode_step_s":
            return "decode_small_batch" if self.batch_size <= 16 else "decode_large_batch"
        return "capacity" if self.metric == "kv_cache_tokens" else self.metric


def predict(m: Measurement, profile: CalibrationProfile = IDEAL_PROFILE) -> float:
    """The planner's prediction of one measured point."""
    gpu = catalog.gpu(m.deployment.gpu_id)
    d = m.deployment
    if m.metric == "kv_cache_tokens":
        return float(memory_budget(m.model, gpu, d, profile).kv_capacity_tokens)
    if m.metric == "weights_bytes":
        return float(memory_budget(m.model, gpu, d, profile).weight_bytes * d.gpus_per_replica)
    if m.metric not in METRICS:
        raise SpecError(f"metric: unknown metric '{m.metric}'; known: {', '.join(METRICS)}")
    return float(_latency(m.model, d, profile, m.metric, m.batch_size, m.prompt_tokens, m.output_tokens,
                          m.chunk_tokens))


def _latency(model: ModelSpec, d: Deployment, profile: CalibrationProfile, metric: str, batch, prompt, output, chunk):
    """A latency metric of ``model`` under ``d``, elementwise over arrays of batch/prompt/output/chunk tokens."""
    mc = model_costs(model, d)
    hw = hw_coeffs(catalog.gpu(d.gpu_id), d.weight_dtype, profile, model)
    if metric == "prefill_s":
        return prefill_time_costs(mc, hw, prompt, batch, d.max_num_batched_tokens).time_s
    if metric == "decode_step_s":
        return decode_step_costs(mc, hw, batch, np.asarray(prompt) + np.asarray(output) / 2.0).time_s
    return mixed_step_time(mc, hw, batch, prompt, chunk).total_s


def predict_many(points: list[Measurement], profile: CalibrationProfile = IDEAL_PROFILE) -> np.ndarray:
    """:func:`predict` of every point (equal to it up to rounding), the latency points of one model,
    deployment and metric in one array call (the calibration fit predicts its points thousands of times)."""
    out = np.empty(len(points))
    groups: dict[tuple, list[int]] = {}
    for i, m in enumerate(points):
        if m.metric in METRICS[:3]:
            groups.setdefault((m.model.id, m.deployment, m.metric), []).append(i)
        else:
            out[i] = predict(m, profile)
    for (_, d, metric), idx in groups.items():
        pts = [points[i] for i in idx]
        cols = [np.array([getattr(p, k) for p in pts], dtype=float)
                for k in ("batch_size", "prompt_tokens", "output_tokens", "chunk_tokens")]
        out[idx] = _latency(pts[0].model, d, profile, metric, *cols)
    return out


def error_pct(predicted: float, measured: float) -> float:
    """Signed error of a prediction, percent of the measurement."""
    return 100.0 * (predicted - measured) / measured


def summarize(errors: list[float]) -> dict:
    a = np.abs(np.asarray(errors, dtype=float))
    if a.size == 0:
        return {"n": 0, "median_abs_error_pct": 0.0, "p90_abs_error_pct": 0.0, "median_signed_error_pct": 0.0}
    return {"n": int(a.size), "median_abs_error_pct": round(float(np.median(a)), 3),
            "p90_abs_error_pct": round(float(np.percentile(a, 90)), 3),
            "median_signed_error_pct": round(float(np.median(errors)), 3)}


# --------------------------------------------------------------------------------------- CSV


#: Largest value of an integer column (tokens, batch, GPUs): beyond it a value is a typo, not a measurement.
MAX_INT_FIELD = 10**9


def _num(row: dict, key: str, cast, default, line: int):
    v = row.get(key)
    v = (v if isinstance(v, str) else "").strip()
    if v == "":
        return default
    try:
        x = float(v)
    except ValueError:
        raise SpecError(f"line {line}: {key}: not a number: {v[:40]!r}") from None
    if not math.isfinite(x) or x < 0:
        raise SpecError(f"line {line}: {key}: must be a finite number >= 0, got {v[:40]!r}")
    if cast is int:
        if not x.is_integer():
            raise SpecError(f"line {line}: {key}: must be a whole number, got {v[:40]!r}")
        if x > MAX_INT_FIELD:
            raise SpecError(f"line {line}: {key}: {v[:40]} is beyond any real deployment (at most {MAX_INT_FIELD:,})")
        return int(x)
    return cast(x)


#: The shortest time a measurement may hold: 100 ns, below any GPU kernel launch (about 2-5 µs).
MIN_MEASURED_S = 1e-7


def measurement_from_row(row: dict, line: int = 0) -> Measurement:
    """Parse one CSV row (a dict of strings); SpecError names the line and the column."""
    row = {k: v for k, v in row.items() if isinstance(k, str)}  # cells beyond the header: csv's None key
    metric = (row.get("metric") or "").strip()
    if metric not in METRICS:
        raise SpecError(f"line {line}: metric: {metric!r} is not one of {', '.join(METRICS)}")
    try:
        model = catalog.model((row.get("model") or "").strip())
        gpu = catalog.gpu((row.get("gpu") or "").strip())
    except SpecError as err:
        raise SpecError(f"line {line}: {err}") from None
    kv = KV_ALIASES.get((row.get("kv_cache_dtype") or "").strip())
    if kv is None:
        raise SpecError(f"line {line}: kv_cache_dtype: unknown {row.get('kv_cache_dtype')!r}")
    tp = _num(row, "tensor_parallel", int, 1, line)
    try:
        dep = Deployment.for_gpu(
            gpu, num_gpus=_num(row, "num_gpus", int, tp, line), tensor_parallel=tp,
            weight_dtype=(row.get("weight_dtype") or "").strip() or "bf16", kv_cache_dtype=kv,
            gpu_memory_utilization=_num(row, "gpu_memory_utilization", float,
                                        Deployment.default("gpu_memory_utilization"), line),
            **({"max_num_batched_tokens": mnbt}
               if (mnbt := _num(row, "max_num_batched_tokens", int, None, line)) else {}),
        )
    except Exception as err:  # pydantic ValidationError
        from pydantic import ValidationError

        if isinstance(err, ValidationError):
            raise SpecError(catalog.format_validation_error(err, f"line {line}")) from None
        raise
    measured = _num(row, "measured", float, None, line)
    if not measured or measured < 0:
        raise SpecError(f"line {line}: measured: must be a number > 0")
    floor, unit = (MIN_MEASURED_S, "s") if metric.endswith("_s") else (1.0, "tokens or bytes")
    if measured < floor:  # 1e-320 s would make every error percentage infinite
        raise SpecError(f"line {line}: measured: {measured:.3g} is below {floor:g} {unit}; no real {metric} is")
    b = _num(row, "batch_size", int, 1, line)
    p = _num(row, "prompt_tokens", int, 0, line)
    o = _num(row, "output_tokens", int, 0, line)
    if metric in ("prefill_s", "decode_step_s", "mixed_step_s") and (b < (metric != "mixed_step_s") or p <= 0):
        raise SpecError(f"line {line}: batch_size (>= 0 for mixed_step_s: the new prompt's step alone) and "
                        f"prompt_tokens must be > 0 for {metric}")
    c = _num(row, "chunk_tokens", int, 0, line)
    if metric == "mixed_step_s" and c <= 0:
        raise SpecError(f"line {line}: chunk_tokens must be > 0 for mixed_step_s")
    # the one start-up rule: a layout vLLM refuses, or a context beyond the model, was never measured.  Memory
    # problems are not refused: the engine did start, and the prediction's error says the model is off.
    for problem in startup_check(model, gpu, dep, p + o if b else 0).problems:
        if problem.kind != "memory":
            raise SpecError(f"line {line}: {problem.field}: {problem.reason}")
    return Measurement(model, dep, metric, b, p, o, measured, (row.get("engine_version") or "").strip(),
                       (row.get("source") or "").strip(), "validate", dict(row), c)


def read_measurements(path: str | Path) -> list[Measurement]:
    """Every row of a measurement CSV (:mod:`planner.io.files`: a regular UTF-8 file, BOM accepted, at most
    256 MiB); SpecError naming the file, the line and the column of the first bad one."""
    path = Path(path)
    header, rows = csv_rows(read_text(path), path.name)
    missing = [c for c in ("model", "gpu", "metric", "measured") if c not in header]
    if missing:
        raise SpecError(f"{path.name}: missing column(s): {', '.join(missing)}")
    out = []
    for line, row in rows:
        try:
            out.append(measurement_from_row(row, line))
        except SpecError as err:
            raise SpecError(f"{path.name} {err}") from None
    if not out:
        raise SpecError(f"{path.name}: no measurement rows under the header")
    return out


def write_measurements(rows: list[dict], path: str | Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: csv_cell(v) for k, v in r.items()})


ProfileChooser = Callable[[Measurement], CalibrationProfile]


def choose_profile(spec: str, field: str = "profile") -> ProfileChooser:
    """:func:`planner.io.catalog.resolve_profile` per row: 'auto' -> the committed profile for each row's GPU
    and engine version (another GPU's, transferred, where none exists; ideal where no GPU has one);
    'none' -> ideal roofline; anything else -> a profile YAML path (read once)."""
    if spec == "auto":
        return lambda m: catalog.resolve_profile("auto", m.deployment.gpu_id,
                                                 engine_version=m.engine_version or None)[0]
    prof, _ = catalog.resolve_profile(spec, "", field=field)  # the GPU matters to 'auto' only
    return lambda m: prof


def validate(measurements: list[Measurement], chooser: ProfileChooser) -> dict:
    """Each row with predicted value and signed % error, and per metric n, median and p90 |error|."""
    rows, by_metric = [], {}
    for m in measurements:
        prof = chooser(m)
        pred = predict(m, prof)
        err = error_pct(pred, m.measured)
        row = {c: (m.row or {}).get(c, "") for c in COLUMNS}
        row.update(predicted=pred, error_pct=round(err, 3), calibration_mode=prof.mode)
        rows.append(row)
        by_metric.setdefault(m.metric, []).append(err)
    return {"rows": rows, "summary": {k: summarize(v) for k, v in by_metric.items()}}
