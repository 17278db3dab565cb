"""Pure figure builders: DataFrame (SI units, unit-suffixed columns) -> plotly Figure.

No streamlit calls here, and no planner maths: the caller computes the numbers, these functions only
draw them.  Seconds are drawn as milliseconds, bytes as GiB (binary, 2**30, what vLLM and nvidia-smi
print), and every axis title says which unit it shows.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from planner.units import MS, TFLOPS, GiB

# one palette for the whole dashboard
COLORS = {
    "weights": "#4C78A8",
    "activation": "#F58518",
    "overhead": "#B279A2",
    "kv_pool": "#54A24B",
    "headroom": "#BAB0AC",
    "slo": "#E45756",
    "target": "#E45756",
    "prefill": "#F58518",
    "decode": "#4C78A8",
    "pareto": "#E45756",
    "candidate": "#9D9DA3",
    "chosen": "#000000",
    "feasible": "rgba(84,162,75,0.15)",
}
#: Colours of several lines in one chart (one per batch size).
LINE_COLORS = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#E45756")

# No template: st.plotly_chart applies the Streamlit theme, and validating a template per figure costs
# more than everything else a figure does.
# The legend sits under the plot (never over the title, whatever its length on a phone); plotly grows the
# bottom margin to fit it.
_LAYOUT = {
    "margin": {"l": 60, "r": 20, "t": 40, "b": 40},
    "height": 400,
    "legend": {"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0, "xanchor": "left", "x": 0},
}


def _fig(title: str, x_title: str, y_title: str, xaxis_type: str | None = None, yaxis_type: str | None = None,
         **layout) -> go.Figure:
    """A figure with its title, axis titles and the common layout, built in one go (each plotly ``update_*``
    call validates the whole layout again: the dashboard builds several figures per widget change)."""
    axes = {f"{a}axis": {"title": {"text": t}, **({"type": k} if k else {})}
            for a, t, k in (("x", x_title, xaxis_type), ("y", y_title, yaxis_type))}
    return go.Figure(layout={"title": {"text": title, "x": 0, "xanchor": "left", "font": {"size": 15}},
                             **_LAYOUT, **axes, **layout})


def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float, np.floating, np.integer)) and math.isfinite(float(x))


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    return f"rgba({int(h[0:2], 16)},{int(h[2:4], 16)},{int(h[4:6], 16)},{alpha})"


def error_band(fig: go.Figure, x, y, band_pct, color: str, what: str, legend: bool = True) -> None:
    """Shade y × (1 ± band_pct/100) where the band is known; say "no measured basis" where it is not
    (``band_pct`` NaN: :class:`planner.bands.Band` with ``pct`` None).  ``legend``: list the band in the legend."""
    x, y, pct = (np.asarray(v, dtype=float) for v in (x, y, band_pct))
    pct = np.broadcast_to(pct, y.shape)
    ok = np.isfinite(pct) & np.isfinite(y)
    if ok.any():
        xs, lo, hi = x[ok], y[ok] * (1 - pct[ok] / 100), y[ok] * (1 + pct[ok] / 100)
        vals = sorted({float(v) for v in pct[ok]})
        fig.add_scatter(x=np.r_[xs, xs[::-1]], y=np.r_[hi, lo[::-1]], fill="toself", fillcolor=_rgba(color, 0.18),
                        line={"width": 0}, hoverinfo="skip", mode="lines", showlegend=legend, legendgroup="band",
                        name="error band ±" + " / ±".join(f"{v:.0f}" for v in vals) + " %")
    if not ok.all() and legend:
        where = "" if not ok.any() else f" beyond {x[ok].max():,.0f}" if ok[0] else f" below {x[ok].min():,.0f}"
        fig.add_annotation(x=1.0, xref="paper", y=1.0, yref="paper", xanchor="right", yanchor="top", showarrow=False,
                           text=f"{what}: no measured basis for an error band{where}",
                           font={"size": 11, "color": "#8A6D3B"}, bgcolor="rgba(255,255,255,0.8)")


def thin_cloud(df: pd.DataFrame, x: str, y: str, max_points: int, cells: int = 48) -> pd.DataFrame:
    """At most ``max_points`` rows of ``df``: one per cell of a ``cells`` × ``cells`` grid over log(x), log(y)
    (then evenly spaced if still too many), so a scatter keeps its shape with far fewer points."""
    if len(df) <= max_points:
        return df
    if max_points <= 0:
        return df.iloc[:0]
    lx, ly = (np.log10(df[c].to_numpy(float).clip(1e-300)) for c in (x, y))
    span = lambda v: (v - v.min()) / ((v.max() - v.min()) or 1.0)
    key = (span(lx) * (cells - 1)).round().astype(int) * cells + (span(ly) * (cells - 1)).round().astype(int)
    keep = df.iloc[np.unique(key, return_index=True)[1]]
    if len(keep) > max_points:
        keep = keep.iloc[np.linspace(0, len(keep) - 1, max_points).astype(int)]
    return keep


def empty_figure(message: str) -> go.Figure:
    """A blank figure that says why there is nothing to draw."""
    fig = go.Figure()
    fig.update_layout(height=240, xaxis={"visible": False}, yaxis={"visible": False},
                      annotations=[{"text": message, "showarrow": False, "font": {"size": 14}, "x": 0.5, "y": 0.5,
                                        "xref": "paper", "yref": "paper"}])
    return fig


def _axis_pos(fig: go.Figure, axis: str, value: float) -> float:
    """Annotation coordinate for ``value``: plotly places annotations on log axes at log10(value)."""
    ax = fig.layout.xaxis if axis == "x" else fig.layout.yaxis
    return math.log10(value) if ax.type == "log" else value


def _vline(fig: go.Figure, x: float, text: str, color: str, top: bool = True) -> None:
    """A dotted vertical line with a label that also works on log axes."""
    fig.add_shape(type="line", x0=x, x1=x, y0=0, y1=1, yref="paper", line={"color": color, "dash": "dot"})
    fig.add_annotation(x=_axis_pos(fig, "x", x), y=1.0 if top else 0.0, yref="paper", text=text, showarrow=False,
                       xanchor="left", yanchor="top" if top else "bottom", font={"color": color, "size": 11})


def _hline(fig: go.Figure, y: float, text: str, color: str, dash: str = "dash") -> None:
    """A horizontal line with a label that also works on log axes."""
    fig.add_shape(type="line", x0=0, x1=1, xref="paper", y0=y, y1=y, line={"color": color, "dash": dash})
    fig.add_annotation(x=0.0, xref="paper", y=_axis_pos(fig, "y", y), text=text, showarrow=False, xanchor="left",
                       yanchor="bottom", font={"color": color, "size": 11})


# ------------------------------------------------------------------------------------------ memory

MEMORY_COMPONENTS = (
    ("weights_bytes", "weights", "weights"),
    ("activation_bytes", "activation peak", "activation"),
    ("overhead_bytes", "non-torch + CUDA graphs", "overhead"),
    ("kv_pool_bytes", "KV cache pool", "kv_pool"),
    ("headroom_bytes", "not given to vLLM (1 − utilization)", "headroom"),
)


def memory_stack(df: pd.DataFrame) -> go.Figure:
    """Stacked bar per GPU: weights / activation / overhead / KV pool / headroom, in GiB.

    ``df``: one row per bar, columns ``label`` and the ``*_bytes`` of :data:`MEMORY_COMPONENTS`
    (a negative KV pool is drawn as 0: the weights and overhead already overflow), optional
    ``memory_bytes`` (the card's total, drawn as a marker).
    """
    fig = _fig("Memory per GPU", "", "GiB per GPU (1 GiB = 2³⁰ bytes)", barmode="stack")
    for col, name, color in MEMORY_COMPONENTS:
        if col not in df:
            continue
        gib = df[col].clip(lower=0) / GiB
        fig.add_bar(x=df["label"], y=gib, name=name, marker_color=COLORS[color],
                    text=[f"{v:,.1f}" if v >= 0.05 else "" for v in gib], textposition="inside",
                    hovertemplate=f"{name}: %{{y:,.2f}} GiB<extra></extra>")
    if "memory_bytes" in df:
        fig.add_scatter(x=df["label"], y=df["memory_bytes"] / GiB, mode="markers", name="GPU memory",
                        marker={"symbol": "line-ew-open", "size": 40, "color": "black", "line": {"width": 2}},
                        hovertemplate="total %{y:,.1f} GiB<extra></extra>")
    return fig


def users_vs_context(df: pd.DataFrame, target_users: int | None = None, chosen_context: int | None = None,
                     max_context_for_target: int | None = None) -> go.Figure:
    """Max concurrent users vs context length (the seeds' chart), log-x, with the target-users line.

    ``df``: ``context_tokens``, ``max_users`` (and optionally ``series`` to draw several lines).
    """
    fig = _fig("Max concurrent users vs context length", "context length per request (tokens, log scale)",
               "max concurrent users (KV cache limit, log scale)", xaxis_type="log", yaxis_type="log")
    df = df[df["max_users"] > 0]
    if df.empty:
        fig.add_annotation(x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font={"size": 14},
                           text="not one request fits at any context length")
        return fig
    groups = df.groupby("series", sort=False) if "series" in df else [("max users", df)]
    for name, g in groups:
        fig.add_scatter(x=g["context_tokens"], y=g["max_users"], mode="lines", name=str(name),
                        hovertemplate="%{x:,} tokens: %{y:,} users<extra></extra>")
    if target_users:
        _hline(fig, target_users, f"{target_users:,} users", COLORS["target"])
    if max_context_for_target:
        _vline(fig, max_context_for_target, f"≤ {max_context_for_target:,} tokens", COLORS["target"])
    if chosen_context and "series" not in df:
        y = float(np.interp(np.log(chosen_context), np.log(df["context_tokens"].astype(float)), df["max_users"]))
        fig.add_scatter(x=[chosen_context], y=[y], mode="markers", name="this scenario",
                        marker={"color": COLORS["chosen"], "size": 11, "symbol": "diamond"},
                        hovertemplate="%{x:,} tokens: %{y:,.0f} users<extra>this scenario</extra>")
    return fig


# ----------------------------------------------------------------------------------------- latency


def _slo_line(fig: go.Figure, slo_s: float | None, label: str) -> None:
    if _finite(slo_s) and slo_s > 0:
        _hline(fig, slo_s / MS, f"{label} target {slo_s / MS:,.0f} ms", COLORS["slo"])


def ttft_vs_prompt(df: pd.DataFrame, ttft_slo_s: float | None = None, chosen_prompt: int | None = None) -> go.Figure:
    """TTFT (prefill) vs prompt length.  ``df``: ``prompt_tokens``, ``ttft_s`` (optional ``bound``)."""
    fig = _fig("TTFT vs prompt length (prefill)", "prompt length (tokens, log scale)", "TTFT (ms)",
               xaxis_type="log")
    custom = df.get("bound")
    if "band_pct" in df:
        error_band(fig, df["prompt_tokens"], df["ttft_s"] / MS, df["band_pct"], COLORS["prefill"], "TTFT")
    fig.add_scatter(x=df["prompt_tokens"], y=df["ttft_s"] / MS, mode="lines", name="TTFT",
                    line={"color": COLORS["prefill"]}, customdata=custom,
                    hovertemplate="%{x:,} tokens: %{y:,.1f} ms" + (" (%{customdata}-bound)" if custom is not None
                                                                    else "") + "<extra></extra>")
    _slo_line(fig, ttft_slo_s, "TTFT")
    if chosen_prompt and len(df):
        y = float(np.interp(np.log(chosen_prompt), np.log(df["prompt_tokens"].astype(float)), df["ttft_s"]))
        fig.add_scatter(x=[chosen_prompt], y=[y / MS], mode="markers", name="this scenario",
                        marker={"color": COLORS["chosen"], "size": 11, "symbol": "diamond"})
    return fig


def tpot_vs_batch(df: pd.DataFrame, tpot_slo_s: float | None = None, crossing_batch: float | None = None,
                  memory_max_batch: float | None = None) -> go.Figure:
    """TPOT vs batch size.  ``df``: ``batch_size``, ``tpot_s`` (what users see: the decode step plus the
    other requests' interleaved prefills) and, if present, ``decode_step_s`` (the decode step alone)."""
    fig = _fig("TPOT vs batch size (decode)", "batch size (sequences decoding together, log scale)",
               "TPOT (ms)", xaxis_type="log")
    if "band_pct" in df:
        error_band(fig, df["batch_size"], df["tpot_s"] / MS, df["band_pct"], COLORS["decode"], "TPOT")
    fig.add_scatter(x=df["batch_size"], y=df["tpot_s"] / MS, mode="lines+markers", name="TPOT (with prefills)",
                    line={"color": COLORS["decode"]}, marker={"size": 4},
                    hovertemplate="batch %{x:,}: %{y:,.2f} ms<extra></extra>")
    if "decode_step_s" in df:
        fig.add_scatter(x=df["batch_size"], y=df["decode_step_s"] / MS, mode="lines", name="decode step alone",
                        line={"color": COLORS["decode"], "dash": "dot"},
                        hovertemplate="batch %{x:,}: %{y:,.2f} ms<extra>decode step</extra>")
    _slo_line(fig, tpot_slo_s, "TPOT")
    if _finite(crossing_batch) and crossing_batch > 0:
        _vline(fig, crossing_batch, f"TPOT target crossed above {int(crossing_batch):,}", COLORS["slo"], top=False)
    if _finite(memory_max_batch) and memory_max_batch > 0:
        _vline(fig, memory_max_batch, f"KV cache full at {int(memory_max_batch):,}", COLORS["kv_pool"])
    return fig


def tpot_vs_context(df: pd.DataFrame, tpot_slo_s: float | None = None) -> go.Figure:
    """TPOT vs context length, one line per batch size.  ``df``: ``context_tokens``, ``tpot_s``, ``batch_size``."""
    fig = _fig("TPOT vs context length (decode reads the whole KV cache)", "context per sequence (tokens, log scale)",
               "TPOT (ms)", xaxis_type="log")
    for i, (b, g) in enumerate(df.groupby("batch_size", sort=True)):
        color = LINE_COLORS[i % len(LINE_COLORS)]
        if "band_pct" in g:
            error_band(fig, g["context_tokens"], g["tpot_s"] / MS, g["band_pct"], color, "TPOT", legend=i == 0)
        fig.add_scatter(x=g["context_tokens"], y=g["tpot_s"] / MS, mode="lines", name=f"batch {int(b):,}",
                        line={"color": color},
                        hovertemplate="%{x:,} tokens: %{y:,.2f} ms<extra>batch " + f"{int(b):,}</extra>")
    _slo_line(fig, tpot_slo_s, "TPOT")
    return fig


def throughput_vs_batch(df: pd.DataFrame, feasible_max_batch: float | None = None,
                        chosen_batch: float | None = None) -> go.Figure:
    """Output tokens/s vs batch, the SLO-feasible region shaded.

    ``df``: ``batch_size``, ``output_tokens_per_s`` (optionally ``decode_tokens_per_s``, the no-prefill ceiling).
    """
    fig = _fig("Throughput vs batch size", "batch size (log scale)", "output tokens/s per replica",
               xaxis_type="log")
    if _finite(feasible_max_batch) and feasible_max_batch >= 1 and len(df):
        x0 = float(df["batch_size"].min())
        fig.add_shape(type="rect", x0=x0, x1=max(float(feasible_max_batch), x0), y0=0, y1=1, yref="paper",
                      fillcolor=COLORS["feasible"], line_width=0, layer="below")
        fig.add_annotation(x=_axis_pos(fig, "x", x0), y=1.0, yref="paper", xanchor="left", yanchor="top",
                           showarrow=False, text="SLO-feasible: meets TTFT + TPOT, fits the KV cache",
                           font={"size": 11, "color": "#2E7D32"})
    if "band_pct" in df:
        error_band(fig, df["batch_size"], df["output_tokens_per_s"], df["band_pct"], COLORS["decode"], "throughput")
    if "decode_tokens_per_s" in df:
        fig.add_scatter(x=df["batch_size"], y=df["decode_tokens_per_s"], mode="lines",
                        name="decode only (batch ÷ TPOT)",
                        line={"color": COLORS["candidate"], "dash": "dot"},
                        hovertemplate="batch %{x:,}: %{y:,.0f} tok/s<extra></extra>")
    fig.add_scatter(x=df["batch_size"], y=df["output_tokens_per_s"], mode="lines+markers",
                    name="with prefill of arriving requests", line={"color": COLORS["decode"]}, marker={"size": 4},
                    hovertemplate="batch %{x:,}: %{y:,.0f} tok/s<extra></extra>")
    if _finite(chosen_batch) and chosen_batch >= 1 and len(df):
        y = float(np.interp(np.log(chosen_batch), np.log(df["batch_size"].astype(float)), df["output_tokens_per_s"]))
        fig.add_scatter(x=[chosen_batch], y=[y], mode="markers", name="SLO-feasible batch",
                        marker={"color": COLORS["chosen"], "size": 11, "symbol": "diamond"})
    return fig


# ---------------------------------------------------------------------------------------- roofline


def roofline(peaks: pd.DataFrame, bandwidth_bytes_per_s: float, points: pd.DataFrame,
             gpu_name: str = "") -> go.Figure:
    """Arithmetic intensity vs attainable FLOP/s (log-log) with operating points.

    ``peaks``: ``label``, ``flops_per_s`` (one flat roof each, e.g. bf16 and fp8 tensor cores).
    ``points``: ``label``, ``arithmetic_intensity`` (FLOP/byte), ``flops_per_s`` (achieved), ``bound``.
    """
    fig = _fig(f"Roofline{': ' + gpu_name if gpu_name else ''}", "arithmetic intensity (FLOP per byte of HBM traffic)",
               "attainable TFLOP/s", xaxis_type="log", yaxis_type="log", height=440)
    lo = 0.5
    hi = max(1e4, float(points["arithmetic_intensity"].max()) * 4 if len(points) else 1e4)
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    for i, row in enumerate(peaks.itertuples()):
        y = np.minimum(row.flops_per_s, x * bandwidth_bytes_per_s) / TFLOPS
        ridge = row.flops_per_s / bandwidth_bytes_per_s
        fig.add_scatter(x=x, y=y, mode="lines", name=f"{row.label} roof (ridge {ridge:,.0f} FLOP/B)",
                        line={"color": "black" if i == 0 else COLORS["candidate"],
                              "dash": "solid" if i == 0 else "dash"},
                        hovertemplate="%{x:,.1f} FLOP/B: %{y:,.0f} TFLOP/s<extra></extra>")
        fig.add_shape(type="line", x0=ridge, x1=ridge, y0=0, y1=1, yref="paper",  # shapes use data coordinates
                      line={"color": "lightgray", "dash": "dot"})
    colors = {"prefill": COLORS["prefill"], "decode": COLORS["decode"]}
    for row in points.itertuples():
        color = next((c for k, c in colors.items() if str(row.label).startswith(k)), COLORS["chosen"])
        fig.add_scatter(x=[row.arithmetic_intensity], y=[row.flops_per_s / TFLOPS], mode="markers+text",
                        name=f"{row.label}: {row.bound}-bound", text=[f"{row.label} ({row.bound}-bound)"],
                        textposition="top center",
                        marker={"size": 12, "color": color, "line": {"color": "black", "width": 1}},
                        hovertemplate="%{x:,.1f} FLOP/B, %{y:,.1f} TFLOP/s achieved<extra></extra>")
    return fig


# ---------------------------------------------------------------------------------------- triangle


def pareto_mask(df: pd.DataFrame, maximize: tuple[str, ...] = (), minimize: tuple[str, ...] = ()) -> np.ndarray:
    """True for rows no other row dominates (at least as good on every objective, better on one).

    Rows with a non-finite objective are never on the front.  Each round takes the remaining row with
    the largest objective sum (nothing remaining can dominate it: a dominating row has a larger sum),
    keeps it, and drops every row it dominates, so the loop runs once per front member, not per row.
    """
    n = len(df)
    keep = np.zeros(n, dtype=bool)
    if n == 0 or not (maximize or minimize):
        return keep
    v = np.stack([df[c].to_numpy(float) for c in maximize] + [-df[c].to_numpy(float) for c in minimize], axis=1)
    alive = np.flatnonzero(np.all(np.isfinite(v), axis=1))
    while alive.size:
        sums = v[alive].sum(axis=1)
        i = alive[int(np.argmax(sums))]
        keep[i] = True
        rest = v[alive]
        dominated = np.all(v[i] >= rest, axis=1) & np.any(v[i] > rest, axis=1)
        dominated |= alive == i
        alive = alive[~dominated]
    return keep


#: where each corner's label sits relative to its point (pixels): away from the cloud
CORNER_OFFSETS = {"quality + latency": (-20, 60), "quality + throughput": (50, -50), "latency + throughput": (-40, -60)}


def triangle(df: pd.DataFrame, chosen: dict | None = None, corners: pd.DataFrame | None = None) -> go.Figure:
    """Quality–latency–throughput: latency (x, log) vs throughput per GPU (y, log), colour = quality.

    ``df``: ``latency_s`` (TTFT + TPOT × output), ``output_tokens_per_s_per_gpu``, ``quality``, ``pareto``
    (bool) and ``label``.  ``corners``: rows with ``latency_s``, ``output_tokens_per_s_per_gpu``, ``corner``.
    ``chosen``: the same two coordinates for the sidebar's scenario.
    """
    fig = _fig("Quality – latency – throughput: pick two", "request latency = TTFT + TPOT × output (ms, log scale)",
               "output tokens/s per GPU (log scale)", xaxis_type="log", yaxis_type="log", height=480)
    if df.empty:
        return fig
    qmin, qmax = float(df["quality"].min()), float(df["quality"].max())
    rest = df[~df["pareto"]]
    front = df[df["pareto"]]
    fig.add_scatter(x=rest["latency_s"] / MS, y=rest["output_tokens_per_s_per_gpu"], mode="markers",
                    name="candidate", text=rest["label"],
                    marker={"size": 5, "color": rest["quality"], "colorscale": "Viridis", "cmin": qmin, "cmax": qmax,
                                "opacity": 0.25, "showscale": False},
                    hovertemplate="%{text}<br>%{x:,.0f} ms, %{y:,.0f} tok/s/GPU<extra></extra>")
    fig.add_scatter(x=front["latency_s"] / MS, y=front["output_tokens_per_s_per_gpu"], mode="markers",
                    name="Pareto set", text=front["label"], customdata=front["quality"],
                    marker={"size": 10, "color": front["quality"], "colorscale": "Viridis", "cmin": qmin, "cmax": qmax,
                                "line": {"color": COLORS["pareto"], "width": 2},
                                "colorbar": {"title": "quality", "thickness": 12}},
                    hovertemplate="%{text}<br>%{x:,.0f} ms, %{y:,.0f} tok/s/GPU, quality %{customdata:.1f}"
                                  "<extra>Pareto</extra>")
    if corners is not None and not corners.empty:
        fig.add_scatter(x=corners["latency_s"] / MS, y=corners["output_tokens_per_s_per_gpu"], mode="markers",
                        name="pick-two corners", text=corners["corner"],
                        marker={"size": 18, "symbol": "circle-open", "color": COLORS["pareto"], "line": {"width": 3}},
                        hovertemplate="%{text}<extra></extra>")
        for row in corners.itertuples():
            ax, ay = CORNER_OFFSETS.get(row.corner, (40, -40))
            fig.add_annotation(x=math.log10(row.latency_s / MS), y=math.log10(row.output_tokens_per_s_per_gpu),
                               text=f"<b>{row.corner}</b>", ax=ax, ay=ay, showarrow=True, arrowhead=2,
                               arrowcolor=COLORS["pareto"], font={"color": COLORS["pareto"], "size": 12},
                               bgcolor="rgba(255,255,255,0.85)")
    if chosen and _finite(chosen.get("latency_s")) and _finite(chosen.get("output_tokens_per_s_per_gpu")):
        fig.add_scatter(x=[chosen["latency_s"] / MS], y=[chosen["output_tokens_per_s_per_gpu"]], mode="markers",
                        name="this scenario", marker={"size": 18, "symbol": "star", "color": COLORS["chosen"],
                                                          "line": {"color": "white", "width": 1}},
                        hovertemplate="this scenario: %{x:,.0f} ms, %{y:,.0f} tok/s/GPU<extra></extra>")
    return fig


# -------------------------------------------------------------------------------------------- load


def latency_vs_rate(df: pd.DataFrame, slo: dict[str, float] | None = None, knee_rate: float | None = None) -> go.Figure:
    """Latency percentiles vs request rate from the simulator.

    ``df``: ``request_rate_per_s``, ``metric`` (e.g. 'TTFT p50'), ``value_s``.  ``slo``: metric
    prefix -> target seconds (drawn as dashed lines).
    """
    fig = _fig("Latency percentiles vs request rate", "request rate (requests/s)", "latency (ms, log scale)",
               yaxis_type="log")
    for name, g in df.groupby("metric", sort=False):
        color = COLORS["prefill"] if str(name).startswith("TTFT") else COLORS["decode"]
        dash = "dot" if str(name).endswith(("p90", "p99")) else "solid"
        fig.add_scatter(x=g["request_rate_per_s"], y=g["value_s"] / MS, mode="lines+markers", name=str(name),
                        line={"color": color, "dash": dash}, marker={"size": 5},
                        hovertemplate="%{x:,.2f} req/s: %{y:,.1f} ms<extra>" + str(name) + "</extra>")
    for label, s in (slo or {}).items():
        _slo_line(fig, s, label)
    if _finite(knee_rate) and knee_rate > 0:
        _vline(fig, knee_rate, f"knee ≈ {knee_rate:,.2f} req/s", COLORS["slo"])
    return fig
