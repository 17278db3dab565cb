"""The dashboard's numbers: every frame, point and sentence part the Streamlit views show, computed here
from planner calls so that ``app.py`` only lays them out (and caches them by the scenario).

Each view's function takes the scenario's planner objects (:class:`planner.scenario.Planned`).  No
streamlit import; figures are drawn by :mod:`planner.charts` from these frames.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner import batching, memory, phases, ranking, roofline, serving
from planner import cost as cost_mod
from planner.charts import pareto_mask
from planner.profile import CalibrationProfile
from planner.report import SizingReport
from planner.scenario import Planned, Scenario
from planner.specs import GpuSpec
from planner.sweep import sweep
from planner.units import MS, TB_PER_S, fmt_bytes, fmt_gb, fmt_gib, fmt_ms, fmt_tflops, fmt_usd
from planner.workloads import synthetic

#: The dashboard's views, in tab order, each with the sentence that explains what it shows.
VIEW_BLURBS = {
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


# ========================================================================================= headline


def deployment_users(report: SizingReport) -> int:
    """Requests the whole deployment holds at once: the per-replica KV limit × replicas."""
    return report.max_concurrency * report.deployment.replicas


def latency_model_label(profile_mode: str) -> str:
    return {"calibrated": "calibrated profile", "transferred": "calibration transferred from another GPU"}.get(
        profile_mode, "ideal roofline (speed of light)")


def profile_caption(p: CalibrationProfile) -> str:
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
    return (f"Calibrated profile: {p.engine or 'engine'} {p.engine_version or '?'}, "
            f"fitted {p.created[:10] or '?'}{used}."
            + (f" Fit error, median |error|: {fit}." if fit else " No residuals recorded.")
            + (f" Validation: {val}." if val else ""))


# =========================================================================================== memory


def memory_bar(report: SizingReport, label: str) -> pd.DataFrame:
    """One stacked bar of the per-GPU memory split (:func:`planner.charts.memory_stack`'s columns)."""
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
        return memory.kv_pool_concurrency(budget.kv_pool_bytes, per_req, budget.fits) * reps

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
        ("KV bytes per token (whole model)", f"{per_tok_model:,.0f} B", f"{fmt_bytes(per_tok_model)} (decimal)"),
        ("KV bytes per token per GPU", f"{m.kv_bytes_per_token:,.0f} B", f"after TP {d.tensor_parallel} sharding"),
        (f"KV per request at {context:,} tokens", fmt_gib(r.kv_per_request.total_bytes, 3),
         fmt_gb(r.kv_per_request.total_bytes, 3) + f", blocks of {d.block_size_tokens} tokens"),
        ("KV per request per GPU", fmt_gib(r.kv_per_request_bytes_per_gpu, 3),
         fmt_gb(r.kv_per_request_bytes_per_gpu, 3)),
        ("KV pool per GPU", fmt_gib(max(m.kv_pool_bytes, 0)), f"{m.kv_capacity_tokens:,} tokens"),
        ("Weights per GPU", fmt_gib(m.weight_bytes), fmt_gb(m.weight_bytes)),
        ("Usable per GPU", fmt_gib(m.usable_bytes),
         f"{d.gpu_memory_utilization:.0%} of {fmt_gib(m.gpu_memory_bytes)}"),
    ]
    return pd.DataFrame(rows, columns=["quantity", "value", "also"])


# ========================================================================================== latency


@dataclass(frozen=True)
class LatencyFrames:
    """The Latency view: TTFT vs prompt, TPOT vs batch and vs context, throughput vs batch.

    ``crossing``: the largest batch whose TPOT (with interleaved prefills) meets the target (0: none);
    ``kv_limit_batch``: the most sequences one replica holds (KV cache, or max_num_seqs);
    ``decode_context_tokens``: the context the decode curves are drawn at."""

    ttft: pd.DataFrame
    tpot_batch: pd.DataFrame
    tpot_context: pd.DataFrame
    throughput: pd.DataFrame
    crossing: int
    kv_limit_batch: int
    decode_context_tokens: float


def latency_frames(p: Planned) -> LatencyFrames:
    d, w, report = p.deployment, p.workload, p.report
    mc, hw = roofline.model_costs(p.model, d), roofline.hw_coeffs(p.gpu, d.weight_dtype, p.profile, p.model)
    m_tok = d.max_num_batched_tokens
    prompts = np.unique(np.geomspace(16, max(131072, w.prompt_tokens * 2), 48).astype(int))
    pre = phases.prefill_time_costs(mc, hw, prompts, 1, m_tok)
    ttft = pd.DataFrame({"prompt_tokens": prompts, "ttft_s": pre.time_s, "bound": pre.bound})

    dctx = batching.decode_context_tokens(w)
    all_b = np.arange(1, d.max_num_seqs + 1)
    step_all = np.atleast_1d(phases.decode_step_costs(mc, hw, all_b, dctx).time_s)
    busy = cost_mod.prefill_busy_costs(mc, hw, w.prompt_tokens, all_b, m_tok)
    tpot_all = np.atleast_1d(cost_mod.effective_tpot_s(step_all, all_b, busy, w.output_tokens))
    under = np.flatnonzero(tpot_all <= w.tpot_slo_s)
    crossing = int(all_b[under[-1]]) if under.size else 0
    batches = np.unique(np.geomspace(1, d.max_num_seqs, 40).astype(int))
    tpot_b = pd.DataFrame({"batch_size": batches, "tpot_s": tpot_all[batches - 1],
                           "decode_step_s": step_all[batches - 1]})

    ctxs = np.unique(np.geomspace(128, max(p.model.max_context_tokens, w.context_tokens), 40).astype(int))
    lines = sorted({1, max(1, report.batch_size), max(1, min(report.max_concurrency, d.max_num_seqs))})
    tpot_c = pd.concat([pd.DataFrame({"context_tokens": ctxs, "batch_size": b,
                                      "tpot_s": phases.decode_step_costs(mc, hw, b, ctxs).time_s}) for b in lines])

    sw = sweep(p.model, w, gpus=[p.gpu], weight_dtypes=[d.weight_dtype], kv_dtypes=[d.kv_cache_dtype],
               tensor_parallels=[d.tensor_parallel], batch_sizes=batches.tolist(), profile_for=lambda _g: p.profile,
               deployment_defaults={"gpu_memory_utilization": d.gpu_memory_utilization})
    thr = sw.sort_values("batch_size")[["batch_size", "output_tokens_per_s", "tpot_s", "decode_step_s", "meets_slo",
                                         "fits"]].copy()
    thr["decode_tokens_per_s"] = thr["batch_size"] / thr["decode_step_s"]
    return LatencyFrames(ttft, tpot_b, tpot_c, thr, crossing, min(report.max_concurrency, d.max_num_seqs), dctx)


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
    df = sw[sw["fits"] & ~sw["context_exceeds_model_limit"]].copy()
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


def scenario_point(report: SizingReport, output_tokens: int) -> dict | None:
    """The scenario on the triangle's axes (None when no batch meets the targets)."""
    if not report.batch_size:
        return None
    return {"latency_s": report.slo.ttft_s + report.tpot_effective_s * output_tokens,
            "output_tokens_per_s_per_gpu": float(report.throughput.output_tokens_per_s_per_gpu)}


# ============================================================================================= cost

def cost_grid(sc: Scenario, same_dtypes: bool) -> dict:
    """The sweep grid of the Cost view: every batch size up to the target users
    (:func:`planner.ranking.batch_grid`, what plan() searches), with the scenario's dtypes or with any dtype."""
    grid = {"batch_sizes": ranking.batch_grid(sc.target_users)}
    if same_dtypes:
        grid.update(weight_dtypes=(sc.weight_dtype,), kv_dtypes=(sc.kv_cache_dtype,))
    return grid


def cheapest_per_gpu(sw: pd.DataFrame, target_users: int) -> pd.DataFrame:
    """Per GPU type, the cheapest configuration meeting every target at a batch ≤ the target users, in the one
    ranking order (:func:`planner.ranking.cheapest_per`): the first row is the cheapest of all."""
    best = ranking.cheapest_per(sw, "gpu_id", users=target_users)
    return best.assign(label=best["num_gpus"].astype(str) + " × " + best["gpu_id"].astype(str))


def cost_table(best: pd.DataFrame) -> pd.DataFrame:
    """:func:`cheapest_per_gpu`'s rows, formatted, with their price sources; the first money column is the
    ranking key (:data:`planner.ranking.RANK_LABEL`)."""
    return pd.DataFrame({
        "configuration": best["label"], "weights": best["weight_dtype"].astype(str),
        "KV": best["kv_cache_dtype"].astype(str), "batch": best["batch_size"],
        ranking.RANK_LABEL: best[ranking.RANK_KEY].map(fmt_usd),
        "$/M output": best["cost_usd_per_million_output_tokens"].map(fmt_usd),
        "$/M blended": best["cost_usd_per_million_tokens_blended"].map(fmt_usd),
        "TPOT": best["tpot_s"].map(fmt_ms), "TTFT": best["ttft_s"].map(fmt_ms),
        "$/GPU-hour": best["price_usd_per_hour"].map(fmt_usd), "price source": best["price_source"].astype(str),
        "price date": best["price_date"].astype(str)})


def sweep_command(sc: Scenario, model_id: str) -> str:
    """The ``planner sweep`` command that writes the Sizing report's CSV."""
    return (f"planner sweep -m {model_id} --prompt-tokens {sc.prompt_tokens} --output-tokens {sc.output_tokens} "
            f"--ttft-slo-ms {sc.ttft_slo_s / MS:g} --tpot-slo-ms {sc.tpot_slo_s / MS:g} "
            f"--profile {'auto' if sc.calibrated else 'none'} --csv sweep.csv")


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


def load_view(p: Planned, num_requests: int) -> LoadView:
    """From :func:`planner.serving.load_curve`, with a fixed seed, so every rate sees the same arrival
    pattern compressed in time."""
    w = p.workload
    cost, cfg = serving.engine_setup(p.model, p.gpu, p.deployment, p.profile)
    curve = serving.load_curve(lambda rate: synthetic(num_requests, w.prompt_tokens, w.output_tokens,
                                                      rate_per_s=rate, seed=0),
                               cost, cfg, w.ttft_slo_s, w.tpot_slo_s)
    rows = [{"request_rate_per_s": row["rate_per_s"], "metric": f"{metric} {q}", "value_s": row[f"{key}_{q}_s"]}
            for row in curve.rows for metric, key in (("TTFT", "ttft"), ("TPOT", "tpot")) for q in ("p50", "p99")]
    knee, cap = curve.knee.max_rate_per_s or None, curve.knee.saturation_rate_per_s
    return LoadView(pd.DataFrame(rows).dropna(), knee, not curve.knee.at_search_limit, cap,
                    cap * serving.load.LOWER_BRACKET, knee * p.deployment.replicas if knee is not None else None)
