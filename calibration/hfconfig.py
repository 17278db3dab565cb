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


def hf_config(model: ModelSpec) -> dict:
    """A config.json dict for ``model`` (dense llama/mistral/qwen layouts and Mixtral/Qwen3-MoE)."""
    arch = model.architecture or "LlamaForCausalLM"
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
    return cfg


def write_hf_config(model: ModelSpec, directory: Path) -> Path:
    """Write ``directory/config.json`` for ``model``; returns the directory."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(hf_config(model), indent=2) + "\n")
    return directory
