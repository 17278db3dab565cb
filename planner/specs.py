"""Data contracts: GPUs, models (with their parameter count), workloads and deployments.

Every class is a frozen pydantic model with ``extra="forbid"``: a typo in a YAML key is an error that
names the key, never a silently ignored field.  Every number is in SI base units and its unit is in
its name (``memory_bytes``, ``hbm_bandwidth_bytes_per_s``, ``price_usd_per_hour``).  Values that come
from the outside world (datasheets, prices, benchmark scores) carry a :class:`Source`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.dtypes import WEIGHT_COMPUTE_DTYPES, ComputeDtype, KvDtype, WeightDtype
from planner.prices import PriceEntry, check_table
from planner.quoting import refuse_control_characters
from planner.units import BILLION, GiB


class FrozenSpec(BaseModel):
    """Frozen, ``extra="forbid"``, no NaN/inf: the base of every data contract."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    _no_control_characters = field_validator("*")(refuse_control_characters)  # no text field holds one


Positive = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegInt = Annotated[int, Field(ge=0)]


class Source(FrozenSpec):
    """Where an outside-world value comes from."""

    url: str = Field(min_length=1, description="URL (or citation) of the source")
    date: str = Field(min_length=4, description="date the value was read or published, ISO format")
    note: str = Field("", description="how the value was derived from the source, if not verbatim")


# ------------------------------------------------------------------------------------------------ GPU

#: Plausible range of each GpuSpec number and the unit mistake a value outside it usually is (141 for 141 GB,
#: 4.8 for 4.8 TB/s would otherwise plan "Feasible: yes" with a TTFT of 3.9e9 s).
PLAUSIBLE_GPU: dict[str, tuple[float, float, str]] = {
    "memory_bytes": (1e9, 1e13, "bytes: 141 GB is 141e9 (or 141 * 2**30 as CUDA reports it), not 141"),
    "hbm_bandwidth_bytes_per_s": (1e10, 1e14, "bytes/s: 4.8 TB/s is 4.8e12, not 4.8"),
    "peak_flops_per_s": (1e12, 1e18, "FLOP/s: 989 TFLOP/s is 989e12, not 989"),
    "interconnect_bandwidth_bytes_per_s": (1e9, 1e13, "bytes/s, one direction: 450 GB/s is 450e9, not 450"),
    "interconnect_latency_s": (1e-7, 1e-2, "seconds: 5 µs is 5e-6, not 5"),
    "price_usd_per_hour": (0.01, 1000.0, "USD per GPU-hour, e.g. 3.5 (not cents, not per month)"),
}


class GpuSpec(FrozenSpec):
    """One accelerator model, as its datasheet states it."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$", description="catalog id, e.g. 'h200-sxm'")
    name: str = Field(description="marketing name, e.g. 'NVIDIA H200 SXM 141GB'")
    vendor: Literal["nvidia", "amd", "intel", "google", "other"] = "nvidia"
    memory_bytes: Positive = Field(
        description="device memory in bytes as CUDA/ROCm report it (nvidia-smi total), what vLLM budgets from"
    )
    memory_marketed: str = Field(description="capacity as the datasheet prints it, e.g. '80 GB', '141 GB'")
    memory_stated_as: Literal["GB", "GiB"] = Field(
        description="what the datasheet's unit really means for this card: marketed HBM sizes are "
        "usually binary (an '80 GB' H100 reports 81,559 MiB), so say which"
    )
    hbm_bandwidth_bytes_per_s: Positive = Field(description="peak device-memory bandwidth, bytes/s")
    peak_flops_per_s: dict[ComputeDtype, Positive] = Field(
        description="dense (no sparsity) tensor-core peak FLOP/s (or OP/s for int8) per dtype"
    )
    interconnect: str = Field(description="GPU-to-GPU link, e.g. 'NVLink 4', 'PCIe 5.0 x16'")
    interconnect_bandwidth_bytes_per_s: Positive = Field(
        description="GPU-to-GPU bandwidth per GPU, one direction, bytes/s"
    )
    interconnect_latency_s: Positive = Field(5e-6, description="latency of one small collective, s")
    max_gpus_per_node: PositiveInt = Field(description="GPUs that share the fast interconnect in one node")
    price_usd_per_hour: Positive = Field(description="default on-demand price per GPU-hour, USD (one of prices)")
    prices: tuple[PriceEntry, ...] = Field((), description="sourced prices by provider and basis (planner.prices)")
    sources: dict[str, Source] = Field(
        description="source per field: memory_bytes, hbm_bandwidth_bytes_per_s, peak_flops_per_s, "
        "interconnect_bandwidth_bytes_per_s, price_usd_per_hour"
    )

    REQUIRED_SOURCES: ClassVar[tuple[str, ...]] = ("memory_bytes", "hbm_bandwidth_bytes_per_s", "peak_flops_per_s",
                                                   "interconnect_bandwidth_bytes_per_s", "price_usd_per_hour")

    @field_validator("peak_flops_per_s")
    @classmethod
    def _needs_16bit(cls, v: dict[str, float]) -> dict[str, float]:
        if "bf16" not in v and "fp16" not in v:
            raise ValueError("needs a bf16 or fp16 entry")
        return v

    @field_validator(*PLAUSIBLE_GPU)
    @classmethod
    def _plausible(cls, v, info):
        lo, hi, unit = PLAUSIBLE_GPU[info.field_name]
        for x in (v.values() if isinstance(v, dict) else [v]):
            if not lo <= x <= hi:
                raise ValueError(f"{x:g} is outside the plausible {lo:g} to {hi:g}; wrong unit? expected {unit}")
        return v

    @model_validator(mode="after")
    def _sources_cover_values(self) -> GpuSpec:
        if missing := [k for k in self.REQUIRED_SOURCES if k not in self.sources]:
            raise ValueError(f"sources: missing a source for {', '.join(missing)}")
        check_table(self.price_usd_per_hour, self.prices)
        return self

    def peak_flops_for(self, dtype: str) -> tuple[str, float]:
        """(dtype actually used, peak FLOP/s) for matmuls whose weights are stored as ``dtype``."""
        for d in WEIGHT_COMPUTE_DTYPES.get(dtype, (dtype, "bf16")):
            if d in self.peak_flops_per_s:
                return d, self.peak_flops_per_s[d]
        d = "bf16" if "bf16" in self.peak_flops_per_s else "fp16"
        return d, self.peak_flops_per_s[d]

    @property
    def price_source(self) -> Source:
        return self.sources["price_usd_per_hour"]


# ---------------------------------------------------------------------------------------------- model


class AttentionSpec(FrozenSpec):
    """Attention geometry.  ``kind`` decides what the KV cache stores."""

    kind: Literal["mha", "gqa", "mqa", "mla"]
    num_heads: PositiveInt = Field(description="query heads")
    num_kv_heads: PositiveInt = Field(description="key/value heads (1 for MQA; = num_heads for MHA)")
    head_dim: PositiveInt = Field(description="per-head dimension of q/k (v too unless v_head_dim)")
    v_head_dim: PositiveInt | None = Field(None, description="per-head value dimension if different")
    # MLA (DeepSeek-V2/V3): the cache holds one latent of kv_lora_rank + qk_rope_head_dim per layer.
    kv_lora_rank: NonNegInt = 0
    q_lora_rank: NonNegInt = 0
    qk_rope_head_dim: NonNegInt = 0
    qk_nope_head_dim: NonNegInt = 0

    @model_validator(mode="after")
    def _consistent(self) -> AttentionSpec:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})")
        if self.kind == "mha" and self.num_kv_heads != self.num_heads:
            raise ValueError("kind 'mha' needs num_kv_heads == num_heads")
        if self.kind == "mqa" and self.num_kv_heads != 1:
            raise ValueError("kind 'mqa' needs num_kv_heads == 1")
        if self.kind == "mla" and (self.kv_lora_rank <= 0 or self.qk_rope_head_dim <= 0):
            raise ValueError("kind 'mla' needs kv_lora_rank > 0 and qk_rope_head_dim > 0")
        return self

    @property
    def value_dim(self) -> int:
        return self.v_head_dim or self.head_dim


class MoeSpec(FrozenSpec):
    """Mixture-of-experts feed-forward layers."""

    num_experts: PositiveInt = Field(description="routed experts per MoE layer")
    experts_per_token: PositiveInt = Field(description="routed experts each token activates (top-k)")
    expert_intermediate_size: PositiveInt = Field(description="FFN width of one routed expert")
    num_shared_experts: NonNegInt = Field(0, description="always-active shared experts")
    shared_expert_intermediate_size: NonNegInt = Field(0, description="FFN width of one shared expert")
    num_dense_layers: NonNegInt = Field(0, description="leading layers with a dense FFN instead of MoE")

    @model_validator(mode="after")
    def _k_le_e(self) -> MoeSpec:
        if self.experts_per_token > self.num_experts:
            raise ValueError("experts_per_token cannot exceed num_experts")
        return self


class QualitySpec(FrozenSpec):
    """A published benchmark score, with its source."""

    benchmark: str = Field(description="e.g. 'MMLU (5-shot)', 'MMLU-Pro'")
    score: Annotated[float, Field(ge=0, le=100)] = Field(description="percent")
    source: Source


class ModelSpec(FrozenSpec):
    """A transformer's architecture, in Hugging Face config.json terms."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$", description="catalog id, e.g. 'mistral-7b-v0.3'")
    name: str
    hf_repo: str = Field("", description="Hugging Face repository the config comes from")
    architecture: str = Field("", description="config.json 'architectures'[0], e.g. MistralForCausalLM")
    hidden_size: PositiveInt
    num_layers: PositiveInt = Field(description="num_hidden_layers")
    intermediate_size: NonNegInt = Field(description="dense FFN width (0 if every layer is MoE)")
    vocab_size: PositiveInt
    max_context_tokens: PositiveInt = Field(description="max_position_embeddings (served context limit)")
    rope_theta: float = 10000.0
    rope_cache_positions: PositiveInt | None = Field(None, description="rows of vLLM's rotary cos/sin tables, all of "
                                                     "them (a linear ×f table has f × max positions); None: one table")
    tie_word_embeddings: bool = False
    gated_mlp: bool = Field(True, description="SwiGLU/GeGLU (3 matrices) vs plain MLP (2)")
    attention: AttentionSpec
    sliding_window_tokens: PositiveInt | None = Field(None, description="window of sliding-window layers")
    num_sliding_layers: NonNegInt = Field(0, description="layers that attend only to the last window tokens")
    num_linear_layers: NonNegInt = Field(0, description="linear-attention / Mamba layers: constant state, no KV growth")
    linear_state_bytes_per_layer: NonNegInt = Field(0, description="recurrent state per request per layer")
    linear_layer_params: NonNegInt = Field(0, description="parameters of one linear-attention layer (0: 4 x hidden^2)")
    mamba_chunk_tokens: NonNegInt = Field(0, description="Mamba-2 layers' SSD chunk (mamba_chunk_size); 0: none")
    moe: MoeSpec | None = None
    native_dtype: WeightDtype = Field("bf16", description="dtype of the published checkpoint")
    published_total_params: Annotated[float, Field(ge=1e3, le=1e14)] = Field(
        description="parameter count the authors state (7.2e9, not 7.2 billions)")
    published_active_params: Positive | None = Field(None, description="active parameters per token (MoE)")
    params_source: Source
    config_source: Source
    quality: QualitySpec | None = None

    @model_validator(mode="after")
    def _layers_and_params(self) -> ModelSpec:
        if self.num_sliding_layers + self.num_linear_layers > self.num_layers:
            raise ValueError("num_sliding_layers + num_linear_layers exceeds num_layers")
        if self.num_sliding_layers and not self.sliding_window_tokens:
            raise ValueError("num_sliding_layers > 0 needs sliding_window_tokens")
        if self.moe is None and self.intermediate_size <= 0:
            raise ValueError("intermediate_size must be > 0 for a dense model")
        if self.moe is not None and self.moe.num_dense_layers and self.intermediate_size <= 0:
            raise ValueError("moe.num_dense_layers > 0 needs intermediate_size > 0")
        counted = count_params(self)
        err = abs(counted.total - self.published_total_params) / self.published_total_params
        if err > 0.02:
            raise ValueError(
                f"published_total_params: computed {counted.total / BILLION:.3f}B from the architecture "
                f"fields, published {self.published_total_params / BILLION:.3f}B ({err:.1%} apart, > 2%)"
            )
        if self.published_active_params:
            err = abs(counted.active - self.published_active_params) / self.published_active_params
            if err > 0.02:
                raise ValueError(
                    f"published_active_params: computed {counted.active / BILLION:.3f}B, published "
                    f"{self.published_active_params / BILLION:.3f}B ({err:.1%} apart, > 2%)"
                )
        return self

    @property
    def num_full_attention_layers(self) -> int:
        return self.num_layers - self.num_sliding_layers - self.num_linear_layers

    @property
    def num_attention_layers(self) -> int:
        return self.num_layers - self.num_linear_layers

    @property
    def is_moe(self) -> bool:
        return self.moe is not None


# ----------------------------------------------------------------------------------- parameter count


@dataclass(frozen=True)
class ParamCount:
    """Parameter counts of a model, split the way memory and FLOPs need them.

    ``embedding`` is the input embedding table, ``lm_head`` the output projection (0 when tied),
    ``attention`` and ``dense_mlp`` are summed over layers; ``expert`` is one routed expert's
    weights in one layer, ``num_moe_layers`` how many layers hold routed experts.
    """

    embedding: float
    lm_head: float
    attention: float
    dense_mlp: float
    routed_experts: float  # all routed experts, all layers
    shared_experts: float  # all shared experts, all layers
    router: float
    norms: float
    expert: float  # one routed expert in one layer
    num_moe_layers: int
    experts_per_token: int

    @property
    def total(self) -> float:
        return (
            self.embedding + self.lm_head + self.attention + self.dense_mlp
            + self.routed_experts + self.shared_experts + self.router + self.norms
        )

    @property
    def non_expert(self) -> float:
        """Everything but the routed experts (read in full every step)."""
        return self.total - self.routed_experts

    @property
    def active(self) -> float:
        """Parameters one token touches (embedding lookup included, as papers count it)."""
        return self.non_expert + self.num_moe_layers * self.experts_per_token * self.expert

    @property
    def active_matmul_no_lm_head(self) -> float:
        return self.active - self.embedding - self.lm_head

    @property
    def lm_head_matmul(self) -> float:
        return self.lm_head if self.lm_head else self.embedding

    @property
    def quantizable(self) -> float:
        """Linear-layer weights that weight quantisation compresses (embeddings and lm_head stay 16-bit)."""
        return self.attention + self.dense_mlp + self.routed_experts + self.shared_experts


def count_params(m: ModelSpec) -> ParamCount:
    h = m.hidden_size
    a = m.attention
    mats = 3 if m.gated_mlp else 2
    if a.kind == "mla":
        qk_dim = a.qk_nope_head_dim + a.qk_rope_head_dim
        q = (h * a.q_lora_rank + a.q_lora_rank * a.num_heads * qk_dim) if a.q_lora_rank else h * a.num_heads * qk_dim
        kv_a = h * (a.kv_lora_rank + a.qk_rope_head_dim)
        kv_b = a.kv_lora_rank * a.num_heads * (a.qk_nope_head_dim + a.value_dim)
        o = a.num_heads * a.value_dim * h
        attn_layer = q + kv_a + kv_b + o + a.kv_lora_rank + a.q_lora_rank  # latent norms
    else:
        q = h * a.num_heads * a.head_dim
        kv = h * a.num_kv_heads * a.head_dim + h * a.num_kv_heads * a.value_dim
        o = a.num_heads * a.value_dim * h
        attn_layer = q + kv + o
    attention = attn_layer * m.num_attention_layers
    # linear-attention layers: their own count where the config gives one (Gated DeltaNet), else q, k, v, o of width h
    attention += m.num_linear_layers * (m.linear_layer_params or 4 * h * h)
    embedding = m.vocab_size * h
    lm_head = 0 if m.tie_word_embeddings else m.vocab_size * h
    norms = (2 * m.num_layers + 1) * h
    if m.moe is None:
        return ParamCount(embedding, lm_head, attention, m.num_layers * mats * h * m.intermediate_size,
                          0, 0, 0, norms, 0, 0, 0)
    e = m.moe
    moe_layers = m.num_layers - e.num_dense_layers
    expert = mats * h * e.expert_intermediate_size
    return ParamCount(
        embedding=embedding,
        lm_head=lm_head,
        attention=attention,
        dense_mlp=e.num_dense_layers * mats * h * m.intermediate_size,
        routed_experts=moe_layers * e.num_experts * expert,
        shared_experts=moe_layers * e.num_shared_experts * mats * h * e.shared_expert_intermediate_size,
        router=moe_layers * h * e.num_experts,
        norms=norms,
        expert=expert,
        num_moe_layers=moe_layers,
        experts_per_token=e.experts_per_token,
    )


# ------------------------------------------------------------------------------- workload, deployment


class Workload(FrozenSpec):
    """What the users send."""

    prompt_tokens: PositiveInt = Field(description="input tokens per request")
    output_tokens: PositiveInt = Field(description="generated tokens per request")
    concurrency: PositiveInt | None = Field(None, description="requests in flight at once")
    request_rate_per_s: Positive | None = Field(None, description="arrival rate, requests/s")
    ttft_slo_s: Positive | None = Field(None, description="time-to-first-token target, s")
    tpot_slo_s: Positive | None = Field(None, description="time-per-output-token target, s")

    @property
    def context_tokens(self) -> int:
        """Tokens a request holds in the KV cache at its end."""
        return self.prompt_tokens + self.output_tokens


#: vLLM 0.26's (max_num_batched_tokens, max_num_seqs) defaults (engine/arg_utils.py): `vllm serve` on >= 70 GiB GPUs
#: but the A100 (Deployment's), on the rest; the ``LLM`` class's, which calibration's probe engines run with.
SERVE_LIMITS_LARGE_GPU, SERVE_LIMITS_SMALL_GPU, LLM_CLASS_LIMITS = (8192, 1024), (2048, 256), (16384, 1024)


def vllm_serve_defaults(gpu: GpuSpec) -> tuple[int, int]:
    """``vllm serve``'s (max_num_batched_tokens, max_num_seqs) on this GPU: 8,192 tokens and 1,024 sequences on GPUs
    of >= 70 GiB other than the A100, else 2,048 and 256 (:data:`SERVE_LIMITS_LARGE_GPU`, ...)."""
    large = gpu.memory_bytes >= 70 * GiB and "a100" not in gpu.id and "a100" not in gpu.name.lower()
    return SERVE_LIMITS_LARGE_GPU if large else SERVE_LIMITS_SMALL_GPU


DEFAULT_TENSOR_PARALLELS: tuple[int, ...] = (1, 2, 4, 8)  #: tensor-parallel sizes tried when none are asked for


def tensor_parallel_candidates(model: ModelSpec, gpu: GpuSpec, wanted: Iterable[int] | None = None) -> list[int]:
    """The tensor-parallel sizes of ``wanted`` (default :data:`DEFAULT_TENSOR_PARALLELS`) vLLM can run
    ``model`` at on one node of ``gpu``: at most ``gpu.max_gpus_per_node`` and dividing the attention heads."""
    cands = wanted if wanted is not None else DEFAULT_TENSOR_PARALLELS
    return [t for t in cands if t <= gpu.max_gpus_per_node and model.attention.num_heads % t == 0]


class Deployment(FrozenSpec):
    """How the model is served."""

    gpu_id: str
    num_gpus: PositiveInt = 1
    tensor_parallel: PositiveInt = 1
    pipeline_parallel: PositiveInt = 1
    weight_dtype: WeightDtype = "bf16"
    kv_cache_dtype: KvDtype = "bf16"
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] = Field(
        0.92, description="fraction of total GPU memory vLLM may use (vLLM 0.26 default 0.92)")
    # the scheduler's token budget per step and sequences at once (Deployment.for_gpu: vLLM 0.26 serve's for the GPU)
    max_num_batched_tokens: PositiveInt = Field(SERVE_LIMITS_LARGE_GPU[0], description="chunked-prefill token budget")
    max_num_seqs: PositiveInt = Field(SERVE_LIMITS_LARGE_GPU[1], description="sequences scheduled at once")
    block_size_tokens: PositiveInt = Field(16, description="paged KV block size")
    max_cudagraph_capture_tokens: PositiveInt | None = Field(None, description="largest CUDA-graph step; None: vLLM's")

    @classmethod
    def for_gpu(cls, gpu: GpuSpec, **fields) -> Deployment:
        """The one way to build a deployment: on ``gpu``, the scheduler limits not in ``fields`` take vLLM 0.26
        serve's defaults for that GPU (:func:`vllm_serve_defaults`), other settings :meth:`default`."""
        if "gpu_id" in fields:
            raise TypeError("Deployment.for_gpu: the GPU gives gpu_id")
        tokens, seqs = vllm_serve_defaults(gpu)
        return cls(gpu_id=gpu.id, **{"max_num_batched_tokens": tokens, "max_num_seqs": seqs, **fields})

    @classmethod
    def default(cls, setting: str):
        """The one default of an engine setting (``gpu_memory_utilization`` 0.92, ``block_size_tokens`` 16, …):
        the CLI, the dashboard, calibration and replay read it here, as vLLM's EngineArgs reads CacheConfig's."""
        return cls.model_fields[setting].default

    def replace(self, **changes) -> Deployment:
        """This deployment with ``changes``, validated again (``model_copy(update=...)`` would not check them)."""
        return type(self).model_validate({**self.model_dump(), **changes})

    @model_validator(mode="after")
    def _parallel_fits(self) -> Deployment:
        if self.tensor_parallel * self.pipeline_parallel > self.num_gpus:
            raise ValueError(f"tensor_parallel × pipeline_parallel = {self.tensor_parallel * self.pipeline_parallel} "
                             f"exceeds num_gpus = {self.num_gpus}")
        if n := self.num_gpus % (per := self.gpus_per_replica):  # 3 GPUs of TP 2 were priced as 2 ("3 ×" title)
            raise ValueError(f"num_gpus = {self.num_gpus} is not a whole number of replicas of tensor_parallel × "
                             f"pipeline_parallel = {per} GPUs; give {self.num_gpus - n} or {self.num_gpus - n + per}")
        return self

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def replicas(self) -> int:
        return self.num_gpus // self.gpus_per_replica
