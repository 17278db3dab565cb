"""planner.dashboard.charts: pure DataFrame -> plotly Figure builders (no streamlit, units on every axis)."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.dashboard import charts, charts_cost
from planner.units import MS, TFLOPS, GiB


def names(fig: go.Figure) -> list[str]:
    return [t.name for t in fig.data]


def annotation_texts(fig: go.Figure) -> list[str]:
    return [a.text for a in fig.layout.annotations]


@pytest.mark.parametrize("module", [charts, charts_cost])
def test_charts_module_is_pure(module):
    """No streamlit (or any UI) import: the dashboard stays a thin layer over these builders."""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    imported = {n.names[0].name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert "streamlit" not in imported
    assert imported <= {"__future__", "math", "numpy", "pandas", "plotly", "planner"}


# ------------------------------------------------------------------------------------------ memory


def test_memory_stack_draws_gib_and_clips_a_negative_pool():
    df = pd.DataFrame([{"label": "GPU", "weights_bytes": 14.5e9, "activation_bytes": 1.2e9, "overhead_bytes": 0.6e9,
                        "kv_pool_bytes": -3e9, "headroom_bytes": 6e9, "memory_bytes": 80 * GiB}])
    fig = charts.memory_stack(df)
    bars = {t.name: t for t in fig.data if t.type == "bar"}
    assert list(bars) == ["weights", "activation peak", "non-torch + CUDA graphs", "KV cache pool",
                          "not given to vLLM (1 − utilization)"]
    assert bars["weights"].y[0] == pytest.approx(14.5e9 / GiB)
    assert bars["KV cache pool"].y[0] == 0  # a negative pool (does not fit) is drawn as empty
    assert fig.layout.barmode == "stack"
    assert "GiB" in fig.layout.yaxis.title.text and "2³⁰" in fig.layout.yaxis.title.text
    marker = next(t for t in fig.data if t.name == "GPU memory")
    assert marker.y[0] == pytest.approx(80)


def test_users_vs_context_has_target_line_and_crossing_on_log_axes():
    ctx = np.array([512, 1024, 2048, 4096, 8192, 16384])
    df = pd.DataFrame({"context_tokens": ctx, "max_users": (1_000_000 // ctx).astype(int)})
    fig = charts.users_vs_context(df, target_users=160, chosen_context=4096, max_context_for_target=6250)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    texts = annotation_texts(fig)
    assert "160 users" in texts and "≤ 6,250 tokens" in texts
    # annotations on log axes sit at log10 of the value
    ann = {a.text: a for a in fig.layout.annotations}
    assert ann["160 users"].y == pytest.approx(math.log10(160))
    assert ann["≤ 6,250 tokens"].x == pytest.approx(math.log10(6250))
    chosen = next(t for t in fig.data if t.name == "this scenario")
    assert chosen.y[0] == pytest.approx(1_000_000 // 4096, rel=0.01)


def test_users_vs_context_drops_zero_users_on_the_log_axis():
    df = pd.DataFrame({"context_tokens": [1000, 2000, 4000], "max_users": [10, 0, 0]})
    fig = charts.users_vs_context(df, target_users=160)
    assert list(fig.data[0].y) == [10]


def test_users_vs_context_when_nothing_fits_says_so():
    """#13 defect 6: a model that does not fit left no point to draw and the Memory view showed numpy's
    "array of sample points is empty"; the chart says it in words instead."""
    df = pd.DataFrame({"context_tokens": [1000, 2000], "max_users": [0, 0]})
    fig = charts.users_vs_context(df, target_users=160, chosen_context=4096, max_context_for_target=None)
    assert annotation_texts(fig) == ["not one request fits at any context length"] and not fig.data


# ----------------------------------------------------------------------------------------- latency


def test_ttft_vs_prompt_draws_ms_and_the_target():
    df = pd.DataFrame({"prompt_tokens": [128, 1024, 8192], "ttft_s": [0.01, 0.05, 0.4],
                       "bound": ["memory", "compute", "compute"]})
    fig = charts.ttft_vs_prompt(df, ttft_slo_s=0.2, chosen_prompt=1024)
    assert list(fig.data[0].y) == pytest.approx([10, 50, 400])
    assert "ms" in fig.layout.yaxis.title.text
    assert "TTFT target 200 ms" in annotation_texts(fig)
    assert [s.y0 for s in fig.layout.shapes] == [pytest.approx(200)]


def test_tpot_vs_batch_marks_crossing_and_kv_limit():
    df = pd.DataFrame({"batch_size": [1, 8, 64, 512], "tpot_s": [0.003, 0.004, 0.01, 0.06]})
    fig = charts.tpot_vs_batch(df, tpot_slo_s=0.05, crossing_batch=375, memory_max_batch=202)
    texts = annotation_texts(fig)
    assert "TPOT target crossed above 375" in texts and "KV cache full at 202" in texts
    assert fig.layout.xaxis.type == "log"
    ann = {a.text: a for a in fig.layout.annotations}
    assert ann["KV cache full at 202"].x == pytest.approx(math.log10(202))
    # the axis must not be stretched by a data-space annotation: every annotation x within the data
    for a in fig.layout.annotations:
        if a.xref in (None, "x"):
            assert 0 <= a.x <= math.log10(512) + 1e-9


def test_tpot_vs_context_one_line_per_batch():
    df = pd.concat([pd.DataFrame({"context_tokens": [1000, 10000], "tpot_s": [0.003 * b, 0.01 * b], "batch_size": b})
                    for b in (1, 32)])
    fig = charts.tpot_vs_context(df, tpot_slo_s=0.05)
    assert names(fig) == ["batch 1", "batch 32"]


def test_latency_curves_shade_their_error_band():
    """#12 in the dashboard: y × (1 ± band) shaded around each curve, one legend entry for the band."""
    df = pd.DataFrame({"batch_size": [1, 8, 64], "tpot_s": [0.01, 0.02, 0.04], "band_pct": 10.0})
    fig = charts.tpot_vs_batch(df, tpot_slo_s=0.05)
    band = next(t for t in fig.data if t.fill == "toself")
    assert band.name == "error band ±10 %" and band.hoverinfo == "skip"
    assert list(band.y) == pytest.approx([11, 22, 44, 36, 18, 9])  # upper edge, then the lower edge back
    ctx = pd.concat([pd.DataFrame({"context_tokens": [1000, 10000], "tpot_s": [0.003, 0.01], "batch_size": b,
                                   "band_pct": 5.0}) for b in (1, 32)])
    fig = charts.tpot_vs_context(ctx)
    bands = [t for t in fig.data if t.fill == "toself"]
    assert len(bands) == 2 and [t.showlegend for t in bands] == [True, False]


def test_a_curve_without_measured_basis_says_so():
    df = pd.DataFrame({"prompt_tokens": [128, 1024, 8192], "ttft_s": [0.01, 0.05, 0.4], "band_pct": np.nan})
    fig = charts.ttft_vs_prompt(df)
    assert not [t for t in fig.data if t.fill == "toself"]
    assert "TTFT: no measured basis for an error band" in annotation_texts(fig)
    part = df.assign(band_pct=[12.0, 12.0, np.nan])
    fig = charts.ttft_vs_prompt(part)
    assert [t.name for t in fig.data if t.fill == "toself"] == ["error band ±12 %"]
    assert "TTFT: no measured basis for an error band beyond 1,024" in annotation_texts(fig)


def test_latency_charts_survive_an_empty_frame():
    """No curve to draw (every point filtered out) is an empty chart, not numpy's interp error."""
    charts.ttft_vs_prompt(pd.DataFrame({"prompt_tokens": [], "ttft_s": []}), 1.0, chosen_prompt=4096)
    charts.throughput_vs_batch(pd.DataFrame({"batch_size": [], "output_tokens_per_s": []}), 8, 8)


def test_throughput_vs_batch_shades_the_feasible_region():
    df = pd.DataFrame({"batch_size": [1, 2, 4, 8, 16], "output_tokens_per_s": [100, 190, 350, 600, 900],
                       "decode_tokens_per_s": [120, 230, 420, 700, 1000]})
    fig = charts.throughput_vs_batch(df, feasible_max_batch=8, chosen_batch=8)
    [rect] = [s for s in fig.layout.shapes if s.type == "rect"]
    assert (rect.x0, rect.x1) == (1, 8)
    assert any("SLO-feasible" in t for t in annotation_texts(fig))
    chosen = next(t for t in fig.data if t.name == "SLO-feasible batch")
    assert chosen.y[0] == pytest.approx(600)


def test_throughput_without_feasible_batch_has_no_shading():
    df = pd.DataFrame({"batch_size": [1, 2], "output_tokens_per_s": [100, 190]})
    fig = charts.throughput_vs_batch(df, feasible_max_batch=None)
    assert not [s for s in fig.layout.shapes if s.type == "rect"]


# ---------------------------------------------------------------------------------------- roofline


def test_roofline_roof_is_min_of_peak_and_bandwidth_times_intensity():
    peaks = pd.DataFrame([{"label": "fp8", "flops_per_s": 1979e12}, {"label": "bf16", "flops_per_s": 989e12}])
    pts = pd.DataFrame([{"label": "prefill", "arithmetic_intensity": 4000.0, "flops_per_s": 900e12, "bound": "compute"},
                        {"label": "decode, batch 1", "arithmetic_intensity": 1.0, "flops_per_s": 4.8e12,
                         "bound": "memory"}])
    fig = charts.roofline(peaks, 4.8e12, pts, "H200")
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    roof = fig.data[0]
    x, y = np.asarray(roof.x), np.asarray(roof.y)
    assert np.allclose(y, np.minimum(1979e12, x * 4.8e12) / TFLOPS)
    assert "ridge 412 FLOP/B" in roof.name  # 1,979 TFLOP/s ÷ 4.8 TB/s
    assert "prefill: compute-bound" in names(fig) and "decode, batch 1: memory-bound" in names(fig)
    assert "TFLOP/s" in fig.layout.yaxis.title.text and "FLOP per byte" in fig.layout.xaxis.title.text


# ---------------------------------------------------------------------------------------- triangle


def brute_pareto(v: np.ndarray) -> np.ndarray:
    ge = (v[:, None, :] >= v[None, :, :]).all(2)
    gt = (v[:, None, :] > v[None, :, :]).any(2)
    return ~(ge & gt).any(0)


def test_pareto_mask_small_example():
    df = pd.DataFrame({"q": [1, 1, 2, 0], "lat": [1, 2, 3, 0.5], "thr": [10, 20, 5, 1]})
    mask = charts.pareto_mask(df, maximize=("q", "thr"), minimize=("lat",))
    # row 1 (q 1, lat 2, thr 20) is not dominated; row 0 isn't either (faster than row 1)
    assert list(mask) == [True, True, True, True]
    df.loc[4] = [1, 3, 10]  # dominated by row 0 (same q, slower, same thr) and row 1
    assert list(charts.pareto_mask(df, ("q", "thr"), ("lat",))) == [True, True, True, True, False]


def test_pareto_mask_ignores_non_finite_rows_and_empty_frames():
    df = pd.DataFrame({"a": [1.0, np.nan, np.inf], "b": [1.0, 5.0, 0.0]})
    assert list(charts.pareto_mask(df, maximize=("a", "b"))) == [True, False, False]
    assert charts.pareto_mask(df.iloc[:0], maximize=("a",)).size == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 8), st.integers(1, 8)), min_size=1, max_size=40))
def test_pareto_mask_matches_brute_force(rows):
    df = pd.DataFrame(rows, columns=["q", "lat", "thr"]).astype(float)
    got = charts.pareto_mask(df, maximize=("q", "thr"), minimize=("lat",))
    want = brute_pareto(np.stack([df.q, df.thr, -df.lat], axis=1))
    assert list(got) == list(want)


def _candidates() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 60
    df = pd.DataFrame({"latency_s": rng.uniform(0.2, 20, n), "output_tokens_per_s_per_gpu": rng.uniform(50, 9000, n),
                       "quality": rng.choice([57.0, 59.5, 60.1], n), "label": [f"cfg {i}" for i in range(n)]})
    df["pareto"] = charts.pareto_mask(df, ("quality", "output_tokens_per_s_per_gpu"), ("latency_s",))
    return df


def test_triangle_highlights_pareto_labels_corners_and_marks_the_scenario():
    df = _candidates()
    front = df[df.pareto]
    names3 = ["quality + latency", "quality + throughput", "latency + throughput"]
    corners = pd.DataFrame([{**front.iloc[i][["latency_s", "output_tokens_per_s_per_gpu"]].to_dict(), "corner": c}
                            for i, c in enumerate(names3)])
    fig = charts.triangle(df, {"latency_s": 1.0, "output_tokens_per_s_per_gpu": 1000.0}, corners)
    assert names(fig) == ["candidate", "Pareto set", "pick-two corners", "this scenario"]
    assert len(fig.data[1].x) == int(df.pareto.sum())
    assert {a.text for a in fig.layout.annotations} == {"<b>quality + latency</b>", "<b>quality + throughput</b>",
                                                       "<b>latency + throughput</b>"}
    a = fig.layout.annotations[0]
    assert a.x == pytest.approx(math.log10(corners.latency_s[0] / MS))
    star = fig.data[3]
    assert star.x[0] == pytest.approx(1000.0) and star.marker.symbol == "star"
    assert "ms" in fig.layout.xaxis.title.text


def test_triangle_empty_frame_is_an_empty_figure():
    df = _candidates().iloc[:0]
    assert len(charts.triangle(df).data) == 0


# -------------------------------------------------------------------------------------------- cost


def _cost_rows() -> pd.DataFrame:
    return pd.DataFrame({"label": ["1 × mi300x (TP 1)", "1 × h200-sxm (TP 1)", "2 × l4 (TP 2)"],
                         "cost_usd_per_million_output_tokens_all_in": [0.15, 0.45, 1.2],
                         "calibration_mode": ["transferred", "calibrated", "ideal"],
                         "ttft_error_band_pct": [np.nan, 13.0, np.nan], "tpot_error_band_pct": [np.nan, 4.0, np.nan]})


def test_cost_bars_mark_how_each_latency_was_obtained_and_its_band():
    """#13 defect 9: a transferred MI300X won every comparison unmarked.  Bars in ranking order, patterned by
    calibration mode, the band as error bars, "(no band)" where there is no measured basis."""
    fig = charts_cost.cost_bars(_cost_rows())
    by = {t.name: t for t in fig.data}
    assert set(by) == {"calibrated", "transferred (not measured here)", "ideal roofline"}
    assert by["transferred (not measured here)"].marker.pattern.shape == "/"
    assert by["ideal roofline"].marker.pattern.shape == "x"
    assert list(by["calibrated"].error_y.array) == pytest.approx([0.45 * 0.13])
    assert list(by["transferred (not measured here)"].text) == ["$0.150 (no band)"]
    assert list(fig.layout.xaxis.categoryarray) == list(_cost_rows()["label"])
    assert "USD" in fig.layout.yaxis.title.text


def test_cost_vs_speed_is_selectable_and_carries_the_configuration():
    df = pd.DataFrame({"per_user_tokens_per_s": [20.0, 40.0, 30.0], "cost": [0.2, 0.5, 0.6],
                       "quality": [60.0, 58.0, 61.0], "pareto": [True, True, False], "label": ["a", "b", "c"],
                       "calibration_mode": ["calibrated", "transferred", "calibrated"],
                       "gpu_id": ["h200-sxm", "mi300x", "h200-sxm"], "weight_dtype": ["bf16", "fp8", "bf16"],
                       "kv_cache_dtype": ["bf16", "bf16", "fp8"], "tensor_parallel": [1, 1, 2]})
    cols = ("gpu_id", "weight_dtype", "kv_cache_dtype", "tensor_parallel")
    fig = charts_cost.cost_vs_speed(df, {"per_user_tokens_per_s": 25.0, "cost": 0.3}, cols)
    pts = {t.name: t for t in fig.data}
    assert [list(x) for x in pts["calibrated"].customdata] == [["h200-sxm", "bf16", "bf16", 1],
                                                               ["h200-sxm", "bf16", "fp8", 2]]
    assert pts["transferred (not measured here)"].marker.symbol == "diamond"
    assert list(pts["Pareto front"].x) == [20.0, 40.0]
    assert fig.layout.clickmode == "event+select" and fig.layout.yaxis.type == "log"
    assert "this scenario" in pts


def test_thin_cloud_keeps_the_shape_with_few_points():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": 10 ** rng.uniform(0, 3, 5000), "y": 10 ** rng.uniform(0, 2, 5000)})
    thin = charts.thin_cloud(df, "x", "y", 300)
    assert 100 < len(thin) <= 300
    assert thin["x"].max() > 500 and thin["x"].min() < 2  # reaches the corners
    assert charts.thin_cloud(df.head(10), "x", "y", 300) is not None and len(charts.thin_cloud(df, "x", "y", 0)) == 0


# -------------------------------------------------------------------------------------------- load


def test_latency_vs_rate_lines_slos_and_knee():
    df = pd.DataFrame({"request_rate_per_s": [1, 2, 4, 1, 2, 4], "metric": ["TTFT p50"] * 3 + ["TTFT p99"] * 3,
                       "value_s": [0.1, 0.12, 0.5, 0.2, 0.3, 2.0]})
    fig = charts.latency_vs_rate(df, slo={"TTFT": 1.0}, knee_rate=3.2)
    assert names(fig) == ["TTFT p50", "TTFT p99"]
    assert "TTFT target 1,000 ms" in annotation_texts(fig) and "knee ≈ 3.20 req/s" in annotation_texts(fig)
    assert fig.layout.yaxis.type == "log"
    ann = {a.text: a for a in fig.layout.annotations}
    assert ann["TTFT target 1,000 ms"].y == pytest.approx(3.0)  # log10(1000 ms)


def test_empty_figure_says_why():
    fig = charts.empty_figure("nothing fits")
    assert fig.layout.annotations[0].text == "nothing fits"


def test_every_builder_returns_a_serialisable_figure():
    figs = [
        charts.memory_stack(pd.DataFrame([{"label": "x", "weights_bytes": 1e9, "kv_pool_bytes": 2e9}])),
        charts.users_vs_context(pd.DataFrame({"context_tokens": [1, 2], "max_users": [2, 1]})),
        charts.ttft_vs_prompt(pd.DataFrame({"prompt_tokens": [1, 2], "ttft_s": [0.1, 0.2]})),
        charts.tpot_vs_batch(pd.DataFrame({"batch_size": [1, 2], "tpot_s": [0.1, 0.2]})),
        charts_cost.cost_bars(_cost_rows()),
    ]
    for f in figs:
        assert isinstance(f, go.Figure)
        assert f.to_json()


def test_legends_sit_under_the_plot_never_over_the_title():
    """#13 defect 9: horizontal legends above the plot overlapped the titles on narrow screens.  Every figure's
    legend is anchored to the bottom of the figure (plotly makes room for it), the title at the top."""
    figs = [charts.tpot_vs_batch(pd.DataFrame({"batch_size": [1, 2], "tpot_s": [0.1, 0.2]})),
            charts.memory_stack(pd.DataFrame([{"label": "x", "weights_bytes": 1e9, "kv_pool_bytes": 2e9}])),
            charts_cost.cost_bars(_cost_rows()), charts.triangle(_candidates())]
    for f in figs:
        leg = f.layout.legend
        assert (leg.yref, leg.yanchor, leg.y, leg.orientation) == ("container", "bottom", 0, "h")
        assert f.layout.title.text
