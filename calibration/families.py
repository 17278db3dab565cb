"""Kernel families: a staged latency fit in which every family has its own few coefficients, identified by
its own engines only, then each family's error band from the points it was not fitted on.

Families (``family_of``): ``dense`` (16-bit GEMMs; the shared attention, KV and CPU-overhead terms),
``kv-fp8`` (an fp8 KV cache), one per quantised weight format (``fp8`` W8A8, ``int4``/``int8`` weight-only),
``moe`` (fused-MoE GEMM, its routing overhead) and ``tp`` (tensor-parallel all-reduce).  The stages run in
that order; a stage fits its parameters on its family's fit-role points with everything fitted before held
fixed, so an fp8 engine cannot move the bf16 efficiencies and a MoE engine cannot move the dense ones.

The loss is the robust (soft-L1) squared log ratio predicted/measured: a 10 % miss on a 5 ms decode step
counts as much as one on a 1 s prefill, and a few outlying points (a compile on a new shape) do not drag
the fit.  Pure numpy/scipy.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from calibration.solve import METHOD, FitParam, solve, toolchain
from planner.bands import kernel_family
from planner.kernel_families import cudagraph_max_tokens
from planner.profile import (
    AllreduceCoeffs,
    CalibrationProfile,
    ErrorBand,
    MoeCoeffs,
    ShapeCorrection,
    Spread,
    WeightFormatCoeffs,
)
from planner.validate import Measurement, error_pct, predict, predict_many

LATENCY_METRICS = ("prefill_s", "decode_step_s", "mixed_step_s")

# The fit tables: one FitParam(path, lo, hi, start) per coefficient (calibration.solve.FitParam says what each
# field means).  Paths into the profile: a top-level field, or "<section>.<field>" for the nested coefficient
# objects (weight_formats.<fmt>, moe, allreduce).
DENSE = [
    FitParam("matmul_efficiency_max", 0.3, 1.2, 0.7), FitParam("matmul_half_tokens", 0.0, 4096.0, 16.0),
    FitParam("attention_compute_efficiency", 0.1, 1.2, 0.6), FitParam("weight_bandwidth_efficiency", 0.3, 1.2, 0.8),
    FitParam("kv_bandwidth_efficiency", 0.1, 1.2, 0.9), FitParam("step_overhead_s", 0.0, 0.02, 1e-3),
    FitParam("layer_overhead_s", 0.0, 2e-4, 1e-5),
    FitParam("prefill_layer_overhead_s", 0.0, 1e-3, 1e-5), FitParam("eager_layer_overhead_s", 0.0, 2e-3, 8e-5),
    FitParam("per_seq_overhead_s", 0.0, 2e-4, 9e-6), FitParam("request_overhead_s", 0.0, 0.05, 8e-3),
]
KV_FP8 = [FitParam("kv_bandwidth_efficiency_fp8", 0.1, 1.2, 0.6)]
MOE = [
    FitParam("moe.weight_bandwidth_efficiency", 0.05, 1.2, 0.8), FitParam("moe.matmul_efficiency_max", 0.05, 1.2, 0.5),
    FitParam("moe.matmul_half_tokens", 0.0, 8192.0, 64.0), FitParam("moe.layer_overhead_s", 0.0, 5e-4, 3e-5),
    FitParam("moe.prefill_layer_overhead_s", 0.0, 1e-3, 1e-4),
    FitParam("moe.eager_layer_launch_s", 0.0, 3e-3, 1e-3),
]
#: The eager MoE step as an additive per-layer cost instead of a launch floor: what the default fused-MoE
#: stage fitted before issue #21's mixed steps.  On Qwen3-30B-A3B's probes + mixed steps it fits about as well
#: (soft-L1 objective 0.146 vs 0.151 for the floor) but misses the 4,096-token prefill by +39 % (floor +6 %) and the
#: held-out Mixtral-8x7B's idle prefill by +39 % (floor +17 %), so MOE uses the floor (calibration/data/README.md).
#: The MoE variants (calibration/family_fit.py) keep it but MLA's (family_fit.FLOOR_VARIANTS): with the floor the
#: MXFP4 stage had two minima (soft-L1 0.069 and 0.188) that data scaled by 1 ± 1e-12 switched between.
MOE_EAGER_ADDITIVE = FitParam("moe.eager_layer_overhead_s", 0.0, 3e-3, 5e-4)
MOE_VARIANT = [p for p in MOE if p.path != "moe.eager_layer_launch_s"] + [MOE_EAGER_ADDITIVE]
#: what a MoE stage does not fit where the profile has a fused-MoE kernel law (planner.profile.MoeKernelLaw): the
#: law, timed on the kernel itself over 14 expert shapes, sets the GEMM time: the engine's share of it is 1.  The bf16
#: stage's half-point is the law's too (fitted, it took 0.4 tokens and traded with the expert bandwidth: data scaled by
#: 1 - 1e-12 moved both by 1e-4); a variant's half-point stays fitted (a per-step MoE cost at small batches beyond the
#: kernel's: MLA's batch-1 decode is 3.4 ms, flat to batch 8, -36 % with it held at 0)
LAW_SET = {"matmul_efficiency_max": 1.0}
LAW_SET_BF16 = dict(LAW_SET, matmul_half_tokens=0.0)


def without_law_terms(params: list[FitParam], law_set: dict | None) -> list[FitParam]:
    """A MoE stage's table without the terms the kernel law sets (``law_set``: :data:`LAW_SET`, or None without a
    law)."""
    return [p for p in params if not law_set or p.path.rsplit(".", 1)[-1] not in law_set]


TP = [FitParam("allreduce.custom_latency_s", 0.0, 2e-4, 1e-5),
      FitParam("allreduce.custom_bandwidth_efficiency", 0.02, 1.2, 0.5)]


def format_params(fmt: str) -> list[FitParam]:
    f = f"weight_formats.{fmt}"
    return [FitParam(f"{f}.weight_bandwidth_efficiency", 0.05, 1.2, 0.6),
            FitParam(f"{f}.matmul_efficiency_max", 0.05, 1.2, 0.6),
            FitParam(f"{f}.matmul_half_tokens", 0.0, 64.0, 16.0),
            FitParam(f"{f}.dequant_s_per_token_param", 0.0, 2e-14, 3e-15)]


#: What vLLM 0.26 ran for each family on the H200 (from the engines' start-up logs).
KERNELS = {
    "fp8": "CUTLASS fp8 scaled_mm, per-tensor weight scales, dynamic per-token activation scales (online quantisation)",
    "int4": "Machete W4A16 (GPTQ layout, group 128)",
    "int8": "Machete W8A16 (GPTQ layout, group 128)",
    "moe": "Triton fused_moe (bf16)",
}


def family_of(m: Measurement) -> str:
    """The family whose coefficients a measurement identifies: :func:`planner.bands.kernel_family` (MoE variant, then
    sliding-window hybrid, then TP, then weight format, then KV), the family a plan's error band looks up."""
    return kernel_family(m.model, m.deployment)


def regime_of(m: Measurement) -> str:
    """decode, mixed, prefill_short (≤ 2,048 prompt tokens in the request batch: CPU overheads and CUDA-graph
    boundaries dominate), prefill_long, kv_capacity or weights."""
    if m.metric == "decode_step_s":
        return "decode"
    if m.metric == "mixed_step_s":
        return "mixed"
    if m.metric == "prefill_s":
        return "prefill_short" if m.batch_size * m.prompt_tokens <= 2048 else "prefill_long"
    return {"kv_cache_tokens": "kv_capacity", "weights_bytes": "weights"}.get(m.metric, m.metric)


# ----------------------------------------------------------------------------------- the stages


def _with(base: dict, updates: dict[str, float]) -> CalibrationProfile:
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for path, value in updates.items():
        parts = path.split(".")
        node = data
        for p in parts[:-1]:
            node = node.setdefault(p, {}) if isinstance(node, dict) else node
            if node is None:
                raise KeyError(path)
        node[parts[-1]] = float(value)
    return CalibrationProfile.model_validate(data)


def fit_stage(points: list[Measurement], params: list[FitParam], base: dict) -> dict:
    """Least squares over ``params`` on ``points`` with the rest of ``base`` (a profile as a dict) fixed
    (:func:`calibration.solve.solve`: converged starts only, polished, unidentified terms fixed); returns the
    updated dict, its ``fit`` report holding this stage's objective, points and fixed terms under its family."""
    pts = [p for p in points if p.metric in LATENCY_METRICS]
    if not pts:
        return base
    params = [FitParam(*p) for p in params]
    meas = np.array([p.measured for p in pts])

    def resid(values: np.ndarray) -> np.ndarray:
        prof = _with(base, dict(zip([p.path for p in params], values)))
        return np.log(predict_many(pts, prof) / meas)

    stage = family_of(pts[0])
    sol = solve(resid, params, stage)
    out = _with(base, sol.values).model_dump()
    report = dict(out.get("fit") or {})
    report.update(method=METHOD, toolchain=toolchain(), objective={**report.get("objective", {}), stage: sol.cost},
                  points={**report.get("points", {}), stage: len(pts)}, fixed={**report.get("fixed", {}), **sol.fixed})
    out["fit"] = report
    return out


def layer_term_prior(points: list[Measurement], base: CalibrationProfile) -> tuple[float, str] | None:
    """(value, why) of ``layer_overhead_s`` where the dense fit points have one layer count (``planner calibrate``'s
    default plan: Mistral-7B alone), which cannot tell it from ``step_overhead_s``: the newest committed profile's for
    this GPU, else another GPU's (calibration/data/README.md: fitted on one model at 16, 32 and 64 layers), else 0;
    None where the points have two or more layer counts and the fit can tell them apart."""
    if len({p.model.num_layers for p in points}) > 1:
        return None
    from planner.io import catalog

    prior = catalog.profile_for(base.gpu_id, transfer=True) if base.gpu_id in catalog.gpus() else None
    value = prior.layer_overhead_s if prior is not None else 0.0
    where = f"the {prior.gpu_id} vLLM {prior.engine_version} profile's" if prior is not None else "none committed"
    return value, f"{value:g} ({where}): the dense fit points have one layer count"


def fit_families(fit_points: list[Measurement], base: CalibrationProfile,
                 nccl: tuple[float, float] | None = None) -> CalibrationProfile:
    """Every family in turn (module docstring).  ``nccl``: (latency s, bandwidth fraction of the link) from
    the NCCL all-reduce micro-benchmark, used above vLLM's custom all-reduce size."""
    by_family: dict[str, list[Measurement]] = {}
    for p in fit_points:
        by_family.setdefault(family_of(p), []).append(p)
    data = base.model_dump()
    if "dense" not in by_family:
        raise ValueError("no successful dense 16-bit probes to fit (the shared terms need them)")
    dense, held = DENSE, layer_term_prior(by_family["dense"], base)
    if held is not None:  # one depth: a step's per-step and per-layer costs move together, so the layer term is held
        dense = [p for p in DENSE if p.path != "layer_overhead_s"]
        data["layer_overhead_s"] = held[0]
    data = fit_stage(by_family["dense"], dense, data)
    if held is not None:
        data["fit"]["fixed"]["layer_overhead_s"] = held[1]
    data["shape_corrections"] = [c.model_dump() for c in fit_shape_corrections(
        by_family["dense"], CalibrationProfile.model_validate(data))]
    if "kv-fp8" in by_family:
        data = fit_stage(by_family["kv-fp8"], KV_FP8, data)
    for fmt in ("fp8", "int8", "int4"):
        if fmt in by_family:
            models = sorted({p.model.id for p in by_family[fmt]})
            data["weight_formats"][fmt] = WeightFormatCoeffs(
                kernel=KERNELS.get(fmt, ""), weight_bandwidth_efficiency=0.6, matmul_efficiency_max=0.6,
                fitted_on=models).model_dump()
            data = fit_stage(by_family[fmt], format_params(fmt), data)
    if "moe" in by_family:
        law = LAW_SET_BF16 if data.get("moe_kernel") is not None else None
        data["moe"] = MoeCoeffs(kernel=KERNELS["moe"], weight_bandwidth_efficiency=0.8,
                                fitted_on=sorted({p.model.id for p in by_family["moe"]}),
                                **(law or {"matmul_efficiency_max": 0.5})).model_dump()
        data = fit_stage(by_family["moe"], without_law_terms(MOE, law), data)
    if "tp" in by_family:
        lat, eff = nccl if nccl else (4e-5, 0.6)
        data["allreduce"] = AllreduceCoeffs(
            custom_latency_s=1e-5, custom_bandwidth_efficiency=0.5, nccl_latency_s=lat, nccl_bandwidth_efficiency=eff,
            source="custom all-reduce fitted on TP engine probes; NCCL from the all-reduce micro-benchmark"
            if nccl else "custom all-reduce fitted on TP engine probes; NCCL not measured (assumed)").model_dump()
        data = fit_stage(by_family["tp"], TP, data)
    return CalibrationProfile.model_validate(data)


#: Steps of up to this many tokens above the largest CUDA graph were probed for a GEMM-shape cliff.
SHAPE_CLIFF_HI_TOKENS = 1024.0


def fit_shape_corrections(points: list[Measurement], profile: CalibrationProfile) -> list[ShapeCorrection]:
    """Per dense GEMM shape (hidden, intermediate) among the fitted models: single-prompt prefills just above
    the largest CUDA graph (cudagraph_max < tokens < 1,024) that take far longer than the model predicts —
    median excess > 3 ms and > 25 % over at least two points — become a per-layer extra cost for every model
    of that shape.  (On the H200 the 4,096 × 14,336 shape of Mistral-7B/Llama-3.1-8B did this; Qwen
    shapes did not.  Llama-3.1-8B's mixed steps of calibration/data/h200-2026-12-01-moe-mixed, 768-896 tokens
    in 19-25 ms, show none: held out, they are its check, and it fails there; see calibration/data/README.md.)"""
    by_shape: dict[tuple[int, int], list[tuple[float, float, Measurement]]] = {}
    for p in points:
        lo = cudagraph_max_tokens(p.deployment, p.model)
        if p.metric == "prefill_s" and p.batch_size == 1 and lo < p.prompt_tokens < SHAPE_CLIFF_HI_TOKENS \
                and p.model.moe is None:
            pred = predict(p, profile)
            by_shape.setdefault((p.model.hidden_size, p.model.intermediate_size), []).append(
                (p.measured - pred, pred, p))
    out = []
    for (hidden, inter), rows in sorted(by_shape.items()):
        extra = float(np.median([r[0] for r in rows]))
        if len(rows) >= 2 and extra > max(3e-3, 0.25 * float(np.median([r[1] for r in rows]))):
            layers = rows[0][2].model.num_layers
            out.append(ShapeCorrection(
                hidden_size=hidden, intermediate_size=inter,
                tokens_lo=float(min(cudagraph_max_tokens(r[2].deployment, r[2].model) for r in rows)),
                tokens_hi=SHAPE_CLIFF_HI_TOKENS, extra_s_per_layer=round(extra / layers, 9),
                fitted_on=sorted({r[2].model.id for r in rows})))
    return out


def nccl_from_microbench(records: list[dict], link_bandwidth_bytes_per_s: float) -> tuple[float, float] | None:
    """(latency s, bus bandwidth ÷ link bandwidth) of NCCL all-reduce: the smallest messages' time and the
    largest messages' bus bandwidth (nccl-tests' definition) from ``allreduce`` records."""
    def ok(row) -> bool:  # a damaged row is left out, not fatal
        return isinstance(row, dict) and all(
            isinstance(row.get(k), (int, float)) and not isinstance(row.get(k), bool) and 0 < row[k] < float("inf")
            for k in ("message_bytes", "time_s", "bus_bandwidth_bytes_per_s"))

    rows = [row for r in records if r.get("type") == "allreduce" and isinstance(r.get("rows"), list)
            for row in r["rows"] if ok(row)]
    if not rows:
        return None
    rows.sort(key=lambda x: x["message_bytes"])
    latency = float(np.median([x["time_s"] for x in rows[:4]]))
    bandwidth = float(max(x["bus_bandwidth_bytes_per_s"] for x in rows))
    return latency, min(1.2, bandwidth / link_bandwidth_bytes_per_s)


# -------------------------------------------------------------------------- engine-start spread


def engine_key(m: Measurement) -> str:
    return f"{m.source}|{m.model.id}|{m.deployment.weight_dtype}|{m.deployment.kv_cache_dtype}|" \
           f"{m.deployment.tensor_parallel}|{m.role}"


def overhead_spread(points: list[Measurement], profile: CalibrationProfile) -> tuple[Spread | None, Spread | None]:
    """Per engine start, the step overhead that makes its small-batch decodes (B ≤ 8) exact and then the
    request overhead that makes its short prefills (≤ 512 tokens) exact; their p10/median/p90 across starts."""
    steps, requests = [], []
    by_engine: dict[str, list[Measurement]] = {}
    for p in points:
        by_engine.setdefault(engine_key(p), []).append(p)
    for pts in by_engine.values():
        dec = [p for p in pts if p.metric == "decode_step_s" and p.batch_size <= 8]
        pre = [p for p in pts if p.metric == "prefill_s" and p.batch_size * p.prompt_tokens <= 512]
        if not dec:
            continue
        delta = float(np.median([p.measured - predict(p, profile) for p in dec]))
        step = max(0.0, profile.step_overhead_s + delta)
        steps.append(step)
        if pre:
            shifted = profile.model_copy(update={"step_overhead_s": step})
            req = float(np.median([p.measured - predict(p, shifted) for p in pre]))
            requests.append(max(0.0, profile.request_overhead_s + req))

    def spread(x: list[float]) -> Spread | None:
        if len(x) < 2:
            return None
        p10, p50, p90 = np.percentile(x, [10, 50, 90])
        return Spread(n=len(x), p10=float(p10), median=float(p50), p90=float(p90))

    return spread(steps), spread(requests)


# ----------------------------------------------------------------------------------- error bands


def error_bands(fit_points: list[Measurement], validation_points: list[Measurement],
                profile: CalibrationProfile, *, min_points: int = 3,
                label: Callable[[Measurement], str] = lambda p: p.model.id) -> dict[str, ErrorBand]:
    """'<family>/<regime>' -> ErrorBand: from the held-out points where a family/regime has at least
    ``min_points`` of them, else from the fit residuals (the basis says which)."""
    def groups(points):
        out: dict[str, list[tuple[float, str]]] = {}
        for p in points:
            out.setdefault(f"{family_of(p)}/{regime_of(p)}", []).append((error_pct(predict(p, profile), p.measured),
                                                                         label(p)))
        return out

    held, fitted = groups(validation_points), groups(fit_points)
    # the memory model is one for every family: its KV-capacity error is pooled over all engines
    for g in (held, fitted):
        g["all/kv_capacity"] = [x for k, v in g.items() if k.endswith("/kv_capacity") for x in v]
    bands = {}
    for key in sorted(set(held) | set(fitted)):
        use, kind = (held[key], "held-out") if len(held.get(key, [])) >= min_points else (fitted.get(key, []), "fit residuals")
        if len(use) < min_points:
            continue
        err = np.abs([e for e, _ in use])
        bands[key] = ErrorBand(pct=round(float(np.percentile(err, 90)), 2), median_pct=round(float(np.median(err)), 2),
                               n=len(use), basis=f"{kind}: {', '.join(sorted({m for _, m in use}))}")
    return bands
