"""LLM inference capacity planner — the Streamlit dashboard (`make app`).

Streamlit only: sidebar widgets -> planner -> metrics, tables and plotly figures (planner.charts).
Every number comes from the planner package; this file formats and lays out.  The scenario is
mirrored in the URL (every sidebar widget is bound to a query parameter), so a plan can be shared.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import importlib
import json
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import streamlit as st

st.set_page_config(page_title="LLM inference capacity planner", page_icon="🧮", layout="wide")

import numpy as np
import pandas as pd

from planner import batching, catalog, charts, memory, phases, roofline, serving
from planner import cost as cost_mod
from planner.dtypes import KV_BYTES, WEIGHT_BITS
from planner.presets import PRESETS, resolve
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.specs import Deployment, ModelSpec, Source, Workload
from planner.units import BILLION, MS, TB_PER_S, fmt_bytes, fmt_gb, fmt_gib, fmt_int, fmt_ms, fmt_tflops, fmt_usd


def _optional(name: str):
    """A planner module another part of the project provides; None until it exists."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


plan_mod = _optional("planner.plan")
sweep_mod = _optional("planner.sweep")
report_mod = _optional("planner.report")
hf_import = _optional("planner.hf_import")

UPLOAD = "upload config.json"  # the model option that opens the uploader
MAX_UPLOAD_BYTES = 256 * 1024  # a config.json is a few kB
#: The scenario a bare URL opens (values equal to these are left out of the URL).
DEFAULTS = {"model": "mistral-7b-v0.3", "gpu": "h200-sxm", "gpus": 1, "wdtype": "bf16", "kvdtype": "bf16",
            "util": 0.92, "prompt": 4096, "output": 512, "users": 160, "ttft_ms": 2000, "tpot_ms": 50.0, "price": 0.0}
TP_CHOICES = [1, 2, 4, 8, 16]
CALIB_CHOICES = ["ideal roofline", "calibrated profile"]

VIEWS = {
    "Memory": "Weights are a fixed cost; the **KV cache** is the variable one: whatever memory the weights and "
              "overheads leave becomes the KV pool, and context length × users must fit in it.",
    "Latency": "**Prefill** processes the prompt in parallel and sets **TTFT** (compute-bound); **decode** makes one "
               "token per step for the whole batch and sets **TPOT/ITL** (memory-bound: it streams the weights and "
               "every sequence's KV cache).",
    "Roofline": "Arithmetic intensity (FLOPs per byte read) decides the bound: left of the ridge a step is "
                "**memory-bound**, right of it **compute-bound**. Prefill sits right, decode far left.",
    "Triangle": "Quality, latency, throughput: pick two. Every configuration of this model (GPU × weight dtype × "
                "KV dtype × TP × batch), latency = TTFT + TPOT × output, quality = published score × quantisation "
                "retention.",
    "Cost": "$/Mtok at the largest batch that meets the TTFT and TPOT targets: a pricier GPU can be cheaper per "
            "token if its useful throughput rises enough.",
    "Sizing report": "The full sweep (every GPU × dtype × KV dtype × TP × batch) as the CLI computes it; sort any "
                     "column, download the raw CSV.",
    "Load": "Queueing under a Poisson request stream: TTFT and TPOT/ITL percentiles as the request rate rises, "
            "and the knee where the latency targets break.",
}


# ============================================================================ loaders (cached by id)


@st.cache_resource
def _uploads() -> dict[str, ModelSpec]:
    """Uploaded models by content hash (content-addressed, so sessions can share it)."""
    return {}


def _catalog() -> tuple[dict, dict, str | None]:
    """(models, gpus, error) — a malformed catalog file is shown, not raised."""
    try:
        return catalog.models(), catalog.gpus(), None
    except catalog.SpecError as err:
        return {}, {}, str(err)


def _model(model_key: str) -> ModelSpec:
    if model_key.startswith("upload:"):
        return _uploads()[model_key.removeprefix("upload:")]
    return catalog.model(model_key)


def _gpu(gpu_id: str, price_usd_per_hour: float):
    """The GPU spec, with the sidebar's price override (0 = catalog price) and its source."""
    gpu = catalog.gpu(gpu_id)
    if price_usd_per_hour <= 0:
        return gpu
    src = Source(url="price override (dashboard sidebar)", date=dt.date.today().isoformat(),
                 note=f"catalog price {gpu.price_usd_per_hour:g} USD/h replaced")
    return gpu.model_copy(update={"price_usd_per_hour": price_usd_per_hour,
                                  "sources": {**gpu.sources, "price_usd_per_hour": src}})


def _profile(gpu_id: str, calibrated: bool = True) -> CalibrationProfile:
    """``--profile auto`` (or ``none`` when not ``calibrated``) for the GPU; the ideal roofline if its profile
    cannot be read."""
    try:
        return catalog.resolve_profile("auto" if calibrated else "none", gpu_id)[0]
    except catalog.SpecError:
        return IDEAL_PROFILE


@st.cache_data(max_entries=16, show_spinner=False)
def _parse_upload(data: bytes) -> tuple[ModelSpec | None, str | None]:
    """(model, error) for an uploaded config.json: size-limited, parsed by planner.hf_import."""
    if len(data) > MAX_UPLOAD_BYTES:
        return None, f"config.json is {len(data):,} bytes; the limit is {MAX_UPLOAD_BYTES:,} bytes"
    try:
        config = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        return None, f"config.json is not valid JSON: {err}"
    except RecursionError:
        return None, "config.json is not valid JSON: nested too deeply"
    if hf_import is None:
        return None, "importing Hugging Face configs is not available (planner.hf_import is missing)"
    sha = hashlib.sha256(data).hexdigest()[:12]
    try:
        return ModelSpec.model_validate(hf_import.hf_config_to_model_dict(config, model_id=f"uploaded-{sha}")), None
    # SpecError, pydantic errors, anything odd in a hostile file: always one readable line
    except Exception as err:  # noqa: BLE001
        return None, f"could not read this config.json: {err}"


def _register_upload(spec: ModelSpec) -> str:
    """Keep an uploaded model where the cached planner calls can find it by key."""
    _uploads()[spec.id] = spec
    return f"upload:{spec.id}"


# ===================================================================================== the scenario


class Scenario(NamedTuple):
    """Everything the sidebar chose, as ids and numbers (hashable: the key of every cache)."""

    model_key: str
    gpu_id: str
    num_gpus: int
    tensor_parallel: int
    weight_dtype: str
    kv_cache_dtype: str
    gpu_memory_utilization: float
    prompt_tokens: int
    output_tokens: int
    target_users: int
    ttft_slo_s: float
    tpot_slo_s: float
    price_usd_per_hour: float  # 0 = catalog price
    calibrated: bool

    @property
    def context_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens


def validate(sc: Scenario) -> list[str]:
    """Plain-language problems that stop the planner from running (zero, negative, contradictory)."""
    errs = []
    for label, v in (("prompt length", sc.prompt_tokens), ("output length", sc.output_tokens),
                     ("target concurrent users", sc.target_users), ("GPU count", sc.num_gpus)):
        if v < 1:
            errs.append(f"{label} must be at least 1 (got {v:,})")
    for label, v in (("TTFT target", sc.ttft_slo_s), ("TPOT target", sc.tpot_slo_s)):
        if not v > 0:
            errs.append(f"{label} must be above 0 ms (got {v / MS:,.1f} ms)")
    if sc.num_gpus >= 1 and sc.tensor_parallel > sc.num_gpus:
        errs.append(f"tensor parallel {sc.tensor_parallel} needs at least {sc.tensor_parallel} GPUs; "
                    f"the deployment has {sc.num_gpus}")
    if not 0 < sc.gpu_memory_utilization <= 1:
        errs.append(f"gpu_memory_utilization must be in (0, 1], got {sc.gpu_memory_utilization}")
    return errs


@st.cache_resource(max_entries=256)
def _planned(sc: Scenario) -> SimpleNamespace:
    """The planner's objects for a scenario (model, gpu, profile, deployment, workload) and its
    SizingReport ``report``; cached by the scenario's ids and numbers."""
    model = _model(sc.model_key)
    gpu = _gpu(sc.gpu_id, sc.price_usd_per_hour)
    profile = _profile(sc.gpu_id, sc.calibrated)
    dep = Deployment.for_gpu(gpu, num_gpus=sc.num_gpus, tensor_parallel=sc.tensor_parallel,
                             weight_dtype=sc.weight_dtype, kv_cache_dtype=sc.kv_cache_dtype,
                             gpu_memory_utilization=sc.gpu_memory_utilization)
    wl = Workload(prompt_tokens=sc.prompt_tokens, output_tokens=sc.output_tokens, concurrency=sc.target_users,
                  ttft_slo_s=sc.ttft_slo_s, tpot_slo_s=sc.tpot_slo_s)
    report = plan_mod.plan(model, gpu, dep, wl, profile)
    return SimpleNamespace(model=model, gpu=gpu, profile=profile, deployment=dep, workload=wl, report=report)


def _replicas(sc: Scenario) -> int:
    return max(1, sc.num_gpus // sc.tensor_parallel)


# ========================================================================== data for the views (cached)


@st.cache_resource(max_entries=64, show_spinner=False)
def _users_vs_context(sc: Scenario) -> tuple[pd.DataFrame, int | None]:
    """Max concurrent users (whole deployment) vs context, and the longest context that still holds
    ``target_users``."""
    o = _planned(sc)
    budget = memory.memory_budget(o.model, o.gpu, o.deployment, o.profile)
    reps = _replicas(sc)

    def users(ctx: int) -> int:
        per_req = memory.request_kv_bytes_per_gpu(o.model, o.deployment, int(ctx))
        return memory.kv_pool_concurrency(budget.kv_pool_bytes, per_req, budget.fits) * reps

    hi = max(o.model.max_context_tokens, sc.context_tokens) * 2
    ctxs = np.unique(np.geomspace(128, hi, 64).astype(int))
    df = pd.DataFrame({"context_tokens": ctxs, "max_users": [users(c) for c in ctxs]})
    # longest context with users(ctx) >= target (users is non-increasing in ctx)
    lo_c, hi_c = 0, hi
    if users(1) < sc.target_users:
        return df, None
    while lo_c < hi_c:
        mid = (lo_c + hi_c + 1) // 2
        lo_c, hi_c = (mid, hi_c) if users(mid) >= sc.target_users else (lo_c, mid - 1)
    return df, lo_c


@st.cache_resource(max_entries=64, show_spinner=False)
def _latency_frames(sc: Scenario) -> dict:
    """TTFT vs prompt, TPOT vs batch and vs context, and throughput vs batch for the scenario."""
    o = _planned(sc)
    mc, hw = roofline.model_costs(o.model, o.deployment), roofline.hw_coeffs(o.gpu, sc.weight_dtype, o.profile)
    m_tok = o.deployment.max_num_batched_tokens
    prompts = np.unique(np.geomspace(16, max(131072, sc.prompt_tokens * 2), 48).astype(int))
    pre = phases.prefill_time_costs(mc, hw, prompts, 1, m_tok)
    ttft = pd.DataFrame({"prompt_tokens": prompts, "ttft_s": pre.time_s, "bound": pre.bound})

    dctx = batching.decode_context_tokens(o.workload)
    all_b = np.arange(1, o.deployment.max_num_seqs + 1)
    step_all = np.atleast_1d(phases.decode_step_costs(mc, hw, all_b, dctx).time_s)
    busy = cost_mod.prefill_busy_costs(mc, hw, o.workload.prompt_tokens, all_b, m_tok)
    tpot_all = np.atleast_1d(cost_mod.effective_tpot_s(step_all, all_b, busy, o.workload.output_tokens))
    under = np.flatnonzero(tpot_all <= sc.tpot_slo_s)
    crossing = int(all_b[under[-1]]) if under.size else 0
    batches = np.unique(np.geomspace(1, o.deployment.max_num_seqs, 40).astype(int))
    tpot_b = pd.DataFrame({"batch_size": batches, "tpot_s": tpot_all[batches - 1],
                           "decode_step_s": step_all[batches - 1]})

    report = _planned(sc).report
    ctxs = np.unique(np.geomspace(128, max(o.model.max_context_tokens, sc.context_tokens), 40).astype(int))
    lines = sorted({1, max(1, report.batch_size), max(1, min(report.max_concurrency, o.deployment.max_num_seqs))})
    tpot_c = pd.concat([pd.DataFrame({"context_tokens": ctxs, "batch_size": b,
                                      "tpot_s": phases.decode_step_costs(mc, hw, b, ctxs).time_s}) for b in lines])

    sw = sweep_mod.sweep(o.model, o.workload, gpus=[o.gpu], weight_dtypes=[sc.weight_dtype],
                        kv_dtypes=[sc.kv_cache_dtype], tensor_parallels=[sc.tensor_parallel],
                        batch_sizes=batches.tolist(), profile_for=lambda _g: o.profile,
                        deployment_defaults={"gpu_memory_utilization": sc.gpu_memory_utilization})
    thr = sw.sort_values("batch_size")[["batch_size", "output_tokens_per_s", "tpot_s", "decode_step_s", "meets_slo",
                                         "fits"]].copy()
    thr["decode_tokens_per_s"] = thr["batch_size"] / thr["decode_step_s"]
    return {"ttft": ttft, "tpot_batch": tpot_b, "tpot_context": tpot_c, "throughput": thr, "crossing": crossing}


@st.cache_resource(max_entries=32, show_spinner=False)
def _sweep_all(model_key: str, prompt: int, output: int, users: int, ttft_s: float, tpot_s: float, util: float,
               price_gpu: str, price: float, calibrated: bool, batch_sizes: tuple[int, ...] | None = None,
               weight_dtypes: tuple[str, ...] | None = None, kv_dtypes: tuple[str, ...] | None = None) -> pd.DataFrame:
    """The sweep over every catalog GPU for this model and workload (the price override applies to
    the scenario's GPU only)."""
    model = _model(model_key)
    wl = Workload(prompt_tokens=prompt, output_tokens=output, concurrency=users, ttft_slo_s=ttft_s, tpot_slo_s=tpot_s)
    gpus = [_gpu(g, price if g == price_gpu else 0.0) for g in catalog.gpus()]
    return sweep_mod.sweep(model, wl, gpus=gpus, weight_dtypes=list(weight_dtypes) if weight_dtypes else None,
                          kv_dtypes=list(kv_dtypes) if kv_dtypes else None,
                          batch_sizes=list(batch_sizes) if batch_sizes else None,
                          profile_for=lambda g: _profile(g, calibrated),
                          deployment_defaults={"gpu_memory_utilization": util})


def _sweep_for(sc: Scenario, **kw) -> pd.DataFrame:
    return _sweep_all(sc.model_key, sc.prompt_tokens, sc.output_tokens, sc.target_users, sc.ttft_slo_s,
                      sc.tpot_slo_s, sc.gpu_memory_utilization, sc.gpu_id, sc.price_usd_per_hour, sc.calibrated, **kw)


#: batch sizes for cost and triangle: every size to 16, then ~12 % steps to 1,024
FINE_BATCHES = tuple(int(b) for b in np.unique(np.r_[np.arange(1, 17), np.geomspace(16, 1024, 36).astype(int)]))


# ========================================================================================= sidebar


def _apply_preset(name: str) -> None:
    models, gpus, _ = _catalog()
    vals = resolve(PRESETS[name], models, gpus)
    s = st.session_state
    if vals["model_id"]:
        s["model"] = vals["model_id"]
    if vals["gpu_id"]:
        s["gpu"] = vals["gpu_id"]
    s.update(gpus=vals["num_gpus"], tp=vals["tensor_parallel"], wdtype=vals["weight_dtype"],
             kvdtype=vals["kv_cache_dtype"], prompt=vals["prompt_tokens"], output=vals["output_tokens"],
             users=vals["target_users"], ttft_ms=round(vals["ttft_slo_s"] / MS),
             tpot_ms=float(vals["tpot_slo_s"] / MS), preset_applied=name)


BIND = {"bind": "query-params"}  # every scenario widget mirrors itself in the URL


def _presets_section() -> None:
    st.caption("Presets — the seeds' *pick two* corners of the triangle")
    for name, p in PRESETS.items():
        st.button(f"{name} ({' + '.join(p.corner)})", key=f"preset-{name}", on_click=_apply_preset, args=(name,),
                  help=p.summary, width="stretch")
    applied = st.session_state.get("preset_applied")
    if applied:
        st.caption(f"Applied **{applied}**: {PRESETS[applied].summary}")


def _model_section(models: dict) -> str | None:
    """The model key: a catalog id or 'upload:<id>'; None while waiting for a usable upload."""
    model_ids = [*models, UPLOAD]
    default = DEFAULTS["model"] if DEFAULTS["model"] in models else model_ids[0]
    choice = st.selectbox("Model", model_ids, index=model_ids.index(default), key="model", **BIND,
                          help="A catalog id (models/*.yaml) or your own Hugging Face config.json")
    key = choice
    if choice == UPLOAD:
        up = st.file_uploader("config.json", type=["json"], key="upload",
                              help=f"A Hugging Face config.json, at most {MAX_UPLOAD_BYTES // 1024} kB")
        if up is None:
            st.info("Upload a config.json to plan it.")
            return None
        spec, err = _parse_upload(up.getvalue())
        if err:
            st.error(err)
            return None
        key = _register_upload(spec)
        st.caption("Uploads are not part of the shareable URL.")
    m = _model(key)
    st.caption(f"{m.name}: {m.published_total_params / BILLION:,.2f}B parameters, {m.attention.kind.upper()}, "
               f"{m.max_context_tokens:,}-token context")
    return key


def _hardware_section(gpus: dict) -> dict:
    gpu_ids = list(gpus)
    default = DEFAULTS["gpu"] if DEFAULTS["gpu"] in gpus else gpu_ids[0]
    gpu_id = st.selectbox("GPU", gpu_ids, index=gpu_ids.index(default), key="gpu", **BIND,
                          help="A catalog id (hardware/*.yaml)")
    g = gpus[gpu_id]
    st.caption(f"{g.name}: {fmt_gib(g.memory_bytes)} as CUDA reports it ({g.memory_marketed} marketed), "
               f"{g.hbm_bandwidth_bytes_per_s / TB_PER_S:,.2f} TB/s, "
               f"{fmt_tflops(g.peak_flops_for('bf16')[1])} bf16 dense")
    c1, c2 = st.columns(2)
    num_gpus = c1.number_input("GPUs", min_value=0, max_value=4096, value=DEFAULTS["gpus"], step=1, key="gpus", **BIND,
                               help="GPUs in the deployment; replicas = GPUs ÷ tensor parallel")
    tp = c2.selectbox("Tensor parallel", TP_CHOICES, index=0, key="tp", **BIND,
                      help="GPUs one replica spans (two all-reduces per layer per step)")
    c1, c2 = st.columns(2)
    wd, kd = list(WEIGHT_BITS), list(KV_BYTES)
    weight_dtype = c1.selectbox("Weights", wd, index=wd.index(DEFAULTS["wdtype"]), key="wdtype", **BIND,
                                help="Weight format (int4 = group-wise with 16-bit scales, 4.125 bits)")
    kv_dtype = c2.selectbox("KV cache", kd, index=kd.index(DEFAULTS["kvdtype"]), key="kvdtype", **BIND,
                            help="fp8 KV halves the cache: roughly twice the tokens")
    util = st.slider("gpu_memory_utilization", min_value=0.10, max_value=1.00, value=DEFAULTS["util"], step=0.01,
                     key="util", **BIND, help="Fraction of GPU memory vLLM may use (vLLM default 0.92)")
    return {"gpu_id": gpu_id, "num_gpus": int(num_gpus), "tensor_parallel": int(tp), "weight_dtype": weight_dtype,
            "kv_cache_dtype": kv_dtype, "gpu_memory_utilization": float(util)}


def _workload_section() -> dict:
    c1, c2 = st.columns(2)
    prompt = c1.number_input("Prompt tokens", min_value=0, max_value=10_000_000, value=DEFAULTS["prompt"], step=256,
                             key="prompt", **BIND, help="Input tokens per request (prefill)")
    output = c2.number_input("Output tokens", min_value=0, max_value=1_000_000, value=DEFAULTS["output"], step=64,
                             key="output", **BIND, help="Generated tokens per request (decode)")
    users = st.number_input("Target concurrent users", min_value=0, max_value=1_000_000, value=DEFAULTS["users"],
                            step=10, key="users", **BIND, help="Requests in flight at once (the seeds' 160)")
    c1, c2 = st.columns(2)
    ttft_ms = c1.number_input("TTFT target (ms)", min_value=0, max_value=3_600_000, value=DEFAULTS["ttft_ms"],
                              step=100, key="ttft_ms", **BIND, help="Time to first token")
    tpot_ms = c2.number_input("TPOT target (ms)", min_value=0.0, max_value=60_000.0, value=DEFAULTS["tpot_ms"],
                              step=5.0, key="tpot_ms", **BIND, help="Time per output token (inter-token latency)")
    return {"prompt_tokens": int(prompt), "output_tokens": int(output), "target_users": int(users),
            "ttft_slo_s": float(ttft_ms) * MS, "tpot_slo_s": float(tpot_ms) * MS}


def _price_calibration_section(gpu) -> dict:
    src = gpu.price_source
    price = st.number_input("Price override ($/GPU-hour)", min_value=0.0, max_value=10_000.0, value=DEFAULTS["price"],
                            step=0.1, key="price", **BIND,
                            help=f"0 = catalog price ({fmt_usd(gpu.price_usd_per_hour)}/h, {src.url}, {src.date})")
    profile = _profile(gpu.id)
    calib = st.radio("Latency model", CALIB_CHOICES, index=0 if profile.is_ideal else 1, key="calib",
                     horizontal=True, **BIND, disabled=profile.is_ideal,
                     help="Efficiencies fitted on real vLLM probes (the default where a profile exists: this GPU's "
                          "own, or another GPU's transferred), or the ideal roofline (speed of light)")
    if profile.is_ideal:
        st.caption(f"No calibrated profile for {gpu.name} yet: the ideal roofline is used.")
    else:
        st.caption(_profile_line(profile))
    return {"price_usd_per_hour": float(price), "calibrated": calib == CALIB_CHOICES[1] and not profile.is_ideal}


def sidebar(models: dict, gpus: dict) -> Scenario | None:
    """The scenario widgets; None when there is no model to plan yet (e.g. waiting for an upload)."""
    with st.sidebar:
        st.header("Scenario")
        _presets_section()
        st.subheader("Model and hardware")
        model_key = _model_section(models)
        hw = _hardware_section(gpus)
        st.subheader("Workload and targets")
        wl = _workload_section()
        st.subheader("Price and calibration")
        pc = _price_calibration_section(gpus[hw["gpu_id"]])
    return None if model_key is None else Scenario(model_key=model_key, **hw, **wl, **pc)


def _profile_line(p) -> str:
    """Provenance and error of a calibrated profile, in one caption."""
    def errs(table) -> str:
        return ", ".join(f"{k} {r.median_abs_error_pct:.1f}% (p90 {r.p90_abs_error_pct:.1f}%)"
                         for k, r in table.items() if r.n > 1)
    fit, val = errs(p.residuals), errs(p.validation)
    used = f" on {', '.join(p.models_used)}" if p.models_used else ""
    if p.mode == "transferred":
        return (f"Transferred calibration: measured on {p.transferred_from} with {p.engine} {p.engine_version}"
                f"{used}, applied to this GPU's datasheet roofs (not measured on it). Validation there: "
                f"{errs(p.validation) or 'none'}.")
    return (f"Calibrated profile: {p.engine or 'engine'} {p.engine_version or '?'}, fitted {p.created[:10] or '?'}{used}."
            + (f" Fit error, median |error|: {fit}." if fit else " No residuals recorded.")
            + (f" Validation: {val}." if val else ""))


# =========================================================================================== views


@contextlib.contextmanager
def guard(what: str):
    """Show a failure inside one view as a plain message, never a traceback."""
    try:
        yield
    # the dashboard must keep standing: any failure in one view becomes a message in that view
    except Exception as err:  # noqa: BLE001
        st.error(f"Could not compute {what}: {err}")


def headline(sc: Scenario, o: SimpleNamespace, r) -> None:
    reps = _replicas(sc)
    for reason in r.reasons:
        st.error(f"Infeasible: {reason}.")
    for note in r.notes:
        st.info(note[0].upper() + note[1:] + ".")
    c = st.columns(6)
    c[0].metric("Max concurrent users", fmt_int(r.max_concurrency * reps),
                help=f"At {sc.context_tokens:,} tokens of context (prompt + output), KV cache limit, "
                     f"{reps} replica(s) of {sc.tensor_parallel} GPU(s)")
    c[1].metric("KV cache pool / GPU", fmt_gib(max(r.memory.kv_pool_bytes, 0.0)),
                help=f"{fmt_gb(max(r.memory.kv_pool_bytes, 0.0))}; {r.memory.kv_capacity_tokens:,} tokens per GPU")
    c[2].metric("TTFT (one prompt)", fmt_ms(r.ttft.time_s), help=f"prefill of {sc.prompt_tokens:,} tokens, "
                f"{r.ttft.bound}-bound")
    c[3].metric("SLO-feasible batch", fmt_int(r.batch_size),
                help=f"largest batch per replica meeting TTFT ≤ {fmt_ms(sc.ttft_slo_s)} and TPOT ≤ "
                     f"{fmt_ms(sc.tpot_slo_s)} (stopped by: {r.slo.binding})")
    c[4].metric("TPOT at that batch", fmt_ms(r.tpot_effective_s) if r.batch_size else "—",
                help=f"mean time per output token with the other requests' prefills mixed into the decode steps "
                     f"(chunked prefill); the decode step alone is {fmt_ms(r.tpot.time_s)}, {r.tpot.bound}-bound")
    c[5].metric("$ / M output tokens", fmt_usd(float(r.cost.usd_per_million_output_tokens)) if r.batch_size else "—",
                help=f"at {fmt_usd(o.gpu.price_usd_per_hour)}/GPU-h ({o.gpu.price_source.url}, "
                     f"{o.gpu.price_source.date})")
    mode = {"calibrated": "calibrated profile", "transferred": "calibration transferred from another GPU"}.get(
        r.profile_mode, "ideal roofline (speed of light)")
    st.caption(f"{o.model.name} on {sc.num_gpus} × {o.gpu.name} (TP {sc.tensor_parallel}), weights {sc.weight_dtype}, "
               f"KV {sc.kv_cache_dtype}; {sc.prompt_tokens:,} prompt + {sc.output_tokens:,} output tokens; "
               f"latency model: {mode}. Memory: {r.memory.explain()}.")


def view_memory(sc: Scenario, o: SimpleNamespace, r) -> None:
    m = r.memory
    bar = pd.DataFrame([{
        "label": f"{o.gpu.name}", "weights_bytes": m.weight_bytes, "activation_bytes": m.activation_bytes,
        "overhead_bytes": m.non_torch_bytes + m.cudagraph_bytes, "kv_pool_bytes": m.kv_pool_bytes,
        "headroom_bytes": m.gpu_memory_bytes - m.usable_bytes, "memory_bytes": m.gpu_memory_bytes}])
    curve, max_ctx = _users_vs_context(sc)
    left, right = st.columns([1, 2])
    left.plotly_chart(charts.memory_stack(bar), key="mem-stack")
    right.plotly_chart(charts.users_vs_context(curve, sc.target_users, sc.context_tokens, max_ctx), key="mem-users")
    if max_ctx:
        st.markdown(f"For **{sc.target_users:,} concurrent users** on {sc.num_gpus} × {o.gpu.name}, each request's "
                    f"context must stay at or below **{max_ctx:,} tokens** (KV {sc.kv_cache_dtype}).")
    else:
        st.markdown(f"**{sc.target_users:,} concurrent users** do not fit at any context length: the KV pool is "
                    f"{fmt_gib(max(m.kv_pool_bytes, 0))} per GPU.")
    per_tok_model = memory.kv_bytes_per_token(o.model, sc.kv_cache_dtype)
    rows = [
        ("KV bytes per token (whole model)", f"{per_tok_model:,.0f} B", f"{fmt_bytes(per_tok_model)} (decimal)"),
        ("KV bytes per token per GPU", f"{m.kv_bytes_per_token:,.0f} B", f"after TP {sc.tensor_parallel} sharding"),
        (f"KV per request at {sc.context_tokens:,} tokens", fmt_gib(r.kv_per_request.total_bytes, 3),
         fmt_gb(r.kv_per_request.total_bytes, 3) + f", blocks of {o.deployment.block_size_tokens} tokens"),
        ("KV per request per GPU", fmt_gib(r.kv_per_request_bytes_per_gpu, 3),
         fmt_gb(r.kv_per_request_bytes_per_gpu, 3)),
        ("KV pool per GPU", fmt_gib(max(m.kv_pool_bytes, 0)), f"{m.kv_capacity_tokens:,} tokens"),
        ("Weights per GPU", fmt_gib(m.weight_bytes), fmt_gb(m.weight_bytes)),
        ("Usable per GPU", fmt_gib(m.usable_bytes),
         f"{sc.gpu_memory_utilization:.0%} of {fmt_gib(m.gpu_memory_bytes)}"),
    ]
    st.dataframe(pd.DataFrame(rows, columns=["quantity", "value", "also"]), hide_index=True, width="stretch")


def view_latency(sc: Scenario, o: SimpleNamespace, r) -> None:
    f = _latency_frames(sc)
    c1, c2 = st.columns(2)
    c1.plotly_chart(charts.ttft_vs_prompt(f["ttft"], sc.ttft_slo_s, sc.prompt_tokens), key="lat-ttft")
    mem_b = min(r.max_concurrency, o.deployment.max_num_seqs)
    c2.plotly_chart(charts.tpot_vs_batch(f["tpot_batch"], sc.tpot_slo_s, f["crossing"], mem_b), key="lat-tpot-b")
    c1, c2 = st.columns(2)
    c1.plotly_chart(charts.tpot_vs_context(f["tpot_context"], sc.tpot_slo_s), key="lat-tpot-c")
    c2.plotly_chart(charts.throughput_vs_batch(f["throughput"], r.batch_size or None, r.batch_size or None),
                    key="lat-thr")
    if f["crossing"]:
        st.markdown(f"The TPOT target {fmt_ms(sc.tpot_slo_s)} is crossed above **batch {f['crossing']:,}** "
                    f"(decode at {batching.decode_context_tokens(o.workload):,.0f} tokens of context); the KV cache "
                    f"holds {r.max_concurrency:,} requests per replica.")
    else:
        st.markdown(f"Even one sequence takes {fmt_ms(r.slo.tpot_batch1_s)} per output token: the TPOT target "
                    f"{fmt_ms(sc.tpot_slo_s)} cannot be met on this GPU.")


def view_roofline(sc: Scenario, o: SimpleNamespace, r) -> None:
    g = o.gpu
    dtype, peak = g.peak_flops_for(sc.weight_dtype)
    peaks = [{"label": dtype, "flops_per_s": peak}]
    if dtype != "bf16" and "bf16" in g.peak_flops_per_s:
        peaks.append({"label": "bf16", "flops_per_s": g.peak_flops_per_s["bf16"]})
    mc, hw = roofline.model_costs(o.model, o.deployment), roofline.hw_coeffs(g, sc.weight_dtype, o.profile)
    dctx = batching.decode_context_tokens(o.workload)
    pts = [("prefill", r.ttft)]
    pts.append(("decode, batch 1", phases.decode_step_costs(mc, hw, 1, dctx)))
    if r.batch_size > 1:
        pts.append((f"decode, batch {r.batch_size:,}", phases.decode_step_costs(mc, hw, r.batch_size, dctx)))
    points = pd.DataFrame([{"label": n, "arithmetic_intensity": float(p.arithmetic_intensity),
                            "flops_per_s": float(p.achieved_flops_per_s), "bound": str(p.bound),
                            "time_s": float(p.time_s)} for n, p in pts])
    st.plotly_chart(charts.roofline(pd.DataFrame(peaks), g.hbm_bandwidth_bytes_per_s, points, g.name), key="roof")
    ridge = peak / g.hbm_bandwidth_bytes_per_s
    st.markdown(f"Ridge point of {g.name} at {dtype}: {fmt_tflops(peak)} ÷ "
                f"{g.hbm_bandwidth_bytes_per_s / TB_PER_S:,.2f} TB/s = **{ridge:,.0f} FLOP/byte**.")
    tbl = points.assign(**{
        "arithmetic intensity (FLOP/B)": points["arithmetic_intensity"].map(lambda x: f"{x:,.1f}"),
        "achieved": points["flops_per_s"].map(fmt_tflops), "time": points["time_s"].map(fmt_ms),
        "bound": points["bound"] + "-bound"})[["label", "arithmetic intensity (FLOP/B)", "achieved", "time", "bound"]]
    st.dataframe(tbl, hide_index=True, width="stretch")


@st.cache_resource(max_entries=32, show_spinner=False)
def _triangle_frame(sc: Scenario) -> tuple[pd.DataFrame, pd.DataFrame]:
    sw = _sweep_for(sc)
    df = sw[sw["fits"] & ~sw["context_exceeds_model_limit"]].copy()
    df["latency_s"] = df["ttft_s"] + df["tpot_s"] * sc.output_tokens
    df["quality"] = df["quality_score"].fillna(0.0)
    df["label"] = (df["num_gpus"].astype(str) + " × " + df["gpu_id"].astype(str) + ", " + df["weight_dtype"].astype(str)
                   + " / KV " + df["kv_cache_dtype"].astype(str) + ", batch " + df["batch_size"].astype(str))
    df["pareto"] = charts.pareto_mask(df, maximize=("quality", "output_tokens_per_s_per_gpu"), minimize=("latency_s",))
    front = df[df["pareto"]]
    corners = []
    if not front.empty:
        def norm(s, log=False, invert=False):
            v = np.log(s.astype(float)) if log else s.astype(float)
            span = v.max() - v.min()
            n = (v - v.min()) / span if span > 0 else v * 0 + 1.0
            return 1 - n if invert else n
        q = norm(front["quality"])
        lat = norm(front["latency_s"], log=True, invert=True)
        thr = norm(front["output_tokens_per_s_per_gpu"], log=True)
        for (a, b), name in (((q, lat), "quality + latency"), ((q, thr), "quality + throughput"),
                             ((lat, thr), "latency + throughput")):
            i = (a + b).idxmax()
            corners.append({**front.loc[i, ["latency_s", "output_tokens_per_s_per_gpu", "label"]].to_dict(),
                            "corner": name})
    return df, pd.DataFrame(corners)


def view_triangle(sc: Scenario, o: SimpleNamespace, r) -> None:
    df, corners = _triangle_frame(sc)
    if df.empty:
        st.warning("No configuration of this model fits any catalog GPU at this context length.")
        return
    chosen = None
    if r.batch_size:
        chosen = {"latency_s": r.slo.ttft_s + r.tpot_effective_s * sc.output_tokens,
                  "output_tokens_per_s_per_gpu": float(r.throughput.output_tokens_per_s_per_gpu)}
    st.plotly_chart(charts.triangle(df, chosen, corners), key="tri")
    q = r.quality
    st.caption(f"Quality: {q.benchmark or 'no published score'} {q.published_score:.1f} × retention "
               f"{q.retention:.3f} (weights {sc.weight_dtype}, KV {sc.kv_cache_dtype}) = {q.score:.1f} for this "
               f"scenario; source {q.score_source_url or '—'}. Retention factors: planner.quality (cited per dtype).")
    if not corners.empty:
        tbl = corners.assign(latency=corners["latency_s"].map(fmt_ms),
                             throughput=corners["output_tokens_per_s_per_gpu"].map(lambda x: f"{x:,.0f} tok/s/GPU"))
        st.dataframe(tbl[["corner", "label", "latency", "throughput"]], hide_index=True, width="stretch")
    st.caption(f"{len(df):,} candidates that fit, {int(df['pareto'].sum()):,} on the Pareto front "
               "(no other candidate is at least as good on all three and better on one).")


@st.cache_resource(max_entries=32, show_spinner=False)
def _cost_frame(sc: Scenario, same_dtypes: bool) -> pd.DataFrame:
    """Per GPU type, the cheapest configuration meeting the targets at a batch ≤ the target users:
    every batch size with the scenario's dtypes (what plan() searches), a ~12 % grid with any dtype."""
    top = max(1, min(sc.target_users, 1024))
    if same_dtypes:
        kw = {"batch_sizes": tuple(range(1, top + 1)), "weight_dtypes": (sc.weight_dtype,),
              "kv_dtypes": (sc.kv_cache_dtype,)}
    else:
        kw = {"batch_sizes": tuple(sorted({b for b in FINE_BATCHES if b <= top} | {top}))}
    sw = _sweep_for(sc, **kw)
    ok = sw[sw["meets_slo"] & ~sw["context_exceeds_model_limit"] & (sw["batch_size"] <= sc.target_users)]
    if ok.empty:
        return ok
    best = ok.sort_values("cost_usd_per_million_output_tokens").groupby("gpu_id", observed=True).head(1)
    best = best.assign(label=best["num_gpus"].astype(str) + " × " + best["gpu_id"].astype(str))
    return best.reset_index(drop=True)


def view_cost(sc: Scenario, o: SimpleNamespace, r) -> None:
    same = st.toggle("Keep the scenario's weight and KV dtypes", value=True, key="cost_same_dtypes",
                     help="Off: any weight/KV dtype may win (quality changes with the dtype)")
    best = _cost_frame(sc, same)
    if best.empty:
        st.warning(f"No GPU in the catalog meets TTFT ≤ {fmt_ms(sc.ttft_slo_s)} and TPOT ≤ {fmt_ms(sc.tpot_slo_s)} "
                   f"for {sc.prompt_tokens:,} + {sc.output_tokens:,} tokens with this model. Loosen a target or "
                   "shorten the context.")
        return
    gpus = catalog.gpus()
    top = best.iloc[0]
    st.success(f"Cheapest configuration meeting the targets: **{int(top['num_gpus'])} × {gpus[top['gpu_id']].name}, "
               f"{top['weight_dtype']} weights, KV {top['kv_cache_dtype']}, batch {int(top['batch_size']):,}: "
               f"{fmt_usd(top['cost_usd_per_million_output_tokens'])} per million output tokens**, TPOT "
               f"{fmt_ms(top['tpot_s'], 0)}, TTFT {fmt_ms(top['ttft_s'], 0)} "
               f"(price {fmt_usd(top['price_usd_per_hour'])}/GPU-h, {top['price_source']}, {top['price_date']}).")
    st.plotly_chart(charts.cost_bars(best), key="cost")
    tbl = pd.DataFrame({
        "configuration": best["label"], "weights": best["weight_dtype"].astype(str),
        "KV": best["kv_cache_dtype"].astype(str), "batch": best["batch_size"],
        "$/M output": best["cost_usd_per_million_output_tokens"].map(fmt_usd),
        "$/M blended": best["cost_usd_per_million_tokens_blended"].map(fmt_usd),
        "TPOT": best["tpot_s"].map(fmt_ms), "TTFT": best["ttft_s"].map(fmt_ms),
        "$/GPU-hour": best["price_usd_per_hour"].map(fmt_usd), "price source": best["price_source"].astype(str),
        "price date": best["price_date"].astype(str)})
    st.dataframe(tbl, hide_index=True, width="stretch")
    missing = sorted(set(gpus) - set(best["gpu_id"].astype(str)))
    if missing:
        st.caption("No configuration meets the targets on: " + ", ".join(gpus[g].name for g in missing) + ".")


@st.cache_resource(max_entries=16, show_spinner=False)
def _cli_sweep(model_key: str, prompt: int, output: int, ttft_s: float, tpot_s: float,
               calibrated: bool) -> pd.DataFrame:
    """What `planner sweep -m MODEL --context P --output-tokens N --ttft-slo-ms … --tpot-slo-ms … --profile
    auto|none` computes: every catalog GPU at catalog prices, default dtypes, TP and batches."""
    wl = Workload(prompt_tokens=prompt, output_tokens=output, ttft_slo_s=ttft_s, tpot_slo_s=tpot_s)
    return sweep_mod.sweep(_model(model_key), wl, contexts=[prompt],
                          profile_for=lambda g: _profile(g, calibrated))


def _cli_command(sc: Scenario, model_id: str) -> str:
    return (f"planner sweep -m {model_id} --context {sc.prompt_tokens} --output-tokens {sc.output_tokens} "
            f"--ttft-slo-ms {sc.ttft_slo_s / MS:g} --tpot-slo-ms {sc.tpot_slo_s / MS:g} "
            f"--profile {'auto' if sc.calibrated else 'none'} --csv sweep.csv")


def _csv_bytes(df: pd.DataFrame) -> bytes:
    """The bytes planner.report.write_csv writes for ``df`` (the writer `planner sweep --csv` uses).
    Called only when the user clicks download (formatting ~7,000 rows takes a few hundred ms)."""
    with tempfile.TemporaryDirectory() as d:
        return report_mod.write_csv(df, Path(d) / "sweep.csv").read_bytes()


def view_report(sc: Scenario, o: SimpleNamespace, r) -> None:
    sw = _cli_sweep(sc.model_key, sc.prompt_tokens, sc.output_tokens, sc.ttft_slo_s, sc.tpot_slo_s, sc.calibrated)
    only = st.toggle("Only rows that meet the targets", value=False, key="report_only_slo")
    shown = sw[sw["meets_slo"]] if only else sw
    cfg = {c: st.column_config.NumberColumn(c, help=f"unit: {c.rsplit('_', 1)[-1]}", format="%.4g")
           for c in sw.columns if c.endswith(("_s", "_bytes", "_per_gpu", "_per_s")) or c.startswith("cost_")}
    st.dataframe(shown, hide_index=True, width="stretch", height=560, column_config=cfg)
    st.caption(f"{len(shown):,} of {len(sw):,} rows, ranked by $/M output tokens among the rows that meet the "
               "targets. Column names carry their units (s, bytes, usd); the CSV holds the same raw numbers.")
    if report_mod is None:
        return
    st.download_button("Download the sweep as CSV", lambda: _csv_bytes(sw), file_name=f"sweep-{o.model.id}.csv",
                       mime="text/csv", key="dl-csv", on_click="ignore")
    st.caption("The same file as:")
    st.code(_cli_command(sc, o.model.id), language="bash")
    if sc.price_usd_per_hour > 0 or abs(sc.gpu_memory_utilization - 0.92) > 1e-9 or sc.model_key.startswith("upload:"):
        st.caption("Like the CLI, this table uses catalog prices and the default gpu_memory_utilization (0.92); "
                   "the sidebar's overrides apply to the other views." +
                   (" An uploaded model has no catalog id: save it with `planner import-hf` first."
                    if sc.model_key.startswith("upload:") else ""))


@st.cache_resource(max_entries=16, show_spinner="Simulating the load…")
def _load_frame(sc: Scenario, num_requests: int) -> SimpleNamespace:
    """Latency percentiles of one replica vs Poisson request rate and the knee, from
    planner.serving.load_curve (a fixed seed, so every rate sees the same arrival pattern compressed
    in time; the knee is `planner slo-search`'s: the highest rate meeting both p99 targets).

    ``knee``: None if even the lightest load tried (``lightest_rate``) misses; ``found_miss``: whether
    the search found a rate that misses (if not, the knee lies above the highest rate searched);
    ``burst_rate``: the same requests arriving all at once complete at this rate (sets the grid's scale)."""
    o = _planned(sc)
    wl = importlib.import_module("planner.workloads")
    cost, cfg = serving.engine_setup(o.model, o.gpu, o.deployment, o.profile)
    curve = serving.load_curve(lambda rate: wl.synthetic(num_requests, sc.prompt_tokens, sc.output_tokens,
                                                         rate_per_s=rate, seed=0),
                               cost, cfg, sc.ttft_slo_s, sc.tpot_slo_s)
    rows = [{"request_rate_per_s": row["rate_per_s"], "metric": f"{metric} {q}", "value_s": row[f"{key}_{q}_s"]}
            for row in curve.rows for metric, key in (("TTFT", "ttft"), ("TPOT", "tpot")) for q in ("p50", "p99")]
    knee, cap = curve.knee, curve.knee.saturation_rate_per_s
    return SimpleNamespace(frame=pd.DataFrame(rows).dropna(), knee=knee.max_rate_per_s or None,
                           found_miss=not knee.at_search_limit, burst_rate=cap,
                           lightest_rate=cap * serving.load.LOWER_BRACKET)


def view_load(sc: Scenario, o: SimpleNamespace, r) -> None:
    if not r.memory.fits:
        st.warning(f"Nothing to simulate: {r.memory.explain()}.")
        return
    c1, c2 = st.columns([1, 2], vertical_alignment="bottom")
    n = int(c1.number_input("Requests per simulated run", min_value=100, max_value=20_000, value=1000, step=100,
                            key="load_requests", help="Poisson arrivals with the sidebar's prompt and output "
                                                      "lengths on one replica; more requests = steadier tails"))
    # the simulation runs on request (about a second), so that widget changes elsewhere stay fast
    if c2.button("Simulate", type="primary", key="load_run"):
        st.session_state["load_for"] = (sc, n)
    if st.session_state.get("load_for") != (sc, n):
        st.info("Press **Simulate** to run the serving simulator on this scenario (about a second).")
        return
    res = _load_frame(sc, n)
    st.plotly_chart(charts.latency_vs_rate(res.frame, {"TTFT": sc.ttft_slo_s, "TPOT": sc.tpot_slo_s}, res.knee),
                    key="load")
    reps, targets = _replicas(sc), f"p99 TTFT ≤ {fmt_ms(sc.ttft_slo_s)} and p99 TPOT ≤ {fmt_ms(sc.tpot_slo_s)}"
    if res.knee is None:
        st.markdown(f"Even the lightest simulated load ({res.lightest_rate:,.3f} requests/s) misses {targets} "
                    "on one replica.")
    elif not res.found_miss:
        st.markdown(f"One replica meets {targets} even at **{res.knee:,.2f} requests/s**, the highest rate "
                    "searched: the knee lies above that.")
    else:
        st.markdown(f"One replica ({sc.tensor_parallel} × {o.gpu.name}) keeps {targets} up to about "
                    f"**{res.knee:,.2f} requests/s** (the knee); the deployment's {reps} replica(s): "
                    f"**{res.knee * reps:,.2f} requests/s**. (For scale: {n:,} requests arriving at once finish "
                    f"at {res.burst_rate:,.2f} requests/s.)")
    st.caption("Discrete-event simulation of a vLLM-style engine (continuous batching, chunked prefill, paged KV "
               "with preemption, prefix caching) with the same roofline step times; planner.serving.")


VIEW_FUNCS = {"Memory": view_memory, "Latency": view_latency, "Roofline": view_roofline, "Triangle": view_triangle,
              "Cost": view_cost, "Sizing report": view_report, "Load": view_load}


# ============================================================================================ page


def main() -> None:
    st.title("LLM inference capacity planner")
    models, gpus, cat_err = _catalog()
    if cat_err or not models or not gpus:
        st.error(f"The catalog could not be read: {cat_err or 'no models or GPUs found'}")
        st.stop()
    if plan_mod is None:
        st.error("planner.plan is not available; the dashboard needs it.")
        st.stop()
    sc = sidebar(models, gpus)
    if sc is None:
        st.info("Upload a Hugging Face config.json in the sidebar (or pick a catalog model) to see the plan.")
        st.stop()
    problems = validate(sc)
    if problems:
        for p in problems:
            st.error(p[0].upper() + p[1:] + ".")
        st.stop()
    try:
        o = _planned(sc)
        r = o.report
    except Exception as err:  # noqa: BLE001 — any planner error becomes a plain message
        st.error(f"This scenario cannot be planned: {err}")
        st.stop()
    headline(sc, o, r)
    tabs = st.tabs(list(VIEWS), key="view", bind="query-params")
    for tab, (name, blurb) in zip(tabs, VIEWS.items()):
        with tab:
            if tab.open:
                st.caption(blurb)
                with guard(f"the {name} view"):
                    VIEW_FUNCS[name](sc, o, r)


main()
