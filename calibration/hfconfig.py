"""Write a Hugging Face config.json from a catalog ModelSpec, so vLLM can build the model with
dummy weights (``load_format="dummy"``): no download, no tokenizer.  Pure Python (no torch/vllm)."""

from __future__ import annotations

import json
from pathlib import Path

from planner.specs import ModelSpec

# model_type and architecture vLLM knows for each family; dense llama-style models share one layout
_FAMILIES = {
    "MistralForCausalLM": "mistral",
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "MixtralForCausalLM": "mixtral",
    "Qwen3MoeForCausalLM": "qwen3_moe",
}

#: Families with a layout of their own (:mod:`calibration.hfconfig_families`): MXFP4 MoE (gpt-oss), MLA with
#: fine-grained MoE (DeepSeek-V2/V3, Moonlight) and the Gemma-3 sliding-window hybrid (text decoder only).
_OWN_WRITERS = ("GptOssForCausalLM", "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM",
                "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration")


#: Weight-only integer formats as a GPTQ ``quantization_config`` (vLLM 0.26 runs them with its Machete or
#: Marlin mixed-precision kernels on Hopper).  vLLM's GPTQ path quantises only the linear layers named in
#: ``modules_in_block_to_quantize`` and, when that is empty, fills it from the checkpoint's safetensors
#: metadata (``AutoGPTQConfig.maybe_update_config``): a config-only dummy-weight directory has none, so
#: every layer silently stayed bf16 (15.0 GiB for Llama-3.1-8B).  Naming the modules fixes that.  MoE
#: experts are quantised regardless of the list (vLLM's WNA16 MoE path).
GPTQ_BITS = {"int4": 4, "int8": 8}
_DENSE_MODULES = [["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], ["self_attn.o_proj"],
                  ["mlp.gate_proj", "mlp.up_proj"], ["mlp.down_proj"]]
_ATTN_MODULES = _DENSE_MODULES[:2]


def quantization_config(model: ModelSpec, weight_dtype: str) -> dict | None:
    """The ``quantization_config`` a dummy-weight config.json needs for ``weight_dtype`` (None for 16-bit
    weights and for fp8, which vLLM quantises online with ``quantization="fp8"``)."""
    if weight_dtype not in GPTQ_BITS:
        return None
    return {"quant_method": "gptq", "bits": GPTQ_BITS[weight_dtype], "group_size": 128, "desc_act": False,
            "sym": True, "lm_head": False,
            "modules_in_block_to_quantize": _ATTN_MODULES if model.moe is not None else _DENSE_MODULES}


def hf_config(model: ModelSpec, weight_dtype: str = "bf16") -> dict:
    """A config.json dict for ``model`` (dense llama/mistral/qwen layouts and Mixtral/Qwen3-MoE); int4/int8
    weights add a GPTQ ``quantization_config`` (:func:`quantization_config`)."""
    arch = model.architecture or "LlamaForCausalLM"
    if arch in _OWN_WRITERS:
        from calibration.hfconfig_families import family_config

        return family_config(model, weight_dtype)
    if arch not in _FAMILIES:
        raise ValueError(
            f"architecture: {arch!r} has no dummy-weight config writer; supported: {', '.join(_FAMILIES)}"
        )
    a = model.attention
    if a.kind == "mla":
        raise ValueError("attention.kind: MLA models need their own config writer")
    cfg = {
        "architectures": [arch],
        "model_type": _FAMILIES[arch],
        "hidden_size": model.hidden_size,
        "intermediate_size": model.intermediate_size,
        "num_hidden_layers": model.num_layers,
        "num_attention_heads": a.num_heads,
        "num_key_value_heads": a.num_kv_heads,
        "head_dim": a.head_dim,
        "vocab_size": model.vocab_size,
        "max_position_embeddings": model.max_context_tokens,
        "rope_theta": model.rope_theta,
        "rms_norm_eps": 1e-5,
        "hidden_act": "silu",
        "tie_word_embeddings": model.tie_word_embeddings,
        "torch_dtype": "bfloat16",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "sliding_window": model.sliding_window_tokens if model.num_sliding_layers else None,
    }
    if model.moe is not None:
        m = model.moe
        if arch == "MixtralForCausalLM":
            cfg.update(num_local_experts=m.num_experts, num_experts_per_tok=m.experts_per_token,
                       intermediate_size=m.expert_intermediate_size)
        else:
            cfg.update(num_experts=m.num_experts, num_experts_per_tok=m.experts_per_token,
                       moe_intermediate_size=m.expert_intermediate_size, decoder_sparse_step=1,
                       norm_topk_prob=True)
    if arch.startswith("Qwen2"):
        cfg["use_sliding_window"] = False
    q = quantization_config(model, weight_dtype)
    if q is not None:
        cfg["quantization_config"] = q
    return cfg


def write_hf_config(model: ModelSpec, directory: Path, weight_dtype: str = "bf16") -> Path:
    """Write ``directory/config.json`` for ``model``; returns the directory."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(hf_config(model, weight_dtype), indent=2) + "\n")
    return directory
