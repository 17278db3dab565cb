"""Pure figure builders for the Cost view: $/Mtok per GPU with its error band, and cost against per-user
speed (the Pareto chart whose points the dashboard lets the user pick).  Like :mod:`planner.dashboard.charts`: no
streamlit, no planner maths; rows marked by how their latency was obtained (calibrated, transferred, ideal).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from planner.dashboard.charts import COLORS, _fig

#: Bar pattern per calibration mode: a transferred or ideal row is never drawn like a measured one.
MODE_PATTERN = {"calibrated": "", "transferred": "/", "ideal": "x"}
MODE_SYMBOL = {"calibrated": "circle", "transferred": "diamond", "ideal": "x"}
MODE_NAME = {"calibrated": "calibrated", "transferred": "transferred (not measured here)", "ideal": "ideal roofline"}


def _band(df: pd.DataFrame) -> np.ndarray:
    """The ± band (%) of a row's throughput, hence of its cost: the wider of TTFT and TPOT; NaN: no basis."""
    t, p = (df[c].to_numpy(float) for c in ("ttft_error_band_pct", "tpot_error_band_pct"))
    return np.where(np.isfinite(t) & np.isfinite(p), np.fmax(t, p), np.nan)


def cost_bars(df: pd.DataFrame) -> go.Figure:
    """All-in $/M output tokens per GPU type in ranking order, with the error band as error bars and the
    calibration mode as the bar's pattern (hatched: transferred, crossed: ideal roofline).

    ``df``: ``label``, ``cost_usd_per_million_output_tokens_all_in``, ``calibration_mode``,
    ``ttft_error_band_pct``, ``tpot_error_band_pct`` (rows that miss a target left out by the caller)."""
    fig = _fig("All-in $ per million output tokens, cheapest first", "", "USD per million output tokens",
               height=430)
    cost = df["cost_usd_per_million_output_tokens_all_in"].to_numpy(float)
    band = _band(df)
    modes = df["calibration_mode"].astype(str).to_numpy()
    for mode in ("calibrated", "transferred", "ideal"):
        m = modes == mode
        if not m.any():
            continue
        err = np.where(np.isfinite(band[m]), cost[m] * band[m] / 100, 0.0)
        fig.add_bar(x=df["label"][m], y=cost[m], name=MODE_NAME[mode], marker_color=COLORS["decode"],
                    marker_pattern_shape=MODE_PATTERN[mode],
                    error_y={"type": "data", "array": err, "visible": True, "color": "#555"},
                    text=[f"${v:,.3f}" + ("" if np.isfinite(b) else " (no band)") for v, b in zip(cost[m], band[m])],
                    textposition="outside",
                    customdata=[("no measured basis" if not np.isfinite(b) else f"±{b:.0f} %") for b in band[m]],
                    hovertemplate="%{x}: $%{y:,.3f} per M output tokens (%{customdata})<extra>" + MODE_NAME[mode]
                                  + "</extra>")
    fig.update_xaxes(tickangle=-30, categoryorder="array", categoryarray=list(df["label"]))
    return fig


def cost_vs_speed(df: pd.DataFrame, chosen: dict | None = None, customdata_cols: tuple[str, ...] = ()) -> go.Figure:
    """All-in $/M output tokens (y, log) against tokens/s each user sees (x = 1 / TPOT, log), colour = quality,
    the Pareto front ringed; one trace per calibration mode (its marker symbol).  Points carry
    ``customdata_cols`` so a picked point names its configuration.

    ``df``: ``per_user_tokens_per_s``, ``cost``, ``quality``, ``pareto``, ``label``, ``calibration_mode``.
    ``chosen``: the scenario's own point (same two coordinates)."""
    fig = _fig("Cost against speed per user: pick a point to apply it", "tokens/s each user sees (1 / TPOT, log)",
               "all-in $ per million output tokens (log)", xaxis_type="log", yaxis_type="log", height=460)
    if df.empty:
        return fig
    q = df["quality"].astype(float)
    qmin, qmax = float(np.nanmin(q)) if q.notna().any() else 0.0, float(np.nanmax(q)) if q.notna().any() else 1.0
    first = True
    for mode in ("calibrated", "transferred", "ideal"):
        g = df[df["calibration_mode"].astype(str) == mode]
        if g.empty:
            continue
        fig.add_scatter(
            x=g["per_user_tokens_per_s"], y=g["cost"], mode="markers", name=MODE_NAME[mode], text=g["label"],
            customdata=g[list(customdata_cols)].to_numpy().tolist() if customdata_cols else None,
            marker={"size": np.where(g["pareto"], 13, 8), "symbol": MODE_SYMBOL[mode], "color": g["quality"],
                    "colorscale": "Viridis", "cmin": qmin, "cmax": qmax, "opacity": 0.9,
                    "line": {"color": np.where(g["pareto"], COLORS["pareto"], "rgba(0,0,0,0.3)"),
                             "width": np.where(g["pareto"], 2, 0.5)},
                    "showscale": first, "colorbar": {"title": {"text": "quality"}, "thickness": 12, "len": 0.6}},
            hovertemplate="%{text}<br>%{x:,.1f} tok/s per user, $%{y:,.3f}/M output<br>quality %{marker.color:.1f}"
                          "<extra>" + MODE_NAME[mode] + "</extra>")
        first = False
    front = df[df["pareto"]].sort_values("per_user_tokens_per_s")
    fig.add_scatter(x=front["per_user_tokens_per_s"], y=front["cost"], mode="lines", name="Pareto front",
                    line={"color": COLORS["pareto"], "dash": "dot", "width": 1}, hoverinfo="skip")
    if chosen and np.isfinite(chosen.get("per_user_tokens_per_s", np.nan)) and np.isfinite(chosen.get("cost", np.nan)):
        fig.add_scatter(x=[chosen["per_user_tokens_per_s"]], y=[chosen["cost"]], mode="markers", name="this scenario",
                        marker={"size": 18, "symbol": "star", "color": COLORS["chosen"]}, hoverinfo="skip")
    fig.update_layout(clickmode="event+select")
    return fig
