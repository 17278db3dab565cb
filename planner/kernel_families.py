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

import itertools

import numpy as np

from planner.fused_moe_configs import fused_moe_tuned
from planner.specs import Deployment, ModelSpec
from planner.units import cdiv

#: vLLM 0.26 config/vllm.py: MoE architectures that still get the V2 model runner (dense models always do)
V2_RUNNER_MOE_ARCHITECTURES = frozenset({"DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "Qwen2MoeForCausalLM"})
#: vLLM 0.26 model_executor/models/config.py: architectures whose largest CUDA graph is raised to 1,024 tokens
LARGE_GRAPH_ARCHITECTURES = frozenset({"GptOssForCausalLM"})
MXFP4_BITS = 4.25
#: vLLM 0.26 v1/attention/backends/mla/flashattn_mla.py (FlashAttnMLAMetadataBuilder.reorder_batch_threshold, "process
#: small prefills with decode pathway"): FLASH_ATTN_MLA, the MLA backend on Hopper, runs a request of up to this many
#: query tokens in a step down MLA's decode pathway (absorbed weights over the latent cache) and a longer prompt chunk
#: down its prefill pathway (the latent up-projected, then MHA); inside the CUDA graphs the second launches about
#: twice the CPU work a layer (Moonlight-16B-A3B on an H100, 2026-12-05: 0.93 against 0.49 ms)
MLA_DECODE_PATH_MAX_QUERY_TOKENS = 512


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


def decode_path_max_tokens(model: ModelSpec) -> float:
    """The longest prompt chunk ``model``'s attention runs down its decode pathway: MLA's
    :data:`MLA_DECODE_PATH_MAX_QUERY_TOKENS`; inf for attention of one pathway."""
    return float(MLA_DECODE_PATH_MAX_QUERY_TOKENS) if model.attention.kind == "mla" else float("inf")


def piecewise_layer_launches(profile, model: ModelSpec | None) -> dict:
    """The per-layer CPU launch of a prompt step inside the CUDA graphs: ``piecewise_layer_launch_s`` and, where a
    chunk takes the attention's prefill pathway, ``prefill_path_layer_launch_s``.  An MLA model takes the profile's
    MLA terms (its decode pathway's, and its prefill pathway's: vLLM 0.26's FLASH_ATTN_MLA launches both where a step
    holds a chunk above :data:`MLA_DECODE_PATH_MAX_QUERY_TOKENS`), each where measured; others the dense one."""
    dense = profile.piecewise_layer_launch_s
    if model is None or model.attention.kind != "mla":
        return {"piecewise_layer_launch_s": dense, "prefill_path_layer_launch_s": dense}
    decode = profile.mla_piecewise_layer_launch_s or dense
    return {"piecewise_layer_launch_s": decode, "prefill_path_layer_launch_s": profile.mla_prefill_layer_launch_s
            or decode}


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


def moe_coeffs(model: ModelSpec | None, weight_dtype: str, profile, gpu_id: str | None = None):
    """The fitted MoE coefficients a model's experts run with (the profile's bf16 ones for a dense model or none;
    None for a profile without them): its kernel family's (:func:`moe_variant`), where for the fp8 family, fitted on
    Qwen3-30B-A3B fp8 (per-tensor scales: vLLM 0.26 has no tuned H200 configuration for E=128,N=768 and runs its
    default one; its router is quantised with the experts, which with dummy weights collapses its routing onto ~14
    of 128 experts):

    * an engine whose router stays bf16 routes as the bf16 engines do (the bf16 fused-MoE stage's touch share) and
      launches its eager steps as they do (without the variant's ``eager_layer_launch_extra_s``: measured on
      Qwen3-30B-A3B, fp8 92.8 against bf16 68.1 ms on one host; Mixtral-8x7B, fp8 52.5 against bf16 52.2 ms on
      another: calibration/data/h200-2026-12-03-fp8-moe-launch);
    * an engine with a tuned configuration runs its GEMMs at the bf16 stage's share of the peak (fitted on Qwen3-30B-A3B
      bf16, tuned), here of the fp8 peak.

    Held out on Mixtral-8x7B fp8 (bf16 router, tuned E=8,N=14336 fp8 configuration on the H200): decode median 43.8 ->
    1.1 %, prefill 61.5 -> 30.9 % (calibration/family_fit.py).  With a fused-MoE kernel law in the profile both
    stages' GEMM share is 1 (:func:`moe_kernel_law`: its fp8 and bf16 terms decide), so the second rule changes nothing
    there."""
    variant = moe_variant(model, weight_dtype)
    moe = profile.moe_variants.get(variant or "", profile.moe)
    if variant != "fp8" or moe is None or profile.moe is None:
        return moe
    upd = {}
    if model.architecture not in QUANTIZED_ROUTER_ARCHITECTURES:
        upd.update(expert_touch_fraction=profile.moe.expert_touch_fraction, eager_layer_launch_extra_s=0.0,
                   eager_layer_launch_s=max(0.0, moe.eager_layer_launch_s - moe.eager_layer_launch_extra_s))
    if fused_moe_tuned(model, weight_dtype, gpu_id):
        upd.update(matmul_efficiency_max=profile.moe.matmul_efficiency_max,
                   matmul_half_tokens=profile.moe.matmul_half_tokens)
    return moe.model_copy(update=upd) if upd else moe


#: the expert weight dtypes whose experts run vLLM 0.26's Triton fused MoE, by the kernel law's dtype key
KERNEL_LAW_DTYPES = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8"}
#: the MoE kernel families (:func:`moe_variant`) whose experts run that kernel beside the bf16 default: MLA's (bf16)
#: and fp8's (W8A8); MXFP4 runs its own Triton kernel
FUSED_MOE_VARIANTS = ("mla", "fp8")


def runs_triton_fused_moe(model: ModelSpec | None, weight_dtype: str) -> bool:
    """Whether the model's experts run vLLM's bf16/fp8 Triton fused MoE (the kernel law's kernel): a MoE model whose
    experts are not MXFP4 (their own Triton kernel) or int4/int8 (Marlin)."""
    return weight_dtype in KERNEL_LAW_DTYPES and moe_variant(model, weight_dtype) in ("default", *FUSED_MOE_VARIANTS)


def moe_kernel_law(model: ModelSpec | None, weight_dtype: str, profile):
    """The fused-MoE kernel law (:class:`planner.profile.MoeKernelDtype`) a model's experts run at, or None: the
    profile has none, the model is dense, or its experts run another kernel (MXFP4, int4 Marlin)."""
    law = profile.moe_kernel
    if law is None or not runs_triton_fused_moe(model, weight_dtype):
        return None
    return law.dtypes.get(KERNEL_LAW_DTYPES[weight_dtype])


def moe_kernel_coeffs(model: ModelSpec | None, weight_dtype: str, profile) -> dict:
    """The kernel law's terms as :class:`planner.roofline.HwCoeffs` takes them (without a law: the FLOPs as they are,
    at the stage's efficiency alone)."""
    law = moe_kernel_law(model, weight_dtype, profile)
    return {"moe_kernel_efficiency": law.efficiency if law else 1.0,
            "moe_pad_tokens_per_expert": law.pad_tokens_per_expert if law else 0.0,
            "moe_inner_overhead_dim": law.inner_overhead_dim if law else 0.0}


def moe_kernel_flops(flops, touched_rows, expert_width: float, hidden: float, inner_overhead_dim: float):
    """The work the fused MoE's two GEMMs take, in FLOPs at the law's efficiency: ``flops`` (2 x the routed expert
    parameters each token multiplies) plus ``touched_rows`` (2 x expert parameters x the padding tokens of every
    touched expert), each GEMM's share of them (gate/up 2/3, down 1/3) stretched by its per-tile cost along the
    inner dimension (hidden K for gate/up, expert width N for down): x (1 + c/K), x (1 + c/N).  Plain arithmetic:
    numpy arrays and floats alike (``expert_width`` > 0: a MoE model)."""
    stretch = (2.0 * (1.0 + inner_overhead_dim / hidden) + (1.0 + inner_overhead_dim / expert_width)) / 3.0
    return stretch * (flops + touched_rows)


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


def kv_groups(model: ModelSpec) -> tuple[int, int, int]:
    """(layers per KV group, full-attention groups, sliding-window groups) of vLLM 0.26's hybrid allocator
    (``_get_kv_cache_groups_uniform_page_size``): a group has as many layers as the smaller kind (the larger
    kind's count when it is under 1.5x the smaller), the other kind padded up to whole groups; each block of the
    pool is a page of every layer of one group.  Gemma-3-27B (52 sliding, 10 full): 10, 1, 6; gpt-oss-120b
    (18/18): 18, 1, 1; a model without sliding layers: one group of its attention layers."""
    sliding, full = model.num_sliding_layers, model.num_full_attention_layers
    if not sliding or not full:
        return model.num_attention_layers, 1, 0
    g = min(sliding, full)
    if max(sliding, full) < 1.5 * g:  # vLLM: "to avoid too many padding layers"
        g = max(sliding, full)
    return g, cdiv(full, g), cdiv(sliding, g)


def kv_layer_slots(model: ModelSpec) -> int:
    """Attention layers the KV pool is laid out for (:func:`kv_groups`: every group's layers, padding included):
    Gemma-3-27B (52 sliding, 10 full) takes 70 slots for 62 layers; Gemma-3-12B (40/8), gpt-oss (18/18) none extra.
    Measured: 27B's 'GPU KV cache size' = 74.7 GiB / (70 × 8 KiB per token)."""
    g, full_groups, sliding_groups = kv_groups(model)
    return g * (full_groups + sliding_groups)


def experts_touched(num_experts, k, tokens, fraction=1.0):
    """Expected distinct experts a batch of ``tokens`` routes to: E'·(1 − (1 − k/E')^T), with routing spread
    uniformly over E' = max(k, fraction·E) experts (fraction 1: all of them).  Plain arithmetic (numpy arrays
    and floats alike: the simulator's StepCost calls it on floats)."""
    if not num_experts:
        return tokens * 0.0
    e = fraction * num_experts
    e = e + (k - e) * (e < k)  # max(k, fraction·E), for floats and numpy arrays alike
    return e * (1.0 - (1.0 - k / e) ** tokens)


def moe_parts(mc, hw, tokens, active, xp=np):
    """(experts touched per layer, expert bytes read, expert FLOPs, compute s, memory s) of a step's routed experts
    (``mc``, ``hw``: :class:`planner.roofline.ModelCosts` and :class:`~planner.roofline.HwCoeffs`): the experts the
    step's tokens touch are read once each; the GEMMs take the kernel law's work (padding rows of each touched expert,
    per-tile inner-dimension cost) at its efficiency times the stage's share of it (without a law: the FLOPs at the
    stage's efficiency)."""
    if not mc.num_experts:
        zero = tokens * 0.0
        return zero, zero, zero, zero, zero
    touched = experts_touched(mc.num_experts, mc.experts_per_token, tokens, hw.moe_touch_fraction)
    moe_bytes = xp.where(active, mc.num_moe_layers * touched * mc.expert_weight_bytes, 0.0)
    moe_flops = mc.moe_flops_per_token * tokens
    work = moe_kernel_flops(moe_flops, mc.num_moe_layers * touched * 2.0 * mc.expert_params
                            * hw.moe_pad_tokens_per_expert, mc.expert_width, mc.hidden_size, hw.moe_inner_overhead_dim)
    share = hw.moe_matmul_efficiency_max * tokens / (tokens + hw.moe_matmul_half_tokens + 1e-30)
    moe_c = work / (hw.linear_peak_flops_per_s * hw.moe_kernel_efficiency * xp.maximum(share, 1e-9))
    return touched, moe_bytes, moe_flops, moe_c, moe_bytes / (hw.hbm_bandwidth_bytes_per_s
                                                             * hw.moe_weight_bandwidth_efficiency)


def linear_kernel_knots(law, weight_dtype: str, gpu_id: str) -> tuple:
    """The dense linear kernel law's knots for ``weight_dtype`` on ``gpu_id`` as (tokens, factors) with each dispatch
    bucket's first and last knot held flat to the bucket's edges (so a factor jumps where the kernel's configuration
    changes and is interpolated inside a bucket), or () where the law does not apply (no law, another dtype or a GPU
    that runs another dispatch)."""
    d = law.dtypes.get(weight_dtype) if law is not None and gpu_id in law.gpu_ids else None
    if d is None:
        return ()
    edges = [0.0, *sorted(law.bucket_edges_tokens), float("inf")]
    xs, ys = [], []
    for lo, hi in itertools.pairwise(edges):
        inside = [(t, f) for t, f in zip(d.tokens, d.factor) if lo < t <= hi]
        if inside:
            xs += [min(lo + 1.0, inside[0][0]), *(t for t, _ in inside)] + ([hi] if hi < float("inf") else [])
            ys += [inside[0][1], *(f for _, f in inside)] + ([inside[-1][1]] if hi < float("inf") else [])
    keep = [i for i in range(len(xs)) if i == 0 or xs[i] > xs[i - 1]]
    return tuple(xs[i] for i in keep), tuple(ys[i] for i in keep)


def linear_kernel_factor(hw, tokens, xp=np):
    """How much slower than at 1-16 tokens a step of ``tokens`` streams its quantised linear weights
    (:func:`linear_kernel_knots` in ``hw.linear_knots``; 1 without them).  numpy arrays and floats alike."""
    if not hw.linear_knots:
        return 1.0
    f = np.interp(tokens, *hw.linear_knots)
    return f if xp is np else float(f)


def cudagraph_max_tokens(deployment: Deployment, model: ModelSpec | None = None) -> int:
    """vLLM 0.26's largest CUDA-graph capture size: the deployment's ``max_cudagraph_capture_tokens``
    (--max-cudagraph-capture-size), else min(2 × max_num_seqs, 512 — 1,024 for gpt-oss); capped at
    max_num_batched_tokens (config/vllm.py ``_set_cudagraph_sizes``); bigger steps run their kernels without graphs."""
    top = deployment.max_cudagraph_capture_tokens or min(2 * deployment.max_num_seqs, graph_capture_limit(model))
    return min(top, deployment.max_num_batched_tokens)


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
