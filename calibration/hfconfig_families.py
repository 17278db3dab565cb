"""Dummy-weight config.json writers for the 2026 families (issue #21): gpt-oss (MXFP4 MoE with attention
sinks, alternating 128-token sliding layers), DeepSeek-V2/V3 layouts (MLA + fine-grained MoE with shared
experts; Moonlight uses the V3 one) and the Gemma-3 text decoder (5:1 local/global).  Each dict follows the
published config.json's keys (the legacy ``rope_theta``/``rope_scaling`` spelling, which transformers 5
converts), so vLLM 0.26 builds the same modules and kernels as for the real checkpoint.  Pure Python."""

from __future__ import annotations

from planner.specs import ModelSpec


def loaded_weight_dtype(model: ModelSpec, weight_dtype: str) -> str:
    """The weights a dummy-weight engine of ``model`` asked for ``weight_dtype`` loads: an MXFP4-native MoE's
    config.json keeps its checkpoint's MXFP4 ``quantization_config`` when bf16 is asked (:func:`gpt_oss`), so vLLM
    loads MXFP4 experts (gpt-oss-20b: 13.0 GiB where bf16 is 39 GiB, 2026-12-05); every other case as asked."""
    if weight_dtype == "bf16" and model.native_dtype == "mxfp4" and model.moe is not None:
        return "mxfp4"
    return weight_dtype


def _layer_types(model: ModelSpec, global_every: int, sliding_first: bool = True) -> list[str]:
    """'sliding_attention'/'full_attention' per layer: every ``global_every``-th layer is global."""
    out = []
    for i in range(model.num_layers):
        is_global = (i % global_every == global_every - 1) if sliding_first else (i % global_every == 0)
        out.append("full_attention" if is_global else "sliding_attention")
    return out


def gpt_oss(model: ModelSpec, weight_dtype: str) -> dict:
    a, m = model.attention, model.moe
    cfg = {
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
        "hidden_size": model.hidden_size, "intermediate_size": m.expert_intermediate_size,
        "num_hidden_layers": model.num_layers, "num_attention_heads": a.num_heads,
        "num_key_value_heads": a.num_kv_heads, "head_dim": a.head_dim,
        "num_local_experts": m.num_experts, "num_experts_per_tok": m.experts_per_token,
        "experts_per_token": m.experts_per_token, "vocab_size": model.vocab_size,
        "sliding_window": model.sliding_window_tokens, "layer_types": _layer_types(model, 2),
        "max_position_embeddings": model.max_context_tokens, "initial_context_length": 4096,
        "rope_theta": model.rope_theta,
        "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                         "truncate": False, "original_max_position_embeddings": 4096},
        "swiglu_limit": 7.0, "attention_bias": True, "rms_norm_eps": 1e-5, "hidden_act": "silu",
        "tie_word_embeddings": model.tie_word_embeddings, "torch_dtype": "bfloat16",
        "eos_token_id": 200002, "pad_token_id": 199999, "router_aux_loss_coef": 0.9,
        "output_router_logits": False, "use_cache": True,
    }
    if loaded_weight_dtype(model, weight_dtype) == "mxfp4" and model.native_dtype == "mxfp4":
        # the published checkpoint's own quantization_config: experts MXFP4, the rest bf16
        cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    return cfg


def deepseek(model: ModelSpec, weight_dtype: str) -> dict:
    a, m = model.attention, model.moe
    arch = model.architecture
    v3 = arch == "DeepseekV3ForCausalLM"
    cfg = {
        "architectures": [arch], "model_type": "deepseek_v3" if v3 else "deepseek_v2",
        "hidden_size": model.hidden_size, "intermediate_size": model.intermediate_size,
        "moe_intermediate_size": m.expert_intermediate_size, "num_hidden_layers": model.num_layers,
        "num_attention_heads": a.num_heads, "num_key_value_heads": a.num_kv_heads,
        "n_shared_experts": m.num_shared_experts or None, "n_routed_experts": m.num_experts,
        "num_experts_per_tok": m.experts_per_token, "first_k_dense_replace": m.num_dense_layers,
        "moe_layer_freq": 1, "kv_lora_rank": a.kv_lora_rank, "q_lora_rank": a.q_lora_rank or None,
        "qk_rope_head_dim": a.qk_rope_head_dim, "qk_nope_head_dim": a.qk_nope_head_dim,
        "v_head_dim": a.v_head_dim or a.head_dim, "vocab_size": model.vocab_size,
        "max_position_embeddings": model.max_context_tokens, "rope_theta": model.rope_theta,
        "rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": model.tie_word_embeddings,
        "torch_dtype": "bfloat16", "bos_token_id": 100000, "eos_token_id": 100001, "attention_bias": False,
        "n_group": 1, "topk_group": 1, "norm_topk_prob": v3, "aux_loss_alpha": 0.001,
        # V2(-Lite): greedy softmax top-k; V3 layout (Moonlight, DeepSeek-V3): sigmoid scores with a
        # correction bias (noaux_tc), as the published configs say
        "topk_method": "noaux_tc" if v3 else "greedy", "scoring_func": "sigmoid" if v3 else "softmax",
        "routed_scaling_factor": 2.446 if v3 else 1.0,
    }
    return cfg


def gemma3_text(model: ModelSpec, weight_dtype: str) -> dict:
    a = model.attention
    every = round(model.num_layers / max(1, model.num_layers - model.num_sliding_layers))
    return {
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
        "hidden_size": model.hidden_size, "intermediate_size": model.intermediate_size,
        "num_hidden_layers": model.num_layers, "num_attention_heads": a.num_heads,
        "num_key_value_heads": a.num_kv_heads, "head_dim": a.head_dim, "vocab_size": model.vocab_size,
        "sliding_window": model.sliding_window_tokens, "layer_types": _layer_types(model, every),
        "sliding_window_pattern": every, "max_position_embeddings": model.max_context_tokens,
        "rope_theta": model.rope_theta, "rope_local_base_freq": 10000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
        "query_pre_attn_scalar": a.head_dim if a.head_dim != 128 else 168,
        "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6, "attention_bias": False,
        "final_logit_softcapping": None, "attn_logit_softcapping": None,
        "tie_word_embeddings": model.tie_word_embeddings, "torch_dtype": "bfloat16",
        "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
    }


def family_config(model: ModelSpec, weight_dtype: str = "bf16") -> dict:
    arch = model.architecture
    if arch == "GptOssForCausalLM":
        return gpt_oss(model, weight_dtype)
    if arch in ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"):
        return deepseek(model, weight_dtype)
    return gemma3_text(model, weight_dtype)
