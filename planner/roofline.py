"""Roofline latency of one engine step (a prefill, TTFT, and a decode step, TPOT, are in :mod:`planner.phases`).

A step is a sum of kernels, each limited by its own roof:

    linear    max(GEMM FLOPs / (peak × eff_f(T)),    weight bytes read / (bandwidth × eff_w,f))
              the weight stream + tokens × quantised params × dequant_f (weight format f), its quantised weights'
              part × the linear kernel law's factor at T (CUTLASS fp8's tile configurations by token count)
    moe       max(expert FLOPs / (peak × eff_moe(T)), touched expert bytes / (bandwidth × eff_w,moe))
              (a fused-MoE kernel law: its work, padded and per-tile stretched, at peak × its efficiency × eff_moe)
              + MoE layers × layer overhead                    (fused MoE: routing, align, grouped GEMM)
    attention max(attention FLOPs / (peak × eff_a), (KV bytes read + linear layers' state, read and written back by
              each sequence) / (bandwidth × eff_kv,dtype))
    comm      2 all-reduces per layer under tensor parallel: vLLM's custom all-reduce below 8 MiB, NCCL above
    overhead  step + per layer + per sequence + per token (launches, scheduling, sampling) + per layer outside graphs
    launch    a step above the largest CUDA graph (eager) launches every kernel from the CPU while the GPU runs them:
              max(GPU work, CPU launch floor) + overhead, the floor = layers × per-layer launch + MoE layers × per-MoE-
              layer launch; a prompt step inside the graphs (piecewise): per-step + layers × per-layer piecewise launch

The kernel families' efficiencies and overheads come from a :class:`CalibrationProfile` (ideal roofline by
default): ``hw_coeffs`` picks the weight format's own coefficients, the MoE and all-reduce ones.  This is the one
step formula: :func:`step_parts` = :func:`token_parts` (GEMMs, all-reduces, overheads) + :func:`attention_parts`,
composed by :func:`linear_s` and :func:`step_total`; it runs on numpy arrays (:func:`step_time`: sweep, batching,
phases) and on floats (``xp=SCALAR``: :class:`planner.serving.StepCost`), bit-identical.  Results keep their parts
(:data:`STEP_PARTS`, summed by name) and name the bound.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from planner.kernel_families import (
    allreduce_s,
    cudagraph_max_tokens,
    decode_path_max_tokens,
    is_hybrid_swa,
    linear_kernel_factor,
    linear_kernel_knots,
    moe_coeffs,
    moe_kernel_coeffs,
    moe_parts,
    mxfp4_experts_only,
    piecewise_layer_launches,
)
from planner.memory import kv_bytes_per_token_per_layer, kv_heads_per_gpu, weight_bytes
from planner.profile import IDEAL_PROFILE, CalibrationProfile, format_coeffs, shape_correction
from planner.specs import Deployment, GpuSpec, ModelSpec, count_params
from planner.units import ROOF_P, roof_max  # noqa: F401  (ROOF_P: the calibration fit sets it here)

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
    linear_kernel_bytes: float  # ... of them the quantised linear layers' (the linear kernel law's), per GPU
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
    expert_params: float = 0.0  # one routed expert in one layer, per GPU (its FFN width split under TP)
    expert_width: float = 0.0  # a routed expert's FFN width per GPU (the down GEMM's inner dimension)
    hidden_size: float = 0.0  # the gate/up GEMM's inner dimension
    state_bytes_per_seq: float = 0.0  # the linear layers' recurrent state of one sequence, per GPU and stage
    decode_path_max_tokens: float = float("inf")  # a longer chunk takes the prefill pathway (MLA: 512; inf: one)
    # MLA's prefill pathway up-projects a chunk's cached context (kv_b_proj on each context token's latent, every
    # layer: 2 × kv_lora_rank × heads/TP × (qk_nope + v) FLOPs), priced as this many more query tokens attending each
    # context token: kv_lora_rank × (qk_nope + v) / (qk_nope + qk_rope + v); 0: none (other attention)
    context_upproj_tokens: float = 0.0


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
        upproj = a.kv_lora_rank * (a.qk_nope_head_dim + a.value_dim) / prefill_dims
    else:
        prefill_dims = decode_dims = a.head_dim + a.value_dim
        upproj = 0.0
    # weights read per step: quantised linear non-expert weights + 16-bit lm_head/norms/routers
    # (the embedding table is gathered, not streamed: only the used rows are read)
    non_expert_linear = p.attention + p.dense_mlp + p.shared_experts
    kept_read = p.lm_head_matmul + p.norms + p.router
    linear_bytes = ACT_BYTES if mxfp4_experts_only(model, deployment.weight_dtype) else bytes_per_quant
    dense_bytes = non_expert_linear * linear_bytes + kept_read * ACT_BYTES
    routed_active = p.num_moe_layers * p.experts_per_token * p.expert
    return ModelCosts(
        model_id=model.id, weight_dtype=deployment.weight_dtype, kv_cache_dtype=deployment.kv_cache_dtype,
        tensor_parallel=tp, pipeline_parallel=pp,
        linear_flops_per_token=2.0 * (p.active_matmul_no_lm_head - routed_active) / (tp * pp),
        lm_head_flops_per_seq=2.0 * p.lm_head_matmul / tp,
        moe_flops_per_token=2.0 * routed_active / (tp * pp),
        quantized_params_per_token=(routed_active if linear_bytes == ACT_BYTES and model.moe else
                                    non_expert_linear + routed_active) / (tp * pp),
        dense_weight_bytes=dense_bytes / (tp * pp), linear_kernel_bytes=non_expert_linear * linear_bytes / (tp * pp),
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
        expert_params=p.expert / tp,
        expert_width=model.moe.expert_intermediate_size / tp if model.moe else 0.0,
        hidden_size=float(model.hidden_size),
        state_bytes_per_seq=model.linear_state_bytes_per_layer * model.num_linear_layers / (tp * pp),
        decode_path_max_tokens=decode_path_max_tokens(model), context_upproj_tokens=upproj)


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
    layer_overhead_s: float  # every layer, every step (the kernels' gaps inside a CUDA graph)
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
    moe_prefill_expert_overhead_s: float = 0.0  # ... per expert the step touches (MoeCoeffs.prefill_expert_overhead_s)
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
    eager_layer_launch_s: float = 0.0  # CPU launch time per layer of an eager step (the step's floor)
    moe_eager_layer_launch_s: float = 0.0  # ... and per MoE layer on top
    piecewise_step_launch_s: float = 0.0  # CPU launch of a prompt step inside the CUDA graphs (piecewise) ...
    piecewise_layer_launch_s: float = 0.0  # ... and per layer (an MLA model's: its decode pathway's) ...
    prefill_path_layer_launch_s: float = 0.0  # ... and per layer where a chunk takes the prefill pathway (MLA)
    moe_kernel_efficiency: float = 1.0  # the fused-MoE kernel law (MoeKernelDtype): share of the peak on its work,
    moe_pad_tokens_per_expert: float = 0.0  # ... the tokens each touched expert's tiles round up to,
    moe_inner_overhead_dim: float = 0.0  # ... and the per-tile cost along each GEMM's inner dimension
    linear_knots: tuple = ()  # the linear kernel law's (tokens, factors) for these weights (kernel_families)


#: The profile's fixed costs, taken over as they are (seconds per step, layer, sequence, token, request).
PROFILE_OVERHEADS = ("step_overhead_s", "layer_overhead_s", "prefill_layer_overhead_s", "eager_layer_overhead_s",
                     "per_seq_overhead_s", "per_token_overhead_s", "request_overhead_s")


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
    moe = moe_coeffs(model, weight_dtype, profile, gpu.id)
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
        **{name: getattr(profile, name) for name in PROFILE_OVERHEADS},
        link_bandwidth_bytes_per_s=ar_bw,
        allreduce_latency_s=ar_lat,
        dequant_s_per_token_param=fmt.dequant_s_per_token_param if fmt else 0.0,
        moe_weight_bandwidth_efficiency=moe.weight_bandwidth_efficiency if moe else profile.weight_bandwidth_efficiency,
        moe_matmul_efficiency_max=moe.matmul_efficiency_max if moe else profile.matmul_efficiency_max,
        moe_matmul_half_tokens=moe.matmul_half_tokens if moe else profile.matmul_half_tokens,
        moe_layer_overhead_s=moe.layer_overhead_s if moe else 0.0,
        moe_eager_layer_overhead_s=moe.eager_layer_overhead_s if moe else 0.0,
        moe_prefill_layer_overhead_s=moe.prefill_layer_overhead_s if moe else 0.0,
        moe_prefill_expert_overhead_s=moe.prefill_expert_overhead_s if moe else 0.0,
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
        eager_layer_launch_s=profile.eager_layer_launch_s,
        moe_eager_layer_launch_s=moe.eager_layer_launch_s if moe else 0.0,
        piecewise_step_launch_s=profile.piecewise_step_launch_s,
        **piecewise_layer_launches(profile, model),
        **moe_kernel_coeffs(model, weight_dtype, profile),
        linear_knots=linear_kernel_knots(profile.linear_kernel, weight_dtype, gpu.id))


# ------------------------------------------------------------------------------------ step time

def linear_s(linear_compute_s, linear_memory_s, dequant_s, moe_compute_s, moe_memory_s, maximum=np.maximum):
    """Dense GEMMs at their roof (max of compute and weight streaming + dequantisation) + fused-MoE GEMMs."""
    return maximum(linear_compute_s, linear_memory_s + dequant_s) + maximum(moe_compute_s, moe_memory_s)


def step_total(linear, attention_compute_s, attention_memory_s, comm_s, overhead_s, maximum=np.maximum, launch_s=0.0):
    """A step's seconds: the GPU work — the GEMMs (:func:`linear_s`), attention at its roof, communication — or the
    CPU launch floor (``launch_s``: eager and piecewise steps; 0 for full CUDA graphs), whichever is longer, plus the
    overheads.  The kernels run as they are launched, so the GPU hides under the launches or the launches under the
    GPU (Qwen3-30B-A3B's 768-2,048-token eager steps: 50-65 ms, the CPU launching all but ~1 ms, GPU work 16-25 ms)."""
    return maximum(linear + maximum(attention_compute_s, attention_memory_s) + comm_s, launch_s) + overhead_s


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
    launch_s: object = 0.0  # eager/piecewise CPU launch floor (the step takes max(GPU work, launch) + overhead)

    @property
    def total_s(self):
        linear = linear_s(self.linear_compute_s, np.asarray(self.linear_memory_s), self.dequant_s,
                          self.moe_compute_s, self.moe_memory_s, roof_max)
        return step_total(linear, self.attention_compute_s, self.attention_memory_s, self.comm_s, self.overhead_s,
                          roof_max, self.launch_s)

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
        label = np.where(np.asarray(self.launch_s) > roof + self.comm_s, "overhead", label)  # CPU launch-bound
        return label.item() if label.ndim == 0 else label

    @property
    def arithmetic_intensity(self):
        """FLOPs per byte moved from HBM."""
        return np.asarray(self.flops) / np.maximum(np.asarray(self.bytes), 1.0)


#: The parts a step's time is made of (StepTime's numeric fields), summed by name over steps.
STEP_PARTS: tuple[str, ...] = tuple(f.name for f in fields(StepTime) if f.name != "mode")


def token_parts(mc: ModelCosts, hw: HwCoeffs, tokens, sampled, prefill, xp=np, long_chunk=False) -> dict:
    """The parts of a step that depend on its tokens alone: the GEMMs, the all-reduces and the overheads of a step
    of ``tokens`` tokens, ``sampled`` of them sampled (``prefill``: the step holds prompt tokens; ``long_chunk``: one
    of its chunks is above ``mc.decode_path_max_tokens``, the attention's prefill pathway).  Seconds are
    summed over the pipeline stages; flops and bytes are per stage (:func:`step_parts` adds them up)."""
    where, maximum, active = xp.where, xp.maximum, tokens > 0  # the dense linear layers (non-expert, lm_head) first
    lin_flops = mc.linear_flops_per_token * tokens + mc.lm_head_flops_per_seq * sampled / mc.pipeline_parallel
    w_bytes = where(active, mc.dense_weight_bytes, 0.0)
    eff = hw.matmul_efficiency_max * tokens / (tokens + hw.matmul_half_tokens + 1e-30)
    lin_c = lin_flops / (hw.linear_peak_flops_per_s * maximum(eff, 1e-9))
    lin_m = (w_bytes + where(active, mc.linear_kernel_bytes, 0.0) * (linear_kernel_factor(hw, tokens, xp) - 1.0)) / (
        hw.hbm_bandwidth_bytes_per_s * hw.weight_bandwidth_efficiency)
    dequant = hw.dequant_s_per_token_param * tokens * mc.quantized_params_per_token
    # routed experts (fused MoE): the experts the step's tokens touch are read once each
    touched, moe_bytes, moe_flops, moe_c, moe_m = moe_parts(mc, hw, tokens, active, xp)
    comm = allreduce_s(mc, hw, tokens, xp)
    eager = tokens > mc.cudagraph_max_tokens
    # the CPU launch floor: an eager step's every layer and fused-MoE layer (per stage, stages in turn); a prompt step
    # inside the graphs runs piecewise, each layer's attention launched between the pieces (an MLA step with a chunk
    # on the prefill pathway launches that pathway's too)
    piecewise = where(active & prefill, hw.piecewise_step_launch_s + mc.num_layers * where(
        long_chunk, hw.prefill_path_layer_launch_s, hw.piecewise_layer_launch_s), 0.0)
    launch = where(active & eager, mc.num_layers * hw.eager_layer_launch_s
                   + mc.num_moe_layers * mc.pipeline_parallel * hw.moe_eager_layer_launch_s, piecewise)
    overhead = where(
        active,
        hw.step_overhead_s + hw.hybrid_step_overhead_s
        + (hw.per_seq_overhead_s + mc.num_layers * hw.moe_seq_layer_overhead_s) * sampled
        + hw.per_token_overhead_s * tokens
        + mc.num_layers * (hw.layer_overhead_s + where(eager, hw.eager_layer_overhead_s,
                                                        where(prefill, hw.prefill_layer_overhead_s, 0.0)))
        + mc.num_layers * where((tokens > hw.shape_tokens_lo) & (tokens < hw.shape_tokens_hi),
                                hw.shape_extra_s_per_layer, 0.0)
        + mc.num_moe_layers * (hw.moe_layer_overhead_s + where(
            eager, hw.moe_eager_layer_overhead_s,
            where(prefill, hw.moe_prefill_layer_overhead_s + touched * hw.moe_prefill_expert_overhead_s, 0.0))),
        0.0,
    )
    if mc.pipeline_parallel > 1:  # a token crosses every stage in turn: stage times add up
        k = mc.pipeline_parallel
        lin_c, lin_m, comm, moe_c, moe_m, dequant = lin_c * k, lin_m * k, comm * k, moe_c * k, moe_m * k, dequant * k
    return dict(linear_compute_s=lin_c, linear_memory_s=lin_m, comm_s=comm, overhead_s=overhead, moe_compute_s=moe_c,
                moe_memory_s=moe_m, dequant_s=dequant, flops=lin_flops + moe_flops, bytes=w_bytes + moe_bytes,
                launch_s=launch)


def attention_parts(mc: ModelCosts, hw: HwCoeffs, tokens, prefill_attended, decode_attended, kv_read_tokens,
                    seqs=0.0):
    """(compute s, memory s, flops, bytes) of a step's attention: the attended contexts' FLOPs, and the KV it
    reads (``kv_read_tokens``, layer-weighted) plus the new tokens' K/V it writes, plus the recurrent state each of
    its ``seqs`` sequences reads and writes back in the linear layers (a Gated DeltaNet / Mamba-2 step updates it in
    place).  Seconds are summed over the pipeline stages, flops and bytes per stage.  Plain arithmetic."""
    att_flops = mc.attn_flops_per_ctx_prefill * prefill_attended + mc.attn_flops_per_ctx_decode * decode_attended
    kv_bytes = (mc.kv_bytes_per_ctx_layer * (kv_read_tokens + tokens * (mc.full_layers + mc.sliding_layers))
                + 2.0 * mc.state_bytes_per_seq * seqs)
    att_c = att_flops / (hw.attn_peak_flops_per_s * hw.attention_compute_efficiency)
    kv_eff = hw.kv_bandwidth_efficiency_fp8 if mc.kv_cache_dtype == "fp8" else hw.kv_bandwidth_efficiency
    att_m = kv_bytes / (hw.hbm_bandwidth_bytes_per_s * kv_eff)
    if mc.pipeline_parallel > 1:
        att_c, att_m = att_c * mc.pipeline_parallel, att_m * mc.pipeline_parallel
    return att_c, att_m, att_flops, kv_bytes


def step_parts(mc: ModelCosts, hw: HwCoeffs, tokens, sampled, prefill, prefill_attended, decode_attended,
               kv_read_tokens, xp=np, long_chunk=False) -> dict:
    """The one step formula: a step of ``tokens`` tokens (``sampled`` of them sampled; ``prefill``: it holds
    prompt tokens) -> its :data:`STEP_PARTS` by name (:func:`token_parts` + :func:`attention_parts`).
    ``kv_read_tokens`` = layer-weighted context read from the cache (the decoders' attended context + the
    prefill chunks' prior context).  Runs elementwise on numpy arrays (``xp=np``) and on floats
    (``xp=SCALAR``).  ``long_chunk``: a chunk takes the attention's prefill pathway (:func:`token_parts`)."""
    parts = token_parts(mc, hw, tokens, sampled, prefill, xp, long_chunk)
    att_c, att_m, att_flops, kv_bytes = attention_parts(mc, hw, tokens, prefill_attended, decode_attended,
                                                        kv_read_tokens, sampled)
    flops, nbytes = parts["flops"] + att_flops, parts["bytes"] + kv_bytes
    if mc.pipeline_parallel > 1:
        flops, nbytes = flops * mc.pipeline_parallel, nbytes * mc.pipeline_parallel
    parts.update(attention_compute_s=att_c, attention_memory_s=att_m, flops=flops, bytes=nbytes)
    return parts


def step_time(mc: ModelCosts, hw: HwCoeffs, *, prefill_tokens=0.0, prefill_attended=0.0, prefill_kv_read_tokens=0.0,
              decode_seqs=0.0, decode_attended=0.0, sampled_seqs=None) -> StepTime:
    """One step over ``prefill_tokens`` new prompt tokens and ``decode_seqs`` decoding sequences (:func:`step_parts`
    on numpy arrays).  ``prefill_attended`` / ``decode_attended``: the layer-weighted attended contexts
    (:func:`planner.attention_sums.attended_prefill`, :func:`~planner.attention_sums.attended_decode`);
    ``prefill_kv_read_tokens`` the layer-weighted cached tokens a prefill chunk reads.  ``sampled_seqs`` defaults to
    the decode sequences plus one per prefill (the lm_head's).  The prompt tokens are one chunk: above
    ``mc.decode_path_max_tokens`` MLA's prefill pathway, which also up-projects the chunk's cached context
    (``mc.context_upproj_tokens`` per context token read), else its decode pathway, which attends in the absorbed form
    (the decode tokens' FLOPs per context token)."""
    pt, ds = np.asarray(prefill_tokens, dtype=float), np.asarray(decode_seqs, dtype=float)
    tokens = pt + ds
    sampled = ds + (pt > 0) if sampled_seqs is None else np.asarray(sampled_seqs, dtype=float)
    decode_attended = np.asarray(decode_attended, dtype=float)
    kv_read = decode_attended + np.asarray(prefill_kv_read_tokens, dtype=float)
    long = pt > mc.decode_path_max_tokens
    pa = np.asarray(prefill_attended, dtype=float) + np.where(
        long, mc.context_upproj_tokens * np.asarray(prefill_kv_read_tokens, dtype=float), 0.0)
    on_decode = ~long & np.isfinite(mc.decode_path_max_tokens)
    parts = step_parts(mc, hw, tokens, sampled, pt > 0, np.where(on_decode, 0.0, pa),
                       decode_attended + np.where(on_decode, pa, 0.0), kv_read, np, long)
    return StepTime(mode=hw.mode, **parts)
