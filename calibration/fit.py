"""The fit: raw probe records + catalog specs -> a CalibrationProfile with residuals and error bands.

Pure numpy/scipy (no torch, no vllm): CI runs it on the committed real records.

What is fitted, per GPU and engine version (not per model), family by family (:mod:`calibration.families`):
- dense 16-bit GEMMs, attention and the CPU-side overheads (per step, per scheduled sequence, per layer
  outside CUDA graphs, per request) on the dense engines;
- the fp8 KV cache's bandwidth efficiency; each quantised weight format's GEMM coefficients; the fused-MoE
  GEMM and its per-layer routing cost; vLLM's custom all-reduce under tensor parallel — each on its own
  engines with everything before it held fixed;
- memory budget: vLLM's non-torch bytes, the peak-activation bytes per batched token per unit of layer
  width (dense and MoE separately), the weight-bytes factor, and the device memory CUDA reports;
- how much the per-step and per-request overheads vary between engine starts;
- the error band of every family and regime, from held-out engines where there are some.

Records are not trusted (:func:`points_from_records`): a probe whose ``measured`` is not a finite positive
number (NaN, 0, negative, inf, ``true``, a string), whose batch/prompt/output are not whole numbers, whose
model, GPU, metric or dtypes are unknown, or that repeats an earlier record exactly is left out of the fit and
listed with its file and line in the profile's ``excluded_records`` (and the refit's output); a file with more
than :data:`MAX_BAD_LINE_FRACTION` unreadable lines is refused rather than fitted on what is left.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import numpy as np
import yaml

from calibration.families import error_bands, family_of, fit_families, nccl_from_microbench, overhead_spread, regime_of
from calibration.linear_kernel_fit import fit_linear_kernel
from calibration.moe_kernel_fit import fit_moe_kernel
from calibration.probes import PROBE_MAX_NUM_BATCHED_TOKENS, PROBE_MAX_NUM_SEQS
from calibration.records import SAFE_ID, SAFE_VERSION, read_records, safe_name_part, sha256_file
from calibration.variants import VARIANTS, probe_model
from planner.dtypes import WEIGHT_BITS
from planner.io import catalog
from planner.io.jsonl import where
from planner.kernel_families import is_hybrid_swa
from planner.profile import CalibrationProfile, Residuals
from planner.specs import Deployment
from planner.units import cdiv
from planner.validate import KV_ALIASES, METRICS, error_pct, predict, summarize
from planner.validate import Measurement as Point

#: A raw file with more unreadable lines than this fraction (beyond one torn last line) is refused.
MAX_BAD_LINE_FRACTION = 0.05
#: Largest whole number a record's batch/prompt/output/TP may hold.
MAX_RECORD_INT = 10**9


def _positive(x) -> bool:
    """A real, finite, positive number (not a bool, not a string)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _whole(rec: dict, key: str, default: int | None = None, lo: int = 0) -> int:
    v = rec.get(key, default) if default is not None else rec.get(key)
    if v is None and default is not None:
        v = default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or int(v) != v \
            or not lo <= v <= MAX_RECORD_INT:
        raise ValueError(f"{key}: expected a whole number >= {lo}, got {str(v)[:40]!r}")
    return int(v)


def check_record(r: dict) -> None:
    """Raise ValueError (naming the field) unless a probe or engine_log record can be a measurement: a known
    model, GPU and dtypes, whole numbers where counts go, and a finite positive ``measured`` (a real number,
    not a bool) for a probe."""
    for key, known in (("model", {*catalog.models(), *VARIANTS}), ("gpu", catalog.gpus())):
        if not isinstance(r.get(key), str) or r[key] not in known:
            raise ValueError(f"{key}: unknown or missing {str(r.get(key))[:40]!r}")
    if not isinstance(r.get("weight_dtype") or "bf16", str) or (r.get("weight_dtype") or "bf16") not in WEIGHT_BITS:
        raise ValueError(f"weight_dtype: unknown {str(r.get('weight_dtype'))[:40]!r}")
    if not isinstance(r.get("kv_cache_dtype", "auto"), str) or r.get("kv_cache_dtype", "auto") not in KV_ALIASES:
        raise ValueError(f"kv_cache_dtype: unknown {str(r.get('kv_cache_dtype'))[:40]!r}")
    if not isinstance(r.get("role", "fit"), str):
        raise ValueError(f"role: expected a string, got {str(r.get('role'))[:40]!r}")
    _whole(r, "tensor_parallel", 1, lo=1)
    if r.get("type") == "engine_log":
        for key in ("kv_cache_tokens", "weights_bytes"):
            if r.get(key) is not None and not _positive(r[key]):
                raise ValueError(f"{key}: must be a finite positive number, got {str(r[key])[:40]!r}")
        return
    if r.get("metric") not in METRICS[:3]:
        raise ValueError(f"metric: {str(r.get('metric'))[:40]!r} is not one of {', '.join(METRICS[:3])}")
    if not _positive(r.get("measured")):
        raise ValueError(f"measured: must be a finite positive number of seconds, got {str(r.get('measured'))[:40]!r}")
    _whole(r, "batch_size", lo=1)
    _whole(r, "prompt_tokens", lo=1)
    _whole(r, "output_tokens", lo=0)
    _whole(r, "chunk_tokens", 0)


def _deployment(gpu_id: str, rec: dict, eng: dict | None) -> Deployment:
    eng = eng or {}
    tp = int(rec.get("tensor_parallel", 1) or 1)

    def engine_value(key, default, ok):  # a damaged engine record falls back to the probe plan's defaults
        v = eng.get(key, default)
        return v if ok(v) else default

    return Deployment.for_gpu(  # check_record has made sure the GPU is in the catalog
        catalog.gpu(gpu_id), num_gpus=tp, tensor_parallel=tp, weight_dtype=rec.get("weight_dtype") or "bf16",
        kv_cache_dtype=KV_ALIASES.get(rec.get("kv_cache_dtype", "auto"), "bf16"),
        gpu_memory_utilization=engine_value("gpu_memory_utilization", Deployment.default("gpu_memory_utilization"),
                                            lambda v: _positive(v) and v <= 1),
        max_num_batched_tokens=engine_value("max_num_batched_tokens", PROBE_MAX_NUM_BATCHED_TOKENS,
                                            lambda v: type(v) is int and v > 0),
        max_num_seqs=engine_value("max_num_seqs", PROBE_MAX_NUM_SEQS, lambda v: type(v) is int and v > 0),
    )


def _engine_key(r: dict) -> tuple:
    tp = r.get("tensor_parallel", 1)
    return (str(r.get("model")), str(r.get("kv_cache_dtype", "auto")), str(r.get("role", "fit")),
            tp if type(tp) is int else 1, str(r.get("weight_dtype") or "bf16"))


def mixed_step_value(r: dict) -> float | None:
    """The median of a mixed-step probe's samples that are at least its decode-only period (a step that also
    prefills cannot be shorter than one that only decodes; shorter samples were misattributed by the probe's
    timestamp matching on single-process engines) — None when no sample survives."""
    period = r.get("decode_period_median_s") or 0.0
    period = period if _positive(period) else 0.0
    samples = r.get("mixed_samples_s", [])
    valid = sorted(x for x in (samples if isinstance(samples, list) else []) if _positive(x) and x >= 0.95 * period)
    return valid[len(valid) // 2] if valid else None


def preempted(r: dict, eng: dict | None, model) -> str | None:
    """Why a decode probe did not time decode steps: its sequences need more KV blocks than the engine has (vLLM
    preempts and recomputes them; Mistral-7B-l64's batch 256 at 2,048 tokens: 216 ms a step, 27 ms at 512)."""
    blocks, size = (eng or {}).get("num_gpu_blocks"), (eng or {}).get("block_size")
    size = size if type(size) is int and size > 0 else 16  # vLLM's default where the record lacks it (or damaged)
    if r.get("metric") != "decode_step_s" or not _positive(blocks) or is_hybrid_swa(model):
        return None  # a sliding-window hybrid's blocks are counted per KV group (its window needs fewer)
    need = int(r["batch_size"]) * cdiv(int(r["prompt_tokens"]) + int(r["output_tokens"]), size)
    if need <= blocks:
        return None
    return f"batch {r['batch_size']} needs {need} KV blocks, the engine has {blocks}: preempted"


def points_from_records(records: list[dict], source: str = "", role: str | None = None,
                        excluded: list[str] | None = None) -> list[Point]:
    """Probe and engine records -> measurements (failed or skipped probes, and mixed-step probes with no
    valid sample, are left out).  ``role`` overrides the records' own role (e.g. a campaign's engine that is
    held out of the fit).  A record :func:`check_record` refuses, or an exact repeat of an earlier one, is
    left out too and, with ``excluded``, listed there as ``'file:line: reason'``."""
    engines = {_engine_key(r): r for r in records if r.get("type") == "engine"}
    version = next((r.get("vllm_version", "") for r in records if r.get("type") in ("env", "engine")), "")
    version = version if isinstance(version, str) else ""
    out, seen = [], {}
    for r in records:
        kind = r.get("type")
        if not ((kind == "probe" and r.get("status") == "ok")
                or (kind == "engine_log" and r.get("returncode") == 0 and r.get("kv_cache_tokens") is not None)):
            continue
        here = where(r) or source or "record"
        text = json.dumps(r, sort_keys=True, default=str)
        if text in seen:  # the same record twice (a file concatenated onto itself) must not count twice
            if excluded is not None:
                excluded.append(f"{here}: duplicate of {seen[text]}")
            continue
        seen[text] = here
        try:
            check_record(r)
            dep = _deployment(r["gpu"], r, engines.get(_engine_key(r)))
        except ValueError as err:  # pydantic's ValidationError is a ValueError too
            if excluded is not None:
                excluded.append(f"{here}: {catalog.format_validation_error(err) if hasattr(err, 'errors') else err}")
            continue
        who = role or r.get("role", "fit")
        if kind == "probe":
            model = probe_model(r["model"])
            if why := preempted(r, engines.get(_engine_key(r)), model):
                if excluded is not None:
                    excluded.append(f"{here}: {why}")
                continue
            measured, chunk, prompt = float(r["measured"]), _whole(r, "chunk_tokens", 0), int(r["prompt_tokens"])
            if r["metric"] == "mixed_step_s":
                measured = mixed_step_value(r)
                try:
                    prompt = _whole(r, "decode_contexts_tokens", prompt, lo=1)
                except ValueError as err:
                    measured = None
                    if excluded is not None:
                        excluded.append(f"{here}: {err}")
                if measured is None:
                    continue
            out.append(Point(model, dep, r["metric"], int(r["batch_size"]), prompt,
                             int(r["output_tokens"]), measured, version, source, who, None, chunk))
        else:
            m = probe_model(r["model"])
            out.append(Point(m, dep, "kv_cache_tokens", 0, 0, 0, float(r["kv_cache_tokens"]), version, source, who))
            if r.get("weights_bytes"):
                out.append(Point(m, dep, "weights_bytes", 0, 0, 0, float(r["weights_bytes"]), version, source, who))
    return out


def measurement_rows(points: list[Point]) -> list[dict]:
    """Measurements as rows of the ``planner validate`` CSV."""
    rows = []
    for p in points:
        d = p.deployment
        rows.append({
            "model": p.model.id, "gpu": d.gpu_id, "num_gpus": d.num_gpus, "tensor_parallel": d.tensor_parallel,
            "weight_dtype": d.weight_dtype, "kv_cache_dtype": d.kv_cache_dtype,
            "gpu_memory_utilization": d.gpu_memory_utilization, "max_num_batched_tokens": d.max_num_batched_tokens,
            "batch_size": p.batch_size, "prompt_tokens": p.prompt_tokens, "output_tokens": p.output_tokens,
            "metric": p.metric, "measured": repr(p.measured), "engine": "vllm", "engine_version": p.engine_version,
            "source": p.source, "chunk_tokens": p.chunk_tokens or "",
        })
    return rows


def residuals_by(points: list[Point], profile: CalibrationProfile, key) -> dict[str, Residuals]:
    groups: dict[str, list[float]] = {}
    for p in points:
        groups.setdefault(key(p), []).append(error_pct(predict(p, profile), p.measured))
    return {k: Residuals(**summarize(v)) for k, v in sorted(groups.items())}


# ------------------------------------------------------------------------------------- fitting


def _memory_log(r: dict) -> bool:
    """An engine_log record the memory fit can use: checked (:func:`check_record`) with positive numbers."""
    try:
        check_record(r)
    except ValueError:
        return False
    return (_positive(r.get("peak_activation_bytes")) and _positive(r.get("weights_bytes"))
            and (r.get("non_torch_bytes") is None or _positive(r["non_torch_bytes"]) or r["non_torch_bytes"] == 0))


def fit_memory_terms(records: list[dict]) -> dict:
    """vLLM's start-up accounting from the fit engines' logs (bf16 KV engines of role 'fit')."""
    logs = [r for r in records if r.get("type") == "engine_log" and r.get("returncode") == 0
            and r.get("role", "fit") == "fit" and _memory_log(r)
            and (r.get("weight_dtype") or "bf16") == "bf16" and int(r.get("tensor_parallel", 1) or 1) == 1
            and probe_model(r["model"]).moe is None]
    if not logs:
        return {}
    from planner.memory import rope_cache_bytes, weight_bytes

    non_torch, act_coef, wfac, total = [], [], [], []
    for r in logs:
        m = probe_model(r["model"])
        eng = next((e for e in records if e.get("type") == "engine" and e.get("model") == r["model"]
                    and e.get("role", "fit") == r.get("role", "fit")), {})
        mnbt = eng.get("max_num_batched_tokens", PROBE_MAX_NUM_BATCHED_TOKENS)
        mnbt = mnbt if type(mnbt) is int and mnbt > 0 else PROBE_MAX_NUM_BATCHED_TOKENS
        ffn = m.intermediate_size
        if m.moe is not None:
            e = m.moe
            ffn = max(ffn, e.experts_per_token * e.expert_intermediate_size
                      + e.num_shared_experts * e.shared_expert_intermediate_size)
        width = 3 * ffn + 6 * m.hidden_size
        act_coef.append(r["peak_activation_bytes"] / (mnbt * width))
        non_torch.append(r.get("non_torch_bytes") or 0.0)
        wfac.append((r["weights_bytes"] - rope_cache_bytes(m)) / weight_bytes(m, "bf16").total_bytes)
        if _positive(r.get("total_memory_bytes")):
            total.append(r["total_memory_bytes"])
    env = [r for r in records if r.get("type") == "env" and _positive(r.get("total_memory_bytes"))]
    device_total = env[0]["total_memory_bytes"] if env else (float(np.median(total)) if total else None)
    gpu_id = env[0].get("gpu") if env else None
    fraction = 1.0
    if device_total and gpu_id in catalog.gpus():
        fraction = min(1.0, float(device_total) / catalog.gpu(gpu_id).memory_bytes)
    return {
        "device_memory_fraction": fraction,
        "non_torch_bytes": float(np.median(non_torch)),
        "activation_bytes_per_batched_token_per_width": float(np.median(act_coef)),
        "weight_bytes_factor": float(np.median(wfac)),
        "device_memory_bytes": float(device_total) if device_total else None,
        "cudagraph_bytes": 0.0,  # vLLM 0.26's V2 runner captures graphs after sizing the KV pool
    }


def fit_profile(records: list[dict], *, source: str = "", points: list[Point] | None = None,
                extra_validation: list[Point] = (), excluded: list[str] = ()) -> tuple[CalibrationProfile, list[Point]]:
    """Fit on the 'fit'-role points family by family; residuals on them; validation and error bands on the
    held-out points (``points`` defaults to every record's; ``extra_validation`` adds held-out points from
    elsewhere, e.g. serving runs).  The records left out (:func:`points_from_records`, and ``excluded``: lines
    the caller already left out) are the profile's ``excluded_records``."""
    excluded = list(excluded)
    points = points_from_records(records, source, excluded=excluded) if points is None else points
    fit_pts = [p for p in points if p.role == "fit"]
    val_pts = [p for p in points if p.role != "fit"] + list(extra_validation)
    env = next((r for r in records if r.get("type") == "env"), {})
    micro = next((r for r in records if r.get("type") == "microbench"), {})
    gpu_id = env.get("gpu") or (fit_pts[0].deployment.gpu_id if fit_pts else None)
    base = {
        "mode": "calibrated",
        "gpu_id": gpu_id,
        "engine": "vllm",
        "engine_version": env.get("vllm_version", ""),
        "created": env.get("date", dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")),
        "models_used": sorted({p.model.id for p in fit_pts}),
        "measured_peak_flops_per_s": micro.get("peak_flops_per_s", {}),
        "measured_hbm_bandwidth_bytes_per_s": micro.get("hbm_bandwidth_bytes_per_s"),
        "command": env.get("command", ""),
        "excluded_records": excluded,
    }
    base.update({k: v for k, v in fit_memory_terms(records).items() if v is not None})
    if gpu_id in catalog.gpus():  # the fused-MoE kernel law first: the MoE stages are fitted as shares of it
        base["moe_kernel"] = fit_moe_kernel(records, catalog.gpu(gpu_id))
    base["linear_kernel"] = fit_linear_kernel(records, gpu_id)  # the fp8 stage's weight streaming rides on its knots
    link = catalog.gpu(gpu_id).interconnect_bandwidth_bytes_per_s if gpu_id in catalog.gpus() else 1.0
    lat_pts = [p for p in fit_pts if p.metric in ("prefill_s", "decode_step_s", "mixed_step_s")]
    if not lat_pts:
        raise ValueError("no successful prefill or decode probes to fit")
    try:
        start = CalibrationProfile(**base)
    except ValueError as err:  # a damaged env or microbench record: one line naming the field
        raise ValueError(catalog.format_validation_error(err, "env/microbench record") if hasattr(err, "errors")
                         else str(err)) from None
    prof = fit_families(lat_pts, start, nccl_from_microbench(records, link))
    step_spread, request_spread = overhead_spread(points, prof)
    prof = prof.model_copy(update={**residual_fields(fit_pts, val_pts, prof), "step_overhead_spread": step_spread,
                                   "request_overhead_spread": request_spread})
    return prof, points


def with_residuals(profile: CalibrationProfile, fit_pts: list[Point], val_pts: list[Point]) -> CalibrationProfile:
    """``profile`` with :func:`residual_fields` recomputed on these points, merged into the ones it has (a term
    replaced after the fit: the served eager floors of calibration/serve_floor.py)."""
    fields = residual_fields(fit_pts, val_pts, profile)
    return profile.model_copy(update={k: {**getattr(profile, k), **v} for k, v in fields.items()})


def residual_fields(fit_pts: list[Point], val_pts: list[Point], profile: CalibrationProfile) -> dict:
    """A profile's ``residuals`` (the fit points by family/regime), ``validation`` (the held-out points by
    family/model/KV dtype/regime) and ``error_bands`` under ``profile``."""
    return {"residuals": residuals_by(fit_pts, profile, lambda p: f"{family_of(p)}/{regime_of(p)}"),
            "validation": residuals_by(val_pts, profile, lambda p: f"{family_of(p)}/{p.model.id}/"
                                       f"{p.deployment.kv_cache_dtype}/{regime_of(p)}") if val_pts else {},
            "error_bands": error_bands(fit_pts, val_pts, profile)}


def _rounded(v):
    """Floats to 12 significant digits, at any depth (the profile's nested coefficient sections too)."""
    if isinstance(v, float):
        return float(f"{v:.12g}")
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_rounded(x) for x in v]
    return v


def profile_to_yaml(profile: CalibrationProfile) -> str:
    data = _rounded(profile.model_dump(mode="json"))
    header = (
        "# Calibration profile fitted by calibration/fit.py from the raw records named in raw_data.\n"
        "# Efficiencies are fractions of the datasheet roofs in hardware/<gpu_id>.yaml; times in seconds;\n"
        "# memory in bytes.  residuals: error on the points it was fitted on; validation: on held-out points.\n"
    )
    return header + yaml.safe_dump(data, sort_keys=False)


def read_raw(raw_paths) -> tuple[list[dict], list[str]]:
    """(records, 'file:line: why' of each unreadable line) of raw JSONL files; a ValueError naming the file
    when more than :data:`MAX_BAD_LINE_FRACTION` of its lines (beyond one torn last line) are unreadable --
    half a file of garbage is not fitted on silently."""
    records: list[dict] = []
    bad_lines: list[str] = []
    for p in raw_paths:
        skipped: list[tuple[int, str]] = []
        recs = read_records(p, skipped)
        last = max([k for k, _ in skipped] + [r.line for r in recs], default=0)
        bad = [k for k, _ in skipped if k != last]  # a torn last line (a killed run) is expected, not counted
        if len(bad) > MAX_BAD_LINE_FRACTION * (len(recs) + len(skipped)):
            raise ValueError(f"{p.name}: {len(skipped):,} of {len(recs) + len(skipped):,} lines are unreadable "
                             f"(first at line {skipped[0][0]}: {skipped[0][1]}); not fitting on what is left")
        records += recs
        bad_lines += [f"{p.name}:{k}: {why}" for k, why in skipped]
    return records, bad_lines


def profile_path(out_dir: Path, profile: CalibrationProfile, name: str | None = None) -> Path:
    """``out_dir/<gpu>-vllm-<version>.yaml`` (or ``out_dir/name``), from validated ids only: a GPU id or
    version that could leave ``out_dir`` (``../../x``) is a ValueError naming it."""
    if name is None:
        safe_name_part(profile.gpu_id, "gpu", SAFE_ID)
        safe_name_part(profile.engine_version, "vllm_version", SAFE_VERSION)
        name = f"{profile.gpu_id}-vllm-{profile.engine_version}.yaml"
    path = Path(out_dir) / safe_name_part(name, "profile name", SAFE_VERSION)
    if path.resolve().parent != Path(out_dir).resolve():
        raise ValueError(f"profile name: {name!r} is outside {out_dir}")
    return path


def fit_and_write(raw_paths, out_dir: Path, name: str | None = None, command: str = "") -> tuple[Path, CalibrationProfile]:
    """Fit on one or more raw JSONL files and write ``out_dir/<gpu>-vllm-<version>.yaml`` (its
    ``excluded_records`` list every unreadable line and every record left out, with file and line)."""
    if isinstance(raw_paths, (str, Path)):
        raw_paths = [raw_paths]
    raw_paths = [Path(p) for p in raw_paths]
    records, bad_lines = read_raw(raw_paths)
    prof, _ = fit_profile(records, source=",".join(p.name for p in raw_paths), excluded=bad_lines)
    prof = prof.model_copy(update={
        "raw_data": [str(p.name) for p in raw_paths],
        "raw_data_sha256": [sha256_file(p) for p in raw_paths],
        "command": command or prof.command,
    })
    out_dir = Path(out_dir)
    path = profile_path(out_dir, prof, name)
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(profile_to_yaml(prof))
    return path, prof
