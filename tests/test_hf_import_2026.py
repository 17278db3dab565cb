"""planner import-hf on the 2025-26 config layouts: Gemma-3 configs that leave the head counts to
Gemma3TextConfig, Llama-4 (interleaved dense / MoE layers, a shared expert, chunked local attention),
Qwen3-Next / Qwen3.5 (Gated DeltaNet linear-attention layers and their recurrent state), Granite-4.0-H (Mamba-2
layers, their state and parameters, the shared MLP), layer patterns the
planner cannot hold (refused, naming the key), and compressed-tensors checkpoints.

Each config is built inline from the keys of the published config.json that the importer reads."""

from __future__ import annotations

import json

import pytest

from planner.io import catalog
from planner.io.catalog import SpecError, parse_spec
from planner.io.hf_import import hf_config_to_model_dict, model_from_config_bytes
from planner.memory import kv_bytes_per_request, kv_bytes_per_token, kv_bytes_per_token_per_layer
from planner.specs import ModelSpec, count_params


def _model(config: dict, mid: str = "m") -> ModelSpec:
    return parse_spec(ModelSpec, hf_config_to_model_dict(config, mid), mid)


# ------------------------------------------------------------------------------------------- Gemma-3

# google/gemma-3-4b-it: text_config gives no num_attention_heads, num_key_value_heads or head_dim
GEMMA3_4B_IT = {
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "torch_dtype": "bfloat16",
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model", "num_hidden_layers": 27},
}

# google/gemma-3-12b-it: gives the head counts but not head_dim (256, not 3840 / 16 = 240)
GEMMA3_12B_IT = {
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "torch_dtype": "bfloat16",
    "text_config": {"hidden_size": 3840, "intermediate_size": 15360, "model_type": "gemma3_text",
                    "num_attention_heads": 16, "num_hidden_layers": 48, "num_key_value_heads": 8,
                    "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
}


def test_gemma3_4b_takes_its_heads_from_gemma3textconfig_defaults():
    m = _model(GEMMA3_4B_IT)
    a = m.attention
    assert (a.kind, a.num_heads, a.num_kv_heads, a.head_dim) == ("gqa", 8, 4, 256)
    # sliding_window_pattern 6 (default): layers 5, 11, 17, 23, 29 are global -> 5 full, 29 sliding
    assert (m.num_sliding_layers, m.num_full_attention_layers, m.sliding_window_tokens) == (29, 5, 1024)
    assert m.vocab_size == 262_208 and m.tie_word_embeddings
    assert kv_bytes_per_token_per_layer(m, "bf16") == 2 * 4 * 256 * 2  # K and V x 4 kv heads x 256 x 2 bytes
    kv = kv_bytes_per_request(m, "bf16", 100_000)
    assert kv.full_bytes == 100_000 * 4096 * 5  # 5 global layers hold every token
    assert kv.sliding_bytes == 1024 * 4096 * 29  # 29 local layers hold the 1,024-token window
    assert count_params(m).total == (
        262_208 * 2560  # embedding (tied)
        + 34 * (2560 * 8 * 256 + 2 * 2560 * 4 * 256 + 8 * 256 * 2560)  # q, k, v, o
        + 34 * 3 * 2560 * 10240  # GeGLU
        + (2 * 34 + 1) * 2560  # norms
    ) == 3_880_071_680  # Gemma-3-4B text model: 3.88B


def test_gemma3_12b_head_dim_is_256_and_matches_the_catalog():
    m = _model(GEMMA3_12B_IT, "gemma-3-12b")
    assert m.attention.head_dim == 256
    assert kv_bytes_per_token(m, "bf16") == 2 * 48 * 8 * 256 * 2 == 393_216  # 40 local + 8 global: 48 slots
    assert count_params(m).total == (
        262_208 * 3840 + 48 * (3840 * 16 * 256 + 2 * 3840 * 8 * 256 + 16 * 256 * 3840)
        + 48 * 3 * 3840 * 15360 + 97 * 3840
    ) == 11_765_640_960  # keras-hub gemma3_12b_text: 11,765,788,416 (its q/k norms are the difference)
    want = catalog.model("gemma-3-12b")
    for field in ("hidden_size", "num_layers", "intermediate_size", "vocab_size", "attention",
                  "sliding_window_tokens", "num_sliding_layers", "tie_word_embeddings", "rope_cache_positions"):
        assert getattr(m, field) == getattr(want, field), field


# ------------------------------------------------------------------------------------------- Llama-4

LLAMA4_TEXT = {  # meta-llama/Llama-4-Scout-17B-16E-Instruct text_config
    "attention_chunk_size": 8192, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
    "interleave_moe_layer_step": 1, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
    "max_position_embeddings": 10485760, "model_type": "llama4_text", "num_attention_heads": 40,
    "num_experts_per_tok": 1, "num_hidden_layers": 48, "num_key_value_heads": 8, "num_local_experts": 16,
    "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "torch_dtype": "bfloat16", "use_qk_norm": True, "vocab_size": 202048,
}
SCOUT = {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4", "text_config": LLAMA4_TEXT,
         "torch_dtype": "bfloat16"}
# meta-llama/Llama-4-Maverick-17B-128E-Instruct: 128 experts on every 2nd layer, 1M context
MAVERICK = {**SCOUT, "text_config": {**LLAMA4_TEXT, "interleave_moe_layer_step": 2, "num_local_experts": 128,
                                     "max_position_embeddings": 1048576, "rope_scaling": None}}

ATTN = 48 * (5120 * 40 * 128 + 2 * 5120 * 8 * 128 + 40 * 128 * 5120)  # q, k, v, o: 3,019,898,880
EMBED = 2 * 202048 * 5120  # embedding + untied lm_head: 2,068,971,520
EXPERT = 3 * 5120 * 8192  # one SwiGLU expert (routed or shared): 125,829,120
NORMS = 97 * 5120


def test_llama4_scout_every_layer_moe_with_a_shared_expert():
    m = _model(SCOUT)
    assert (m.moe.num_experts, m.moe.experts_per_token, m.moe.expert_intermediate_size) == (16, 1, 8192)
    assert (m.moe.num_shared_experts, m.moe.shared_expert_intermediate_size, m.moe.num_dense_layers) == (1, 8192, 0)
    assert m.intermediate_size == 0
    c = count_params(m)
    assert c.total == ATTN + EMBED + 48 * 16 * EXPERT + 48 * EXPERT + 48 * 5120 * 16 + NORMS == 107_769_861_120
    assert c.active == ATTN + EMBED + 48 * (1 + 1) * EXPERT + 48 * 5120 * 16 + NORMS == 17_172_894_720
    d = hf_config_to_model_dict(SCOUT, "scout", published_total_params=109e9)  # Meta: 109B total, 17B active
    assert parse_spec(ModelSpec, {**d, "published_active_params": 17e9}, "scout")


def test_llama4_maverick_interleaves_dense_and_moe_layers():
    m = _model(MAVERICK)
    # interleave_moe_layer_step 2: layers 1, 3, ..., 47 hold experts, the other 24 a 16,384-wide dense FFN
    assert (m.moe.num_experts, m.moe.num_dense_layers, m.intermediate_size) == (128, 24, 16384)
    c = count_params(m)
    assert c.total == (ATTN + EMBED + 24 * 3 * 5120 * 16384 + 24 * 128 * EXPERT + 24 * EXPERT
                       + 24 * 5120 * 128 + NORMS) == 400_711_848_960  # Meta: 400B
    assert c.active == c.total - 24 * 127 * EXPERT == 17_184_691_200  # Meta: 17B
    explicit = {**MAVERICK, "text_config": {**MAVERICK["text_config"], "moe_layers": list(range(1, 48, 2))}}
    assert _model(explicit).moe == m.moe  # the explicit moe_layers list wins over the step: the same 24
    one = {**MAVERICK, "text_config": {**MAVERICK["text_config"], "moe_layers": [47]}}
    assert _model(one).moe.num_dense_layers == 47


def test_llama4_chunked_attention_on_three_layers_of_four():
    m = _model(SCOUT)
    # no_rope_layers default: layers 3, 7, ..., 47 are global (NoPE); the other 36 attend within 8,192-token chunks
    assert (m.num_full_attention_layers, m.num_sliding_layers, m.sliding_window_tokens) == (12, 36, 8192)
    kv = kv_bytes_per_request(m, "bf16", 1_000_000)
    assert kv.full_bytes == 1_000_000 * 12 * (2 * 8 * 128 * 2)  # 12 global layers x K, V x 8 kv heads x 128 x 2 B
    assert kv.sliding_bytes == 8192 * 36 * 4096  # 36 chunked layers hold at most one 8,192-token chunk
    # the same layout from an explicit no_rope_layers list (0 = global), from layer_types, and [] = the default
    flags = [int((i + 1) % 4 != 0) for i in range(48)]
    for extra in ({"no_rope_layers": flags}, {"no_rope_layers": []},
                  {"layer_types": ["chunked_attention" if f else "full_attention" for f in flags]}):
        got = _model({**SCOUT, "text_config": {**LLAMA4_TEXT, **extra}})
        assert (got.num_sliding_layers, got.sliding_window_tokens) == (36, 8192), extra
    halves = _model({**SCOUT, "text_config": {**LLAMA4_TEXT, "no_rope_layers": [1, 0] * 24}})
    assert halves.num_sliding_layers == 24
    unchunked = _model({**SCOUT, "text_config": {**LLAMA4_TEXT, "attention_chunk_size": None}})
    assert (unchunked.num_sliding_layers, unchunked.sliding_window_tokens) == (0, None)  # every layer global


def test_llama4_bad_layer_keys_name_the_key():
    for extra, key in (({"no_rope_layers": [1, 0]}, "no_rope_layers"), ({"moe_layers": [48]}, "moe_layers"),
                       ({"attention_chunk_size": -1, "layer_types": ["chunked_attention"] * 48},
                        "attention_chunk_size")):
        with pytest.raises(SpecError, match=key):
            hf_config_to_model_dict({**SCOUT, "text_config": {**LLAMA4_TEXT, **extra}}, "x")


# ----------------------------------------------------------------------------------- Qwen3-Next / 3.5

QWEN3_NEXT_80B = {  # Qwen/Qwen3-Next-80B-A3B-Thinking
    "architectures": ["Qwen3NextForCausalLM"], "decoder_sparse_step": 1, "full_attention_interval": 4,
    "head_dim": 256, "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 5120,
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
    "linear_num_value_heads": 32, "linear_value_head_dim": 128, "max_position_embeddings": 262144,
    "mlp_only_layers": [], "model_type": "qwen3_next", "moe_intermediate_size": 512, "num_attention_heads": 16,
    "num_experts": 512, "num_experts_per_tok": 10, "num_hidden_layers": 48, "num_key_value_heads": 2,
    "partial_rotary_factor": 0.25, "rope_theta": 10000000, "shared_expert_intermediate_size": 512,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_sliding_window": False, "vocab_size": 151936,
}
# Gated DeltaNet state per layer, 2-byte numbers: 32 value heads x 128 x 128 (delta-rule state) + the conv's last
# 4 - 1 inputs of q, k (16 heads x 128 each) and v (32 heads x 128)
GDN_STATE = (32 * 128 * 128 + (2 * 16 * 128 + 32 * 128) * (4 - 1)) * 2


def test_qwen3_next_full_attention_every_fourth_layer():
    m = _model(QWEN3_NEXT_80B)
    assert (m.num_linear_layers, m.num_full_attention_layers, m.num_sliding_layers) == (36, 12, 0)
    assert kv_bytes_per_token(m, "bf16") == 12 * 2 * 2 * 256 * 2 == 24_576  # 12 full layers x K, V x 2 heads x 256
    assert m.linear_state_bytes_per_layer == GDN_STATE == 1_097_728
    assert kv_bytes_per_request(m, "bf16", 1000).state_bytes == 36 * 1_097_728  # 39.5 MB, whatever the context
    # a Gated DeltaNet layer (hidden 2,048; 16 key heads and 32 value heads of 128): q, k, v, z projections
    # 2048 x (2 x 2048 + 2 x 4096), beta/decay 2048 x 64, the conv (2 x 2048 + 4096) x 4, decay terms 2 x 32, the norm
    # 128, the output 4096 x 2048 = 33,718,464 (4 x hidden^2 = 16,777,216 before): 79.57B, Qwen's 80B -0.5 % (79.0B,
    # -1.3 %, before)
    assert m.linear_layer_params == 2048 * 12288 + 2048 * 64 + 8192 * 4 + 64 + 128 + 4096 * 2048 == 33_718_464
    assert count_params(m).total == pytest.approx(80e9, rel=0.006)


def test_qwen35_layer_types_linear_attention_get_the_same_state():
    text = {k: v for k, v in QWEN3_NEXT_80B.items() if k not in ("architectures", "torch_dtype")}
    cfg = {  # Qwen/Qwen3.5-35B-A3B: layer_types given (and full_attention_interval beside it)
        "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
        "tie_word_embeddings": False,
        "text_config": {**text, "model_type": "qwen3_5_moe_text", "num_hidden_layers": 40, "num_experts": 256,
                        "num_experts_per_tok": 8, "vocab_size": 248320, "dtype": "bfloat16",
                        "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 10},
    }
    m = _model(cfg)
    assert (m.num_linear_layers, m.num_full_attention_layers) == (30, 10)
    assert kv_bytes_per_token(m, "bf16") == 10 * 2 * 2 * 256 * 2 == 20_480
    assert m.linear_state_bytes_per_layer == GDN_STATE
    # 34.58B where Qwen states 35B (with its vision tower; the text model alone is what vLLM serves here): -1.2 %
    assert count_params(m).total == pytest.approx(34.58e9, rel=0.001)


def test_linear_layers_without_gated_deltanet_keys_keep_no_state():
    cfg = {**QWEN3_NEXT_80B, "full_attention_interval": 2}
    for k in ("linear_conv_kernel_dim", "linear_key_head_dim", "linear_num_key_heads", "linear_num_value_heads",
              "linear_value_head_dim"):
        cfg.pop(k)
    m = _model(cfg)
    assert (m.num_linear_layers, m.linear_state_bytes_per_layer) == (24, 0)
    with pytest.raises(SpecError, match="linear_value_head_dim"):  # some of them: the missing one is named
        hf_config_to_model_dict({**cfg, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
                                 "linear_num_key_heads": 16, "linear_conv_kernel_dim": 4}, "x")


# -------------------------------------------------------------------------------- Granite-4.0-H (Mamba-2)

GRANITE_LAYERS = ["mamba"] * 5 + ["attention"] + (["mamba"] * 9 + ["attention"]) * 3 + ["mamba"] * 4
# ibm-granite/granite-4.0-h-small: 36 Mamba-2 layers and 4 attention layers, every one with 72 experts (top 10) and a
# gated shared MLP of shared_intermediate_size
GRANITE_H_SMALL = {
    "architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid", "hidden_size": 4096,
    "intermediate_size": 768, "layer_types": GRANITE_LAYERS, "mamba_conv_bias": True, "mamba_d_conv": 4,
    "mamba_d_head": 64, "mamba_d_state": 128, "mamba_expand": 2, "mamba_n_groups": 1, "mamba_n_heads": 128,
    "mamba_proj_bias": False, "max_position_embeddings": 131072, "num_attention_heads": 32, "num_experts_per_tok": 10,
    "num_hidden_layers": 40, "num_key_value_heads": 8, "num_local_experts": 72, "position_embedding_type": "nope",
    "shared_intermediate_size": 1536, "tie_word_embeddings": True, "torch_dtype": "bfloat16", "vocab_size": 100352,
}
# one Mamba-2 layer's state, 2-byte numbers: the SSM state 128 heads x 64 x 128, and the conv's last 4 - 1 inputs of
# x (128 x 64 channels), B and C (1 group x 128 each)
MAMBA2_STATE = (128 * 64 * 128 + (128 * 64 + 2 * 128) * (4 - 1)) * 2


def test_granite_h_small_mamba_layers_hold_their_state_and_parameters():
    m = _model(GRANITE_H_SMALL)
    assert (m.num_linear_layers, m.num_full_attention_layers) == (36, 4)
    assert m.linear_state_bytes_per_layer == MAMBA2_STATE == 2_147_840
    # 36 layers x 2.15 MB = 77.3 MB a request whatever its context, more than its 4 attention layers' KV at 4,096
    # tokens (4 x K, V x 8 heads x 128 x 2 bytes x 4,096 = 67.1 MB); none of it was counted before
    kv = kv_bytes_per_request(m, "bf16", 4096)
    assert kv.state_bytes == 36 * 2_147_840 and kv.full_bytes == 4 * 2 * 8 * 128 * 2 * 4096
    # in_proj 4096 -> z, x (8,192 each), B, C (128 each), dt (128 heads); the conv over x, B, C (8,448 channels x 4,
    # + bias); dt bias, A, D per head; the gated norm; out_proj 8,192 -> 4,096
    assert m.linear_layer_params == (4096 * (2 * 8192 + 2 * 128 + 128) + 8448 * (4 + 1) + 3 * 128 + 8192
                                     + 8192 * 4096) == 102_286_976
    assert (m.moe.num_shared_experts, m.moe.shared_expert_intermediate_size) == (1, 1536)
    # 32.21B, IBM's 32B (30.19B, -5.7 %, with 4 x hidden^2 a Mamba layer and no shared MLP); active 8.8B (IBM: 9B,
    # 6.8B before)
    assert count_params(m).total == pytest.approx(32.207e9, rel=1e-4)


def test_vllm_raises_a_hybrids_attention_block_to_hold_a_state_page():
    """vLLM 0.26 makes one attention layer's page (block tokens x its KV per token) hold one linear layer's state:
    16 x ceil(state / (16 x KV per token)) tokens, the state padded to the page.  Qwen3-Next-80B with fp8 KV: 16 x
    ceil(1,097,728 / (16 x 2 x 2 x 256 x 1)) = 1,072, the block vLLM logged serving it on TP 2 (state and KV halved
    alike); Granite-4.0-H-Small: 528, so a 2,200-token request holds 5 blocks x 528 tokens x 4 layers x 4,096 B of KV
    and 36 pages of 528 x 4,096 B of state (2,162,688 B each, 2,147,840 unpadded): 121.1 MB, where 16-token blocks and
    the bare state gave 113.4 MB."""
    from planner.memory import hybrid_block_tokens

    assert hybrid_block_tokens(_model(QWEN3_NEXT_80B), "fp8", 16) == 1072
    assert hybrid_block_tokens(_model(QWEN3_NEXT_80B), "bf16", 16) == 544
    g = _model(GRANITE_H_SMALL)
    assert hybrid_block_tokens(g, "bf16", 16) == 528 and hybrid_block_tokens(g, "bf16", 1024) == 1024
    kv = kv_bytes_per_request(g, "bf16", 2200, 16)
    assert (kv.full_layer_tokens, kv.full_bytes, kv.state_bytes) == (2640, 2640 * 4 * 4096, 36 * 528 * 4096)
    assert kv.total_bytes == pytest.approx(121.1e6, rel=1e-3)
    assert kv_bytes_per_request(g, "bf16", 2200).state_bytes == 36 * 2_147_840  # unrounded: the bare state
    gemma = _model(GEMMA3_12B_IT)  # no linear layers: the configured block
    assert hybrid_block_tokens(gemma, "bf16", 16) == 16


def test_granite_h_dense_runs_its_shared_mlp_and_an_attention_only_granite_has_no_state():
    # ibm-granite/granite-4.0-h-1b: no experts; its one FFN is the shared MLP (shared_intermediate_size)
    cfg = {**GRANITE_H_SMALL, "hidden_size": 1536, "num_attention_heads": 12, "num_key_value_heads": 4,
           "num_local_experts": 0, "num_experts_per_tok": 0, "intermediate_size": 4096,
           "shared_intermediate_size": 4096, "mamba_n_heads": 48}
    m = _model(cfg)
    assert m.moe is None and m.intermediate_size == 4096 and m.num_linear_layers == 36
    assert m.linear_state_bytes_per_layer == (48 * 64 * 128 + (48 * 64 + 2 * 128) * 3) * 2
    # granite-4.0-micro: the same model type and mamba_* keys, every layer attention
    micro = _model({**cfg, "layer_types": ["attention"] * 40})
    assert (micro.num_linear_layers, micro.linear_state_bytes_per_layer, micro.linear_layer_params) == (0, 0, 0)


# ------------------------------------------------------------------------------------------ refusals

NEMOTRON_H = {  # nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 (M = Mamba-2, E = MoE, * = attention)
    "architectures": ["NemotronHForCausalLM"], "head_dim": 128, "hidden_size": 2688,
    "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", "intermediate_size": 1856,
    "max_position_embeddings": 262144, "model_type": "nemotron_h", "moe_intermediate_size": 1856,
    "n_routed_experts": 128, "n_shared_experts": 1, "num_attention_heads": 32, "num_experts_per_tok": 6,
    "num_hidden_layers": 52, "num_key_value_heads": 2, "sliding_window": None, "vocab_size": 131072,
}
MIMO_V2_FLASH = {  # XiaomiMiMo/MiMo-V2-Flash (would have been read as "every layer slides")
    "architectures": ["MiMoV2FlashForCausalLM"], "head_dim": 192, "hidden_size": 4096,
    "hybrid_layer_pattern": [0, 1, 1, 1, 1, 0] * 8, "intermediate_size": 16384, "max_position_embeddings": 262144,
    "model_type": "mimo_v2_flash", "moe_intermediate_size": 2048, "n_routed_experts": 256,
    "num_attention_heads": 64, "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
    "sliding_window": 128, "swa_num_key_value_heads": 8, "v_head_dim": 128, "vocab_size": 152576,
}
GEMMA4_26B = {  # google/gemma-4-26B-A4B
    "architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4",
    "text_config": {"global_head_dim": 512, "head_dim": 256, "hidden_size": 2816, "intermediate_size": 2112,
                    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 5,
                    "max_position_embeddings": 262144, "model_type": "gemma4_text", "moe_intermediate_size": 704,
                    "num_attention_heads": 16, "num_experts": 128, "num_global_key_value_heads": 2,
                    "num_hidden_layers": 30, "num_key_value_heads": 8, "sliding_window": 1024, "top_k_experts": 8,
                    "vocab_size": 262144},
}


@pytest.mark.parametrize("config, key", [
    (NEMOTRON_H, "hybrid_override_pattern"),
    (MIMO_V2_FLASH, "hybrid_layer_pattern"),
    (GEMMA4_26B, "model_type"),
    ({**GEMMA3_12B_IT, "text_config": {**GEMMA3_12B_IT["text_config"], "global_head_dim": 512}}, "global_head_dim"),
    ({**QWEN3_NEXT_80B, "attn_layer_period": 8, "attn_layer_offset": 4}, "attn_layer_period"),  # Jamba style
    ({**QWEN3_NEXT_80B, "full_attention_interval": None,  # LFM2 style: short-conv layers
      "layer_types": ["conv", "conv", "full_attention"] * 16}, "layer_types"),
    ({**GRANITE_H_SMALL, "model_type": "falcon_h1", "layer_types": None}, "model_type"),  # attention + Mamba-2 a layer
    ({**GRANITE_H_SMALL, "layer_types": None}, "mamba_n_heads"),  # which layers are Mamba: not said
    ({"architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2", "hidden_size": 2560, "num_heads": 80,
      "num_hidden_layers": 64, "vocab_size": 50288, "max_position_embeddings": 2048}, "model_type"),  # no attention
])
def test_layer_patterns_the_planner_cannot_hold_are_refused(config, key):
    with pytest.raises(SpecError) as e:
        hf_config_to_model_dict(config, "x")
    msg = str(e.value)
    assert f"'{key}'" in msg and "not supported" in msg and "\n" not in msg, msg
    model, err = model_from_config_bytes(json.dumps(config).encode(), 1 << 20)
    assert model is None and key in err


def test_the_every_layer_slides_fallback_needs_no_pattern_key():
    plain = {k: v for k, v in MIMO_V2_FLASH.items() if k not in ("hybrid_layer_pattern", "swa_num_key_value_heads")}
    assert _model(plain).num_sliding_layers == 48  # mistral v0.1 style: the key-less config still slides everywhere
    assert hf_config_to_model_dict({**plain, "num_kv_shared_layers": 0}, "x")  # 0: no layer shares KV
    with pytest.raises(SpecError, match="'layers_block_type'"):
        hf_config_to_model_dict({**plain, "layers_block_type": ["mamba", "attention"] * 24}, "x")


# ------------------------------------------------------------------------------------ quantisation

def _ct(*groups: tuple[int, str] | None) -> dict:
    """A compressed-tensors quantization_config with one config group per (num_bits, type)."""
    return {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {
        f"group_{i}": {"targets": ["Linear"],
                       "weights": None if g is None else {"num_bits": g[0], "type": g[1], "strategy": "channel"}}
        for i, g in enumerate(groups)}}


def test_compressed_tensors_weights_decide_the_dtype():
    base = dict(QWEN3_NEXT_80B)
    assert _model({**base, "quantization_config": _ct((8, "float"))}).native_dtype == "fp8"  # FP8-dynamic
    assert _model({**base, "quantization_config": _ct((8, "int"))}).native_dtype == "int8"  # W8A8 int
    assert _model({**base, "quantization_config": _ct((4, "int"), (4, "int"))}).native_dtype == "int4"  # W4A16
    assert _model({**base, "quantization_config": _ct(None)}).native_dtype == "bf16"  # activations only
    # RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic: the quantization_config sits beside text_config
    scout_fp8 = {**SCOUT, "quantization_config": {**_ct((8, "float")), "format": "float-quantized"}}
    assert _model(scout_fp8).native_dtype == "fp8"
    # the existing methods are unchanged
    assert _model({**base, "quantization_config": {"quant_method": "fp8", "fmt": "e4m3"}}).native_dtype == "fp8"
    assert _model({**base, "quantization_config": {"quant_method": "gptq", "bits": 4}}).native_dtype == "int4"
    assert _model({**base, "quantization_config": {"quant_method": "mxfp4"}}).native_dtype == "mxfp4"


@pytest.mark.parametrize("qc", [
    _ct((4, "float")),  # NVFP4: no planner dtype
    _ct((8, "float"), (4, "int")),  # mixed formats
    {"quant_method": "compressed-tensors", "config_groups": {}},
    {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": [8], "type": "int"}}}},
])
def test_compressed_tensors_it_cannot_model_is_refused(qc):
    with pytest.raises(SpecError) as e:
        hf_config_to_model_dict({**QWEN3_NEXT_80B, "quantization_config": qc}, "x")
    assert "'quantization_config.config_groups" in str(e.value) and "\n" not in str(e.value)


def test_prefix_caching_on_a_mamba2_hybrid_aligns_its_block_to_the_chunk():
    """vLLM 0.26 with prefix caching on caches a Mamba-2 hybrid's state at every block ('all' mode) and makes the block
    a multiple of the SSD chunk (mamba_chunk_size, transformers' default 256): Granite-4.0-H-Small 256 x ceil(ceil(
    2,147,840 / 4,096) / 256) = 256 x 3 = 768 tokens (528 without).  A Gated DeltaNet hybrid has no such chunk: vLLM's
    'align' mode keeps the block (Qwen3-Next-80B at fp8 KV: 1,072 either way)."""
    from planner.memory import hybrid_block_tokens

    g = _model(GRANITE_H_SMALL)
    g128 = _model({**GRANITE_H_SMALL, "mamba_chunk_size": 128})
    assert (g.mamba_chunk_tokens, g128.mamba_chunk_tokens) == (256, 128)
    assert (hybrid_block_tokens(g, "bf16", 16), hybrid_block_tokens(g, "bf16", 16, prefix_caching=True)) == (528, 768)
    assert hybrid_block_tokens(g128, "bf16", 16, True) == 640
    q = _model(QWEN3_NEXT_80B)
    assert q.mamba_chunk_tokens == 0
    assert hybrid_block_tokens(q, "fp8", 16, prefix_caching=True) == hybrid_block_tokens(q, "fp8", 16) == 1072
