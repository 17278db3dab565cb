"""The dashboard's numbers: every frame, point and sentence part the Streamlit views show, computed here
from planner calls so that ``app.py`` only lays them out (and caches them by the scenario).

Each view's function takes the scenario's planner objects (:class:`planner.dashboard.scenario.Planned`).  No
streamlit import; figures are drawn by :mod:`planner.dashboard.charts` from these frames.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner import batching, memory, phases, ranking, roofline, serving
from planner import cost as cost_mod
from planner.bands import band, prefill_regime
from planner.dashboard.charts import pareto_mask, thin_cloud
from planner.dashboard.choose import question_command
from planner.profile import CalibrationProfile
from planner.report import SizingReport
from planner.dashboard.scenario import Planned, Scenario
from planner.specs import GpuSpec
from planner.units import BILLION, TB_PER_S, cdiv, fmt_bytes, fmt_gib, fmt_ms, fmt_tflops, fmt_usd
from planner.serving.workloads import synthetic

# ========================================================================================= headline


def deployment_users(report: SizingReport) -> int:
    """Requests the whole deployment holds at once: the per-replica KV limit × replicas."""
    return report.max_concurrency * report.deployment.replicas


def latency_model_label(profile_mode: str) -> str:
    return {"calibrated": "calibrated profile", "transferred": "calibration transferred from another GPU"}.get(
        profile_mode, "ideal roofline (speed of light)")


def profile_caption(p: CalibrationProfile) -> str:
    """Provenance and error of the latency model in use, in one caption (the ideal roofline says so)."""
    def errs(table, most: int = 4) -> str:
        rows = [f"{k} {r.median_abs_error_pct:.1f}% (p90 {r.p90_abs_error_pct:.1f}%)"
                for k, r in table.items() if r.n > 1]
        return ", ".join(rows[:most]) + (f" and {len(rows) - most} more (planner.bands)" if len(rows) > most else "")
    if p.mode == "ideal":
        return ("Ideal roofline (speed of light): datasheet peak FLOP/s and bandwidth, no measurement; no error "
                "band can be given.")
    fit, val = errs(p.residuals), errs(p.validation)
    used = f" on {', '.join(p.models_used)}" if p.models_used else ""
    if p.mode == "transferred":
        return (f"Transferred calibration: measured on {p.transferred_from} with {p.engine} {p.engine_version}"
                f"{used}, applied to this GPU's datasheet roofs (not measured on it). Validation there: "
                f"{errs(p.validation) or 'none'}.")
    return (f"Calibrated profile: {p.engine or 'engine'} {p.engine_version or '?'}, "
            f"fitted {p.created[:10] or '?'}{used}."
            + (f" Fit error, median |error|: {fit}." if fit else " No residuals recorded.")
            + (f" Validation: {val}." if val else ""))


def model_caption(m) -> str:
    return (f"{m.name}: {m.published_total_params / BILLION:,.2f}B parameters, {m.attention.kind.upper()}, "
            f"{m.max_context_tokens:,}-token context")


def gpu_caption(g: GpuSpec, memory_bytes: float) -> str:
    """The GPU in one line; ``memory_bytes`` as CUDA reports it (the total the memory views use)."""
    return (f"{g.name}: {mem(memory_bytes)} as CUDA reports it, {g.hbm_bandwidth_bytes_per_s / TB_PER_S:,.2f} TB/s, "
            f"{fmt_tflops(g.peak_flops_for('bf16')[1])} bf16 dense")


def mem(num_bytes: float) -> str:
    """Every memory quantity of the dashboard, one way: binary GiB (2³⁰ bytes), one decimal (three below 1 GiB)."""
    return fmt_gib(num_bytes, 1 if abs(num_bytes) >= 2**30 else 3)


def scenario_notes(p: Planned) -> list[str]:
    """What the plan does not say itself but the user should know about this scenario."""
    d, g = p.deployment, p.gpu
    out = []
    if d.tensor_parallel > g.max_gpus_per_node:
        out.append(f"TP {d.tensor_parallel} is more GPUs than one node of {g.name} holds ({g.max_gpus_per_node}): "
                   f"vLLM would span nodes (`planner deploy` uses TP {g.max_gpus_per_node} × PP "
                   f"{cdiv(d.tensor_parallel, g.max_gpus_per_node)}); the all-reduce here assumes the node's own "
                   "links, so latency is optimistic")
    return out


def load_problem(r: SizingReport) -> str | None:
    """Why the serving simulator has nothing to run for this scenario (None: it can run)."""
    if not r.memory.fits:
        return f"Nothing to simulate: {r.memory.explain()}."
    if r.max_concurrency < 1:
        return f"Nothing to simulate: {r.reasons[0] if r.reasons else 'not one request fits in the KV cache'}."
    if r.quality.context_exceeds_limit:
        return (f"Nothing to simulate: {r.workload.context_tokens:,} tokens of context exceed the model's "
                f"{r.quality.max_context_tokens:,}-token limit.")
    return None


# =========================================================================================== memory


def memory_bar(report: SizingReport, label: str) -> pd.DataFrame:
    """One stacked bar of the per-GPU memory split (:func:`planner.dashboard.charts.memory_stack`'s columns)."""
    m = report.memory
    return pd.DataFrame([{
        "label": label, "weights_bytes": m.weight_bytes, "activation_bytes": m.activation_bytes,
        "overhead_bytes": m.non_torch_bytes + m.cudagraph_bytes, "kv_pool_bytes": m.kv_pool_bytes,
        "headroom_bytes": m.gpu_memory_bytes - m.usable_bytes, "memory_bytes": m.gpu_memory_bytes}])


def users_vs_context(p: Planned, target_users: int) -> tuple[pd.DataFrame, int | None]:
    """Max concurrent users (whole deployment) vs context, and the longest context that still holds
    ``target_users`` (None if not even one token of context does)."""
    budget = memory.memory_budget(p.model, p.gpu, p.deployment, p.profile)
    reps = p.deployment.replicas

    def users(ctx: int) -> int:
        per_req = memory.request_kv_bytes_per_gpu(p.model, p.deployment, int(ctx))
        ask = memory.admission_kv_bytes_per_gpu(p.model, p.deployment, int(ctx))
        return memory.kv_pool_concurrency(budget.kv_pool_bytes, per_req, budget.fits, ask) * reps

    hi = max(p.model.max_context_tokens, p.workload.context_tokens) * 2
    ctxs = np.unique(np.geomspace(128, hi, 64).astype(int))
    df = pd.DataFrame({"context_tokens": ctxs, "max_users": [users(c) for c in ctxs]})
    # longest context with users(ctx) >= target (users is non-increasing in ctx)
    lo_c, hi_c = 0, hi
    if users(1) < target_users:
        return df, None
    while lo_c < hi_c:
        mid = (lo_c + hi_c + 1) // 2
        lo_c, hi_c = (mid, hi_c) if users(mid) >= target_users else (lo_c, mid - 1)
    return df, lo_c


def memory_table(p: Planned) -> pd.DataFrame:
    """The KV and memory quantities of the Memory view (quantity, value, also), formatted."""
    m, r, d = p.report.memory, p.report, p.deployment
    context = p.workload.context_tokens
    per_tok_model = memory.kv_bytes_per_token(p.model, d.kv_cache_dtype)
    rows = [
        ("KV bytes per token (whole model)", f"{per_tok_model:,.0f} B", f"{fmt_bytes(per_tok_model)} in decimal units"),
        ("KV bytes per token per GPU", f"{m.kv_bytes_per_token:,.0f} B", f"after TP {d.tensor_parallel} sharding"),
        (f"KV per request at {context:,} tokens", mem(r.kv_per_request.total_bytes),
         f"all GPUs, blocks of {d.block_size_tokens} tokens"),
        ("KV per request per GPU", mem(r.kv_per_request_bytes_per_gpu), "what one request takes from the pool"),
        ("KV pool per GPU", mem(max(m.kv_pool_bytes, 0)), f"{m.kv_capacity_tokens:,} tokens"),
        ("Weights per GPU", mem(m.weight_bytes), f"{d.weight_dtype}, TP {d.tensor_parallel}"),
        ("GPU memory", mem(m.gpu_memory_bytes), "as CUDA reports it (what vLLM multiplies by the utilisation)"),
        ("Usable per GPU", mem(m.usable_bytes), f"{d.gpu_memory_utilization:.0%} of {mem(m.gpu_memory_bytes)}"),
    ]
    return pd.DataFrame(rows, columns=["quantity", "value", "also"])


# ========================================================================================== latency


@dataclass(frozen=True)
class LatencyFrames:
    """The Latency view: TTFT vs prompt, TPOT vs batch and vs context, throughput vs batch; each frame carries
    ``band_pct`` (the ± error band of that prediction, NaN where there is no measured basis).

    ``crossing``: the largest batch whose TPOT (with interleaved prefills) meets the target (0: none);
    ``kv_limit_batch``: the most sequences one replica holds (KV cache, or max_num_seqs);
    ``decode_context_tokens``: the context the decode curves are drawn at; ``band_basis``: where the
    decode band comes from, or why there is none."""

    ttft: pd.DataFrame
    tpot_batch: pd.DataFrame
    tpot_context: pd.DataFrame
    throughput: pd.DataFrame
    crossing: int
    kv_limit_batch: int
    decode_context_tokens: float
    band_basis: str = ""


def _pct(b) -> float:
    return float("nan") if b.pct is None else float(b.pct)


def latency_frames(p: Planned) -> LatencyFrames:
    """Every curve from the same phase and cost functions :func:`planner.plan.plan` uses, for the scenario's own
    deployment (any TP the dropdown offers, also one spanning nodes)."""
    d, w, report = p.deployment, p.workload, p.report
    mc, hw = roofline.model_costs(p.model, d), roofline.hw_coeffs(p.gpu, d.weight_dtype, p.profile, p.model)
    m_tok = d.max_num_batched_tokens
    prompts = np.unique(np.geomspace(16, max(131072, w.prompt_tokens * 2), 48).astype(int))
    pre = phases.prefill_time_costs(mc, hw, prompts, 1, m_tok)
    pre_band = {r: _pct(band(p.profile, p.model, d, r)) for r in ("prefill_short", "prefill_long")}
    ttft = pd.DataFrame({"prompt_tokens": prompts, "ttft_s": np.asarray(pre.time_s, dtype=float),
                         "bound": np.asarray(pre.bound).astype(str),
                         "band_pct": [pre_band[prefill_regime(x)] for x in prompts]})
    dec = band(p.profile, p.model, d, "decode")

    dctx = batching.decode_context_tokens(w)
    all_b = np.arange(1, d.max_num_seqs + 1)
    step_all = np.atleast_1d(np.asarray(phases.decode_step_costs(mc, hw, all_b, dctx).time_s, dtype=float))
    busy = np.atleast_1d(np.asarray(cost_mod.prefill_busy_costs(mc, hw, w.prompt_tokens, all_b, m_tok), dtype=float))
    tpot_all = np.atleast_1d(cost_mod.effective_tpot_s(step_all, all_b, busy, w.output_tokens))
    under = np.flatnonzero(tpot_all <= w.tpot_slo_s)
    crossing = int(all_b[under[-1]]) if under.size else 0
    batches = np.unique(np.geomspace(1, d.max_num_seqs, 40).astype(int))
    i = batches - 1
    tpot_b = pd.DataFrame({"batch_size": batches, "tpot_s": tpot_all[i], "decode_step_s": step_all[i],
                           "band_pct": _pct(dec)})

    ctxs = np.unique(np.geomspace(128, max(p.model.max_context_tokens, w.context_tokens), 40).astype(int))
    lines = sorted({1, max(1, report.batch_size), max(1, min(report.max_concurrency, d.max_num_seqs))})
    tpot_c = pd.concat([pd.DataFrame({"context_tokens": ctxs, "batch_size": b, "band_pct": _pct(dec),
                                      "tpot_s": np.asarray(phases.decode_step_costs(mc, hw, b, ctxs).time_s,
                                                           dtype=float)}) for b in lines])

    # throughput as planner.sweep computes each row (pinned to it by tests/test_views.py)
    kv_limit = min(report.max_concurrency, d.max_num_seqs)
    thr = cost_mod.throughput(batches, step_all[i], busy[i], w.prompt_tokens, w.output_tokens, d.gpus_per_replica)
    ttft_load = np.asarray(batching.ttft_under_load_costs(mc, hw, w.prompt_tokens, batches, dctx, m_tok).time_s,
                           dtype=float)
    fits = batches <= kv_limit
    meets = fits & (tpot_all[i] <= w.tpot_slo_s) & (ttft_load <= w.ttft_slo_s)
    frame = pd.DataFrame({"batch_size": batches, "output_tokens_per_s": np.asarray(thr.output_tokens_per_s, float),
                          "tpot_s": tpot_all[i], "decode_step_s": step_all[i], "meets_slo": meets, "fits": fits,
                          "band_pct": _pct(dec)})
    frame["decode_tokens_per_s"] = frame["batch_size"] / frame["decode_step_s"]
    return LatencyFrames(ttft, tpot_b, tpot_c, frame, crossing, kv_limit, dctx, dec.basis)


# ========================================================================================= roofline


@dataclass(frozen=True)
class RooflineView:
    """Roofs (``peaks``: label, flops_per_s), the scenario's steps as points, the ridge, and its table."""

    peaks: pd.DataFrame
    points: pd.DataFrame
    dtype: str  # the compute dtype of the weights' matmuls
    peak_flops_per_s: float
    ridge_flops_per_byte: float
    table: pd.DataFrame


def roofline_view(p: Planned) -> RooflineView:
    g, r, d = p.gpu, p.report, p.deployment
    dtype, peak = g.peak_flops_for(d.weight_dtype)
    peaks = [{"label": dtype, "flops_per_s": peak}]
    if dtype != "bf16" and "bf16" in g.peak_flops_per_s:
        peaks.append({"label": "bf16", "flops_per_s": g.peak_flops_per_s["bf16"]})
    mc, hw = roofline.model_costs(p.model, d), roofline.hw_coeffs(g, d.weight_dtype, p.profile, p.model)
    dctx = batching.decode_context_tokens(p.workload)
    pts = [("prefill", r.ttft)]
    pts.append(("decode, batch 1", phases.decode_step_costs(mc, hw, 1, dctx)))
    if r.batch_size > 1:
        pts.append((f"decode, batch {r.batch_size:,}", phases.decode_step_costs(mc, hw, r.batch_size, dctx)))
    points = pd.DataFrame([{"label": n, "arithmetic_intensity": float(s.arithmetic_intensity),
                            "flops_per_s": float(s.achieved_flops_per_s), "bound": str(s.bound),
                            "time_s": float(s.time_s)} for n, s in pts])
    table = points.assign(**{
        "arithmetic intensity (FLOP/B)": points["arithmetic_intensity"].map(lambda x: f"{x:,.1f}"),
        "achieved": points["flops_per_s"].map(fmt_tflops), "time": points["time_s"].map(fmt_ms),
        "bound": points["bound"] + "-bound"})[["label", "arithmetic intensity (FLOP/B)", "achieved", "time", "bound"]]
    return RooflineView(pd.DataFrame(peaks), points, dtype, peak, peak / g.hbm_bandwidth_bytes_per_s, table)


def ridge_sentence(g: GpuSpec, rv: RooflineView) -> str:
    return (f"Ridge point of {g.name} at {rv.dtype}: {fmt_tflops(rv.peak_flops_per_s)} ÷ "
            f"{g.hbm_bandwidth_bytes_per_s / TB_PER_S:,.2f} TB/s = **{rv.ridge_flops_per_byte:,.0f} FLOP/byte**.")


# ========================================================================================= triangle


def triangle_frame(sw: pd.DataFrame, output_tokens: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The sweep's configurations that fit (latency = TTFT + TPOT × output, quality, a label, Pareto flag),
    and the corner of the front that is best on each pair of the three (the *pick two* corners)."""
    cols = ["gpu_id", "weight_dtype", "kv_cache_dtype", "num_gpus", "batch_size", "ttft_s", "tpot_s",
            "quality_score", "output_tokens_per_s_per_gpu"]
    df = sw.loc[sw["fits"] & ~sw["context_exceeds_model_limit"], cols].copy()
    df["latency_s"] = df["ttft_s"] + df["tpot_s"] * output_tokens
    df["quality"] = df["quality_score"].fillna(0.0)
    df["label"] = (df["num_gpus"].astype(str) + " × " + df["gpu_id"].astype(str) + ", " + df["weight_dtype"].astype(str)
                   + " / KV " + df["kv_cache_dtype"].astype(str) + ", batch " + df["batch_size"].astype(str))
    df["pareto"] = pareto_mask(df, maximize=("quality", "output_tokens_per_s_per_gpu"), minimize=("latency_s",))
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


def triangle_points(df: pd.DataFrame, max_points: int = 200) -> pd.DataFrame:
    """What the triangle draws: the whole Pareto front, and the other candidates thinned to one per cell of a
    grid on the chart's log axes (the cloud keeps its shape; a browser draws thousands of points slowly)."""
    front, rest = df[df["pareto"]], df[~df["pareto"]]
    rest = thin_cloud(rest, "latency_s", "output_tokens_per_s_per_gpu", max(0, max_points - len(front)))
    return pd.concat([front, rest])


def scenario_point(report: SizingReport, output_tokens: int) -> dict | None:
    """The scenario on the triangle's axes (None when no batch meets the targets)."""
    if not report.batch_size:
        return None
    return {"latency_s": report.slo.ttft_s + report.tpot_effective_s * output_tokens,
            "output_tokens_per_s_per_gpu": float(report.throughput.output_tokens_per_s_per_gpu)}


# ============================================================================================= cost

#: How a calibration mode is marked wherever a row is shown (a transferred or ideal row never passes unmarked).
MODE_MARK = {"calibrated": "calibrated (measured on this GPU)",
             "transferred": "⚠ transferred (another GPU's calibration, not measured here)",
             "ideal": "⚠ ideal roofline (no measurement)"}


def cost_grid(sc: Scenario, same_dtypes: bool) -> dict:
    """The sweep grid of the Cost view's question (:mod:`planner.choose`'s): every batch size up to the target
    users (:func:`planner.ranking.batch_grid`, what plan() searches), with the scenario's dtypes or any dtype."""
    grid = {"batch_sizes": ranking.batch_grid(sc.target_users)}
    if same_dtypes:
        grid.update(weight_dtypes=(sc.weight_dtype,), kv_dtypes=(sc.kv_cache_dtype,))
    return grid


def cheapest_per_gpu(sw: pd.DataFrame, target_users: int) -> pd.DataFrame:
    """Per GPU type, the cheapest configuration meeting every target at a batch ≤ the target users, in the one
    ranking order (:func:`planner.ranking.cheapest_per`): the first row is the cheapest of all.  ``csv_rank``:
    the row's rank in the sweep (and its CSV)."""
    src = sw.rename(columns={"rank": "csv_rank"}) if "rank" in sw.columns else sw
    best = ranking.cheapest_per(src, "gpu_id", users=target_users)
    return best.assign(label=best["num_gpus"].astype(str) + " × " + best["gpu_id"].astype(str))


def band_text(pct) -> str:
    return "no measured basis" if pct is None or not np.isfinite(pct) else f"±{pct:.0f} %"


def cost_table(best: pd.DataFrame, gpu_names: dict[str, str] | None = None) -> pd.DataFrame:
    """:func:`cheapest_per_gpu`'s rows for the user: the configuration and its dtypes, the ranking key first among
    the money columns (:data:`planner.ranking.RANK_LABEL`), latency with its error band (the wider of TTFT and
    TPOT), TP (the configuration says PP across nodes), quality, the calibration mode (transferred and ideal rows marked), the rank in the CSV, the price
    and its source.  Columns a frame lacks show '—'."""
    def col(name, fmt, default="—"):
        if name not in best.columns:
            return pd.Series(default, index=best.index)
        return pd.Series([fmt(v) for v in best[name]], index=best.index, dtype=object)

    names = gpu_names or {}
    t, d = (best.get(c, pd.Series(np.nan, index=best.index)).astype(float)
            for c in ("ttft_error_band_pct", "tpot_error_band_pct"))
    return pd.DataFrame({  # what decides first (rank, configuration, the ranking key, latency), then the money detail
        "rank in CSV": col("csv_rank", int),
        "configuration": best["num_gpus"].astype(str) + " × " + best["gpu_id"].astype(str).map(lambda g: names.get(g, g))
        + [f", PP {p}" if p > 1 else "" for p in best.get("pipeline_parallel", pd.Series(1, index=best.index))],
        "weights": best["weight_dtype"].astype(str), "KV": best["kv_cache_dtype"].astype(str),
        "TP": best["tensor_parallel"].astype(int), "batch": best["batch_size"].astype(int),
        ranking.RANK_LABEL: col(ranking.RANK_KEY, lambda x: fmt_usd(x, 3)),
        "TTFT": col("ttft_s", fmt_ms), "TPOT": col("tpot_s", fmt_ms),
        "error band": [band_text(None if not (np.isfinite(a) and np.isfinite(b)) else max(a, b)) for a, b in zip(t, d)],
        "quality": col("quality_score", lambda q: "—" if not np.isfinite(q) else f"{q:.1f}"),
        "calibration": col("calibration_mode", lambda m: MODE_MARK.get(str(m), str(m))),
        "$/M output": col("cost_usd_per_million_output_tokens", fmt_usd),
        "$/M blended": col("cost_usd_per_million_tokens_blended", fmt_usd),
        "$/GPU-hour": col("price_usd_per_hour", fmt_usd),
        "price source": col("price_source", str) + " (" + col("price_date", str) + ")",
    })


def sweep_command(sc: Scenario, model_id: str, same_dtypes: bool = True) -> str:
    """The ``planner sweep`` call whose rows (and CSV) the Cost view and the Sizing report show: the Cost view's
    question (:func:`planner.choose.question_command`), with any dtype when ``same_dtypes`` is off."""
    cmd = question_command("sweep", model_id, prompt_tokens=sc.prompt_tokens, output_tokens=sc.output_tokens,
                           ttft_slo_s=sc.ttft_slo_s, tpot_slo_s=sc.tpot_slo_s, users=sc.target_users,
                           weight_dtype=sc.weight_dtype, kv_dtype=sc.kv_cache_dtype, calibrated=sc.calibrated)
    if not same_dtypes:
        cmd = cmd.replace(f" --weight-dtype {sc.weight_dtype} --kv-dtype {sc.kv_cache_dtype}", "")
    return cmd + " --csv sweep.csv"


# ============================================================================================= load


@dataclass(frozen=True)
class LoadView:
    """Latency percentiles of one replica vs Poisson request rate (``frame``: request_rate_per_s, metric,
    value_s) and the knee (``planner slo-search``'s: the highest rate meeting both p99 targets).

    ``knee``: None if even the lightest load tried (``lightest_rate``) misses; ``found_miss``: whether the
    search found a rate that misses (if not, the knee lies above the highest rate searched);
    ``burst_rate``: the same requests arriving all at once complete at this rate (the grid's scale);
    ``deployment_knee``: the knee × the deployment's replicas."""

    frame: pd.DataFrame
    knee: float | None
    found_miss: bool
    burst_rate: float
    lightest_rate: float
    deployment_knee: float | None


#: Simulations one Load view runs, about: the burst, ~8 knee trials, the 8-rate grid (progress is shown
#: against this; it never claims to be done before it is).
LOAD_RUNS_EXPECTED = 17


def load_view(p: Planned, num_requests: int, progress=None) -> LoadView:
    """From :func:`planner.serving.load_curve`, with a fixed seed, so every rate sees the same arrival
    pattern compressed in time.  ``progress(fraction, rate)`` is called before each simulation.
    A replica that cannot hold one request (:func:`load_problem`) raises ValueError with the reason."""
    problem = load_problem(p.report)
    if problem:
        raise ValueError(problem)
    w = p.workload
    cost, cfg = serving.engine_setup(p.model, p.gpu, p.deployment, p.profile)
    runs = [0]

    def make(rate):
        runs[0] += 1
        if progress is not None:
            progress(min(0.95, runs[0] / (LOAD_RUNS_EXPECTED + 1)), rate)
        return synthetic(num_requests, w.prompt_tokens, w.output_tokens, rate_per_s=rate, seed=0)

    curve = serving.load_curve(make, cost, cfg, w.ttft_slo_s, w.tpot_slo_s)
    rows = [{"request_rate_per_s": row["rate_per_s"], "metric": f"{metric} {q}", "value_s": row[f"{key}_{q}_s"]}
            for row in curve.rows for metric, key in (("TTFT", "ttft"), ("TPOT", "tpot")) for q in ("p50", "p99")]
    knee, cap = curve.knee.max_rate_per_s or None, curve.knee.saturation_rate_per_s
    if progress is not None:
        progress(1.0, None)
    return LoadView(pd.DataFrame(rows).dropna(), knee, not curve.knee.at_search_limit, cap,
                    cap * serving.load.LOWER_BRACKET, knee * p.deployment.replicas if knee is not None else None)
