"""LLM inference capacity planner — the Streamlit dashboard (`make app`).

Views only: sidebar widgets -> a Scenario -> planner calls (planner.views computes every frame and
number a view shows) -> metrics, tables and plotly figures (planner.charts).  The scenario is
mirrored in the URL (every sidebar widget is bound to a query parameter), so a plan can be shared.
"""

from __future__ import annotations

import contextlib

import streamlit as st

st.set_page_config(page_title="LLM inference capacity planner", page_icon="🧮", layout="wide")

import pandas as pd

from planner import catalog, charts, views
from planner.dtypes import KV_BYTES, WEIGHT_BITS
from planner.hf_import import model_from_config_bytes
from planner.presets import PRESETS, resolve
from planner.report import csv_bytes
from planner.scenario import Planned, Scenario, plan_scenario, scenario_gpu, scenario_problems, scenario_profile
from planner.specs import ModelSpec, Workload
from planner.sweep import sweep
from planner.units import BILLION, MS, TB_PER_S, fmt_gb, fmt_gib, fmt_int, fmt_ms, fmt_tflops, fmt_usd

UPLOAD = "upload config.json"  # the model option that opens the uploader
MAX_UPLOAD_BYTES = 256 * 1024  # a config.json is a few kB
#: The scenario a bare URL opens (values equal to these are left out of the URL).
DEFAULTS = {"model": "mistral-7b-v0.3", "gpu": "h200-sxm", "gpus": 1, "wdtype": "bf16", "kvdtype": "bf16",
            "util": 0.92, "prompt": 4096, "output": 512, "users": 160, "ttft_ms": 2000, "tpot_ms": 50.0, "price": 0.0}
TP_CHOICES = [1, 2, 4, 8, 16]
CALIB_CHOICES = ["ideal roofline", "calibrated profile"]

VIEWS = views.VIEW_BLURBS  # tab name -> the sentence that explains it


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


@st.cache_data(max_entries=16, show_spinner=False)
def _parse_upload(data: bytes) -> tuple[ModelSpec | None, str | None]:
    """(model, error) for an uploaded config.json (size-limited; planner.hf_import)."""
    return model_from_config_bytes(data, MAX_UPLOAD_BYTES)


def _register_upload(spec: ModelSpec) -> str:
    """Keep an uploaded model where the cached planner calls can find it by key."""
    _uploads()[spec.id] = spec
    return f"upload:{spec.id}"


# ========================================================================== data for the views (cached)


@st.cache_resource(max_entries=256)
def _planned(sc: Scenario) -> Planned:
    """The planner's objects for a scenario and its SizingReport ``report``; cached by the scenario."""
    return plan_scenario(sc, _model(sc.model_key), scenario_gpu(sc.gpu_id, sc.price_usd_per_hour),
                               scenario_profile(sc.gpu_id, sc.calibrated))


@st.cache_resource(max_entries=64, show_spinner=False)
def _users_vs_context(sc: Scenario) -> tuple[pd.DataFrame, int | None]:
    return views.users_vs_context(_planned(sc), sc.target_users)


@st.cache_resource(max_entries=64, show_spinner=False)
def _latency_frames(sc: Scenario) -> views.LatencyFrames:
    return views.latency_frames(_planned(sc))


@st.cache_resource(max_entries=32, show_spinner=False)
def _sweep_all(model_key: str, prompt: int, output: int, users: int, ttft_s: float, tpot_s: float, util: float,
               price_gpu: str, price: float, calibrated: bool, batch_sizes: tuple[int, ...] | None = None,
               weight_dtypes: tuple[str, ...] | None = None, kv_dtypes: tuple[str, ...] | None = None) -> pd.DataFrame:
    """The sweep over every catalog GPU for this model and workload (the price override applies to
    the scenario's GPU only)."""
    wl = Workload(prompt_tokens=prompt, output_tokens=output, concurrency=users, ttft_slo_s=ttft_s, tpot_slo_s=tpot_s)
    gpus = [scenario_gpu(g, price if g == price_gpu else 0.0) for g in catalog.gpus()]
    return sweep(_model(model_key), wl, gpus=gpus, weight_dtypes=list(weight_dtypes) if weight_dtypes else None,
                 kv_dtypes=list(kv_dtypes) if kv_dtypes else None,
                 batch_sizes=list(batch_sizes) if batch_sizes else None,
                 profile_for=lambda g: scenario_profile(g, calibrated),
                 deployment_defaults={"gpu_memory_utilization": util})


def _sweep_for(sc: Scenario, **kw) -> pd.DataFrame:
    return _sweep_all(sc.model_key, sc.prompt_tokens, sc.output_tokens, sc.target_users, sc.ttft_slo_s,
                      sc.tpot_slo_s, sc.gpu_memory_utilization, sc.gpu_id, sc.price_usd_per_hour, sc.calibrated, **kw)


@st.cache_resource(max_entries=32, show_spinner=False)
def _triangle_frame(sc: Scenario) -> tuple[pd.DataFrame, pd.DataFrame]:
    return views.triangle_frame(_sweep_for(sc), sc.output_tokens)


@st.cache_resource(max_entries=32, show_spinner=False)
def _cost_frame(sc: Scenario, same_dtypes: bool) -> pd.DataFrame:
    return views.cheapest_per_gpu(_sweep_for(sc, **views.cost_grid(sc, same_dtypes)), sc.target_users)


@st.cache_resource(max_entries=16, show_spinner=False)
def _cli_sweep(model_key: str, prompt: int, output: int, ttft_s: float, tpot_s: float,
               calibrated: bool) -> pd.DataFrame:
    """What `planner sweep -m MODEL --context P --output-tokens N --ttft-slo-ms … --tpot-slo-ms … --profile
    auto|none` computes: every catalog GPU at catalog prices, default dtypes, TP and batches."""
    wl = Workload(prompt_tokens=prompt, output_tokens=output, ttft_slo_s=ttft_s, tpot_slo_s=tpot_s)
    return sweep(_model(model_key), wl, contexts=[prompt], profile_for=lambda g: scenario_profile(g, calibrated))


@st.cache_resource(max_entries=16, show_spinner="Simulating the load…")
def _load_view(sc: Scenario, num_requests: int) -> views.LoadView:
    return views.load_view(_planned(sc), num_requests)


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
    profile = scenario_profile(gpu.id)
    calib = st.radio("Latency model", CALIB_CHOICES, index=0 if profile.is_ideal else 1, key="calib",
                     horizontal=True, **BIND, disabled=profile.is_ideal,
                     help="Efficiencies fitted on real vLLM probes (the default where a profile exists: this GPU's "
                          "own, or another GPU's transferred), or the ideal roofline (speed of light)")
    if profile.is_ideal:
        st.caption(f"No calibrated profile for {gpu.name} yet: the ideal roofline is used.")
    else:
        st.caption(views.profile_caption(profile))
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


# =========================================================================================== views


@contextlib.contextmanager
def guard(what: str):
    """Show a failure inside one view as a plain message, never a traceback."""
    try:
        yield
    # the dashboard must keep standing: any failure in one view becomes a message in that view
    except Exception as err:  # noqa: BLE001
        st.error(f"Could not compute {what}: {err}")


def headline(sc: Scenario, o: Planned, r) -> None:
    reps = o.deployment.replicas
    for reason in r.reasons:
        st.error(f"Infeasible: {reason}.")
    for note in r.notes:
        st.info(note[0].upper() + note[1:] + ".")
    c = st.columns(6)
    c[0].metric("Max concurrent users", fmt_int(views.deployment_users(r)),
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
    st.caption(f"{o.model.name} on {sc.num_gpus} × {o.gpu.name} (TP {sc.tensor_parallel}), weights {sc.weight_dtype}, "
               f"KV {sc.kv_cache_dtype}; {sc.prompt_tokens:,} prompt + {sc.output_tokens:,} output tokens; "
               f"latency model: {views.latency_model_label(r.profile_mode)}. Memory: {r.memory.explain()}.")


def view_memory(sc: Scenario, o: Planned, r) -> None:
    curve, max_ctx = _users_vs_context(sc)
    left, right = st.columns([1, 2])
    left.plotly_chart(charts.memory_stack(views.memory_bar(r, o.gpu.name)), key="mem-stack")
    right.plotly_chart(charts.users_vs_context(curve, sc.target_users, sc.context_tokens, max_ctx), key="mem-users")
    if max_ctx:
        st.markdown(f"For **{sc.target_users:,} concurrent users** on {sc.num_gpus} × {o.gpu.name}, each request's "
                    f"context must stay at or below **{max_ctx:,} tokens** (KV {sc.kv_cache_dtype}).")
    else:
        st.markdown(f"**{sc.target_users:,} concurrent users** do not fit at any context length: the KV pool is "
                    f"{fmt_gib(max(r.memory.kv_pool_bytes, 0))} per GPU.")
    st.dataframe(views.memory_table(o), hide_index=True, width="stretch")


def view_latency(sc: Scenario, o: Planned, r) -> None:
    f = _latency_frames(sc)
    c1, c2 = st.columns(2)
    c1.plotly_chart(charts.ttft_vs_prompt(f.ttft, sc.ttft_slo_s, sc.prompt_tokens), key="lat-ttft")
    c2.plotly_chart(charts.tpot_vs_batch(f.tpot_batch, sc.tpot_slo_s, f.crossing, f.kv_limit_batch), key="lat-tpot-b")
    c1, c2 = st.columns(2)
    c1.plotly_chart(charts.tpot_vs_context(f.tpot_context, sc.tpot_slo_s), key="lat-tpot-c")
    c2.plotly_chart(charts.throughput_vs_batch(f.throughput, r.batch_size or None, r.batch_size or None),
                    key="lat-thr")
    if f.crossing:
        st.markdown(f"The TPOT target {fmt_ms(sc.tpot_slo_s)} is crossed above **batch {f.crossing:,}** "
                    f"(decode at {f.decode_context_tokens:,.0f} tokens of context); the KV cache "
                    f"holds {r.max_concurrency:,} requests per replica.")
    else:
        st.markdown(f"Even one sequence takes {fmt_ms(r.slo.tpot_batch1_s)} per output token: the TPOT target "
                    f"{fmt_ms(sc.tpot_slo_s)} cannot be met on this GPU.")


def view_roofline(sc: Scenario, o: Planned, r) -> None:
    rv = views.roofline_view(o)
    st.plotly_chart(charts.roofline(rv.peaks, o.gpu.hbm_bandwidth_bytes_per_s, rv.points, o.gpu.name), key="roof")
    st.markdown(views.ridge_sentence(o.gpu, rv))
    st.dataframe(rv.table, hide_index=True, width="stretch")


def view_triangle(sc: Scenario, o: Planned, r) -> None:
    df, corners = _triangle_frame(sc)
    if df.empty:
        st.warning("No configuration of this model fits any catalog GPU at this context length.")
        return
    st.plotly_chart(charts.triangle(df, views.scenario_point(r, sc.output_tokens), corners), key="tri")
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


def view_cost(sc: Scenario, o: Planned, r) -> None:
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
    st.dataframe(views.cost_table(best), hide_index=True, width="stretch")
    missing = sorted(set(gpus) - set(best["gpu_id"].astype(str)))
    if missing:
        st.caption("No configuration meets the targets on: " + ", ".join(gpus[g].name for g in missing) + ".")


def view_report(sc: Scenario, o: Planned, r) -> None:
    sw = _cli_sweep(sc.model_key, sc.prompt_tokens, sc.output_tokens, sc.ttft_slo_s, sc.tpot_slo_s, sc.calibrated)
    only = st.toggle("Only rows that meet the targets", value=False, key="report_only_slo")
    shown = sw[sw["meets_slo"]] if only else sw
    cfg = {c: st.column_config.NumberColumn(c, help=f"unit: {c.rsplit('_', 1)[-1]}", format="%.4g")
           for c in sw.columns if c.endswith(("_s", "_bytes", "_per_gpu", "_per_s")) or c.startswith("cost_")}
    st.dataframe(shown, hide_index=True, width="stretch", height=560, column_config=cfg)
    st.caption(f"{len(shown):,} of {len(sw):,} rows, ranked by $/M output tokens among the rows that meet the "
               "targets. Column names carry their units (s, bytes, usd); the CSV holds the same raw numbers.")
    # the CSV is written only when the user clicks (formatting ~7,000 rows takes a few hundred ms)
    st.download_button("Download the sweep as CSV", lambda: csv_bytes(sw), file_name=f"sweep-{o.model.id}.csv",
                       mime="text/csv", key="dl-csv", on_click="ignore")
    st.caption("The same file as:")
    st.code(views.sweep_command(sc, o.model.id), language="bash")
    if sc.price_usd_per_hour > 0 or abs(sc.gpu_memory_utilization - 0.92) > 1e-9 or sc.model_key.startswith("upload:"):
        st.caption("Like the CLI, this table uses catalog prices and the default gpu_memory_utilization (0.92); "
                   "the sidebar's overrides apply to the other views." +
                   (" An uploaded model has no catalog id: save it with `planner import-hf` first."
                    if sc.model_key.startswith("upload:") else ""))


def view_load(sc: Scenario, o: Planned, r) -> None:
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
    res = _load_view(sc, n)
    st.plotly_chart(charts.latency_vs_rate(res.frame, {"TTFT": sc.ttft_slo_s, "TPOT": sc.tpot_slo_s}, res.knee),
                    key="load")
    reps, targets = o.deployment.replicas, f"p99 TTFT ≤ {fmt_ms(sc.ttft_slo_s)} and p99 TPOT ≤ {fmt_ms(sc.tpot_slo_s)}"
    if res.knee is None:
        st.markdown(f"Even the lightest simulated load ({res.lightest_rate:,.3f} requests/s) misses {targets} "
                    "on one replica.")
    elif not res.found_miss:
        st.markdown(f"One replica meets {targets} even at **{res.knee:,.2f} requests/s**, the highest rate "
                    "searched: the knee lies above that.")
    else:
        st.markdown(f"One replica ({sc.tensor_parallel} × {o.gpu.name}) keeps {targets} up to about "
                    f"**{res.knee:,.2f} requests/s** (the knee); the deployment's {reps} replica(s): "
                    f"**{res.deployment_knee:,.2f} requests/s**. (For scale: {n:,} requests arriving at once finish "
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
    sc = sidebar(models, gpus)
    if sc is None:
        st.info("Upload a Hugging Face config.json in the sidebar (or pick a catalog model) to see the plan.")
        st.stop()
    problems = scenario_problems(sc)
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
