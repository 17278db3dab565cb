"""Calibration profiles: the efficiencies and overheads that turn the ideal roofline into a measured one.

``IDEAL_PROFILE`` is the one spelling of "no profile" (the speed-of-light roofline); every function takes
``profile: CalibrationProfile = IDEAL_PROFILE`` and callers pass a resolved profile
(:func:`planner.catalog.resolve_profile`), never None.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from planner.specs import FrozenSpec, NonNegInt


class Residuals(FrozenSpec):
    """Prediction error of a fitted profile on one regime (percent, signed median and absolute p90)."""

    n: NonNegInt
    median_abs_error_pct: float
    p90_abs_error_pct: float
    median_signed_error_pct: float = 0.0


class CalibrationProfile(FrozenSpec):
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
