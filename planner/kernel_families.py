"""What vLLM 0.26 runs differently for the 2026 model families, measured on an H200 on 2026-12-01
(calibration/data/h200-2026-12-01/, issue #21), as small pure functions the roofline and the memory model call:

* MXFP4 MoE (gpt-oss): only the routed experts are MXFP4 (4 bits + one 8-bit scale per 32 = 4.25 bits); attention,
  router, embeddings and LM head stay bf16, as the published checkpoints' ``quantization_config`` says.  The experts
  run in the Triton MXFP4 kernel (``OAITritonMxfp4ExpertsMonolithic``), the rest in the bf16 GEMMs.  vLLM captures
  CUDA graphs up to 1,024 tokens for gpt-oss (``GptOssForCausalLMConfig``) instead of 512.
* The model runner: vLLM uses its V1 GPU model runner for MoE models other than a few architectures
  (``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES``); the V1 runner subtracts its CUDA-graph memory estimate from the KV pool
  and its profiling pass peaks at the sampler's fp32 logits with the fused-MoE workspace still held
  (:func:`fused_moe_workspace_bytes`), so the pool is 2-5 % smaller than the V2 formula.
* Kernel family of a MoE model (which fitted ``MoeCoeffs`` apply): ``mxfp4``, ``mla`` (MLA attention + fine-grained
  MoE with shared experts, DeepSeek-V2/V3 layout), ``fp8`` (W8A8 experts, Triton fp8 fused MoE) or the bf16 Triton
  fused-MoE default.
* Hybrid sliding-window dense models (Gemma-3 5:1 local/global) carry a per-step cost of their own.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np

from planner.specs import Deployment, ModelSpec
from planner.units import cdiv

#: vLLM 0.26 config/vllm.py: MoE architectures that still get the V2 model runner (dense models always do)
V2_RUNNER_MOE_ARCHITECTURES = frozenset({"DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "Qwen2MoeForCausalLM"})
#: vLLM 0.26 model_executor/models/config.py: architectures whose largest CUDA graph is raised to 1,024 tokens
LARGE_GRAPH_ARCHITECTURES = frozenset({"GptOssForCausalLM"})
MXFP4_BITS = 4.25


def mxfp4_experts_only(model: ModelSpec, weight_dtype: str) -> bool:
    """Weights as gpt-oss publishes them: MXFP4 routed experts, everything else 16-bit (a model published in
    another format and planned at 'mxfp4', e.g. as a stand-in for NVFP4, keeps the all-linear-layers rule)."""
    return weight_dtype == "mxfp4" and model.moe is not None and model.native_dtype == "mxfp4"


def uses_v1_runner(model: ModelSpec) -> bool:
    """Does vLLM 0.26 run ``model`` on its V1 GPU model runner (MoE outside the V2 list)?"""
    return model.moe is not None and model.architecture not in V2_RUNNER_MOE_ARCHITECTURES


def fused_moe_workspace_bytes(model: ModelSpec, weight_dtype: str, tokens: int, tensor_parallel: int = 1) -> float:
    """Bytes of the fused-MoE workspace a ``tokens``-token step leaves allocated (per GPU, bf16 activations).
    vLLM's Triton fused MoE (bf16 and fp8 W8A8 experts alike) takes two workspaces and an output of
    (tokens, top-k, max(I, hidden)), (tokens, top-k, max(2·I, hidden)) and (tokens, hidden), with I the expert width
    per GPU (gate/up output 2·I); vLLM keeps them for the next step, so they are still held when the profiling
    pass's sampler runs.  gpt-oss's Triton MXFP4 kernel keeps only the (tokens, hidden) output.  Measured on the
    H200 (start-up peaks minus the sampler term, calibration/family_fit.py): Qwen3-30B-A3B 0.53 GiB more at 16,384
    than at 8,192 tokens (this formula: 0.53), gpt-oss-20b 0.05 (0.04)."""
    k, h = model.moe.experts_per_token, model.hidden_size
    if mxfp4_experts_only(model, weight_dtype):
        return float(tokens) * h * 2.0
    width = model.moe.expert_intermediate_size / tensor_parallel
    return float(tokens) * (k * max(width, h) + k * max(2.0 * width, h) + h) * 2.0


def graph_capture_limit(model: ModelSpec | None) -> int:
    """vLLM 0.26's default largest CUDA-graph size for ``model`` (before the max_num_seqs/batched-token caps)."""
    return 1024 if model is not None and model.architecture in LARGE_GRAPH_ARCHITECTURES else 512


def moe_variant(model: ModelSpec | None, weight_dtype: str) -> str | None:
    """The MoE kernel family of ``model``: 'mxfp4', 'mla', 'fp8' (fp8 W8A8 experts in the Triton fused MoE),
    'default' (bf16 Triton fused MoE), None if dense."""
    if model is None or model.moe is None:
        return None
    if mxfp4_experts_only(model, weight_dtype):
        return "mxfp4"
    if model.attention.kind == "mla":
        return "mla"
    if weight_dtype == "fp8":
        return "fp8"
    return "default"


#: vLLM 0.26 models/*.py: the MoE architectures whose router gate is built with the model's quant_config, so an fp8
#: (W8A8) engine quantises the router with the experts; every other MoE (Mixtral, Qwen2-MoE, OLMoE, ...) keeps it bf16
QUANTIZED_ROUTER_ARCHITECTURES = frozenset({"Qwen3MoeForCausalLM", "ArcticForCausalLM", "Lfm2MoeForCausalLM"})
#: torch.cuda.get_device_name() of the catalog's GPUs as vLLM names its tuned fused-MoE configurations
VLLM_DEVICE_NAMES = {"h200-sxm": "NVIDIA_H200", "h100-sxm": "NVIDIA_H100_80GB_HBM3", "b200": "NVIDIA_B200",
                     "a100-sxm-80gb": "NVIDIA_A100-SXM4-80GB", "a100-sxm-40gb": "NVIDIA_A100-SXM4-40GB",
                     "l40s": "NVIDIA_L40S", "mi300x": "AMD_Instinct_MI300X"}
FUSED_MOE_CONFIGS = Path(__file__).resolve().parent / "data" / "vllm_fused_moe_configs_0.26.0.json"


@functools.lru_cache(maxsize=1)
def _tuned_configs() -> frozenset[str]:
    return frozenset(json.loads(FUSED_MOE_CONFIGS.read_text(encoding="utf-8"))["files"])


def fused_moe_tuned(model: ModelSpec, weight_dtype: str, gpu_id: str | None) -> bool:
    """Whether vLLM 0.26 ships a tuned Triton fused-MoE configuration for the model's experts on this GPU at one GPU
    per replica (bf16, or fp8 W8A8 with per-tensor scales), rather than running its default one."""
    dev = VLLM_DEVICE_NAMES.get(gpu_id or "")
    dtype = {"bf16": "", "fp8": ",dtype=fp8_w8a8"}.get(weight_dtype)
    if model.moe is None or dev is None or dtype is None:
        return False
    return f"E={model.moe.num_experts},N={model.moe.expert_intermediate_size},device_name={dev}{dtype}.json" in \
        _tuned_configs()


def moe_coeffs(model: ModelSpec | None, weight_dtype: str, profile, gpu_id: str | None = None):
    """The fitted MoE coefficients a model's experts run with (the profile's bf16 ones for a dense model or none;
    None for a profile without them): its kernel family's (:func:`moe_variant`), where for the fp8 family, fitted on
    Qwen3-30B-A3B fp8 (per-tensor scales: vLLM 0.26 has no tuned H200 configuration for E=128,N=768 and runs its
    default one; its router is quantised with the experts, which with dummy weights collapses its routing onto ~14
    of 128 experts):

    * an engine whose router stays bf16 routes as the bf16 engines do: the bf16 fused-MoE stage's touch share;
    * an engine with a tuned configuration runs its GEMMs at the bf16 stage's share of the peak (fitted on Qwen3-30B-A3B
      bf16, tuned), here of the fp8 peak.

    Held out on Mixtral-8x7B fp8 (bf16 router, tuned E=8,N=14336 fp8 configuration on the H200): decode median 43.8 ->
    1.1 %, prefill 61.5 -> 30.9 % (calibration/family_fit.py)."""
    variant = moe_variant(model, weight_dtype)
    moe = profile.moe_variants.get(variant or "", profile.moe)
    if variant != "fp8" or moe is None or profile.moe is None:
        return moe
    upd = {}
    if model.architecture not in QUANTIZED_ROUTER_ARCHITECTURES:
        upd["expert_touch_fraction"] = profile.moe.expert_touch_fraction
    if fused_moe_tuned(model, weight_dtype, gpu_id):
        upd.update(matmul_efficiency_max=profile.moe.matmul_efficiency_max,
                   matmul_half_tokens=profile.moe.matmul_half_tokens)
    return moe.model_copy(update=upd) if upd else moe


def is_hybrid_swa(model: ModelSpec | None) -> bool:
    """A dense model whose layers mix sliding-window and full attention (Gemma-3 style)."""
    return (model is not None and model.moe is None and model.num_sliding_layers > 0
            and model.num_sliding_layers < model.num_layers)


def mxfp4_weight_split(model: ModelSpec) -> tuple[float, float]:
    """(MXFP4 params, 16-bit params) of an MXFP4-MoE checkpoint: the routed experts and their biases' share
    stays in the first, the rest (attention, router, norms, embeddings, LM head, expert biases) in the second."""
    from planner.specs import count_params

    p = count_params(model)
    m = model.moe
    moe_layers = model.num_layers - m.num_dense_layers
    # gpt-oss experts carry a gate/up bias (2 × width) and a down bias (hidden), bf16 (not counted in p.total)
    biases = moe_layers * m.num_experts * (2 * m.expert_intermediate_size + model.hidden_size)
    return p.routed_experts, p.total - p.routed_experts + biases


def kv_layer_slots(model: ModelSpec) -> int:
    """Attention layers the KV pool is laid out for.  vLLM 0.26's hybrid allocator (sliding + full layers) makes
    KV groups of as many layers as the smaller kind has and pads the other kind up to whole groups, each slot
    a page of every block: Gemma-3-27B (52 sliding, 10 full) takes 70 slots for 62 layers; Gemma-3-12B (40/8),
    gpt-oss (18/18) none extra.  Measured: 27B's 'GPU KV cache size' = 74.7 GiB / (70 × 8 KiB per token)."""
    sliding, full = model.num_sliding_layers, model.num_full_attention_layers
    if not sliding or not full:
        return model.num_attention_layers
    g = min(sliding, full)
    return cdiv(sliding, g) * g + cdiv(full, g) * g


def cold_start_note(model: ModelSpec, deployment: Deployment, profile=None) -> str:
    """What a cold vLLM 0.26 engine does before it serves at the predicted speed, and how to warm it (measured
    on the H200, calibration/data/h200-2026-12-01: engine start 90-157 s, first-use Triton compiles 0.7-4.8 s);
    for the Triton MXFP4 MoE, the compile of each new step size above the CUDA graphs (``profile``'s
    :func:`shape_compile_s`; calibration/data/h200-2026-12-02-serve-mxfp4), how long they last and how to avoid
    them."""
    cap, top = cudagraph_max_tokens(deployment, model), deployment.max_num_batched_tokens
    note = (f"cold start: vLLM compiles the model (torch.compile, ~20-55 s) and captures CUDA graphs for steps of "
            f"1-{cap} tokens before it serves (engine start 90-160 s measured on an H200); "
            + ("larger steps run without graphs" if top > cap else "no step is larger"))
    if moe_variant(model, deployment.weight_dtype) == "mxfp4":
        n = uncompiled_step_shapes(deployment, model)
        each = shape_compile_s(model, deployment.weight_dtype, profile) if profile is not None else 0.0
        cost = (f"~{each:.1f} s each here, ~{n * each / 60:.0f} min in all" if each else "0.6-6 s each on gpt-oss")
        lo, hi = (cap + 1) // SHAPE_COMPILE_BUCKET_TOKENS, (top - 1) // SHAPE_COMPILE_BUCKET_TOKENS
        note += (f"; with the Triton MXFP4 MoE a larger step compiles the first time its size has a new key (size // "
                 f"32, and whether it is a multiple of 16): {n} keys from {cap + 1:,} to {top:,} tokens ({cost}), "
                 f"spread over the first traffic (served chat on gpt-oss, H200: TTFT p50 ~1 s for 2,000 requests); "
                 f"the latencies here are for an engine past them. Warm it with {n} requests sent one at a time, "
                 f"prompts of 32k + 16 and 32k + 17 tokens for k = {lo}..{hi}, or serve with "
                 f"--max-num-batched-tokens {cap} (every step inside the graphs: no stall in 10,000 steps, TTFT p50 "
                 f"46 ms and 29 % more throughput at 30 req/s on gpt-oss-20b)" if top > cap else
                 "; staying inside the graphs kept the Triton MXFP4 MoE free of the compiles its larger steps pay "
                 "on each new size; warm it with a few requests before taking traffic")
    elif model.moe is not None:
        note += "; warm it with a few requests of the prompt lengths you expect (first-use Triton MoE compiles)"
    return note


#: vLLM 0.26's Triton MXFP4 MoE compiles again for every step above the CUDA graphs whose token count T has a
#: compile key (:func:`compile_key`) no earlier step had: T // 32, and whether T is a multiple of 16 (Triton
#: specialises integer arguments on that), the start-up profiling run's max_num_batched_tokens key being compiled
#: already.  Over the four traced gpt-oss engines (calibration/data/h200-2026-12-02-serve-mxfp4 g/, h/, j/, k/) 501 of
#: the 502 eager steps with a new key stalled and none of the 787 with a seen key
SHAPE_COMPILE_BUCKET_TOKENS = 32


def compile_key(tokens: int) -> tuple[int, bool]:
    """The Triton MXFP4 MoE's compile key of a step of ``tokens`` tokens above the CUDA graphs."""
    return int(tokens) // SHAPE_COMPILE_BUCKET_TOKENS, int(tokens) % 16 == 0


def shape_compile_s(model: ModelSpec, weight_dtype: str, profile) -> float:
    """Seconds a step above the CUDA graphs stalls on a new compile key (:func:`compile_key`): the profile's
    ``shape_compile_layer_s`` of the model's MoE kernel × its MoE layers; 0 where none was measured."""
    moe = moe_coeffs(model, weight_dtype, profile)
    layers = model.num_layers - model.moe.num_dense_layers if model.moe else 0
    return moe.shape_compile_layer_s * layers if moe is not None else 0.0


def uncompiled_step_shapes(deployment: Deployment, model: ModelSpec) -> int:
    """How many compile keys of step sizes above the CUDA graphs a fresh engine has not compiled: those of every
    size from the largest graph to max_num_batched_tokens, less the start-up profiling run's (448 for gpt-oss at
    vllm serve's 8,192 tokens per step)."""
    top = deployment.max_num_batched_tokens
    return len({compile_key(t) for t in range(cudagraph_max_tokens(deployment, model) + 1, top + 1)}
               - {compile_key(top)})


def experts_touched(num_experts, k, tokens, fraction=1.0):
    """Expected distinct experts a batch of ``tokens`` routes to: E'·(1 − (1 − k/E')^T), with routing spread
    uniformly over E' = max(k, fraction·E) experts (fraction 1: all of them).  Plain arithmetic (numpy arrays
    and floats alike: the simulator's StepCost calls it on floats)."""
    if not num_experts:
        return tokens * 0.0
    e = fraction * num_experts
    e = e + (k - e) * (e < k)  # max(k, fraction·E), for floats and numpy arrays alike
    return e * (1.0 - (1.0 - k / e) ** tokens)


def cudagraph_max_tokens(deployment: Deployment, model: ModelSpec | None = None) -> int:
    """vLLM 0.26's largest CUDA-graph capture size: min(2 × max_num_seqs, 512 — 1,024 for gpt-oss), capped at
    max_num_batched_tokens (config/vllm.py); bigger steps run their kernels without graphs."""
    return min(2 * deployment.max_num_seqs, graph_capture_limit(model), deployment.max_num_batched_tokens)


def allreduce_s(mc, hw, tokens, xp=np):
    """All-reduce time of one step: 2 per layer under TP, each latency + 2(n−1)/n × message / bandwidth (a
    ring's bytes per link), vLLM's custom all-reduce for messages up to its limit and NCCL above (``mc``, ``hw``:
    :class:`planner.roofline.ModelCosts` and :class:`~planner.roofline.HwCoeffs`)."""
    if xp is np:
        tokens = np.asarray(tokens, dtype=float)
    if not mc.allreduces_per_step:
        return tokens * 0.0
    n = mc.tensor_parallel
    msg = tokens * mc.allreduce_bytes_per_token
    ring = 2.0 * (n - 1) / n * msg
    custom = hw.allreduce_latency_s + ring / hw.link_bandwidth_bytes_per_s
    nccl = hw.nccl_latency_s + ring / hw.nccl_bandwidth_bytes_per_s
    one = xp.where(msg <= hw.allreduce_custom_max_bytes, custom, nccl)
    return xp.where(tokens > 0, mc.allreduces_per_step * one, 0.0)
