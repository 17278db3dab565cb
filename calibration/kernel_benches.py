"""The kernel timings a ``planner calibrate`` campaign takes beside its engines, each in its own process so its CUDA
context is gone before vLLM starts: the GEMM/HBM micro-benchmark (calibration/microbench.py) and, when a job runs
bf16 or fp8 experts in vLLM's Triton fused MoE, the fused-MoE kernel bench (calibration/moe_kernel_bench.py: 14
expert shapes x bf16/fp8 x 15 token counts, 148 s on an H200), from which the fit takes the kernel law
(calibration/moe_kernel_fit.py), and when a job runs fp8 weights, the dense linear kernel bench
(calibration/linear_kernel_bench.py: 16 layer shapes x fp8/fp8mm/bf16 x 21 token counts, 24 s on an H200), from which
the fit takes the linear kernel law (calibration/linear_kernel_fit.py).  Each runs once per campaign; a cut kernel
bench resumes where it stopped."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from calibration import linear_kernel_bench
from calibration.moe_kernel_bench import SHAPES, TOKENS
from calibration.moe_kernel_fit import kernel_records

#: the kernel bench's time budget in a campaign (its whole grid took 148 s on an H200), and its process's limit
MOE_KERNEL_BUDGET_S = 300
#: the linear kernel bench's (24 s on an H200)
LINEAR_KERNEL_BUDGET_S = 120
LINEAR_KERNEL_POINTS = (len(linear_kernel_bench.SHAPES) * len(linear_kernel_bench.DTYPES)
                        * len(linear_kernel_bench.TOKENS))
REPO = Path(__file__).resolve().parent.parent


def runs_fused_moe(jobs: list[dict]) -> bool:
    """Whether a job runs bf16/fp8 experts in the Triton fused MoE (the kernel law's kernel): a catalog MoE model or
    probe variant outside the MXFP4 and int4 kernels.  A model the catalog does not know (--model-dir) is not
    looked up."""
    from calibration.variants import probe_model
    from planner.io.files import SpecError
    from planner.kernel_families import runs_triton_fused_moe

    for j in jobs:
        try:
            model = probe_model(j["model"])
        except (SpecError, KeyError):
            continue
        if runs_triton_fused_moe(model, j.get("weights", "bf16")):
            return True
    return False


def kernel_benches(raw: Path, out_dir: Path, gpu_id: str, records: list[dict], jobs: list[dict],
                   stream: Callable) -> list[str]:
    """Run what the campaign still lacks into ``raw`` (``stream(cmd, log_path, env, timeout_s)``, as
    calibration.run._stream); the names of the benches run."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    ran = []
    if not any(r.get("type") == "microbench" for r in records):
        stream([sys.executable, "-m", "calibration.microbench", str(raw), gpu_id],
               out_dir / f"{raw.stem}.microbench.log", env, timeout_s=300)
        ran.append("microbench")
    if runs_fused_moe(jobs) and len(kernel_records(records)) < len(SHAPES) * 2 * len(TOKENS):
        stream([sys.executable, "-m", "calibration.moe_kernel_bench", "--out", str(raw), "--budget-s",
                str(MOE_KERNEL_BUDGET_S)], out_dir / f"{raw.stem}.moe-kernel.log", env,
               timeout_s=MOE_KERNEL_BUDGET_S + 60)
        ran.append("moe_kernel_bench")
    linear = [r for r in records if r.get("type") in ("linear_kernel", "linear_kernel_error")]
    if any(j.get("weights") == "fp8" for j in jobs) and len(linear) < LINEAR_KERNEL_POINTS:
        stream([sys.executable, "-m", "calibration.linear_kernel_bench", "--out", str(raw), "--budget-s",
                str(LINEAR_KERNEL_BUDGET_S)], out_dir / f"{raw.stem}.linear-kernel.log", env,
               timeout_s=LINEAR_KERNEL_BUDGET_S + 60)
        ran.append("linear_kernel_bench")
    return ran
