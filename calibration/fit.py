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
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import yaml

from calibration.families import error_bands, family_of, fit_families, nccl_from_microbench, overhead_spread, regime_of
from calibration.records import read_records, sha256_file
from planner import catalog
from planner.profile import CalibrationProfile, Residuals
from planner.specs import Deployment
from planner.validate import KV_ALIASES, error_pct, predict, summarize
from planner.validate import Measurement as Point


def _deployment(gpu_id: str, rec: dict, eng: dict | None) -> Deployment:
    eng = eng or {}
    tp = int(rec.get("tensor_parallel", 1) or 1)
    return Deployment(
        gpu_id=gpu_id, num_gpus=tp, tensor_parallel=tp, weight_dtype=rec.get("weight_dtype") or "bf16",
        kv_cache_dtype=KV_ALIASES.get(rec.get("kv_cache_dtype", "auto"), "bf16"),
        gpu_memory_utilization=eng.get("gpu_memory_utilization", 0.92),
        max_num_batched_tokens=eng.get("max_num_batched_tokens", 16384),
        max_num_seqs=eng.get("max_num_seqs", 1024),
    )


def _engine_key(r: dict) -> tuple:
    return (r.get("model"), r.get("kv_cache_dtype", "auto"), r.get("role", "fit"), int(r.get("tensor_parallel", 1) or 1),
            r.get("weight_dtype") or "bf16")


def mixed_step_value(r: dict) -> float | None:
    """The median of a mixed-step probe's samples that are at least its decode-only period (a step that also
    prefills cannot be shorter than one that only decodes; shorter samples were misattributed by the probe's
    timestamp matching on single-process engines) — None when no sample survives."""
    period = r.get("decode_period_median_s") or 0.0
    valid = sorted(x for x in r.get("mixed_samples_s", []) if x >= 0.95 * period)
    return valid[len(valid) // 2] if valid else None


def points_from_records(records: list[dict], source: str = "", role: str | None = None) -> list[Point]:
    """Probe and engine records -> measurements (failed or skipped probes, and mixed-step probes with no
    valid sample, are left out).  ``role`` overrides the records' own role (e.g. a campaign's engine that is
    held out of the fit)."""
    engines = {_engine_key(r): r for r in records if r.get("type") == "engine"}
    version = next((r.get("vllm_version", "") for r in records if r.get("type") in ("env", "engine")), "")
    out = []
    for r in records:
        if r.get("type") not in ("probe", "engine_log"):
            continue
        dep = _deployment(r["gpu"], r, engines.get(_engine_key(r)))
        who = role or r.get("role", "fit")
        if r.get("type") == "probe" and r.get("status") == "ok":
            measured, chunk, prompt = float(r["measured"]), int(r.get("chunk_tokens", 0) or 0), int(r["prompt_tokens"])
            if r["metric"] == "mixed_step_s":
                measured = mixed_step_value(r)
                prompt = int(r.get("decode_contexts_tokens") or prompt)
                if measured is None:
                    continue
            out.append(Point(catalog.model(r["model"]), dep, r["metric"], int(r["batch_size"]), prompt,
                             int(r["output_tokens"]), measured, version, source, who, None, chunk))
        elif r.get("type") == "engine_log" and r.get("returncode") == 0 and r.get("kv_cache_tokens"):
            m = catalog.model(r["model"])
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


def fit_memory_terms(records: list[dict]) -> dict:
    """vLLM's start-up accounting from the fit engines' logs (bf16 KV engines of role 'fit')."""
    logs = [r for r in records if r.get("type") == "engine_log" and r.get("returncode") == 0
            and r.get("role", "fit") == "fit" and r.get("peak_activation_bytes") is not None
            and (r.get("weight_dtype") or "bf16") == "bf16" and int(r.get("tensor_parallel", 1) or 1) == 1
            and catalog.model(r["model"]).moe is None]
    if not logs:
        return {}
    from planner.memory import weight_bytes

    non_torch, act_coef, wfac, total = [], [], [], []
    for r in logs:
        m = catalog.model(r["model"])
        eng = next((e for e in records if e.get("type") == "engine" and e.get("model") == r["model"]
                    and e.get("role", "fit") == r.get("role", "fit")), {})
        mnbt = eng.get("max_num_batched_tokens", 16384)
        ffn = m.intermediate_size
        if m.moe is not None:
            e = m.moe
            ffn = max(ffn, e.experts_per_token * e.expert_intermediate_size
                      + e.num_shared_experts * e.shared_expert_intermediate_size)
        width = 3 * ffn + 6 * m.hidden_size
        act_coef.append(r["peak_activation_bytes"] / (mnbt * width))
        non_torch.append(r.get("non_torch_bytes", 0.0))
        wfac.append(r["weights_bytes"] / weight_bytes(m, "bf16").total_bytes)
        if r.get("total_memory_bytes"):
            total.append(r["total_memory_bytes"])
    env = [r for r in records if r.get("type") == "env" and r.get("total_memory_bytes")]
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
                extra_validation: list[Point] = ()) -> tuple[CalibrationProfile, list[Point]]:
    """Fit on the 'fit'-role points family by family; residuals on them; validation and error bands on the
    held-out points (``points`` defaults to every record's; ``extra_validation`` adds held-out points from
    elsewhere, e.g. serving runs)."""
    points = points_from_records(records, source) if points is None else points
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
    }
    base.update({k: v for k, v in fit_memory_terms(records).items() if v is not None})
    link = catalog.gpu(gpu_id).interconnect_bandwidth_bytes_per_s if gpu_id in catalog.gpus() else 1.0
    lat_pts = [p for p in fit_pts if p.metric in ("prefill_s", "decode_step_s", "mixed_step_s")]
    if not lat_pts:
        raise ValueError("no successful prefill or decode probes to fit")
    prof = fit_families(lat_pts, CalibrationProfile(**base), nccl_from_microbench(records, link))
    step_spread, request_spread = overhead_spread(points, prof)
    res = residuals_by(fit_pts, prof, lambda p: f"{family_of(p)}/{regime_of(p)}")
    val = residuals_by(val_pts, prof, lambda p: f"{family_of(p)}/{p.model.id}/{p.deployment.kv_cache_dtype}/"
                                                 f"{regime_of(p)}") if val_pts else {}
    prof = prof.model_copy(update={"residuals": res, "validation": val, "step_overhead_spread": step_spread,
                                   "request_overhead_spread": request_spread,
                                   "error_bands": error_bands(fit_pts, val_pts, prof)})
    return prof, points


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


def fit_and_write(raw_paths, out_dir: Path, name: str | None = None, command: str = "") -> tuple[Path, CalibrationProfile]:
    """Fit on one or more raw JSONL files and write ``out_dir/<gpu>-vllm-<version>.yaml``."""
    if isinstance(raw_paths, (str, Path)):
        raw_paths = [raw_paths]
    raw_paths = [Path(p) for p in raw_paths]
    records: list[dict] = []
    for p in raw_paths:
        records += read_records(p)
    prof, _ = fit_profile(records, source=",".join(p.name for p in raw_paths))
    prof = prof.model_copy(update={
        "raw_data": [str(p.name) for p in raw_paths],
        "raw_data_sha256": [sha256_file(p) for p in raw_paths],
        "command": command or prof.command,
    })
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / (name or f"{prof.gpu_id}-vllm-{prof.engine_version}.yaml")
    path.write_text(profile_to_yaml(prof))
    return path, prof
