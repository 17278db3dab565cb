"""Quality: a model's published benchmark score × a retention factor for its weight and KV dtypes.

Retention = (score of the quantised model) ÷ (score of the 16-bit model), averaged over the models and
benchmarks a published study reports.  These are approximate, model-dependent averages: small
models lose more than large ones, and a particular checkpoint (or a quantisation-aware release such
as GPT-OSS's native MXFP4) can differ.  Each factor says where it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.dtypes import KV_BYTES, WEIGHT_BITS
from planner.specs import ModelSpec


@dataclass(frozen=True)
class Retention:
    """Fraction of the 16-bit benchmark score a dtype keeps, with its source."""

    factor: float
    source_url: str
    note: str


#: Weight-quantisation retention.  Main source: Kurtic et al., '"Give Me BF16 or Give Me Death"?
#: Accuracy-Performance Trade-Offs in LLM Quantization' (arXiv 2411.02355, ACL 2025), 500,000+
#: evaluations of the Llama 3.1 family (8B/70B/405B): W8A8-FP8 "lossless across all model scales",
#: W8A8-INT8 "1-3% accuracy degradation" when tuned, W4A16-INT "competitive with" INT8.
WEIGHT_RETENTION: dict[str, Retention] = {
    "bf16": Retention(1.0, "", "reference precision"),
    "fp16": Retention(1.0, "", "same information as bf16 for inference"),
    "fp8": Retention(
        0.995,
        "https://arxiv.org/abs/2411.02355",
        "W8A8-FP8 'lossless across all model scales' (Llama 3.1 8B-405B); 0.995 leaves room for "
        "noise between benchmarks. Approximate",
    ),
    "int8": Retention(
        0.98,
        "https://arxiv.org/abs/2411.02355",
        "W8A8-INT8 incurs '1-3% accuracy degradation' when properly tuned; 0.98 is the middle. Approximate",
    ),
    "int4": Retention(
        0.975,
        "https://arxiv.org/abs/2411.02355",
        "W4A16-INT (GPTQ, group size 128) is 'competitive with' W8A8-INT8, losing more on the 8B model "
        "than on 70B/405B; 0.975 is an approximate average over sizes",
    ),
    "nf4": Retention(
        0.97,
        "https://arxiv.org/abs/2305.14314",
        "Dettmers et al., 'QLoRA' (2023): 4-bit NormalFloat with double quantisation matches 16-bit "
        "zero-shot accuracy better than plain int4/fp4 round-to-nearest; without a calibrated method "
        "(GPTQ/AWQ) a few points are typically lost on 7B-class models (Jin et al., 'A Comprehensive "
        "Evaluation of Quantization Strategies for Large Language Models', arXiv 2402.16775, ACL 2024, "
        "finds 4-bit weights keep scores comparable to 16-bit). 0.97 is approximate",
    ),
    "mxfp4": Retention(
        0.95,
        "https://arxiv.org/abs/2509.23202",
        "Egiazarian, Castro et al., 'Bridging the Gap Between Promise and Performance for Microscaling "
        "FP4 Quantization' (2025): post-training MXFP4 with standard methods loses clearly more than "
        "int4 because of its power-of-two scales; their MR-GPTQ narrows the gap. 0.95 is approximate. "
        "A checkpoint published natively in MXFP4 (GPT-OSS) has retention 1: its published score is "
        "already the MXFP4 score",
    ),
}

#: KV-cache quantisation retention.
KV_RETENTION: dict[str, Retention] = {
    "bf16": Retention(1.0, "", "reference precision"),
    "fp16": Retention(1.0, "", "same information as bf16 for inference"),
    "fp8": Retention(
        0.995,
        "https://docs.vllm.ai/en/latest/features/quantization/quantized_kvcache/",
        "vLLM/SGLang FP8 (E4M3, per-tensor scales) KV cache: 'may introduce minimal accuracy degradation' "
        "(SGLang quantized KV cache docs); the seeds call it 'typically negligible'. 0.995 is an "
        "approximate figure, not a measured average",
    ),
}


def retention(weight_dtype: str, kv_cache_dtype: str) -> float:
    """Combined retention factor: weight retention × KV retention."""
    if weight_dtype not in WEIGHT_RETENTION:
        raise ValueError(f"weight_dtype: unknown dtype '{weight_dtype}'; known: {', '.join(WEIGHT_BITS)}")
    if kv_cache_dtype not in KV_RETENTION:
        raise ValueError(f"kv_cache_dtype: unknown dtype '{kv_cache_dtype}'; known: {', '.join(KV_BYTES)}")
    return WEIGHT_RETENTION[weight_dtype].factor * KV_RETENTION[kv_cache_dtype].factor


@dataclass(frozen=True)
class QualityEstimate:
    """Published score × retention, and whether the served context covers the workload."""

    benchmark: str  # '' when the model has no published score
    published_score: float  # percent; nan when unknown
    score_source_url: str
    weight_retention: float
    kv_retention: float
    context_tokens: int
    max_context_tokens: int

    @property
    def retention(self) -> float:
        return self.weight_retention * self.kv_retention

    @property
    def score(self) -> float:
        """Estimated benchmark score at these dtypes (percent; nan when unknown)."""
        return self.published_score * self.retention

    @property
    def context_exceeds_limit(self) -> bool:
        return self.context_tokens > self.max_context_tokens


def quality_estimate(model: ModelSpec, weight_dtype: str, kv_cache_dtype: str, context_tokens: int) -> QualityEstimate:
    retention(weight_dtype, kv_cache_dtype)  # validates the names
    q = model.quality
    # A checkpoint published in a quantised format already includes that format's loss.
    w = 1.0 if weight_dtype == model.native_dtype else WEIGHT_RETENTION[weight_dtype].factor
    if model.native_dtype != "bf16" and weight_dtype in ("bf16", "fp16"):
        w = 1.0
    return QualityEstimate(
        q.benchmark if q else "",
        q.score if q else float("nan"),
        q.source.url if q else "",
        w,
        KV_RETENTION[kv_cache_dtype].factor,
        int(context_tokens),
        model.max_context_tokens,
    )
