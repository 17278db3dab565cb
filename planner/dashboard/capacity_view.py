"""The dashboard's Capacity view: the sidebar's model, GPU, workload and targets over a day or a week of
demand (:func:`planner.capacity.plan.plan_capacity`, the engine behind ``planner capacity``), drawn as one
chart — demand against the capacity the autoscaled and the static fleets hold, the replicas, and the SLO
attainment the policy replay measured hour by hour — with the mixes of price bases, the break-even and the
files (executive summary HTML/PDF, KEDA / HPA manifests, hourly CSV).

No streamlit import: :func:`render` lays the view out on the ``st`` module app.py hands it (the layout
moved here to keep app.py within its 550 lines).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from planner.capacity.demand import SHAPES, demand_from_shape
from planner.capacity.engine import DEFAULT_HEADROOM, workload_maker
from planner.capacity.plan import CapacityPlan, plan_capacity
from planner.capacity.summary import summary_html, summary_pdf
from planner.dashboard.charts import COLORS
from planner.dashboard.scenario import Planned
from planner.deploy.autoscale import autoscale_files

__all__ = ["CapacityInputs", "capacity_figure", "capacity_files", "capacity_metrics", "mixes_frame", "render"]


@dataclass(frozen=True)
class CapacityInputs:
    """The view's own inputs (hashable: the results are cached by them and the scenario)."""

    peak_rate_per_s: float = 40.0
    trough_rate_per_s: float = 4.0
    shape: str = "diurnal"
    days: int = 7
    weekend_factor: float = 0.5
    api_usd_per_mtok: float = 1.0
    headroom: float = DEFAULT_HEADROOM


def plan_for(o: Planned, ci: CapacityInputs) -> CapacityPlan:
    """The capacity plan of the sidebar's scenario (its GPU, lengths and targets as p99) for ``ci``."""
    d = demand_from_shape(ci.peak_rate_per_s, ci.trough_rate_per_s, shape=ci.shape, days=ci.days,
                          weekend_factor=ci.weekend_factor)
    w, dep = o.workload, o.deployment
    make = workload_maker(w.prompt_tokens, w.output_tokens)
    return plan_capacity(o.model, [(o.gpu, o.profile)], d, make, w.ttft_slo_s, w.tpot_slo_s,
                         weight_dtype=dep.weight_dtype, kv_cache_dtype=dep.kv_cache_dtype, headroom=ci.headroom,
                         api_usd_per_mtok_output=ci.api_usd_per_mtok or None, replay_hours=min(48, d.hours))


#: The curve's hours drawn from a Monday 00:00 (2024-01-01 was one); the axes show weekday and time only.
T0 = pd.Timestamp("2024-01-01")


def _hours(n: int, offset_h: float = 0.0) -> pd.DatetimeIndex:
    return T0 + pd.to_timedelta(np.arange(n) + offset_h, unit="h")


def capacity_figure(plan: CapacityPlan) -> go.Figure:
    """Top: demand (area) against the capacity within the targets of the autoscaled fleet (replicas × the
    knee, a step line) and of the static fleet (dashed); the right axis reads the step line in replicas.  Bottom: the share of
    requests the policy replay served within the targets, per hour, against the target."""
    s, k = plan.schedule, plan.knee
    n = plan.demand.hours
    x = _hours(n)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.72, 0.28], vertical_spacing=0.06,
                        specs=[[{"secondary_y": True}], [{}]])
    fig.add_trace(go.Scatter(x=x, y=plan.demand.rate_per_s, name="demand (req/s)", fill="tozeroy",
                             line={"color": COLORS["decode"], "width": 1.5}), row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=s.replicas * k.knee_rate_per_s, name="autoscaled replicas × knee (req/s)",
                             customdata=s.replicas, hovertemplate="%{customdata} replicas: %{y:.3g} req/s",
                             line={"color": COLORS["kv_pool"], "shape": "hv", "width": 2}), row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=[s.static_replicas * k.knee_rate_per_s] * len(x),
                             name=f"static fleet: {s.static_replicas} replicas",
                             line={"color": COLORS["headroom"], "dash": "dash"}), row=1, col=1)
    # the right axis counts replicas on the same scale (one replica = its knee): the step line reads either way
    top = 1.08 * max(float(plan.demand.rate_per_s.max()), s.static_replicas * k.knee_rate_per_s)
    fig.add_trace(go.Scatter(x=x, y=s.replicas, showlegend=False, hoverinfo="skip", mode="lines",
                             line={"width": 0}, opacity=0), row=1, col=1, secondary_y=True)
    if plan.replay is not None:
        r = plan.replay
        fig.add_trace(go.Bar(x=_hours(r.hours, 0.5), y=100 * r.attainment, name="within the targets (replay, %)",
                             width=3600 * 1000 * 0.9,
                             marker={"color": [COLORS["kv_pool"] if a >= r.target_attainment else COLORS["slo"]
                                               for a in r.attainment]}), row=2, col=1)
        fig.add_trace(go.Scatter(x=[x[0], _hours(r.hours)[-1] + pd.Timedelta(hours=1)],
                                 y=[100 * r.target_attainment] * 2, mode="lines",
                                 name="target", line={"color": COLORS["slo"], "dash": "dot"}), row=2, col=1)
    fig.update_layout(height=520, margin={"l": 60, "r": 60, "t": 40, "b": 40}, bargap=0.05,
                      title={"text": f"{plan.model_name} on {k.label()}: demand, capacity and attainment",
                             "x": 0, "xanchor": "left", "font": {"size": 15}},
                      legend={"orientation": "h", "yref": "container", "y": 0, "x": 0})
    fig.update_yaxes(title_text="requests/s", row=1, col=1, range=[0, top])
    fig.update_yaxes(title_text="replicas", row=1, col=1, secondary_y=True, showgrid=False,
                     range=[0, top / k.knee_rate_per_s], dtick=max(1, round(top / k.knee_rate_per_s / 8)))
    low = max(0.0, min(95.0, 100 * _min_att(plan) - 2))
    fig.update_yaxes(title_text="% in SLO", row=2, col=1, range=[low, 100.5])
    fig.update_xaxes(tickformat="%a %H:%M" if n <= 14 * 24 else "%b %d", hoverformat="%a %H:%M")
    return fig


def _min_att(plan: CapacityPlan) -> float:
    return float(plan.replay.attainment.min()) if plan.replay is not None else 1.0


def capacity_metrics(plan: CapacityPlan) -> list[tuple[str, str, str]]:
    """(label, value, help) for the metric row."""
    s, p = plan.schedule, plan.policy
    out = [("Replicas", f"{s.min_replicas}–{int(s.replicas.max())}", f"autoscaled on {p.signal}"),
           ("Autoscaled", f"${s.usd_per_month_autoscaled:,.0f}/mo", f"{s.gpu_hours_autoscaled:,.0f} GPU-hours over "
                                                                   f"the curve, boots included"),
           ("Static peak", f"${s.usd_per_month_static:,.0f}/mo", f"{s.static_replicas} replicas every hour"),
           ("Utilisation", f"{s.utilisation_autoscaled:.0%} vs {s.utilisation_static:.0%}",
            "requests served ÷ what the paid replica-hours serve at the knee: autoscaled vs static"),
           ("Lead time", f"{p.lead.total_s:.0f} s", p.lead.boot_basis)]
    if plan.replay is not None:
        out.append(("In SLO (replay)", f"{plan.replay.overall_attainment:.2%}",
                    f"{plan.replay.total_requests:,} requests replayed minute by minute with the policy in the loop"))
    if plan.mixes:
        out.append(("Cheapest mix", f"${plan.mixes[0].usd_per_month:,.0f}/mo", plan.mixes[0].label))
    return out


def mixes_frame(plan: CapacityPlan) -> pd.DataFrame:
    return pd.DataFrame([{"fleet": m.label, "$/month": round(m.usd_per_month), "in SLO (expected)":
                          f"{m.expected_attainment:.2%}", "risk": m.risk} for m in plan.mixes])


def capacity_files(plan: CapacityPlan) -> dict[str, str | bytes]:
    """The downloads: the summary (HTML; PDF when fpdf2 is installed), the manifests, the plan as JSON."""
    files: dict[str, str | bytes] = {"summary.html": summary_html(plan)}
    try:
        files["summary.pdf"] = summary_pdf(plan)
    except ImportError:
        pass
    files.update(autoscale_files(plan.policy, model_id=plan.model_id))
    files["capacity.json"] = json.dumps(plan.as_dict(hourly=True), indent=2, allow_nan=False, default=str)
    return files


def render(st, o: Planned, store: dict) -> None:
    """The view, laid out on ``st`` (streamlit, from app.py); ``store`` keeps finished plans by their inputs."""
    if not (o.workload.ttft_slo_s and o.workload.tpot_slo_s):
        st.info("Set the TTFT and TPOT targets in the sidebar: the capacity plan sizes on their p99.")
        return
    c = st.container(horizontal=True, vertical_alignment="bottom")
    base = CapacityInputs()
    ci = CapacityInputs(
        c.number_input("Peak (req/s)", 0.01, 1e5, base.peak_rate_per_s, key="cap_peak", width=130),
        c.number_input("Trough (req/s)", 0.0, 1e5, base.trough_rate_per_s, key="cap_trough", width=130),
        c.selectbox("Shape", SHAPES, key="cap_shape", width=130),
        c.selectbox("Days", (1, 7), index=1, key="cap_days", width=90),
        c.number_input("Weekend ×", 0.0, 10.0, base.weekend_factor, key="cap_weekend", width=110),
        c.number_input("API $/Mtok out", 0.0, 1e4, base.api_usd_per_mtok, key="cap_api", width=140))
    key = (o.model.id, o.gpu.id, o.deployment.weight_dtype, o.deployment.kv_cache_dtype, o.workload.prompt_tokens,
           o.workload.output_tokens, o.workload.ttft_slo_s, o.workload.tpot_slo_s, o.profile.mode, ci)
    if c.button("Plan capacity", type="primary", key="cap_run"):
        if ci.trough_rate_per_s > ci.peak_rate_per_s:
            st.warning("The trough is above the peak: lower it or raise the peak.")
            return
        with st.spinner("Simulating the knee and replaying the policy…"):
            store[key] = plan_for(o, ci)
        while len(store) > 8:
            store.pop(next(iter(store)))
    plan = store.get(key)
    if plan is None:
        st.info("Press **Plan capacity**: the knee of one replica is simulated (a few seconds), the curve planned "
                "hour by hour and the policy replayed through the simulator.")
        return
    row = st.container(horizontal=True, gap="small")
    for label, value, help in capacity_metrics(plan):
        row.metric(label, value, help=help, width="content")
    st.plotly_chart(capacity_figure(plan), key="capacity")
    if plan.breakeven is not None:
        st.markdown(f"**Against the API:** {plan.breakeven.verdict()}.")
    st.dataframe(mixes_frame(plan), hide_index=True, width="stretch")
    d = st.container(horizontal=True)
    for name, body in capacity_files(plan).items():
        d.download_button(name, body, file_name=name, key=f"cap-dl-{name}", on_click="ignore")
