"""The fit: raw probe records + catalog specs -> a CalibrationProfile with residuals.

Pure numpy/scipy (no torch, no vllm): CI runs it on the committed real records.

What is fitted, per GPU and engine version (not per model):
- compute: matmul efficiency eff(T) = e_max · T / (T + T_half) over the tokens of a step, and an
  attention compute efficiency;
- memory: the fraction of datasheet bandwidth reached streaming weights, and streaming the KV cache;
- fixed costs: per step, per scheduled sequence, per token, and per request (front-end + scheduling
  of an offline ``generate`` call);
- memory budget: vLLM's non-torch bytes, the peak-activation bytes per batched token per unit of
  layer width, the weight-bytes factor, and the device memory CUDA reports.

The loss is the squared log ratio predicted/measured, so a 10 % miss on a 5 ms decode step counts
as much as one on a 1 s prefill.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import yaml

from calibration.records import read_records, sha256_file
from planner import catalog
from planner.profile import CalibrationProfile, Residuals
from planner.specs import Deployment
from planner.validate import KV_ALIASES, error_pct, predict, summarize
from planner.validate import Measurement as Point

# name, lower bound, upper bound, start
PARAMS = [
    ("matmul_efficiency_max", 0.3, 1.2, 0.8),
    ("matmul_half_tokens", 0.0, 4096.0, 64.0),
    ("attention_compute_efficiency", 0.1, 1.2, 0.5),
    ("weight_bandwidth_efficiency", 0.3, 1.2, 0.85),
    ("kv_bandwidth_efficiency", 0.1, 1.2, 0.7),
    ("step_overhead_s", 0.0, 0.02, 1e-3),
    ("prefill_layer_overhead_s", 0.0, 1e-3, 5e-5),
    ("eager_layer_overhead_s", 0.0, 2e-3, 2e-4),
    ("per_seq_overhead_s", 0.0, 2e-4, 5e-6),
    ("request_overhead_s", 0.0, 0.05, 3e-3),
]


def _deployment(gpu_id: str, eng: dict | None, kv: str, tp: int = 1) -> Deployment:
    eng = eng or {}
    return Deployment(
        gpu_id=gpu_id, num_gpus=tp, tensor_parallel=tp, weight_dtype="bf16", kv_cache_dtype=KV_ALIASES.get(kv, "bf16"),
        gpu_memory_utilization=eng.get("gpu_memory_utilization", 0.92),
        max_num_batched_tokens=eng.get("max_num_batched_tokens", 16384),
        max_num_seqs=eng.get("max_num_seqs", 1024),
    )


def points_from_records(records: list[dict], source: str = "") -> list[Point]:
    """Probe and engine records -> measurements (failed or skipped probes are left out)."""
    engines = {}
    for r in records:
        if r.get("type") == "engine":
            engines[(r["model"], r.get("kv_cache_dtype", "auto"), r.get("role", "fit"),
                     int(r.get("tensor_parallel", 1)))] = r
    version = next((r.get("vllm_version", "") for r in records if r.get("type") == "env"), "")
    out = []
    for r in records:
        key = (r.get("model"), r.get("kv_cache_dtype", "auto"), r.get("role", "fit"), int(r.get("tensor_parallel", 1)))
        dep = None
        if r.get("type") in ("probe", "engine_log"):
            dep = _deployment(r["gpu"], engines.get(key), r.get("kv_cache_dtype", "auto"), r.get("tensor_parallel", 1))
        if r.get("type") == "probe" and r.get("status") == "ok":
            out.append(Point(catalog.model(r["model"]), dep, r["metric"], int(r["batch_size"]), int(r["prompt_tokens"]),
                             int(r["output_tokens"]), float(r["measured"]), version, source, r.get("role", "fit")))
        elif r.get("type") == "engine_log" and r.get("returncode") == 0 and r.get("kv_cache_tokens"):
            m = catalog.model(r["model"])
            out.append(Point(m, dep, "kv_cache_tokens", 0, 0, 0, float(r["kv_cache_tokens"]), version, source,
                             r.get("role", "fit")))
            if r.get("weights_bytes"):
                out.append(Point(m, dep, "weights_bytes", 0, 0, 0, float(r["weights_bytes"]), version, source,
                                 r.get("role", "fit")))
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
            "source": p.source,
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
            and r.get("role", "fit") == "fit" and r.get("peak_activation_bytes") is not None]
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


FP8_PARAM = ("kv_bandwidth_efficiency_fp8", 0.1, 1.2, 0.5)
# only tensor-parallel engines among the fit data can pin these down
TP_PARAMS = [("allreduce_latency_s", 0.0, 1e-4, 1e-5), ("allreduce_bandwidth_efficiency", 0.05, 1.2, 0.6)]


def _profile_from(theta, base: dict, params=PARAMS) -> CalibrationProfile:
    vals = dict(base)
    for (name, lo, hi, _), v in zip(params, theta):
        vals[name] = float(min(max(v, lo), hi))
    return CalibrationProfile(**vals)


def fit_latency(points: list[Point], base: dict) -> CalibrationProfile:
    """Least squares on log(predicted/measured) over the prefill and decode points."""
    from scipy.optimize import least_squares

    lat = [p for p in points if p.metric in ("prefill_s", "decode_step_s")]
    if not lat:
        raise ValueError("no successful prefill or decode probes to fit")
    params = list(PARAMS)
    if any(p.deployment.kv_cache_dtype == "fp8" for p in lat):
        params.append(FP8_PARAM)  # only an fp8-KV engine among the fit data can pin it down
    if any(p.deployment.tensor_parallel > 1 for p in lat):
        params += TP_PARAMS
    meas = np.array([p.measured for p in lat])
    lo = np.array([p[1] for p in params])
    hi = np.array([p[2] for p in params])
    scale = np.maximum(hi - lo, 1e-12)

    def resid(z):
        prof = _profile_from(lo + z * scale, base, params)
        pred = np.array([predict(p, prof) for p in lat])
        return np.log(pred / meas)

    best = None
    starts = [np.array([p[3] for p in params])]
    rng = np.random.default_rng(0)
    starts += [lo + rng.uniform(0.05, 0.95, len(params)) * scale for _ in range(3)]
    for x0 in starts:
        z0 = (x0 - lo) / scale
        r = least_squares(resid, z0, bounds=(0.0, 1.0), diff_step=1e-3, max_nfev=400, loss="soft_l1", f_scale=0.05)
        if best is None or r.cost < best.cost:
            best = r
    return _profile_from(lo + best.x * scale, base, params)


CORRECTION_HI_TOKENS = 1024.0


def fit_step_corrections(points: list[Point], prof: CalibrationProfile) -> dict:
    """Per fitted model: the median extra seconds of single-prompt prefills just above the largest
    CUDA graph (cudagraph_max < tokens < 1024), kept only where it is large (> 3 ms and > 25 % of the
    prediction).  On the H200 Mistral-7B's 640- and 768-token prompts took 35-53 ms where 512 took 16
    and 1,024 took 32-39; Qwen2.5-32B showed no such step."""
    from planner.roofline import cudagraph_max_tokens

    out: dict[str, list[tuple[float, float, float]]] = {}
    by_model: dict[str, list[tuple[float, float]]] = {}
    for p in points:
        lo = cudagraph_max_tokens(p.deployment)
        if p.metric == "prefill_s" and p.batch_size == 1 and lo < p.prompt_tokens < CORRECTION_HI_TOKENS:
            pred = predict(p, prof)
            by_model.setdefault(p.model.id, []).append((p.measured - pred, pred))
    for model_id, rows in by_model.items():
        extra = float(np.median([r[0] for r in rows]))
        pred = float(np.median([r[1] for r in rows]))
        if len(rows) >= 2 and extra > max(3e-3, 0.25 * pred):
            lo = min(cudagraph_max_tokens(p.deployment) for p in points if p.model.id == model_id)
            out[model_id] = [(float(lo), CORRECTION_HI_TOKENS, round(extra, 6))]
    return out


def fit_profile(records: list[dict], *, source: str = "") -> tuple[CalibrationProfile, list[Point]]:
    """Fit on the 'fit'-role records; residuals on them; validation on 'validate'-role records."""
    points = points_from_records(records, source)
    fit_pts = [p for p in points if p.role == "fit"]
    val_pts = [p for p in points if p.role != "fit"]
    env = next((r for r in records if r.get("type") == "env"), {})
    micro = next((r for r in records if r.get("type") == "microbench"), {})
    base = {
        "mode": "calibrated",
        "gpu_id": env.get("gpu") or (fit_pts[0].deployment.gpu_id if fit_pts else None),
        "engine": "vllm",
        "engine_version": env.get("vllm_version", ""),
        "created": env.get("date", dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")),
        "models_used": sorted({p.model.id for p in fit_pts}),
        "measured_peak_flops_per_s": micro.get("peak_flops_per_s", {}),
        "measured_hbm_bandwidth_bytes_per_s": micro.get("hbm_bandwidth_bytes_per_s"),
        "command": env.get("command", ""),
    }
    base.update({k: v for k, v in fit_memory_terms(records).items() if v is not None})
    prof = fit_latency(fit_pts, base)
    corrections = fit_step_corrections(fit_pts, prof)
    if corrections:
        prof = prof.model_copy(update={"step_corrections": corrections})
    res = residuals_by(fit_pts, prof, lambda p: p.regime)
    val = residuals_by(val_pts, prof, lambda p: f"{p.model.id}/{p.deployment.kv_cache_dtype}/{p.metric}") if val_pts else {}
    prof = prof.model_copy(update={"residuals": res, "validation": val})
    return prof, points


def profile_to_yaml(profile: CalibrationProfile) -> str:
    data = profile.model_dump(mode="json")
    for k, v in list(data.items()):
        if isinstance(v, float):
            data[k] = float(f"{v:.12g}")
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
