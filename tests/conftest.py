"""Shared spec factories for the tests: inline specs built from published config.json values (no catalog files
needed).  Test modules import them (``from conftest import mistral_7b, make_gpu``)."""

from __future__ import annotations

import pytest
from hypothesis import settings

from planner.specs import AttentionSpec, Deployment, GpuSpec, ModelSpec, MoeSpec, Source, count_params

#: Property tests draw their examples from a seed fixed per test (hypothesis' derandomize): CI on another machine
#: runs the examples this one ran, so a property that holds here cannot fail there by the luck of the draw.
settings.register_profile("pinned", derandomize=True, print_blob=True)
settings.load_profile("pinned")

SRC = Source(url="https://huggingface.co", date="2025-01-01")


def make_model(**fields) -> ModelSpec:
    """A validated ModelSpec whose published count is the counted one (these tests are about KV/weights)."""
    base = {"id": fields.get("id", "m"), "name": fields.get("id", "m"), "params_source": SRC, "config_source": SRC,
                "published_total_params": 1.0}
    base.update(fields)
    draft = ModelSpec.model_construct(**{**base, "num_sliding_layers": base.get("num_sliding_layers", 0),
                                          "num_linear_layers": base.get("num_linear_layers", 0),
                                          "sliding_window_tokens": base.get("sliding_window_tokens"),
                                          "moe": base.get("moe"), "gated_mlp": base.get("gated_mlp", True),
                                          "tie_word_embeddings": base.get("tie_word_embeddings", False),
                                          "linear_state_bytes_per_layer": 0})
    if "published_total_params" not in fields:
        base["published_total_params"] = count_params(draft).total
    return ModelSpec(**base)


def mistral_7b(num_kv_heads: int = 8) -> ModelSpec:
    """mistralai/Mistral-7B-v0.3 config.json: hidden 4096, 32 layers, 32 heads, 8 KV heads, head_dim 128,
    FFN 14336, vocab 32768; published 7,248,023,552 parameters."""
    kind = "gqa" if num_kv_heads != 32 else "mha"
    return make_model(
        id="mistral-7b", hidden_size=4096, num_layers=32, intermediate_size=14336, vocab_size=32768,
        max_context_tokens=32768,
        attention=AttentionSpec(kind=kind, num_heads=32, num_kv_heads=num_kv_heads, head_dim=128),
        **({"published_total_params": 7.248023552e9} if num_kv_heads == 8 else {}),
    )


def gpt_oss_120b() -> ModelSpec:
    """openai/gpt-oss-120b config.json: hidden 2880, 36 layers, 64 heads, 8 KV heads, head_dim 64,
    128 experts top-4 of width 2880, vocab 201088, sliding window 128 on 18 layers; 116.83B params."""
    return make_model(
        id="gpt-oss-120b", hidden_size=2880, num_layers=36, intermediate_size=0, vocab_size=201088,
        max_context_tokens=131072, attention=AttentionSpec(kind="gqa", num_heads=64, num_kv_heads=8, head_dim=64),
        sliding_window_tokens=128, num_sliding_layers=18,
        moe=MoeSpec(num_experts=128, experts_per_token=4, expert_intermediate_size=2880),
        native_dtype="mxfp4", published_total_params=116.83e9,
    )


def llama_31_70b() -> ModelSpec:
    """meta-llama/Llama-3.1-70B: hidden 8192, 80 layers, 64 heads, 8 KV heads, head_dim 128, FFN 28672,
    vocab 128256; 70.55B params."""
    return make_model(
        id="llama-3.1-70b", hidden_size=8192, num_layers=80, intermediate_size=28672, vocab_size=128256,
        max_context_tokens=131072, attention=AttentionSpec(kind="gqa", num_heads=64, num_kv_heads=8, head_dim=128),
        published_total_params=70.553706496e9,
    )


def deepseek_v3() -> ModelSpec:
    """deepseek-ai/DeepSeek-V3: hidden 7168, 61 layers (3 dense), MLA kv_lora_rank 512, rope 64, nope 128,
    v 128, q_lora 1536, 128 heads; 256 routed experts top-8 of width 2048 + 1 shared; 671B params."""
    return make_model(
        id="deepseek-v3", hidden_size=7168, num_layers=61, intermediate_size=18432, vocab_size=129280,
        max_context_tokens=163840,
        attention=AttentionSpec(kind="mla", num_heads=128, num_kv_heads=128, head_dim=192, v_head_dim=128,
                                kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64, qk_nope_head_dim=128),
        moe=MoeSpec(num_experts=256, experts_per_token=8, expert_intermediate_size=2048, num_shared_experts=1,
                    shared_expert_intermediate_size=2048, num_dense_layers=3),
        native_dtype="fp8", published_total_params=671e9,
    )


def gemma_3_27b() -> ModelSpec:
    """google/gemma-3-27b text model: hidden 5376, 62 layers (52 sliding with window 1024, 10 global),
    32 heads, 16 KV heads, head_dim 128, FFN 21504, vocab 262208, tied embeddings."""
    return make_model(
        id="gemma-3-27b", hidden_size=5376, num_layers=62, intermediate_size=21504, vocab_size=262208,
        max_context_tokens=131072, tie_word_embeddings=True,
        attention=AttentionSpec(kind="gqa", num_heads=32, num_kv_heads=16, head_dim=128),
        sliding_window_tokens=1024, num_sliding_layers=52,
    )


def granite_4_h_small() -> ModelSpec:
    """ibm-granite/granite-4.0-h-small config.json: hidden 4096, 40 layers (36 Mamba-2: 128 heads of 64, state 128,
    1 group, conv 4; 4 attention: 32 heads, 8 KV heads, head_dim 128), 72 experts top-10 of width 768 + a shared MLP
    of 1536, vocab 100352, tied embeddings (planner.io.hf_layers sizes the Mamba-2 layers)."""
    return make_model(
        id="granite-4.0-h-small", hidden_size=4096, num_layers=40, intermediate_size=0, vocab_size=100352,
        max_context_tokens=131072, tie_word_embeddings=True,
        attention=AttentionSpec(kind="gqa", num_heads=32, num_kv_heads=8, head_dim=128),
        num_linear_layers=36, linear_state_bytes_per_layer=(128 * 64 * 128 + (128 * 64 + 2 * 128) * 3) * 2,
        linear_layer_params=102_286_976, mamba_chunk_tokens=256,
        moe=MoeSpec(num_experts=72, experts_per_token=10, expert_intermediate_size=768, num_shared_experts=1,
                    shared_expert_intermediate_size=1536),
    )


def make_gpu(**over) -> GpuSpec:
    """An H100-SXM-like GPU: 80 GiB, 3.35 TB/s, 989 TFLOP/s bf16, 1979 fp8, NVLink 450 GB/s, $4/h."""
    d = {
        "id": "test-gpu", "name": "Test GPU", "memory_bytes": 80 * 2**30, "memory_marketed": "80 GB", "memory_stated_as": "GiB",
        "hbm_bandwidth_bytes_per_s": 3.35e12, "peak_flops_per_s": {"bf16": 989e12, "fp16": 989e12, "fp8": 1979e12},
        "interconnect": "NVLink", "interconnect_bandwidth_bytes_per_s": 450e9, "max_gpus_per_node": 8,
        "price_usd_per_hour": 4.0,
        "sources": {k: SRC for k in GpuSpec.REQUIRED_SOURCES},
    }
    d.update(over)
    return GpuSpec(**d)


def make_deployment(**fields) -> Deployment:
    """A deployment on :func:`make_gpu`'s GPU, as the planner builds one (``Deployment.for_gpu``: vLLM serve's
    scheduler limits for an 80 GiB GPU, 8,192 tokens / 1,024 sequences)."""
    return Deployment.for_gpu(make_gpu(), **fields)


@pytest.fixture(scope="module")
def mistral():
    """serving_helpers.mistral_cost(), once per module."""
    from serving_helpers import mistral_cost

    return mistral_cost()


@pytest.fixture(scope="session")
def fitted():
    """(profile, points, serving points) of one refit of the committed raw records (calibration/refit.py's
    inputs), shared by the calibration tests of a worker."""
    from calibration.family_fit import load_points
    from calibration.fit import fit_profile
    from calibration.refit import inputs, with_families

    records, points, extra = inputs()
    prof, points = fit_profile(records, points=points, extra_validation=extra)
    # issue #21's families on top, then the eager launch floors traced under vllm serve, as calibration/refit.py does
    family = load_points()
    return with_families(prof, points, extra, family), points, extra

