"""LLM inference capacity planner — the Streamlit dashboard (`make app`: `python app.py`, planner.dashboard.warm).

Views only: widgets -> a Scenario (planner.dashboard.inputs says whenever a typed or shared value is not the one used)
-> planner calls (planner.dashboard views, headline, cost_view, compare, deploy_view compute every frame, number and
sentence) -> metrics, tables and plotly figures (charts, charts_cost).  Every input that changes an answer is bound
to a query parameter, so a plan is shared as a URL; .streamlit/dashboard.css keeps it compact on a phone."""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path

import streamlit as st

if not st.runtime.scriptrunner.get_script_run_ctx(suppress_warning=True):  # `python app.py [flags]` (make app):
    from streamlit.testing.v1 import AppTest  # the opening page run once here (warm), then `streamlit run` it
    from streamlit.web import cli

    from planner.dashboard import warm
    sys.exit(warm.serve(__file__, AppTest, cli.main, sys.argv[1:]))
st.set_page_config(page_title="LLM inference capacity planner", page_icon="🧮", layout="wide")

import pandas as pd

from planner.io import catalog, hf_import
from planner.dashboard import charts, charts_cost, compare, cost_view, deploy_view, headline, inputs
from planner.dashboard import hardware_inputs, layout, view_text, views
from planner.dtypes import KV_BYTES, WEIGHT_BITS
from planner.memory import device_total_bytes
from planner.plan import SHORTFALL_END
from planner.dashboard.presets import PRESETS, resolve
from planner.report import csv_bytes
from planner.dashboard.scenario import Planned, Scenario, plan_scenario, scenario_gpu, scenario_problems, scenario_profile
from planner.specs import ModelSpec
from planner.units import MS, fmt_layout, fmt_ms, fmt_usd

LOG = logging.getLogger("planner.app")
UPLOAD = "upload config.json"  # the model option that opens the uploader
MAX_UPLOAD_BYTES = 256 * 1024  # a config.json is a few kB
CALIB_CHOICES, DEFAULTS, B = inputs.CALIB_CHOICES, inputs.DEFAULTS, list(inputs.PRICE_BASES)
VIEWS = view_text.VIEW_BLURBS  # tab name -> the sentence that explains it
BIND = {"bind": "query-params"}  # every input that changes an answer mirrors itself in the URL
WARNINGS: list[str] = []  # this run's sentences: a typed or shared value is not the one used
CSS = f"<style>{(Path(__file__).parent / '.streamlit' / 'dashboard.css').read_text(encoding='utf-8')}</style>"


# ============================================================================ loaders (cached by id)


@st.cache_resource
def _uploads() -> dict[str, ModelSpec]:  # uploaded models by content hash (so sessions can share them)
    return {}


def _catalog() -> tuple[dict, dict, str | None]:
    """(models, gpus, error) — a malformed catalog file is shown, not raised."""
    try:
        return catalog.models(), catalog.gpus(), None
    except catalog.SpecError as err:
        return {}, {}, str(err)


def _model(model_key: str) -> ModelSpec:
    up = model_key.startswith("upload:")
    return _uploads()[model_key.removeprefix("upload:")] if up else catalog.model(model_key)


@st.cache_data(max_entries=16, show_spinner=False)
def _parse_upload(data: bytes) -> tuple[ModelSpec | None, str | None]:
    """(model, error) for an uploaded config.json (size-limited; planner.io.hf_import)."""
    return hf_import.model_from_config_bytes(data, MAX_UPLOAD_BYTES)


# ========================================================================== data for the views (cached)


@st.cache_resource(max_entries=256)
def _planned(sc: Scenario) -> Planned:
    return plan_scenario(sc, _model(sc.model_key), scenario_gpu(sc.gpu_id, sc.price_usd_per_hour),
                         scenario_profile(sc.gpu_id, sc.calibrated))


@st.cache_resource(max_entries=64, show_spinner=False)
def _users_vs_context(sc: Scenario) -> tuple[pd.DataFrame, int | None]:
    return views.users_vs_context(_planned(sc), sc.target_users)


@st.cache_resource(max_entries=64, show_spinner=False)
def _latency_frames(sc: Scenario) -> views.LatencyFrames:
    return views.latency_frames(_planned(sc))


def _ranked_sweep(sc: Scenario, same_dtypes: bool) -> pd.DataFrame:
    """The ranked views' rows (cost_view.ranking_sweep: `planner sweep`'s), cached on what they depend on only."""
    return _sweep_cached(cost_view.sweep_key(sc, same_dtypes), same_dtypes)


@st.cache_resource(max_entries=32, show_spinner=False)
def _sweep_cached(key: Scenario, same_dtypes: bool) -> pd.DataFrame:
    return cost_view.ranking_sweep(_model(key.model_key), key, same_dtypes)


@st.cache_resource(max_entries=32, show_spinner=False)
def _triangle(key: Scenario) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    df, corners = views.triangle_frame(cost_view.triangle_sweep(_model(key.model_key), key), key.output_tokens)
    return df, corners, views.triangle_points(df)


@st.cache_resource(max_entries=32, show_spinner=False)
def _pareto(key: Scenario, same_dtypes: bool) -> pd.DataFrame:
    return cost_view.pareto_frame(_sweep_cached(key, same_dtypes), key.target_users)


@st.cache_resource(max_entries=32, show_spinner=False)
def _fits(sc: Scenario) -> pd.DataFrame:
    """Does the model fit each catalog GPU at this context (the scenario's TP, dtypes, utilisation)?"""
    return headline.fits_per_gpu(_model(sc.model_key), catalog.gpus().values(), _planned(sc).deployment,
                                 sc.context_tokens, lambda g: scenario_profile(g, sc.calibrated))


@st.cache_resource(max_entries=64, show_spinner=False)
def _layout(sc: Scenario, demand: headline.Demand) -> layout.Layout:
    """TP/PP "auto" resolved by the fleet engine on the sidebar's GPU for the demand (planner.dashboard.layout)."""
    return layout.resolve_layout(sc, demand, _uploads().get(sc.model_key.removeprefix("upload:")))


@st.cache_resource(max_entries=64, show_spinner=False)
def _demand_answer(sc: Scenario, demand: headline.Demand, pins: tuple[int, int] = (0, 0)) -> headline.DemandAnswer:
    return headline.demand_fleet(_planned(sc), demand, sc, pins)  # pins: the sidebar's TP, PP (0 = auto)


@st.cache_resource(max_entries=16, show_spinner=False)
def _deploy(sc: Scenario, rate: float, replicas: int | None, operating=None) -> deploy_view.DeployPanel:
    return deploy_view.deploy_panel(_planned(sc), rate, replicas, operating)


@st.cache_resource(max_entries=1)
def _load_results() -> dict:  # finished load simulations by (scenario, requests): filled with a progress bar
    return {}


# ========================================================================================= inputs


def num(where, key: str, step: float, help: str) -> float:
    """A number bound to the URL, unbounded in the browser (nothing typed is dropped); planner.dashboard.inputs clamps it."""
    spec = inputs.NUMBERS[key]
    raw = where.number_input(f"{spec.label}{f' ({spec.unit})' if spec.unit else ''}", value=float(spec.default),
                             step=float(step), format="%.0f" if spec.integer else "%g", key=key, help=help, **BIND)
    v, warn = inputs.clean_number(spec, raw)
    if warn:
        WARNINGS.append(warn)
    return int(v) if spec.integer else float(v)


def _check_url(models: dict, gpus: dict) -> None:
    """Once per session: what the opening URL asked for that does not exist (shown until changed)."""
    s, q = st.session_state, st.query_params
    if "url_warnings" in s:
        return
    if (ctx := inputs.legacy_context(q)) is not None:  # a link from before the one context input
        s["context"] = ctx
        del q["prompt"]
    choices = {"model": [*models, UPLOAD], "gpu": list(gpus), "tp": layout.tp_options(gpus.values()),
               "pp": layout.pp_options(), "wdtype": list(WEIGHT_BITS), "kvdtype": list(KV_BYTES), "calib": CALIB_CHOICES, "demand": headline.DEMAND_MODES,
               "view": list(VIEWS), "cost_same_dtypes": [True, False], "report_only_slo": [True, False], "basis": B}
    native = models[q["model"]].native_dtype if q.get("model") in models else DEFAULTS["wdtype"]
    s["url_warnings"] = inputs.url_warnings({k: q[k] for k in q if k not in ("pin", "preset")}, choices,
                                            {**DEFAULTS, "wdtype": native}, inputs.URL_LABELS)
    s[hardware_inputs.WDTYPE_CHOSEN] = "wdtype" in q and "wdtype" not in s["url_warnings"]
    s["pins"], why = compare.read_pins(q.get_all("pin"))
    s["preset_applied"] = q.get("preset") if q.get("preset") in PRESETS else None
    if why:
        s["url_warnings"]["pin"] = (why, None)


def _apply_preset(name: str) -> None:
    models, gpus, _ = _catalog()
    st.session_state.update(inputs.preset_state(resolve(PRESETS[name], models, gpus)), preset_applied=name,
                            **{hardware_inputs.WDTYPE_CHOSEN: True})


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
    ids = [*models, UPLOAD]
    choice = st.selectbox("Model", ids, index=ids.index(DEFAULTS["model"]) if DEFAULTS["model"] in ids else 0,
                          key="model", help="A catalog id (models/*.yaml) or your own Hugging Face config.json", **BIND)
    if choice != UPLOAD:
        key = choice
    else:
        up = st.file_uploader("config.json", type=["json"], key="upload",
                              help=f"A Hugging Face config.json, at most {MAX_UPLOAD_BYTES // 1024} kB")
        if up is None:
            st.info("Upload a config.json to plan it.")
            return None
        spec, err = _parse_upload(up.getvalue())
        if err:
            st.error(err)
            return None
        _uploads()[spec.id] = spec
        key = f"upload:{spec.id}"
        st.caption("Uploads are not part of the shareable URL.")
    st.caption(views.model_caption(_model(key)))
    return key


def _workload_section() -> dict:
    context = num(st, "context", 512, "Tokens a request holds at its end: prompt + output (the KV cache it needs)")
    c1, c2 = st.columns(2)
    output = num(c1, "output", 64, "Generated tokens per request (decode); the rest of the context is the prompt")
    prompt, output, warn = inputs.split_context(context, output)
    if warn:
        WARNINGS.append(warn)
    c2.caption(f"= **{prompt:,}** prompt + **{output:,}** output tokens")
    users = num(st, "users", 10, "Requests in flight at once on the deployment (the seeds' 160)")
    c1, c2 = st.columns(2)
    ttft = num(c1, "ttft_ms", 100, "Time to first token")
    tpot = num(c2, "tpot_ms", 5, "Time per output token (inter-token latency)")
    return {"prompt_tokens": prompt, "output_tokens": output, "target_users": users, "ttft_slo_s": ttft * MS,
            "tpot_slo_s": tpot * MS}


def _price_calibration_section(gpu) -> dict:
    src = gpu.price_source
    price = num(st, "price", 0.1, f"0 = catalog price ({fmt_usd(gpu.price_usd_per_hour)}/h, {src.url}, {src.date})")
    basis = st.selectbox("Price basis", B, key="basis", **BIND, help="The one basis every GPU of the best fleet is "
                         "priced on; a GPU with no sourced price of it is left out, and said so")
    own = scenario_profile(gpu.id)
    calib = st.radio("Latency model", CALIB_CHOICES, index=0 if own.is_ideal else 1, key="calib", horizontal=True,
                     disabled=own.is_ideal, help="Efficiencies fitted on real vLLM probes (this GPU's own, or another "
                     "GPU's transferred), or the ideal roofline (speed of light)", **BIND)
    calibrated = calib == CALIB_CHOICES[1] and not own.is_ideal
    st.caption(f"No calibrated profile for {gpu.name} yet: the ideal roofline is used." if own.is_ideal
               else views.profile_caption(scenario_profile(gpu.id, calibrated)))
    return {"price_usd_per_hour": price, "calibrated": calibrated, "price_basis": basis}


def sidebar(models: dict, gpus: dict) -> Scenario | None:
    """The scenario widgets; None when there is no model to plan yet (e.g. waiting for an upload)."""
    with st.sidebar:
        st.header("Scenario")
        _presets_section()
        st.subheader("Model and hardware")
        model_key = _model_section(models)
        native = _model(model_key).native_dtype if model_key else DEFAULTS["wdtype"]
        hw, gpu_caption = hardware_inputs.hardware_section(st, gpus, native, num, WARNINGS, BIND)
        st.subheader("Workload and targets")
        wl = _workload_section()
        st.subheader("Price and calibration")
        g = gpus[hw["gpu_id"]]
        pc = _price_calibration_section(g)
        total = device_total_bytes(g, scenario_profile(g.id, pc["calibrated"]))
        gpu_caption.caption(views.gpu_caption(g, total))
    return None if model_key is None else Scenario(model_key=model_key, **hw, **wl, **pc)


# ========================================================================================= headline


@contextlib.contextmanager
def guard(name: str):
    """A failure inside one view becomes a plain sentence there (the details go to the server log)."""
    try:
        yield
    except Exception:
        LOG.exception("the %s view failed", name)
        st.warning(view_text.VIEW_FAILED.format(name))


def _demand() -> headline.Demand:
    c = st.container(horizontal=True, vertical_alignment="bottom", gap="small")
    mode = c.radio("Demand", headline.DEMAND_MODES, key="demand", horizontal=True, width="content",
                   help="What the fleet must serve: a request rate, or people who each wait for an answer, read "
                        "for a while and ask again", **BIND)
    if mode == headline.DEMAND_MODES[0]:
        rate = num(c.container(width=170), "rate", 1, "Requests per second, all users")
        return headline.Demand(mode, rate_per_s=rate)
    users = num(c.container(width=150), "active_users", 100, "People using the service at the same time")
    think = num(c.container(width=150), "think_s", 5, "Seconds a user reads/types between answers")
    return headline.Demand(mode, active_users=users, think_s=think)


def headline_section(sc: Scenario, o: Planned, r, demand: headline.Demand, pins: tuple) -> headline.DemandAnswer:
    da = _demand_answer(sc, demand, pins)  # across GPUs at the TP / PP the sidebar pins, as `planner size --pp N`
    if da.across is not None:
        row = st.container(horizontal=True, gap="small")
        for label, value, help in headline.best_fleet_metrics(da.across):
            row.metric(label, value, help=help, width="content")
        cmd = headline.fleet_command(sc, o.model.id, demand, pins)
        ex = st.expander("Every GPU's cheapest fleet, and the CLI call")
        st.caption(headline.best_fleet_caption(da.across, demand))
        ex.code(cmd, language="bash", wrap_lines=True)
        ex.table(headline.options_frame(da.across))
    row = st.container(horizontal=True, gap="small")
    for label, value, help in headline.detail_metrics(r, o.deployment.replicas, views.mem):
        row.metric(label, value, help=help, width="content")
    st.caption(view_text.scenario_caption(o, views.latency_model_label(r.profile_mode), views.scenario_notes(o)))
    s, token = st.session_state, compare.encode(sc, demand)
    st.button("Pin this scenario", icon=":material/push_pin:", key="pin_btn",
              on_click=lambda: s.update(pins=compare.add_pin(s.get("pins", []), token)),
              help=f"Keep it for the Compare view (up to {compare.MAX_PINS}; the pins travel in the URL)")
    return da


# =========================================================================================== views


def view_memory(sc: Scenario, o: Planned, r, da) -> None:
    curve, max_ctx = _users_vs_context(sc)
    left, right = st.columns([1, 2])
    left.plotly_chart(charts.memory_stack(views.memory_bar(r, o.gpu.name)), key="mem-stack")
    right.plotly_chart(charts.users_vs_context(curve, sc.target_users, sc.context_tokens, max_ctx), key="mem-users")
    st.markdown(view_text.memory_sentence(o, max_ctx))
    st.dataframe(views.memory_table(o), hide_index=True, width="stretch")
    fits = _fits(sc)
    tp_pp = fmt_layout(sc.tensor_parallel, sc.pipeline_parallel)
    st.markdown(f"**Fits per GPU** at {sc.context_tokens:,} tokens ({tp_pp}, {sc.weight_dtype} "
                f"weights, KV {sc.kv_cache_dtype}):")
    st.table(fits.assign(fits=fits["fits"].map({True: "✅ fits", False: "❌ does not fit"}))[
        ["gpu", "fits", "sentence"]].set_index("gpu"))


def view_latency(sc: Scenario, o: Planned, r, da) -> None:
    f = _latency_frames(sc)
    c1, c2 = st.columns(2)
    c1.plotly_chart(charts.ttft_vs_prompt(f.ttft, sc.ttft_slo_s, sc.prompt_tokens), key="lat-ttft")
    c2.plotly_chart(charts.tpot_vs_batch(f.tpot_batch, sc.tpot_slo_s, f.crossing, f.kv_limit_batch), key="lat-tpot-b")
    c1, c2 = st.columns(2)
    c1.plotly_chart(charts.tpot_vs_context(f.tpot_context, sc.tpot_slo_s), key="lat-tpot-c")
    c2.plotly_chart(charts.throughput_vs_batch(f.throughput, r.batch_size or None, r.batch_size or None),
                    key="lat-thr")
    st.markdown(view_text.latency_sentence(f, r))
    st.caption(f"Error bands (p90 of |error| on measurements, planner.bands): TTFT {r.bands['ttft'].text()}, "
               f"TPOT {r.bands['tpot'].text()} — {f.band_basis}.")


def view_roofline(sc: Scenario, o: Planned, r, da) -> None:
    rv = views.roofline_view(o)
    st.plotly_chart(charts.roofline(rv.peaks, o.gpu.hbm_bandwidth_bytes_per_s, rv.points, o.gpu.name), key="roof")
    st.markdown(views.ridge_sentence(o.gpu, rv))
    st.dataframe(rv.table, hide_index=True, width="stretch")


def view_triangle(sc: Scenario, o: Planned, r, da) -> None:
    df, corners, pts = _triangle(cost_view.sweep_key(sc, None))
    if df.empty:
        st.warning("No configuration of this model fits any catalog GPU at this context length.")
        return
    st.plotly_chart(charts.triangle(pts, views.scenario_point(r, sc.output_tokens), corners), key="tri")
    if not corners.empty:
        tbl = corners.assign(latency=corners["latency_s"].map(fmt_ms),
                             throughput=corners["output_tokens_per_s_per_gpu"].map(lambda x: f"{x:,.0f} tok/s/GPU"))
        st.dataframe(tbl[["corner", "label", "latency", "throughput"]], hide_index=True, width="stretch")
    st.caption(view_text.triangle_caption(r, len(df), int(df["pareto"].sum()), len(pts)))


def _same_dtypes_toggle() -> bool:
    return st.toggle("Keep the scenario's weight and KV dtypes", value=True, key="cost_same_dtypes", **BIND,
                     help="Off: any weight/KV dtype may win (quality changes with the dtype; see the quality column)")


def _apply_pick() -> None:
    s = st.session_state
    pts = ((s.get("pareto") or {}).get("selection") or {}).get("points") or []
    if new := cost_view.picked_state(pts, float(s.get("gpus", 1)), int(s.get("gpus_per_replica_used", 1))):
        s.update(new, **{hardware_inputs.WDTYPE_CHOSEN: True})


def view_cost(sc: Scenario, o: Planned, r, da) -> None:
    if fleet := da.across and cost_view.fleet_sentence(da.across, da.demand.describe()):  # what ranks: $/month
        st.success(fleet)
        st.table(headline.options_frame(da.across).set_index("GPU"))
        st.caption(cost_view.BY_MTOK_NOTE)
    same = _same_dtypes_toggle()
    best = views.cheapest_per_gpu(_ranked_sweep(sc, same), sc.target_users)
    names = {k: g.name for k, g in catalog.gpus().items()}
    if best.empty:
        st.warning(cost_view.nothing_meets_sentence(sc))
        return
    (st.info if fleet else st.success)(cost_view.first_sentence(best, names))
    st.caption(cost_view.RANKING_DEFINITION + " " + (cost_view.overrides_note(sc, o.gpu.name) or ""))
    st.plotly_chart(charts_cost.cost_bars(best), key="cost")
    st.dataframe(views.cost_table(best, names), hide_index=True, width="stretch")
    if missing := sorted(set(names) - set(best["gpu_id"].astype(str))):
        st.caption("No configuration meets the targets on: " + ", ".join(names[g] for g in missing) + ".")
    fig = charts_cost.cost_vs_speed(_pareto(cost_view.sweep_key(sc, same), same), cost_view.scenario_speed_point(r),
                                    cost_view.PICK_FIELDS)
    st.plotly_chart(fig, key="pareto", on_select=_apply_pick, selection_mode="points")
    picked = st.session_state.get("picked")
    st.caption((f"Applied **{picked}** to the scenario. " if picked else "") + cost_view.PARETO_CAPTION)


def view_report(sc: Scenario, o: Planned, r, da) -> None:
    same = _same_dtypes_toggle()
    sw = _ranked_sweep(sc, same)  # in the ranking's order (planner.sweep ranks with planner.ranking)
    only = st.toggle("Only rows that meet the targets", value=False, key="report_only_slo", **BIND)
    shown = sw[sw["meets_slo"]] if only else sw
    cfg = {c: st.column_config.NumberColumn(c, help=f"unit: {c.rsplit('_', 1)[-1]}", format="%.4g")
           for c in sw.columns if c.endswith(("_s", "_bytes", "_per_gpu", "_per_s")) or c.startswith("cost_")}
    st.dataframe(shown, hide_index=True, width="stretch", height=480, column_config=cfg)
    st.caption(f"{len(shown):,} of {len(sw):,} rows. {cost_view.RANKING_DEFINITION} Column names carry their units "
               "(s, bytes, usd); the CSV holds the same raw numbers. "
               + (cost_view.overrides_note(sc, o.gpu.name) or ""))
    c = st.container(horizontal=True)
    c.download_button("Download the sweep as CSV", lambda: csv_bytes(sw), file_name=f"sweep-{o.model.id}.csv",
                      mime="text/csv", key="dl-csv", on_click="ignore")
    cmd = views.sweep_command(sc, o.model.id, same)
    c.download_button("Download the plan report (Markdown)", lambda: deploy_view.plan_report_markdown(o, da),
        file_name=f"plan-{o.model.id}-{o.gpu.id}.md", mime="text/markdown", key="dl-plan", on_click="ignore")
    st.caption("The same CSV as:")
    st.code(cmd, language="bash")


def view_load(sc: Scenario, o: Planned, r, da) -> None:
    problem = views.load_problem(r)
    if problem:
        st.warning(problem)
        return
    c = st.container(horizontal=True, vertical_alignment="bottom")
    n = num(c.container(width=220), "load_requests", 100, "Poisson arrivals with the sidebar's prompt and output "
            "lengths on one replica; more requests = steadier tails (and a longer run)")
    if c.button("Simulate", type="primary", key="load_run"):
        st.session_state["load_for"] = (sc, n)
    store = _load_results()
    if (sc, n) not in store:
        if st.session_state.get("load_for") != (sc, n):
            st.info(view_text.LOAD_PRESS)
            return
        bar = st.progress(0.0, text="Simulating: the burst that sets the scale…")
        store[(sc, n)] = views.load_view(o, n, progress=lambda f, rate: bar.progress(
            f, text="Simulating…" if rate is None else f"Simulating {n:,} requests at {rate:,.2f} requests/s…"))
        bar.empty()
        if len(store) > 16:
            store.pop(next(iter(store)))
    res = store[(sc, n)]
    st.plotly_chart(charts.latency_vs_rate(res.frame, {"TTFT": sc.ttft_slo_s, "TPOT": sc.tpot_slo_s}, res.knee),
                    key="load")
    st.markdown(view_text.load_sentence(res, o, n))
    st.caption(view_text.LOAD_CAPTION)


def view_compare(sc: Scenario, o: Planned, r, da) -> None:
    pins = st.session_state.get("pins", [])
    if not pins:
        st.info("Nothing pinned yet: press **Pin this scenario** under the headline, change the sidebar, pin again.")
        return
    items, problems = compare.pinned_items(  # each pin with its own demand (the current one for an older pin)
        pins, _planned, lambda pin, token: _demand_answer(pin, compare.decode_demand(token) or da.demand),
        lambda p: views.latency_model_label(p.report.profile_mode))
    for why in problems:  # one pin that cannot be planned is said; the others are still compared
        st.warning(why)
    items = [("now", o, da, views.latency_model_label(r.profile_mode)), *items]
    st.dataframe(compare.compare_frame(items), hide_index=True, width="stretch", height=35 * 19)
    c = st.container(horizontal=True)
    for i, token in enumerate(pins, 1):
        c.button(f"Unpin {i}", key=f"unpin-{i}", on_click=lambda t=token: st.session_state["pins"].remove(t))


def view_deploy(sc: Scenario, o: Planned, r, da) -> None:
    deploy_view.render(st, _deploy(sc, *deploy_view.fleet_args(da)), o.model.id)


@st.cache_resource(max_entries=1)
def _capacity_results() -> dict:  # finished capacity plans by their inputs (filled by **Plan capacity**)
    return {}


def view_capacity(sc: Scenario, o: Planned, r, da) -> None:
    from planner.dashboard import capacity_view  # planner.capacity: off the first screen's imports
    capacity_view.render(st, o, _capacity_results())


VIEW_FUNCS = {"Memory": view_memory, "Latency": view_latency, "Roofline": view_roofline, "Triangle": view_triangle,
              "Cost": view_cost, "Sizing report": view_report, "Load": view_load, "Compare": view_compare,
              "Deploy": view_deploy, "Capacity": view_capacity}


# ============================================================================================ page


def main() -> None:
    st.markdown(CSS, unsafe_allow_html=True)
    st.title("LLM inference capacity planner")
    models, gpus, cat_err = _catalog()
    if cat_err or not models or not gpus:
        st.error(f"The catalog could not be read: {cat_err or 'no models or GPUs found'}")
        st.stop()
    _check_url(models, gpus)
    sc = sidebar(models, gpus)
    if sc is None:
        st.info("Upload a Hugging Face config.json in the sidebar (or pick a catalog model) to see the plan.")
        st.stop()
    for key, vals in (("pin", st.session_state.get("pins", [])), ("preset", [st.session_state.get("preset_applied")])):
        if st.query_params.get_all(key) != [v for v in vals if v]:  # pins and the applied preset travel in the URL
            st.query_params[key] = [v for v in vals if v]
    warn_box, err_box = st.empty(), st.container()
    demand, spec = _demand(), _uploads().get(sc.model_key.removeprefix("upload:"))  # an upload is checked as itself
    try:  # TP/PP "auto" (0): the fleet engine's layout on the sidebar's GPU for the demand, once the rest is sound
        sc, note, pins = sc, None, (sc.tensor_parallel, sc.pipeline_parallel)  # before "auto" (0) is resolved
        tp, pp = sc.tensor_parallel or 1, sc.pipeline_parallel or 1  # auto: any layout; checked again once chosen
        auto = not (sc.tensor_parallel and sc.pipeline_parallel)
        pre = sc._replace(tensor_parallel=tp, pipeline_parallel=pp, num_gpus=tp * pp if auto else sc.num_gpus)
        if not (problems := scenario_problems(pre, spec)):
            sc, note, _ = _layout(sc, demand)
            problems = scenario_problems(sc, spec)
        if problems:
            err_box.error(" ".join(p[0].upper() + p[1:] + "." for p in problems))
            st.stop()
        o = _planned(sc)
    except Exception as err:  # st.stop() is a BaseException: it passes
        LOG.exception("planning failed")
        err_box.error(f"This scenario cannot be planned: {' '.join(str(err).split())[:300] or type(err).__name__}.")
        st.stop()
    st.session_state["gpus_per_replica_used"], r = sc.tensor_parallel * sc.pipeline_parallel, o.report
    if r.reasons:
        err_box.error("Infeasible: " + "; ".join(r.reasons) + ".")
    da = headline_section(sc, o, r, demand, pins)
    preset = st.session_state.get("preset_applied")
    qw = headline.quality_warning(PRESETS[preset].corner if preset else None, sc.weight_dtype, r.quality.retention,
                                  preset or "")
    shown = [*inputs.still_shown(st.session_state.get("url_warnings", {}), st.session_state), *WARNINGS,
             *[qw] * bool(qw), *(w[0].upper() + w[1:] for w in r.warnings if not w.endswith(SHORTFALL_END))]
    if shown:
        warn_box.warning("\n".join(f"- {w.rstrip('.')}." for w in shown))
    tabs = st.tabs(list(VIEWS), key="view", bind="query-params")
    for tab, (name, blurb) in zip(tabs, VIEWS.items()):
        with tab:
            if tab.open:
                st.caption(blurb)
                if note and name not in ("Triangle", "Cost", "Compare"):  # the views of one replica: whose TP/PP
                    st.caption(note)
                with guard(name):
                    VIEW_FUNCS[name](sc, o, r, da)


main()
