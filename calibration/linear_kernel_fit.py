"""The dense linear kernel law (:class:`planner.profile.LinearKernelLaw`) from kernel timings (issue #21).

calibration/linear_kernel_bench.py timed, on one H200, the linear layers (qkv, o, gate_up, down) of four published
dense models as vLLM 0.26 runs them: fp8 as the per-token activation quantisation plus CUTLASS ``cutlass_scaled_mm``
(``fp8``), the GEMM alone (``fp8mm``) and bf16 (cuBLAS), 1-8,192 tokens.  A model's layer time (its four GEMMs
summed) over its time at 1-16 tokens is nearly the same curve on every shape: fp8 x1.25-1.27 at 24-32 tokens, ~x1.05
at 48-64, x1.17-1.22 at 96-128, x1.65-1.97 at 160-256, x2.7-3.3 at 384-512 (the Llama means); bf16 stays within 8 %
up to 64.  The law's
knots are that ratio at each timed token count up to the largest CUDA graph (512), averaged over the fit models'
layers (Llama-3.1-8B and 70B); Qwen2.5-7B and 32B are held out.  The step formula's fitted weight bandwidth carries
the 1-16-token level; the knots carry the rest.  Only fp8 gets a law: bf16's curve is what its fitted efficiency
curve already follows (dense bf16 decode within 0.7 % median held out).

The dispatch (vLLM's csrc/quantization/w8a8/cutlass/c3x/scaled_mm_sm90_fp8_dispatch.cuh, compute capability 9.0):
M <= 16, (16, 64], (64, 128], above; the GPUs of the catalog that run it: :data:`SM90_GPUS`.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from calibration.moe_kernel_fit import kernel_residuals
from planner.profile import LinearKernelDtype, LinearKernelLaw

LINEAR_KERNEL_DATA = "h200-2026-12-03-linear-kernel/lb/linear-kernel.jsonl"
KERNEL = "vLLM 0.26 CutlassFP8ScaledMMLinearKernel (per-token dynamic activation quant + cutlass_scaled_mm)"
FIT_MODELS = ("llama-3.1-8b", "llama-3.1-70b")
#: the law's dtypes, by the bench's name for what the engine runs
LAW_DTYPES = {"fp8": "fp8"}
#: vLLM's sm90 fp8 dispatch edges (tokens): a configuration per (edge, next edge]
BUCKET_EDGES = (16.0, 64.0, 128.0)
#: catalog GPUs of compute capability 9.0 (the dispatch above)
SM90_GPUS = ("h100-pcie", "h100-sxm", "h200-sxm")
MAX_TOKENS = 512  # the dense engines' largest CUDA graph: above it prefill steps are compute-bound
REF_TOKENS = 16  # the reference level: the 1-16-token bucket's median


def layer_times(records: list[dict], dtype: str) -> dict[str, dict[int, float]]:
    """model -> tokens -> its four linear layers' seconds summed (models with every layer timed at that count)."""
    per: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    for r in records:
        if r.get("type") == "linear_kernel" and r.get("dtype") == dtype and r.get("time_s", 0) > 0:
            per[(r["model"], int(r["tokens"]))][r["layer"]] = r["time_s"]
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for (model, tokens), layers in per.items():
        if len(layers) == 4:
            out[model][tokens] = sum(layers.values())
    return dict(out)


def ratios(times: dict[int, float]) -> dict[int, float]:
    """One model's layer time over its 1-16-token median, at each timed count up to :data:`MAX_TOKENS`."""
    ref = float(np.median([t for m, t in times.items() if m <= REF_TOKENS]))
    return {m: t / ref for m, t in sorted(times.items()) if m <= MAX_TOKENS}


def fit_linear_kernel(records: list[dict], gpu_id: str | None = None,
                      source: str = LINEAR_KERNEL_DATA) -> LinearKernelLaw | None:
    """The law (None without fp8 layer timings of a fit model): per dtype the fit models' mean ratio at each timed
    token count, and each model's layer-time error at 1-512 tokens when its own 1-16-token level is scaled by it.
    Timed on a GPU of compute capability 9.0 (``gpu_id`` one of :data:`SM90_GPUS`, or None: the committed H200
    timings) it holds for all of them, with their dispatch's bucket edges; on another GPU for that GPU alone, the
    knots interpolated throughout (its dispatch's edges are not read here)."""
    dtypes, residuals, models = {}, {}, set()
    for bench, dtype in LAW_DTYPES.items():
        every = {m: ratios(t) for m, t in layer_times(records, bench).items()}
        fit = [r for m, r in every.items() if m in FIT_MODELS]
        counts = sorted(set.intersection(*(set(r) for r in fit))) if fit else []
        if len(counts) < 2:
            continue
        knots = LinearKernelDtype(tokens=[float(c) for c in counts],
                                  factor=[float(np.mean([r[c] for r in fit])) for c in counts])
        dtypes[dtype] = knots
        law = dict(zip(counts, knots.factor))
        for role, fitted in (("fit", True), ("held out", False)):
            errs = [100.0 * (law[c] / r[c] - 1.0) for m, r in every.items() if (m in FIT_MODELS) == fitted
                    for c in counts if c in r]
            if errs:
                residuals[f"{role}/{dtype}"] = kernel_residuals(errs)
        models |= set(every)
    if not dtypes:
        return None
    sm90 = gpu_id is None or gpu_id in SM90_GPUS
    return LinearKernelLaw(kernel=KERNEL, dtypes=dtypes, gpu_ids=list(SM90_GPUS) if sm90 else [gpu_id],
                           bucket_edges_tokens=list(BUCKET_EDGES) if sm90 else [],
                           fitted_on=sorted(m for m in models if m in FIT_MODELS),
                           held_out=sorted(m for m in models if m not in FIT_MODELS), residuals=residuals,
                           source=source)
