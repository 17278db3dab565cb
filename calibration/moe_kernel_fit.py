"""The fused-MoE kernel law (:class:`planner.profile.MoeKernelLaw`) fitted on kernel timings (issue #21).

calibration/moe_kernel_bench.py timed vLLM 0.26's Triton ``fused_experts`` on one H200 for 14 published MoE expert
shapes, bf16 and fp8, 1..16,384 tokens.  Per dtype, five terms are fitted on :data:`FIT_SHAPES` and the rest are
held out: the law's efficiency, the padding tokens per touched expert and the inner-dimension overhead (these three
go into the step formula, :func:`planner.kernel_families.moe_kernel_flops`), and, for the timings alone, the
kernel's expert-weight bandwidth efficiency and a fixed cost per call (the engine stages fit their own).  A timing's
touched experts are the ones its random routing hit (recorded).

What the step formula did before, on the same timings (one flat efficiency per stage): kernel time over it ranged
0.45-1.74x across shapes at 256-8,192 tokens; the law's held-out median is 4-7 % (calibration/data/README.md).
"""

from __future__ import annotations

import numpy as np

from calibration.moe_kernel_bench import WEIGHT_BYTES, flops
from calibration.solve import FitParam, solve
from planner.kernel_families import moe_kernel_flops
from planner.profile import MoeKernelDtype, MoeKernelLaw, Residuals
from planner.specs import GpuSpec

KERNEL_DATA = "h200-2026-12-03-moe-kernel/ka/moe-kernel.jsonl"
#: the Triton MXFP4 experts (gpt-oss's kernel) over the same shapes and gpt-oss's own (calibration/data/.../ma/)
MXFP4_KERNEL_DATA = "h200-2026-12-03-moe-kernel/ma/moe-kernel.jsonl"
KERNEL = "vLLM 0.26 Triton fused_experts (bf16; fp8 W8A8 per-tensor, dynamic activation scales), vLLM's config pick"
#: every other shape of the bench's list, the catalog's fit model (Qwen3-30B-A3B) among them; Mixtral-8x7B, the MoE
#: stages' held-out engine, is held out here too
FIT_SHAPES = ("qwen3-30b-a3b", "mixtral-8x22b", "olmoe-1b-7b", "glm-4.5-air", "llama-4-scout", "minimax-m2",
              "deepseek-v2-lite", "gpt-oss-120b")
PARAMS = (FitParam("efficiency", 0.05, 1.2, 0.5), FitParam("pad_tokens_per_expert", 0.0, 1024.0, 64.0),
          FitParam("inner_overhead_dim", 0.0, 4096.0, 100.0), FitParam("bandwidth_efficiency", 0.2, 1.2, 0.85),
          FitParam("call_s", 0.0, 1e-4, 1e-5))


def kernel_records(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("type") == "moe_kernel" and r.get("time_s", 0) > 0]


def law_time_s(rec: dict, gpu: GpuSpec, values: dict) -> float:
    """A timing's predicted seconds: max(the law's work at its efficiency, the touched experts' bytes at the
    bandwidth efficiency) + the call's fixed cost."""
    n, k = rec["expert_width"], rec["hidden"]
    params = 3.0 * n * k
    work = moe_kernel_flops(flops(rec["tokens"], n, k, rec["top_k"]), 2.0 * params * rec["touched_experts"] * values["pad_tokens_per_expert"], n, k,
                            values["inner_overhead_dim"])
    _, peak = gpu.peak_flops_for(rec["dtype"])
    weight_bytes = rec["touched_experts"] * params * WEIGHT_BYTES[rec["dtype"]]
    return max(work / (peak * values["efficiency"]),
               weight_bytes / (gpu.hbm_bandwidth_bytes_per_s * values["bandwidth_efficiency"])) + values["call_s"]


def kernel_residuals(errs: list[float]) -> Residuals:
    """n, median and p90 |error| and the median signed error of a kernel law's timing errors (percent)."""
    a = np.abs(errs)
    return Residuals(n=int(a.size), median_abs_error_pct=float(np.median(a)),
                     p90_abs_error_pct=float(np.percentile(a, 90)), median_signed_error_pct=float(np.median(errs)))


def errors_pct(recs: list[dict], gpu: GpuSpec, values: dict) -> list[float]:
    return [100.0 * (law_time_s(r, gpu, values) / r["time_s"] - 1.0) for r in recs]


def fit_dtype(recs: list[dict], gpu: GpuSpec) -> dict:
    """The five terms of one dtype fitted on ``recs`` (log ratios, calibration.solve's soft-L1 procedure)."""
    names = [p.path for p in PARAMS]

    def resid(x: np.ndarray) -> np.ndarray:
        values = dict(zip(names, x))
        return np.array([np.log(law_time_s(r, gpu, values) / r["time_s"]) for r in recs])

    return solve(resid, list(PARAMS), stage="moe-kernel").values


def fit_moe_kernel(records: list[dict], gpu: GpuSpec, source: str = KERNEL_DATA) -> MoeKernelLaw | None:
    """The law per dtype the records time (None without kernel timings), fitted on :data:`FIT_SHAPES`, with the
    time errors on them and on the held-out shapes."""
    recs = kernel_records(records)
    if not recs:
        return None
    dtypes, residuals = {}, {}
    for dtype in sorted({r["dtype"] for r in recs}):
        mine = [r for r in recs if r["dtype"] == dtype]
        fit = [r for r in mine if r["shape"] in FIT_SHAPES]
        held = [r for r in mine if r["shape"] not in FIT_SHAPES]
        if not fit:
            continue
        values = fit_dtype(fit, gpu)
        dtypes[dtype] = MoeKernelDtype(efficiency=values["efficiency"],
                                       pad_tokens_per_expert=values["pad_tokens_per_expert"],
                                       inner_overhead_dim=values["inner_overhead_dim"],
                                       kernel_bandwidth_efficiency=values["bandwidth_efficiency"],
                                       kernel_call_s=values["call_s"])
        residuals[f"fit/{dtype}"] = kernel_residuals(errors_pct(fit, gpu, values))
        if held:
            residuals[f"held out/{dtype}"] = kernel_residuals(errors_pct(held, gpu, values))
    shapes = sorted({r["shape"] for r in recs})
    return MoeKernelLaw(kernel=KERNEL, dtypes=dtypes, fitted_on=[s for s in shapes if s in FIT_SHAPES],
                        held_out=[s for s in shapes if s not in FIT_SHAPES], residuals=residuals, source=source)


def law_values(law: MoeKernelDtype) -> dict:
    """A fitted dtype's five terms by the names :func:`law_time_s` takes."""
    return {"efficiency": law.efficiency, "pad_tokens_per_expert": law.pad_tokens_per_expert,
            "inner_overhead_dim": law.inner_overhead_dim, "bandwidth_efficiency": law.kernel_bandwidth_efficiency,
            "call_s": law.kernel_call_s}
