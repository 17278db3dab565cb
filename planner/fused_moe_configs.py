"""The kernel configuration vLLM 0.26's Triton fused MoE runs a step with (pure; no torch/vLLM).

vLLM ships tuned configurations per expert shape, GPU and dtype (planner/data/vllm_fused_moe_configs_0.26.0.json,
written by ``python -m calibration.moe_configs`` from the wheel): a step of M tokens runs the configuration of the
tuned key nearest M (``try_get_optimal_moe_config``), or, without a file, ``get_default_config``'s (tiles grow with
M).  Two steps share a compiled kernel only if their configurations are equal (planner.compile_keys).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from planner.specs import ModelSpec

#: torch.cuda.get_device_name() of the catalog's GPUs as vLLM names its tuned fused-MoE configurations
VLLM_DEVICE_NAMES = {"h200-sxm": "NVIDIA_H200", "h100-sxm": "NVIDIA_H100_80GB_HBM3", "b200": "NVIDIA_B200",
                     "a100-sxm-80gb": "NVIDIA_A100-SXM4-80GB", "a100-sxm-40gb": "NVIDIA_A100-SXM4-40GB",
                     "l40s": "NVIDIA_L40S", "mi300x": "AMD_Instinct_MI300X"}
FUSED_MOE_CONFIGS = Path(__file__).resolve().parent / "data" / "vllm_fused_moe_configs_0.26.0.json"
#: the expert weight dtypes that run vLLM 0.26's Triton fused MoE (int4 experts run Marlin, MXFP4 its own kernel),
#: with the ``dtype=`` part of the tuned file's name
TRITON_FUSED_MOE_DTYPES = {"bf16": "", "fp8": ",dtype=fp8_w8a8"}


@functools.lru_cache(maxsize=1)
def _data() -> dict:
    return json.loads(FUSED_MOE_CONFIGS.read_text(encoding="utf-8"))


def tuned_table(model: ModelSpec, weight_dtype: str, gpu_id: str | None,
                tensor_parallel: int = 1) -> dict[int, dict] | None:
    """{token key: configuration} of the tuned file vLLM 0.26 reads for the model's experts (N = expert FFN width per
    GPU) on this GPU, or None where it ships none (then it runs :func:`default_config`)."""
    dev = VLLM_DEVICE_NAMES.get(gpu_id or "")
    dtype = TRITON_FUSED_MOE_DTYPES.get(weight_dtype)
    if model.moe is None or dev is None or dtype is None:
        return None
    n = model.moe.expert_intermediate_size // max(1, tensor_parallel)
    by_m = _data()["files"].get(f"E={model.moe.num_experts},N={n},device_name={dev}{dtype}.json")
    if by_m is None:
        return None
    configs = _data()["configs"]
    return {int(m): configs[i] for m, i in by_m.items()}


def default_config(tokens: int, num_experts: int, weight_dtype: str) -> dict:
    """vLLM 0.26 ``get_default_config`` for bf16 and fp8 per-tensor experts on CUDA: tiles grow with the step's
    tokens M; GROUP_SIZE_M 16 once an expert averages more than 128 tokens."""
    m = int(tokens)
    return {"BLOCK_SIZE_M": 16 if m <= 32 else 32 if m <= 96 else 64 if m <= 512 else 128,
            "BLOCK_SIZE_N": 64 if m <= 64 else 128,
            "BLOCK_SIZE_K": 128 if weight_dtype == "fp8" or m <= 64 else 64,
            "GROUP_SIZE_M": 16 if m // max(num_experts, 1) > 128 else 1, "SPLIT_K": 1,
            "num_warps": 4 if m <= 128 else 8, "num_stages": 4 if m <= 32 else 3}


def step_config(table: dict[int, dict] | None, tokens: int, num_experts: int, weight_dtype: str) -> dict:
    """The configuration a step of ``tokens`` tokens runs with: the tuned key nearest it (the smaller on a tie, as
    ``min`` over vLLM's sorted keys), else the default."""
    if not table:
        return default_config(tokens, num_experts, weight_dtype)
    return table[min(table, key=lambda k: abs(k - int(tokens)))]


def fused_moe_tuned(model: ModelSpec, weight_dtype: str, gpu_id: str | None) -> bool:
    """Whether vLLM 0.26 ships a tuned Triton fused-MoE configuration for the model's experts on this GPU at one GPU
    per replica (bf16, or fp8 W8A8 with per-tensor scales), rather than running its default one."""
    return tuned_table(model, weight_dtype, gpu_id) is not None
