"""Memory: weight bytes, KV-cache bytes, the vLLM-style memory budget and max concurrency.  All sizes are bytes.
Functions return small frozen result objects that keep their parts, so a UI can show *why* a number is what it is."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.compile_keys import v1_graph_estimate_bytes
from planner.dtypes import KV_BYTES, WEIGHT_BITS
from planner.kernel_families import (fused_moe_workspace_bytes, kv_groups, kv_layer_slots, mxfp4_experts_only,
                                     mxfp4_weight_split, uses_v1_runner)
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.specs import Deployment, GpuSpec, ModelSpec, count_params
from planner.units import GiB, cdiv, fmt_gib

BF16_BYTES = 2.0


# ------------------------------------------------------------------------------------------- weights


@dataclass(frozen=True)
class WeightBytes:
    """Weight memory of the whole model (all GPUs together)."""

    dtype: str
    bits_per_weight: float
    quantized_params: float  # linear layers, stored at bits_per_weight
    kept_16bit_params: float  # embeddings, lm_head, norms, routers: stay bf16
    quantized_bytes: float
    kept_16bit_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.quantized_bytes + self.kept_16bit_bytes


def weight_bytes(model: ModelSpec, dtype: str) -> WeightBytes:
    """Weights at ``dtype``: linear layers × bits/8 (scale overhead included), the rest 16-bit.

    Mistral 7B bf16: 7.248e9 params × 2 B = 14.5 GB.  int8: 6.98e9 linear × 1 B + 0.268e9 × 2 B ≈ 7.5 GB.
    """
    if dtype not in WEIGHT_BITS:
        raise ValueError(f"weight_dtype: unknown dtype '{dtype}'; known: {', '.join(WEIGHT_BITS)}")
    p = count_params(model)
    bits = WEIGHT_BITS[dtype]
    quant = p.quantizable
    kept = p.total - quant
    if mxfp4_experts_only(model, dtype):  # gpt-oss: only the routed experts are MXFP4
        quant, kept = mxfp4_weight_split(model)
    return WeightBytes(dtype, bits, quant, kept, quant * bits / 8.0, kept * BF16_BYTES)


def rope_cache_bytes(model: ModelSpec) -> float:
    """vLLM's rotary cos/sin tables, held on every GPU with the weights ("Model loading took" counts them): rows ×
    rotary width × 2 B.  Llama-3.1-8B: 131,072 × 128 × 2 = 33.6 MB (measured 34 MB above its parameters);
    Gemma-3-12B: a linear ×8 table for its global layers and one for its local ones, (8 + 1) × 131,072 × 256 × 2 =
    604 MB of the 756 MB its weights logged above its parameters (vLLM 0.26 rotary_embedding/linear_scaling_rope.py)."""
    a = model.attention
    return float(model.rope_cache_positions or model.max_context_tokens) * (
        a.qk_rope_head_dim if a.kind == "mla" else a.head_dim) * BF16_BYTES


# ---------------------------------------------------------------------------------------------- KV


def kv_bytes_per_token_per_layer(model: ModelSpec, kv_dtype: str) -> float:
    """Bytes one token adds to the cache in one attention layer.

    Standard attention: K and V, (head_dim + v_head_dim) × kv_heads × bytes
    (Mistral 7B: (128 + 128) × 8 × 2 = 4,096 B).  MLA: one latent of kv_lora_rank + qk_rope_head_dim
    (DeepSeek-V3: (512 + 64) × 2 = 1,152 B).
    """
    if kv_dtype not in KV_BYTES:
        raise ValueError(f"kv_cache_dtype: unknown dtype '{kv_dtype}'; known: {', '.join(KV_BYTES)}")
    a = model.attention
    b = KV_BYTES[kv_dtype]
    if a.kind == "mla":
        return (a.kv_lora_rank + a.qk_rope_head_dim) * b
    return (a.head_dim + a.value_dim) * a.num_kv_heads * b


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str = "bf16") -> float:
    """Bytes per token of context over every attention layer (the long-context asymptote of
    full-attention layers; sliding-window layers counted as if the context is inside the window), in the
    layer slots vLLM's hybrid allocator lays out (:func:`planner.kernel_families.kv_layer_slots`).

    Mistral 7B: 2 × 32 layers × 8 KV heads × 128 × 2 B = 131,072 B.
    """
    return kv_bytes_per_token_per_layer(model, kv_dtype) * kv_layer_slots(model)


@dataclass(frozen=True)
class KvPerRequest:
    """KV cache one request holds at a given context length."""

    context_tokens: int
    full_layer_tokens: int  # tokens held by each full-attention layer (block-rounded)
    sliding_layer_tokens: int  # tokens held by each sliding-window layer
    full_bytes: float
    sliding_bytes: float
    state_bytes: float  # linear-attention / Mamba state

    @property
    def total_bytes(self) -> float:
        return self.full_bytes + self.sliding_bytes + self.state_bytes


def round_up(x: int, multiple: int) -> int:
    return int(math.ceil(x / multiple) * multiple)


#: vLLM's attention kernel block alignment (FlashAttention): a hybrid model's attention block is a multiple of it
HYBRID_BLOCK_ALIGN_TOKENS = 16


def hybrid_block_tokens(model: ModelSpec, kv_dtype: str, block_size_tokens: int, prefix_caching: bool = False) -> int:
    """The attention block vLLM 0.26 uses: for a model with recurrent-state layers its attention page (block tokens ×
    one layer's KV per token) must hold one layer's state, so a smaller configured block is raised to 16 × ⌈state ÷
    (16 × KV per token)⌉ tokens ("Setting attention block size to N tokens to ensure that attention page size is >=
    mamba page size") and the state page padded to the attention page.  Granite-4.0-H-Small: 16 × ⌈2,147,840 ÷ (16 ×
    4,096)⌉ = 528; Qwen3-Next-80B at fp8 KV: 16 × ⌈1,097,728 ÷ (16 × 1,024)⌉ = 1,072 (logged by vLLM, TP 2, both
    halved).  With ``prefix_caching`` on a model with Mamba-2 layers, vLLM caches their state per block ('all' mode)
    and aligns the block to their SSD chunk: lcm(chunk, 16) × ⌈⌈state ÷ KV per token⌉ ÷ that⌉ (Granite-4.0-H-Small:
    256 × ⌈525 ÷ 256⌉ = 768).  Any other model: ``block_size_tokens``."""
    per_tok = kv_bytes_per_token_per_layer(model, kv_dtype)
    if not (model.linear_state_bytes_per_layer and model.num_linear_layers) or per_tok <= 0:
        return block_size_tokens
    a = HYBRID_BLOCK_ALIGN_TOKENS
    if prefix_caching and model.mamba_chunk_tokens:
        chunk = math.lcm(model.mamba_chunk_tokens, max(a, block_size_tokens))
        return max(block_size_tokens, chunk * cdiv(cdiv(model.linear_state_bytes_per_layer, int(per_tok)), chunk))
    return max(block_size_tokens, a * math.ceil(model.linear_state_bytes_per_layer / (a * per_tok)))


def kv_bytes_per_request(
    model: ModelSpec, kv_dtype: str, context_tokens: int, block_size_tokens: int = 1
) -> KvPerRequest:
    """KV bytes of one request at ``context_tokens``; blocks of ``block_size_tokens`` are allocated
    whole (vLLM: 16; a recurrent-state hybrid's :func:`hybrid_block_tokens`, its state a page a layer).
    Sliding-window layers keep at most window (+ one block) tokens; in blocks, each kind of layer counts as the
    slots vLLM's KV groups give it, padding included (:func:`planner.kernel_families.kv_groups`: Gemma-3-27B's 52
    sliding layers hold 6 groups of 10 pages a block)."""
    if context_tokens < 0:
        raise ValueError(f"context_tokens must be >= 0, got {context_tokens}")
    per_layer = kv_bytes_per_token_per_layer(model, kv_dtype)
    state = model.linear_state_bytes_per_layer
    if block_size_tokens > 1:
        block_size_tokens = hybrid_block_tokens(model, kv_dtype, block_size_tokens)
        if state:
            state = max(state, block_size_tokens * per_layer)
    full_tokens = round_up(context_tokens, block_size_tokens)
    slide_tokens = 0
    full_slots, sliding_slots = model.num_full_attention_layers, model.num_sliding_layers
    if block_size_tokens > 1 and sliding_slots:
        g, full_groups, sliding_groups = kv_groups(model)
        full_slots, sliding_slots = g * full_groups, g * sliding_groups
    if model.num_sliding_layers:
        w = model.sliding_window_tokens or 0
        slide_tokens = min(full_tokens, round_up(w, block_size_tokens) + (block_size_tokens if block_size_tokens > 1 else 0))
    return KvPerRequest(
        context_tokens,
        full_tokens,
        slide_tokens,
        full_tokens * per_layer * full_slots,
        slide_tokens * per_layer * sliding_slots,
        float(state * model.num_linear_layers),
    )


# ------------------------------------------------------------------------- seeds' capacity equation


@dataclass(frozen=True)
class Concurrency:
    """The seeds' capacity equation: (memory − weights − overhead) ÷ (KV/token × context)."""

    memory_bytes: float
    weight_bytes: float
    overhead_bytes: float
    available_bytes: float
    per_user_bytes: float
    max_users: int


def capacity_equation(
    memory_bytes: float,
    weight_bytes: float,
    overhead_bytes: float,
    kv_bytes_per_token: float,
    context_tokens: int,
) -> Concurrency:
    """A100 80 GB, 14.5 GB weights, 8 GB overhead, 131,072 B/token, 4,096 tokens:
    (80 − 14.5 − 8) GB = 57.5e9 B; 131,072 × 4,096 = 536,870,912 B/user; 57.5e9 / 536,870,912 = 107.1 → 107.
    """
    if context_tokens <= 0:
        raise ValueError(f"context_tokens must be > 0, got {context_tokens}")
    if kv_bytes_per_token <= 0:
        raise ValueError(f"kv_bytes_per_token must be > 0, got {kv_bytes_per_token}")
    available = memory_bytes - weight_bytes - overhead_bytes
    per_user = kv_bytes_per_token * context_tokens
    users = max(0, math.floor(available / per_user)) if available > 0 else 0
    return Concurrency(memory_bytes, weight_bytes, overhead_bytes, available, per_user, users)


# --------------------------------------------------------------------------- vLLM memory budget


def kv_heads_per_gpu(model: ModelSpec, tensor_parallel: int) -> float:
    """KV heads each TP rank stores: heads are split, and replicated when TP > kv_heads.
    MLA's single latent is replicated on every rank."""
    a = model.attention
    if a.kind == "mla":
        return 1.0
    return max(1.0, a.num_kv_heads / tensor_parallel) / a.num_kv_heads


def kv_shard_fraction(model: ModelSpec, tensor_parallel: int, pipeline_parallel: int = 1) -> float:
    """Fraction of a request's KV one GPU holds (TP splits heads, PP splits layers)."""
    return kv_heads_per_gpu(model, tensor_parallel) / pipeline_parallel


def activation_peak_bytes(
    model: ModelSpec, deployment: Deployment, profile: CalibrationProfile = IDEAL_PROFILE
) -> float:
    """Peak activation memory of vLLM's profiling forward pass (max_num_batched_tokens tokens),
    per GPU.  First-principles default: the widest live intermediates of one layer in 16 bits
    (the gate/up output 2 × FFN width plus the down input, plus a few hidden-size buffers), and the
    fp32 logits of max_num_seqs sampled rows, whichever is larger (they are not live together).
    A calibrated profile replaces the 2 bytes per token-width with what vLLM's profiler measured and adds a transient
    the size of the lm_head weight shard (``head_peak_bytes_per_weight``, calibration.family_fit.HEAD_PEAK_FIT).
    MoE models on vLLM's V1 runner: the sampler's logits plus the fused-MoE workspace (below).
    """
    tp = deployment.tensor_parallel
    tokens = deployment.max_num_batched_tokens
    rows = min(deployment.max_num_seqs, tokens)
    if uses_v1_runner(model):
        # vLLM's V1 runner (most MoE models): the peak is its dummy sampler run over max_num_seqs rows of fp32
        # logits (the full vocabulary on every rank: the logits are all-gathered), ``v1_sampler_logits_copies``
        # of them live at once, with the fused-MoE workspace of the max_num_batched_tokens forward still held
        copies = profile.v1_sampler_logits_copies or 1.0
        sampler = copies * rows * model.vocab_size * 4.0
        return sampler + fused_moe_workspace_bytes(model, deployment.weight_dtype, tokens, tp)
    ffn = model.intermediate_size
    if model.moe is not None:
        e = model.moe
        ffn = max(ffn, e.experts_per_token * e.expert_intermediate_size + e.num_shared_experts * e.shared_expert_intermediate_size)
    width = 3 * ffn / tp + 6 * model.hidden_size
    coef = profile.activation_bytes_per_batched_token_per_width or BF16_BYTES
    forward = tokens * width * coef
    sampler = rows * model.vocab_size / tp * 4.0
    head = profile.head_peak_bytes_per_weight * model.vocab_size * model.hidden_size / tp  # HEAD_PEAK_FIT
    return max(forward, sampler, head)


@dataclass(frozen=True)
class MemoryBudget:
    """How vLLM splits one GPU's memory (all values per GPU, bytes)."""

    gpu_memory_bytes: float
    gpu_memory_utilization: float
    usable_bytes: float  # utilization × total
    weight_bytes: float
    activation_bytes: float
    non_torch_bytes: float
    cudagraph_bytes: float
    kv_pool_bytes: float  # what is left for the KV cache (may be negative: does not fit)
    kv_bytes_per_token: float  # per GPU (after TP/PP sharding)
    kv_capacity_tokens: int  # whole blocks
    block_size_tokens: int

    @property
    def overhead_bytes(self) -> float:
        return self.activation_bytes + self.non_torch_bytes + self.cudagraph_bytes

    @property
    def fits(self) -> bool:
        return self.kv_pool_bytes > 0 and self.kv_capacity_tokens >= self.block_size_tokens

    def explain(self) -> str:
        """One sentence on why the model does or does not fit."""
        needed = self.weight_bytes + self.overhead_bytes
        if self.fits:
            return (
                f"weights {fmt_gib(self.weight_bytes)} + overhead {fmt_gib(self.overhead_bytes)} leave "
                f"{fmt_gib(self.kv_pool_bytes)} of {fmt_gib(self.usable_bytes)} usable per GPU for "
                f"{self.kv_capacity_tokens:,} KV tokens"
            )
        return (
            f"does not fit: needs {fmt_gib(needed)} per GPU for weights and overhead before any KV "
            f"cache, has {fmt_gib(self.usable_bytes)} usable "
            f"({self.gpu_memory_utilization:.0%} of {fmt_gib(self.gpu_memory_bytes)})"
        )


# Ideal-mode defaults for the two fixed terms a first-principles model cannot derive; a calibrated
# profile replaces them with what vLLM printed at start-up on the real GPU.
# vLLM 0.26's V2 model runner (dense models) subtracts no CUDA-graph estimate from the KV pool: the
# graphs are captured afterwards inside the (1 − utilization) headroom.
DEFAULT_NON_TORCH_BYTES = 0.6 * GiB
DEFAULT_CUDAGRAPH_BYTES = 0.0


def device_total_bytes(gpu: GpuSpec, profile: CalibrationProfile = IDEAL_PROFILE) -> float:
    """The total vLLM multiplies by gpu_memory_utilization: CUDA's own figure where the profile measured
    it on this GPU, else the catalog (nvidia-smi) total × the measured CUDA/nvidia-smi fraction."""
    if profile.device_memory_bytes and profile.gpu_id in (None, gpu.id):
        return profile.device_memory_bytes
    return gpu.memory_bytes * profile.device_memory_fraction


def memory_budget(
    model: ModelSpec,
    gpu: GpuSpec,
    deployment: Deployment,
    profile: CalibrationProfile = IDEAL_PROFILE,
    *,
    model_weight_bytes: float | None = None,
    model_kv_bytes_per_token: float | None = None,
) -> MemoryBudget:
    """vLLM's start-up accounting per GPU: utilization × total − weights − peak activation −
    non-torch − CUDA graphs = KV pool; KV pool ÷ KV bytes per token (per GPU) = token capacity,
    rounded down to whole blocks.  ``model_weight_bytes`` / ``model_kv_bytes_per_token`` (whole
    model, at the deployment's dtypes) may be passed in when a caller has them cached (the sweep)."""
    tp, pp = deployment.tensor_parallel, deployment.pipeline_parallel
    total = device_total_bytes(gpu, profile)
    usable = deployment.gpu_memory_utilization * total
    if model_weight_bytes is None:
        model_weight_bytes = weight_bytes(model, deployment.weight_dtype).total_bytes
    if model_kv_bytes_per_token is None:
        model_kv_bytes_per_token = kv_bytes_per_token(model, deployment.kv_cache_dtype)
    w = model_weight_bytes * profile.weight_bytes_factor / (tp * pp) + rope_cache_bytes(model)
    if profile.mxfp4_expert_bytes_factor != 1.0 and mxfp4_experts_only(model, deployment.weight_dtype):
        w += weight_bytes(model, "mxfp4").quantized_bytes * (profile.mxfp4_expert_bytes_factor - 1.0) / (tp * pp)
    act = activation_peak_bytes(model, deployment, profile)
    non_torch = profile.non_torch_bytes if profile.mode != "ideal" else DEFAULT_NON_TORCH_BYTES
    graphs = profile.cudagraph_bytes if profile.mode != "ideal" else DEFAULT_CUDAGRAPH_BYTES
    if uses_v1_runner(model):  # the V1 runner subtracts its CUDA-graph memory estimate before sizing the pool
        graphs += v1_graph_estimate_bytes(model, deployment, profile)
    pool = usable - w - act - non_torch - graphs
    per_tok = model_kv_bytes_per_token * kv_shard_fraction(model, tp, pp)
    bs = hybrid_block_tokens(model, deployment.kv_cache_dtype, deployment.block_size_tokens)
    tokens = int(pool // per_tok) // bs * bs if pool > 0 else 0
    return MemoryBudget(total, deployment.gpu_memory_utilization, usable, w, act, non_torch,
                        graphs, pool, per_tok, tokens, bs)


def request_kv_bytes_per_gpu(
    model: ModelSpec, deployment: Deployment, context_tokens: int
) -> float:
    """KV bytes one request holds on one GPU at ``context_tokens`` (block-rounded, sharded)."""
    kv = kv_bytes_per_request(model, deployment.kv_cache_dtype, context_tokens, deployment.block_size_tokens)
    return kv.total_bytes * kv_shard_fraction(model, deployment.tensor_parallel, deployment.pipeline_parallel)


def state_blocks_per_request(model: ModelSpec, deployment: Deployment, prefix_caching: bool = False) -> int:
    """Blocks of the KV pool one running request's recurrent state takes (its linear-attention / Mamba layers' state
    pages, :func:`kv_bytes_per_request`, in blocks of :func:`hybrid_block_tokens` tokens of every attention layer's
    KV), for the simulator's block pool; 0 for an attention-only model.  Granite-4.0-H-Small: 36 pages of 528 × 4,096 B
    in blocks of its 4 attention layers' pages = 9 blocks (vLLM: 9 groups of 4 Mamba layers, a page each)."""
    bs = hybrid_block_tokens(model, deployment.kv_cache_dtype, deployment.block_size_tokens, prefix_caching)
    state = kv_bytes_per_request(model, deployment.kv_cache_dtype, 0, bs).state_bytes
    block = kv_bytes_per_token(model, deployment.kv_cache_dtype) * bs
    return math.ceil(state / block) if state and block > 0 else 0


def window_blocks_per_request(model: ModelSpec, deployment: Deployment) -> tuple[int, int]:
    """(sliding-window KV groups, blocks each holds for a request at most) in the simulator's pool, whose blocks are
    vLLM's (a page of every layer of one KV group, :func:`planner.kernel_families.kv_groups`): a request holds a
    block per ``block_size`` tokens in the full-attention group and, in each sliding group, only the blocks of its
    last window (+ one block, as :func:`kv_bytes_per_request`).  Gemma-3-27B: 6 groups of at most 1,024 / 16 + 1 = 65
    blocks; gpt-oss: 1 of 128 / 16 + 1 = 9.  (0, 0) without sliding layers, and where the full layers make more than
    one group (their blocks are then held for every layer at full length: an upper bound)."""
    _, full_groups, sliding_groups = kv_groups(model)
    if not sliding_groups or full_groups != 1:
        return 0, 0
    bs = hybrid_block_tokens(model, deployment.kv_cache_dtype, deployment.block_size_tokens)
    return sliding_groups, cdiv(model.sliding_window_tokens or 0, bs) + 1


def in_flight_steps(model: ModelSpec, deployment: Deployment) -> int:
    """Steps vLLM 0.26 has scheduled but not yet settled (VllmConfig.max_concurrent_batches, async scheduling on by
    default): the pipeline stages + 1 on its V2 model runner; on the V1 runner 2 without pipeline parallelism, else the
    stages (no async scheduling with pipeline parallelism there)."""
    pp = deployment.pipeline_parallel
    if not uses_v1_runner(model):
        return pp + 1
    return 2 if pp <= 1 else pp


def window_admission_blocks(model: ModelSpec, deployment: Deployment) -> int:
    """The blocks of each sliding-window group vLLM 0.26 asks free, at most, before it admits a request
    (SlidingWindowSpec.max_admission_blocks_per_request: the window less one token and the tokens of the steps in
    flight, :func:`in_flight_steps`, + one block): its admission wants a request's whole prompt free, each sliding
    group's capped by this (:meth:`planner.serving.block_pool.BlockPool.admission_blocks`).  Gemma-3-27B at 8,192
    tokens a step: ⌈(1,024 − 1 + 2 × 8,192) / 16⌉ + 1 = 1,089.  0 where :func:`window_blocks_per_request` has no
    groups."""
    groups, _ = window_blocks_per_request(model, deployment)
    if not groups:
        return 0
    bs = hybrid_block_tokens(model, deployment.kv_cache_dtype, deployment.block_size_tokens)
    in_flight = in_flight_steps(model, deployment) * deployment.max_num_batched_tokens
    return cdiv(model.sliding_window_tokens - 1 + in_flight, bs) + 1


def admission_kv_bytes_per_gpu(model: ModelSpec, deployment: Deployment, context_tokens: int) -> float:
    """KV bytes vLLM 0.26 wants free to admit a request of ``context_tokens`` (scheduler_reserve_full_isl): its blocks
    in each sliding group too, capped by :func:`window_admission_blocks`, where it then holds its window
    (:func:`request_kv_bytes_per_gpu`).  Gemma-3-27B at 16,384 tokens: 7 × 1,024 blocks asked, 1,024 + 6 × 65 held."""
    kv = kv_bytes_per_request(model, deployment.kv_cache_dtype, context_tokens, deployment.block_size_tokens)
    shard = kv_shard_fraction(model, deployment.tensor_parallel, deployment.pipeline_parallel)
    if not (cap := window_admission_blocks(model, deployment)) or not kv.sliding_layer_tokens:
        return kv.total_bytes * shard  # what it holds (request_kv_bytes_per_gpu)
    asked = max(kv.sliding_layer_tokens, min(kv.full_layer_tokens, cap * hybrid_block_tokens(
        model, deployment.kv_cache_dtype, deployment.block_size_tokens)))  # each sliding layer's tokens asked
    return (kv.full_bytes + kv.sliding_bytes / kv.sliding_layer_tokens * asked + kv.state_bytes) * shard


def kv_pool_concurrency(kv_pool_bytes, kv_bytes_per_request, fits=True, admission_bytes=None):
    """Max concurrency: requests whose KV fits in the pool at once, ⌊pool ÷ KV per request⌋ (per GPU both; the last
    one in needs ``admission_bytes`` free where that is more, :func:`admission_kv_bytes_per_gpu`: 1 + ⌊(pool − it) ÷
    KV per request⌋), 0 where the model does not fit.  The one copy of the formula: :func:`max_concurrency`, ``plan``,
    ``sweep`` and the dashboard call it; arrays broadcast (the sweep's pools against its contexts), a scalar gives int.

    H200 pool 100 GiB, Mistral 7B at 4,096 tokens (512 MiB/request): 107,374,182,400 // 536,870,912 = 200.
    """
    pool, per_req = np.asarray(kv_pool_bytes, dtype=float), np.asarray(kv_bytes_per_request, dtype=float)
    div = np.where(per_req > 0, per_req, 1.0)
    ask = per_req if admission_bytes is None else np.asarray(admission_bytes, dtype=float)
    n = np.where(ask > per_req, np.where(pool >= ask, np.floor_divide(pool - ask, div) + 1.0, 0.0),
                 np.floor_divide(pool, div)) * (np.asarray(fits) & (per_req > 0))
    return int(n) if n.ndim == 0 else n


def max_concurrency(
    model: ModelSpec, gpu: GpuSpec, deployment: Deployment, context_tokens: int,
    profile: CalibrationProfile = IDEAL_PROFILE,
) -> int:
    """Requests of ``context_tokens`` whose KV fits in one replica's pool at once: :func:`kv_pool_concurrency`
    of :func:`memory_budget`'s pool, :func:`request_kv_bytes_per_gpu` and :func:`admission_kv_bytes_per_gpu`."""
    if context_tokens <= 0:
        raise ValueError(f"context_tokens must be > 0, got {context_tokens}")
    budget = memory_budget(model, gpu, deployment, profile)
    per_req = request_kv_bytes_per_gpu(model, deployment, context_tokens)
    return kv_pool_concurrency(budget.kv_pool_bytes, per_req, budget.fits,
                               admission_kv_bytes_per_gpu(model, deployment, context_tokens))
