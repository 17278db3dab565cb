"""Data contracts: GPUs, models, workloads, deployments and calibration profiles.

Every class is a frozen pydantic model with ``extra="forbid"``: a typo in a YAML key is an error that
names the key, never a silently ignored field.  Every number is in SI base units and its unit is in
its name (``memory_bytes``, ``hbm_bandwidth_bytes_per_s``, ``price_usd_per_hour``).  Values that come
from the outside world (datasheets, prices, benchmark scores) carry a :class:`Source`.
"""

from __future__ import annotations

import math
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# --------------------------------------------------------------------------------------------- dtypes

WeightDtype = Literal["bf16", "fp16", "fp8", "int8", "int4", "nf4", "mxfp4"]
KvDtype = Literal["bf16", "fp16", "fp8"]
ComputeDtype = Literal["bf16", "fp16", "fp8", "int8", "fp4"]

#: Effective bits per quantised weight, scale overhead included.
#: int4: group-wise (GPTQ/AWQ) with one 16-bit scale per 128 weights = 4 + 16/128 = 4.125 bits.
#: nf4: bitsandbytes, 64-weight blocks, 8-bit absmax + fp32 second-level scale per 256 blocks
#:      = 4 + 8/64 + 32/(64*256) ≈ 4.127 bits.
#: mxfp4: OCP microscaling, 32-element blocks sharing one 8-bit E8M0 scale = 4 + 8/32 = 4.25 bits.
#: fp8 / int8: per-channel scales, negligible (< 0.01 bit) at these sizes.
WEIGHT_BITS: dict[str, float] = {
    "bf16": 16.0,
    "fp16": 16.0,
    "fp8": 8.0,
    "int8": 8.0,
    "int4": 4.0 + 16.0 / 128.0,
    "nf4": 4.0 + 8.0 / 64.0 + 32.0 / (64.0 * 256.0),
    "mxfp4": 4.0 + 8.0 / 32.0,
}
KV_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}

#: Which tensor-core rate a weight format runs its matmuls at, in preference order: W8A8 fp8/int8
#: use the 8-bit rate where the GPU has it; weight-only 4-bit formats dequantise to 16 bits
#: (Marlin-style W4A16) except MXFP4 on GPUs with native FP4.
WEIGHT_COMPUTE_DTYPES: dict[str, tuple[str, ...]] = {
    "bf16": ("bf16",),
    "fp16": ("fp16", "bf16"),
    "fp8": ("fp8", "bf16"),
    "int8": ("int8", "bf16"),
    "int4": ("bf16",),
    "nf4": ("bf16",),
    "mxfp4": ("fp4", "bf16"),
}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


Positive = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegInt = Annotated[int, Field(ge=0)]


class Source(_Frozen):
    """Where an outside-world value comes from."""

    url: str = Field(min_length=1, description="URL (or citation) of the source")
    date: str = Field(min_length=4, description="date the value was read or published, ISO format")
    note: str = Field("", description="how the value was derived from the source, if not verbatim")


# ------------------------------------------------------------------------------------------------ GPU


class GpuSpec(_Frozen):
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
    price_usd_per_hour: Positive = Field(description="reference on-demand price per GPU-hour, USD")
    sources: dict[str, Source] = Field(
        description="source per field: memory_bytes, hbm_bandwidth_bytes_per_s, peak_flops_per_s, "
        "interconnect_bandwidth_bytes_per_s, price_usd_per_hour"
    )

    REQUIRED_SOURCES: ClassVar[tuple[str, ...]] = (
        "memory_bytes",
        "hbm_bandwidth_bytes_per_s",
        "peak_flops_per_s",
        "interconnect_bandwidth_bytes_per_s",
        "price_usd_per_hour",
    )

    @field_validator("peak_flops_per_s")
    @classmethod
    def _needs_16bit(cls, v: dict[str, float]) -> dict[str, float]:
        if "bf16" not in v and "fp16" not in v:
            raise ValueError("needs a bf16 or fp16 entry")
        return v

    @model_validator(mode="after")
    def _sources_cover_values(self) -> GpuSpec:
        missing = [k for k in self.REQUIRED_SOURCES if k not in self.sources]
        if missing:
            raise ValueError(f"sources: missing a source for {', '.join(missing)}")
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


class AttentionSpec(_Frozen):
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
            raise ValueError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})"
            )
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


class MoeSpec(_Frozen):
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


class QualitySpec(_Frozen):
    """A published benchmark score, with its source."""

    benchmark: str = Field(description="e.g. 'MMLU (5-shot)', 'MMLU-Pro'")
    score: Annotated[float, Field(ge=0, le=100)] = Field(description="percent")
    source: Source


class ModelSpec(_Frozen):
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
    tie_word_embeddings: bool = False
    gated_mlp: bool = Field(True, description="SwiGLU/GeGLU (3 matrices) vs plain MLP (2)")
    attention: AttentionSpec
    sliding_window_tokens: PositiveInt | None = Field(None, description="window of sliding-window layers")
    num_sliding_layers: NonNegInt = Field(0, description="layers that attend only to the last window tokens")
    num_linear_layers: NonNegInt = Field(
        0, description="linear-attention / Mamba layers: constant state per request, no KV growth"
    )
    linear_state_bytes_per_layer: NonNegInt = Field(0, description="recurrent state per request per layer")
    moe: MoeSpec | None = None
    native_dtype: WeightDtype = Field("bf16", description="dtype of the published checkpoint")
    published_total_params: Positive = Field(description="parameter count the authors state")
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
        from planner.params import count_params  # local: params imports specs

        counted = count_params(self)
        err = abs(counted.total - self.published_total_params) / self.published_total_params
        if err > 0.02:
            raise ValueError(
                f"published_total_params: computed {counted.total / 1e9:.3f}B from the architecture "
                f"fields, published {self.published_total_params / 1e9:.3f}B ({err:.1%} apart, > 2%)"
            )
        if self.published_active_params:
            err = abs(counted.active - self.published_active_params) / self.published_active_params
            if err > 0.02:
                raise ValueError(
                    f"published_active_params: computed {counted.active / 1e9:.3f}B, published "
                    f"{self.published_active_params / 1e9:.3f}B ({err:.1%} apart, > 2%)"
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


# ------------------------------------------------------------------------------- workload, deployment


class Workload(_Frozen):
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


def vllm_serve_defaults(gpu: GpuSpec) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) that vLLM 0.26 ``serve`` picks on this GPU."""
    if gpu.memory_bytes >= 70 * 2**30 and "a100" not in gpu.id and "a100" not in gpu.name.lower():
        return 8192, 1024
    return 2048, 256


class Deployment(_Frozen):
    """How the model is served."""

    gpu_id: str
    num_gpus: PositiveInt = 1
    tensor_parallel: PositiveInt = 1
    pipeline_parallel: PositiveInt = 1
    weight_dtype: WeightDtype = "bf16"
    kv_cache_dtype: KvDtype = "bf16"
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] = Field(
        0.92, description="fraction of total GPU memory vLLM may use (vLLM 0.26 default 0.92)"
    )
    max_num_batched_tokens: PositiveInt = Field(
        8192, description="chunked-prefill token budget per step (default: vLLM 0.26 `serve`'s for the GPU)"
    )
    max_num_seqs: PositiveInt = Field(1024, description="sequences scheduled at once (default: vLLM 0.26 `serve`'s)")
    block_size_tokens: PositiveInt = Field(16, description="paged KV block size")

    @model_validator(mode="before")
    @classmethod
    def _vllm_defaults(cls, data):
        """Unset scheduler limits take vLLM 0.26 ``vllm serve``'s defaults for the GPU: 8,192 tokens and
        1,024 sequences on GPUs of >= 70 GiB other than the A100, else 2,048 and 256
        (vllm/engine/arg_utils.py, get_batch_defaults)."""
        if isinstance(data, dict) and ("max_num_batched_tokens" not in data or "max_num_seqs" not in data):
            tokens, seqs = 8192, 1024
            try:
                from planner import catalog

                tokens, seqs = vllm_serve_defaults(catalog.gpu(str(data.get("gpu_id"))))
            except Exception:  # an id outside the catalog keeps the H100/H200 defaults
                pass
            data = {"max_num_batched_tokens": tokens, "max_num_seqs": seqs, **data}
        return data

    @model_validator(mode="after")
    def _parallel_fits(self) -> Deployment:
        if self.tensor_parallel * self.pipeline_parallel > self.num_gpus:
            raise ValueError(
                f"tensor_parallel × pipeline_parallel = {self.tensor_parallel * self.pipeline_parallel} "
                f"exceeds num_gpus = {self.num_gpus}"
            )
        return self

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def replicas(self) -> int:
        return self.num_gpus // self.gpus_per_replica


# -------------------------------------------------------------------------------------- calibration


class Residuals(_Frozen):
    """Prediction error of a fitted profile on one regime (percent, signed median and absolute p90)."""

    n: NonNegInt
    median_abs_error_pct: float
    p90_abs_error_pct: float
    median_signed_error_pct: float = 0.0


class CalibrationProfile(_Frozen):
    """Efficiencies and overheads of the roofline model for one GPU and engine version.

    The defaults are the ideal roofline ("speed of light"): every efficiency 1, every overhead 0,
    memory terms from first principles.  ``mode`` says which one a result used.
    """

    mode: Literal["ideal", "calibrated", "transferred"] = Field(
        "ideal", description="ideal roofline; calibrated on this GPU; or transferred: the efficiencies and "
        "overheads measured on another GPU of the same vendor, applied to this GPU's datasheet roofs"
    )
    transferred_from: str = Field("", description="GPU id whose calibration a transferred profile reuses")
    gpu_id: str | None = None
    engine: str = ""
    engine_version: str = ""
    created: str = ""
    # --- compute: matmul efficiency rises with the tokens per step, eff(T) = max * T / (T + half)
    matmul_efficiency_max: Annotated[float, Field(gt=0, le=1.5)] = 1.0
    matmul_half_tokens: Annotated[float, Field(ge=0)] = 0.0
    attention_compute_efficiency: Annotated[float, Field(gt=0, le=1.5)] = 1.0
    # --- memory: fraction of the datasheet bandwidth reached streaming weights and KV
    weight_bandwidth_efficiency: Annotated[float, Field(gt=0, le=1.5)] = 1.0
    kv_bandwidth_efficiency: Annotated[float, Field(gt=0, le=1.5)] = 1.0
    kv_bandwidth_efficiency_fp8: Annotated[float, Field(gt=0, le=1.5)] | None = Field(
        None, description="KV streaming efficiency with an fp8 KV cache, if fitted (else the bf16 one)"
    )
    # --- fixed costs
    step_overhead_s: Annotated[float, Field(ge=0)] = 0.0
    prefill_layer_overhead_s: Annotated[float, Field(ge=0)] = Field(
        0.0, description="extra per layer for a step with prompt tokens that fits a CUDA graph (vLLM runs "
        "such steps as PIECEWISE graphs: attention is launched outside the graph, layer by layer)"
    )
    eager_layer_overhead_s: Annotated[float, Field(ge=0)] = Field(
        0.0, description="extra per layer for a step above the largest CUDA-graph size (no graphs: every "
        "kernel is launched from the CPU)"
    )
    per_seq_overhead_s: Annotated[float, Field(ge=0)] = 0.0
    per_token_overhead_s: Annotated[float, Field(ge=0)] = 0.0
    request_overhead_s: Annotated[float, Field(ge=0)] = 0.0
    # --- measured per-model corrections: extra seconds for steps of tokens_lo < tokens < tokens_hi
    #     (e.g. Mistral/Llama-shaped GEMMs just above the largest CUDA graph); used only for that model
    step_corrections: dict[str, list[tuple[float, float, float]]] = Field(
        default_factory=dict,
        description="model id -> [(tokens_lo, tokens_hi, extra_s)] measured on models the profile was fitted on",
    )
    # --- interconnect (tensor parallel)
    allreduce_latency_s: Annotated[float, Field(ge=0)] | None = None
    allreduce_bandwidth_efficiency: Annotated[float, Field(gt=0, le=1.5)] = 1.0
    # --- memory budget terms (vLLM start-up accounting)
    non_torch_bytes: Annotated[float, Field(ge=0)] = 0.0
    cudagraph_bytes: Annotated[float, Field(ge=0)] = 0.0
    activation_bytes_per_batched_token_per_width: Annotated[float, Field(ge=0)] = 0.0
    weight_bytes_factor: Annotated[float, Field(gt=0)] = 1.0
    device_memory_bytes: Annotated[float, Field(gt=0)] | None = Field(
        None, description="total device memory as CUDA reports it to vLLM (what utilization multiplies)"
    )
    device_memory_fraction: Annotated[float, Field(gt=0.5, le=1.0)] = Field(
        1.0, description="CUDA's total ÷ the catalog's (nvidia-smi) total, measured; a transferred profile "
        "applies it to a GPU whose own CUDA total was never read (H200: 0.9957)"
    )
    # --- measured ceilings (micro-benchmarks), informational
    measured_peak_flops_per_s: dict[str, float] = Field(default_factory=dict)
    measured_hbm_bandwidth_bytes_per_s: float | None = None
    # --- provenance and error
    models_used: list[str] = Field(default_factory=list)
    raw_data: list[str] = Field(default_factory=list)
    raw_data_sha256: list[str] = Field(default_factory=list)
    command: str = ""
    residuals: dict[str, Residuals] = Field(default_factory=dict)
    validation: dict[str, Residuals] = Field(default_factory=dict)

    @property
    def is_ideal(self) -> bool:
        return self.mode == "ideal"

    def transferred_to(self, gpu_id: str) -> CalibrationProfile:
        """This calibration applied to another GPU: the efficiencies (fractions of datasheet roofs),
        overheads and vLLM memory terms carry over; the device memory and measured ceilings do not."""
        return self.model_copy(update={
            "mode": "transferred", "gpu_id": gpu_id, "transferred_from": self.gpu_id or "",
            "device_memory_bytes": None, "measured_peak_flops_per_s": {},
            "measured_hbm_bandwidth_bytes_per_s": None,
        })

    def matmul_efficiency(self, tokens: float) -> float:
        if tokens <= 0:
            return self.matmul_efficiency_max
        return self.matmul_efficiency_max * tokens / (tokens + self.matmul_half_tokens)


IDEAL_PROFILE = CalibrationProfile()


def finite_positive(name: str, value: float) -> float:
    """Raise a ValueError naming ``name`` unless ``value`` is a finite number > 0."""
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)
