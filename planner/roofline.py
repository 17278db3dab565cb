"""Roofline latency of one engine step (a prefill, TTFT, and a decode step, TPOT, are in :mod:`planner.phases`).

A step is a sum of kernels, each limited by its own roof:

    linear    max(GEMM FLOPs / (peak × eff_f(T)),    weight bytes read / (bandwidth × eff_w,f))
              where the weight stream carries + tokens × quantised params × dequant_f   (weight format f)
    moe       max(expert FLOPs / (peak × eff_moe(T)), touched expert bytes / (bandwidth × eff_w,moe))
              + MoE layers × layer overhead                    (fused MoE: routing, align, grouped GEMM)
    attention max(attention FLOPs / (peak × eff_a), KV bytes read / (bandwidth × eff_kv,dtype))
    comm      2 all-reduces per layer under tensor parallel: vLLM's custom all-reduce below 8 MiB, NCCL above
    overhead  step + per sequence + per token (launches, scheduling, sampling) + per layer outside CUDA graphs

The kernel families' efficiencies and overheads come from a :class:`CalibrationProfile` (ideal roofline
by default): ``hw_coeffs`` picks the weight format's own coefficients, the MoE and all-reduce ones.
Every function works elementwise on numpy arrays as well as on floats, so ``sweep`` and the
simulator evaluate thousands of steps in one call.  Results keep their parts and name the bound.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np

from planner.kernel_families import (experts_touched, graph_capture_limit, is_hybrid_swa, moe_variant,
                                     mxfp4_experts_only)
from planner.memory import kv_bytes_per_token_per_layer, kv_heads_per_gpu, weight_bytes
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.specs import Deployment, GpuSpec, ModelSpec, count_params

ACT_BYTES = 2.0  # bf16 activations


# ------------------------------------------------------------------------------- per-model costs


@dataclass(frozen=True)
class ModelCosts:
    """What one GPU of a replica does per token, per sequence and per step (TP/PP applied).

    Flops are per GPU; bytes are per GPU.  ``attn_*`` are per (query token × attended context token)
    summed over the full-attention layers; sliding layers attend at most ``window_tokens``.
    """

    model_id: str
    weight_dtype: str
    kv_cache_dtype: str
    tensor_parallel: int
    pipeline_parallel: int
    linear_flops_per_token: float  # 2 × active non-expert matmul params (no lm_head) / (TP·PP)
    lm_head_flops_per_seq: float  # 2 × vocab × hidden / TP, once per sampled sequence
    moe_flops_per_token: float  # 2 × routed-expert params one token multiplies (k per MoE layer) / (TP·PP)
    quantized_params_per_token: float  # linear params (dense + k experts per layer) a token multiplies, per GPU
    dense_weight_bytes: float  # weights read every step (non-expert), per GPU
    expert_weight_bytes: float  # one routed expert in one layer, per GPU
    num_moe_layers: float  # per pipeline stage
    num_experts: int
    experts_per_token: int
    attn_flops_per_ctx_prefill: float  # per layer, per GPU: 2 × heads/TP × (qk_dim + v_dim)
    attn_flops_per_ctx_decode: float
    kv_bytes_per_ctx_layer: float  # per layer, per GPU
    full_layers: float  # per stage
    sliding_layers: float
    window_tokens: float
    allreduce_bytes_per_token: float  # hidden × 2 B
    allreduces_per_step: float  # 2 per layer per stage under TP > 1, else 0
    cudagraph_max_tokens: float = 512.0  # steps with more tokens run without CUDA graphs
    num_layers: float = 0.0  # all layers of the model (stages run one after another)


def model_costs(model: ModelSpec, deployment: Deployment) -> ModelCosts:
    tp, pp = deployment.tensor_parallel, deployment.pipeline_parallel
    p = count_params(model)
    a = model.attention
    wb = weight_bytes(model, deployment.weight_dtype)
    bytes_per_quant = wb.bits_per_weight / 8.0
    heads = a.num_heads / tp
    if a.kind == "mla":
        # prefill: per-head q·k over nope+rope dims and p·v over v dims (MHA form);
        # decode: weights absorbed, q·k over kv_lora+rope and p·v over kv_lora (MQA form).
        prefill_dims = a.qk_nope_head_dim + a.qk_rope_head_dim + a.value_dim
        decode_dims = a.kv_lora_rank + a.qk_rope_head_dim + a.kv_lora_rank
    else:
        prefill_dims = decode_dims = a.head_dim + a.value_dim
    # weights read per step: quantised linear non-expert weights + 16-bit lm_head/norms/routers
    # (the embedding table is gathered, not streamed: only the used rows are read)
    non_expert_linear = p.attention + p.dense_mlp + p.shared_experts
    kept_read = p.lm_head_matmul + p.norms + p.router
    linear_bytes = ACT_BYTES if mxfp4_experts_only(model, deployment.weight_dtype) else bytes_per_quant
    dense_bytes = non_expert_linear * linear_bytes + kept_read * ACT_BYTES
    routed_active = p.num_moe_layers * p.experts_per_token * p.expert
    return ModelCosts(
        model_id=model.id,
        weight_dtype=deployment.weight_dtype,
        kv_cache_dtype=deployment.kv_cache_dtype,
        tensor_parallel=tp,
        pipeline_parallel=pp,
        linear_flops_per_token=2.0 * (p.active_matmul_no_lm_head - routed_active) / (tp * pp),
        lm_head_flops_per_seq=2.0 * p.lm_head_matmul / tp,
        moe_flops_per_token=2.0 * routed_active / (tp * pp),
        quantized_params_per_token=(routed_active if linear_bytes == ACT_BYTES and model.moe else
                                    non_expert_linear + routed_active) / (tp * pp),
        dense_weight_bytes=dense_bytes / (tp * pp),
        expert_weight_bytes=p.expert * bytes_per_quant / tp,
        num_moe_layers=p.num_moe_layers / pp,
        num_experts=model.moe.num_experts if model.moe else 0,
        experts_per_token=model.moe.experts_per_token if model.moe else 0,
        attn_flops_per_ctx_prefill=2.0 * heads * prefill_dims,
        attn_flops_per_ctx_decode=2.0 * heads * decode_dims,
        kv_bytes_per_ctx_layer=kv_bytes_per_token_per_layer(model, deployment.kv_cache_dtype)
        * kv_heads_per_gpu(model, tp),
        full_layers=model.num_full_attention_layers / pp,
        sliding_layers=model.num_sliding_layers / pp,
        window_tokens=float(model.sliding_window_tokens or 0),
        allreduce_bytes_per_token=model.hidden_size * ACT_BYTES,
        allreduces_per_step=(2.0 * model.num_layers / pp) if tp > 1 else 0.0,
        cudagraph_max_tokens=cudagraph_max_tokens(deployment, model),
        num_layers=float(model.num_layers),
    )


def cudagraph_max_tokens(deployment: Deployment, model: ModelSpec | None = None) -> int:
    """vLLM 0.26's largest CUDA-graph capture size: min(2 × max_num_seqs, 512 — 1,024 for gpt-oss), capped at
    max_num_batched_tokens (config/vllm.py); bigger steps run their kernels without graphs."""
    return min(2 * deployment.max_num_seqs, graph_capture_limit(model), deployment.max_num_batched_tokens)


@dataclass(frozen=True)
class HwCoeffs:
    """A GPU seen through a calibration profile: effective roofs and fixed costs."""

    gpu_id: str
    mode: str
    linear_peak_flops_per_s: float
    linear_compute_dtype: str
    attn_peak_flops_per_s: float
    hbm_bandwidth_bytes_per_s: float
    matmul_efficiency_max: float
    matmul_half_tokens: float
    attention_compute_efficiency: float
    weight_bandwidth_efficiency: float
    kv_bandwidth_efficiency: float
    kv_bandwidth_efficiency_fp8: float
    step_overhead_s: float
    prefill_layer_overhead_s: float
    eager_layer_overhead_s: float
    per_seq_overhead_s: float
    per_token_overhead_s: float
    request_overhead_s: float
    link_bandwidth_bytes_per_s: float  # custom all-reduce (small messages)
    allreduce_latency_s: float
    dequant_s_per_token_param: float = 0.0
    moe_weight_bandwidth_efficiency: float = 1.0
    moe_matmul_efficiency_max: float = 1.0
    moe_matmul_half_tokens: float = 0.0
    moe_layer_overhead_s: float = 0.0
    moe_eager_layer_overhead_s: float = 0.0
    moe_prefill_layer_overhead_s: float = 0.0
    moe_seq_layer_overhead_s: float = 0.0  # MoE families: per decoding sequence per layer per step
    moe_touch_fraction: float = 1.0  # share of the experts routing spreads over (MoeCoeffs.expert_touch_fraction)
    hybrid_step_overhead_s: float = 0.0  # dense sliding-window hybrids' own per-step cost
    allreduce_custom_max_bytes: float = float("inf")  # above: NCCL
    nccl_latency_s: float = 0.0
    nccl_bandwidth_bytes_per_s: float = 1.0
    weight_format_basis: str = "bf16"  # whose coefficients the linear layers use (see hw_coeffs)
    shape_extra_s_per_layer: float = 0.0  # a measured GEMM-shape cliff of this model's shape (see hw_coeffs)
    shape_tokens_lo: float = float("inf")
    shape_tokens_hi: float = float("inf")


#: Weight formats whose GEMMs have no coefficients of their own fall back to a measured relative: weight-only
#: 8-bit and 4-bit formats dequantise on the fly like int4 (Machete/Marlin); fp16 runs the bf16 kernels.
FORMAT_FALLBACKS: dict[str, tuple[str, ...]] = {
    "fp16": ("bf16",), "int8": ("int4",), "nf4": ("int4",), "mxfp4": ("int4",), "fp8": (), "int4": (), "bf16": (),
}


def format_coeffs(profile: CalibrationProfile, weight_dtype: str):
    """(the format whose GEMM coefficients apply, its WeightFormatCoeffs or None for the dense bf16 ones)."""
    for f in (weight_dtype, *FORMAT_FALLBACKS.get(weight_dtype, ())):
        if f in profile.weight_formats:
            return f, profile.weight_formats[f]
    return "bf16", None


def shape_correction(profile: CalibrationProfile, model: ModelSpec | None):
    """The profile's GEMM-shape cliff for ``model``'s dense (hidden, intermediate) shape, or None."""
    if model is None or model.moe is not None:
        return None
    return next((c for c in profile.shape_corrections
                 if (c.hidden_size, c.intermediate_size) == (model.hidden_size, model.intermediate_size)), None)


def hw_coeffs(gpu: GpuSpec, weight_dtype: str, profile: CalibrationProfile = IDEAL_PROFILE,
              model: ModelSpec | None = None) -> HwCoeffs:
    """``gpu`` seen through ``profile`` for weights stored as ``weight_dtype``; ``model`` (optional) picks up
    a measured GEMM-shape cliff of its shape."""
    dtype, peak = gpu.peak_flops_for(weight_dtype)
    shape = shape_correction(profile, model)
    _, attn_peak = gpu.peak_flops_for("bf16")
    basis, fmt = format_coeffs(profile, weight_dtype)
    if model is not None and mxfp4_experts_only(model, weight_dtype):
        basis, fmt = "bf16", None  # gpt-oss: attention/router GEMMs are bf16, only the experts are MXFP4
    moe = profile.moe_variants.get(moe_variant(model, weight_dtype) or "", profile.moe)
    link = gpu.interconnect_bandwidth_bytes_per_s
    ar = profile.allreduce
    if ar is not None:
        ar_lat, ar_bw, ar_max = ar.custom_latency_s, link * ar.custom_bandwidth_efficiency, ar.custom_max_bytes
        nccl_lat, nccl_bw = ar.nccl_latency_s, link * ar.nccl_bandwidth_efficiency
    else:
        ar_lat = profile.allreduce_latency_s if profile.allreduce_latency_s is not None else gpu.interconnect_latency_s
        ar_bw, ar_max = link * profile.allreduce_bandwidth_efficiency, float("inf")
        nccl_lat, nccl_bw = ar_lat, ar_bw
    return HwCoeffs(
        gpu_id=gpu.id,
        mode=profile.mode,
        linear_peak_flops_per_s=peak,
        linear_compute_dtype=dtype,
        attn_peak_flops_per_s=attn_peak,
        hbm_bandwidth_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s,
        matmul_efficiency_max=fmt.matmul_efficiency_max if fmt else profile.matmul_efficiency_max,
        matmul_half_tokens=fmt.matmul_half_tokens if fmt else profile.matmul_half_tokens,
        attention_compute_efficiency=profile.attention_compute_efficiency,
        weight_bandwidth_efficiency=fmt.weight_bandwidth_efficiency if fmt else profile.weight_bandwidth_efficiency,
        kv_bandwidth_efficiency=profile.kv_bandwidth_efficiency,
        kv_bandwidth_efficiency_fp8=profile.kv_bandwidth_efficiency_fp8 or profile.kv_bandwidth_efficiency,
        step_overhead_s=profile.step_overhead_s,
        prefill_layer_overhead_s=profile.prefill_layer_overhead_s,
        eager_layer_overhead_s=profile.eager_layer_overhead_s,
        per_seq_overhead_s=profile.per_seq_overhead_s,
        per_token_overhead_s=profile.per_token_overhead_s,
        request_overhead_s=profile.request_overhead_s,
        link_bandwidth_bytes_per_s=ar_bw,
        allreduce_latency_s=ar_lat,
        dequant_s_per_token_param=fmt.dequant_s_per_token_param if fmt else 0.0,
        moe_weight_bandwidth_efficiency=moe.weight_bandwidth_efficiency if moe else profile.weight_bandwidth_efficiency,
        moe_matmul_efficiency_max=moe.matmul_efficiency_max if moe else profile.matmul_efficiency_max,
        moe_matmul_half_tokens=moe.matmul_half_tokens if moe else profile.matmul_half_tokens,
        moe_layer_overhead_s=moe.layer_overhead_s if moe else 0.0,
        moe_eager_layer_overhead_s=moe.eager_layer_overhead_s if moe else 0.0,
        moe_prefill_layer_overhead_s=moe.prefill_layer_overhead_s if moe else 0.0,
        moe_touch_fraction=moe.expert_touch_fraction if moe else 1.0,
        moe_seq_layer_overhead_s=moe.seq_layer_overhead_s if moe else 0.0,
        hybrid_step_overhead_s=profile.hybrid_step_overhead_s if is_hybrid_swa(model) else 0.0,
        allreduce_custom_max_bytes=ar_max,
        nccl_latency_s=nccl_lat,
        nccl_bandwidth_bytes_per_s=nccl_bw,
        weight_format_basis=basis,
        shape_extra_s_per_layer=shape.extra_s_per_layer if shape else 0.0,
        shape_tokens_lo=shape.tokens_lo if shape else float("inf"),
        shape_tokens_hi=shape.tokens_hi if shape else float("inf"),
    )


def allreduce_s(mc: ModelCosts, hw: HwCoeffs, tokens):
    """All-reduce time of one step: 2 per layer under TP, each latency + 2(n−1)/n × message / bandwidth (a
    ring's bytes per link), vLLM's custom all-reduce for messages up to its limit and NCCL above."""
    tokens = np.asarray(tokens, dtype=float)
    if not mc.allreduces_per_step:
        return np.zeros_like(tokens)
    n = mc.tensor_parallel
    msg = tokens * mc.allreduce_bytes_per_token
    ring = 2.0 * (n - 1) / n * msg
    custom = hw.allreduce_latency_s + ring / hw.link_bandwidth_bytes_per_s
    nccl = hw.nccl_latency_s + ring / hw.nccl_bandwidth_bytes_per_s
    one = np.where(msg <= hw.allreduce_custom_max_bytes, custom, nccl)
    return np.where(tokens > 0, mc.allreduces_per_step * one, 0.0)


# ------------------------------------------------------------------------------- attention sums


def attended_decode(mc: ModelCosts, ctx):
    """Layer-weighted context one decode token attends: full layers × ctx + sliding × min(ctx, W)."""
    ctx = np.asarray(ctx, dtype=float)
    return mc.full_layers * ctx + mc.sliding_layers * np.minimum(ctx, mc.window_tokens)


def attended_prefill(mc: ModelCosts, start, chunk):
    """Σ over the ``chunk`` new tokens at positions start+1 … start+chunk of their attended context,
    layer-weighted (causal: token p attends p keys; sliding layers at most W)."""
    s = np.asarray(start, dtype=float)
    c = np.asarray(chunk, dtype=float)
    full = c * s + c * (c + 1) / 2.0
    if mc.sliding_layers:
        w = mc.window_tokens
        # Σ_{p=s+1}^{s+c} min(p, w) = Σ p over p ≤ w, plus w for the rest
        lo = np.minimum(s, w)
        hi = np.minimum(s + c, w)
        below = (hi * (hi + 1) - lo * (lo + 1)) / 2.0
        above = (s + c - np.maximum(s, w)).clip(min=0) * w
        slide = below + above
    else:
        slide = 0.0
    return mc.full_layers * full + mc.sliding_layers * slide


# ------------------------------------------------------------------------------------ step time

#: p of the smooth roof max that the calibration fit sets (calibration.solve.smooth_roofs); 0: the hard max.
ROOF_P: ContextVar[float] = ContextVar("roof_p", default=0.0)


def roof_max(a, b):
    """max(compute, memory) of a kernel family; while the calibration fit sets ROOF_P = p, the p-norm
    (a^p + b^p)^(1/p) instead: smooth (no kink where a point changes roof), scale-free, ≤ 2^(1/p) × max (at
    a = b), -> max as p -> ∞.  E.g. p = 64: a = 1, b = 0.5 -> 1 + 8.5e-22; a = b = 1 -> 2^(1/64) = 1.0109."""
    p = ROOF_P.get()
    if not p:
        return np.maximum(a, b)
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    m = np.maximum(a, b)
    unit = np.where(m > 0, m, 1.0)
    return m * (np.clip(a / unit, 0.0, 1.0) ** p + np.clip(b / unit, 0.0, 1.0) ** p) ** (1.0 / p)


@dataclass(frozen=True)
class StepTime:
    """Time of one engine step and its parts (seconds; arrays when the inputs are arrays)."""

    linear_compute_s: object
    linear_memory_s: object
    attention_compute_s: object
    attention_memory_s: object
    comm_s: object
    overhead_s: object
    flops: object
    bytes: object
    mode: str = "ideal"
    moe_compute_s: object = 0.0
    moe_memory_s: object = 0.0
    dequant_s: object = 0.0  # quantised formats' per-token work added to the weight stream (small batches)

    @property
    def linear_s(self):
        """Dense GEMMs (max of compute and weight streaming + dequantisation) + fused-MoE GEMMs."""
        return (roof_max(self.linear_compute_s, np.asarray(self.linear_memory_s) + self.dequant_s)
                + roof_max(self.moe_compute_s, self.moe_memory_s))

    @property
    def attention_s(self):
        return roof_max(self.attention_compute_s, self.attention_memory_s)

    @property
    def total_s(self):
        return self.linear_s + self.attention_s + self.comm_s + self.overhead_s

    @property
    def compute_s(self):
        return self.linear_compute_s + self.moe_compute_s + self.attention_compute_s

    @property
    def memory_s(self):
        return self.linear_memory_s + self.dequant_s + self.moe_memory_s + self.attention_memory_s

    @property
    def bound(self):
        """Which roof limits the step: 'compute', 'memory', 'communication' or 'overhead'."""
        pairs = ((self.linear_compute_s, np.asarray(self.linear_memory_s) + self.dequant_s),
                 (self.moe_compute_s, self.moe_memory_s), (self.attention_compute_s, self.attention_memory_s))
        roof = sum(np.maximum(c, m) for c, m in pairs)
        compute_part = sum(np.where(np.asarray(c) >= m, c, 0.0) for c, m in pairs)
        label = np.where(compute_part * 2 >= roof, "compute", "memory")
        label = np.where(np.asarray(self.comm_s) > roof, "communication", label)
        label = np.where(np.asarray(self.overhead_s) > np.maximum(roof, self.comm_s), "overhead", label)
        return label.item() if label.ndim == 0 else label

    @property
    def arithmetic_intensity(self):
        """FLOPs per byte moved from HBM."""
        return np.asarray(self.flops) / np.maximum(np.asarray(self.bytes), 1.0)


def step_time(
    mc: ModelCosts,
    hw: HwCoeffs,
    *,
    prefill_tokens=0.0,
    prefill_attended=0.0,
    prefill_kv_read_tokens=0.0,
    decode_seqs=0.0,
    decode_attended=0.0,
    sampled_seqs=None,
) -> StepTime:
    """One forward step over ``prefill_tokens`` new prompt tokens and ``decode_seqs`` decoding sequences.

    ``prefill_attended`` / ``decode_attended`` are the layer-weighted attended contexts
    (:func:`attended_prefill`, :func:`attended_decode`); ``prefill_kv_read_tokens`` the layer-weighted
    cached tokens a prefill chunk reads (its prior context).  ``sampled_seqs`` defaults to the decode
    sequences plus one per prefill (upper bound for the lm_head).
    """
    pt = np.asarray(prefill_tokens, dtype=float)
    ds = np.asarray(decode_seqs, dtype=float)
    tokens = pt + ds
    sampled = ds + (pt > 0) if sampled_seqs is None else np.asarray(sampled_seqs, dtype=float)
    active = tokens > 0
    # dense linear layers (non-expert weights, lm_head)
    lin_flops = mc.linear_flops_per_token * tokens + mc.lm_head_flops_per_seq * sampled / mc.pipeline_parallel
    w_bytes = np.where(active, mc.dense_weight_bytes, 0.0)
    eff = hw.matmul_efficiency_max * tokens / (tokens + hw.matmul_half_tokens + 1e-30)
    lin_c = lin_flops / (hw.linear_peak_flops_per_s * np.maximum(eff, 1e-9))
    lin_m = w_bytes / (hw.hbm_bandwidth_bytes_per_s * hw.weight_bandwidth_efficiency)
    dequant = hw.dequant_s_per_token_param * tokens * mc.quantized_params_per_token
    # routed experts (fused MoE): the experts the step's tokens touch are read once each
    if mc.num_experts:
        touched = experts_touched(mc.num_experts, mc.experts_per_token, tokens, hw.moe_touch_fraction)
        moe_bytes = np.where(active, mc.num_moe_layers * touched * mc.expert_weight_bytes, 0.0)
        moe_flops = mc.moe_flops_per_token * tokens
        moe_eff = hw.moe_matmul_efficiency_max * tokens / (tokens + hw.moe_matmul_half_tokens + 1e-30)
        moe_c = moe_flops / (hw.linear_peak_flops_per_s * np.maximum(moe_eff, 1e-9))
        moe_m = moe_bytes / (hw.hbm_bandwidth_bytes_per_s * hw.moe_weight_bandwidth_efficiency)
    else:
        moe_bytes = moe_flops = moe_c = moe_m = np.zeros_like(tokens)
    # attention
    att_flops = mc.attn_flops_per_ctx_prefill * np.asarray(prefill_attended, dtype=float) + (
        mc.attn_flops_per_ctx_decode * np.asarray(decode_attended, dtype=float)
    )
    kv_bytes = mc.kv_bytes_per_ctx_layer * (
        np.asarray(decode_attended, dtype=float) + np.asarray(prefill_kv_read_tokens, dtype=float)
        + tokens * (mc.full_layers + mc.sliding_layers)  # writes of the new tokens' K/V
    )
    att_c = att_flops / (hw.attn_peak_flops_per_s * hw.attention_compute_efficiency)
    kv_eff = hw.kv_bandwidth_efficiency_fp8 if mc.kv_cache_dtype == "fp8" else hw.kv_bandwidth_efficiency
    att_m = kv_bytes / (hw.hbm_bandwidth_bytes_per_s * kv_eff)
    comm = allreduce_s(mc, hw, tokens)
    eager = tokens > mc.cudagraph_max_tokens
    overhead = np.where(
        active,
        hw.step_overhead_s + hw.hybrid_step_overhead_s
        + (hw.per_seq_overhead_s + mc.num_layers * hw.moe_seq_layer_overhead_s) * sampled
        + hw.per_token_overhead_s * tokens
        + mc.num_layers * np.where(eager, hw.eager_layer_overhead_s, np.where(pt > 0, hw.prefill_layer_overhead_s, 0.0))
        + mc.num_layers * np.where((tokens > hw.shape_tokens_lo) & (tokens < hw.shape_tokens_hi),
                                   hw.shape_extra_s_per_layer, 0.0)
        + mc.num_moe_layers * (hw.moe_layer_overhead_s + np.where(
            eager, hw.moe_eager_layer_overhead_s, np.where(pt > 0, hw.moe_prefill_layer_overhead_s, 0.0))),
        0.0,
    )
    flops = lin_flops + moe_flops + att_flops
    nbytes = w_bytes + moe_bytes + kv_bytes
    if mc.pipeline_parallel > 1:  # a token crosses every stage in turn: stage times add up
        k = mc.pipeline_parallel
        lin_c, lin_m, att_c, att_m, comm = lin_c * k, lin_m * k, att_c * k, att_m * k, comm * k
        moe_c, moe_m, dequant = moe_c * k, moe_m * k, dequant * k
        flops, nbytes = flops * k, nbytes * k
    return StepTime(lin_c, lin_m, att_c, att_m, comm, overhead, flops, nbytes, hw.mode, moe_c, moe_m, dequant)
