"""Turn a Hugging Face ``config.json`` into a models/<id>.yaml entry (``planner import-hf``).

Handles the key spellings of llama / mistral / qwen2 / qwen3 / qwen2_moe / qwen3_moe / mixtral /
deepseek_v2 / deepseek_v3 / gpt_oss / gemma2 / gemma3 (``text_config`` nesting) / phi3 / llama4 (dense and MoE
layers interleaved, chunked local attention) / qwen3_next and qwen3.5 (Gated DeltaNet linear attention) /
granitemoehybrid (Granite-4.0-H: Mamba-2 layers, a shared MLP beside the experts) configs.
Keys a config omits fall back to the defaults of the matching transformers config class (the
gemma-3 configs on the hub, for instance, leave ``vocab_size`` and ``rope_theta`` out).  Layer patterns the
planner's spec cannot hold (Nemotron-H, MiMo, Gemma-4, Falcon-H1, attention-free state-space models, ...) are
refused (:mod:`planner.io.hf_layers`).

Every problem is a :class:`planner.io.catalog.SpecError` with a one-line message that names the
config key, never a KeyError or a pydantic traceback.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
from typing import Any

import yaml

from planner.io.catalog import SpecError, parse_spec
from planner.io.hf_layers import (
    dense_layer_count,
    layer_layout,
    linear_layer_params,
    linear_state_bytes,
    mamba_chunk_tokens,
    refuse_unsupported,
)
from planner.io.hf_layers import find as _find
from planner.io.hf_layers import native_dtype as _native_dtype
from planner.io.hf_layers import read_int as _int
from planner.quoting import control_char_problem
from planner.specs import AttentionSpec, ModelSpec, MoeSpec, count_params

__all__ = ["hf_config_to_model_dict", "model_dict_to_yaml", "model_from_config_bytes"]

IMPORT_NOTE = "imported by planner import-hf"

#: transformers config-class defaults for keys that published configs leave out, per model_type.
#: Only keys that change what the planner computes are listed.
_MODEL_TYPE_DEFAULTS: dict[str, dict[str, Any]] = {
    # transformers Gemma3TextConfig (gemma-3-4b/12b-it leave the head counts and head_dim to these)
    "gemma3_text": {
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "vocab_size": 262_208,
        "max_position_embeddings": 131_072,
        "rope_theta": 1_000_000.0,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
        "tie_word_embeddings": True,
        "hidden_activation": "gelu_pytorch_tanh",
    },
    # transformers Gemma2Config: layers alternate local / global
    "gemma2": {
        "vocab_size": 256_000,
        "max_position_embeddings": 8192,
        "rope_theta": 10_000.0,
        "sliding_window": 4096,
        "sliding_window_pattern": 2,
        "tie_word_embeddings": True,
    },
    "gemma": {"tie_word_embeddings": True, "rope_theta": 10_000.0},
}

#: models whose MLP is a plain two-matrix MLP (everything else here is SwiGLU/GeGLU)
_UNGATED_MODEL_TYPES = {"gpt2", "gpt_neox", "gptj", "opt", "falcon", "gpt_bigcode", "phi", "starcoder2", "bloom"}

# ------------------------------------------------------------------------------------------ helpers


def _positive_float(cfg: dict[str, Any], key: str, default: float) -> float:
    value = cfg.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise SpecError(f"config.json: '{key}' must be a positive number, got {value!r}")
    return float(value)


def _rope_theta(cfg: dict[str, Any]) -> float:
    if cfg.get("rope_theta") is not None:
        return _positive_float(cfg, "rope_theta", 10_000.0)
    params = cfg.get("rope_parameters")  # transformers v5 spelling
    if isinstance(params, dict):
        if isinstance(params.get("full_attention"), dict):  # per-layer-type parameters (gemma3)
            params = params["full_attention"]
        if params.get("rope_theta") is not None:
            return _positive_float(params, "rope_theta", 10_000.0)
    return 10_000.0


def _rope_cache_positions(cfg: dict[str, Any], model_type: str, max_ctx: int) -> int | None:
    """Rows of vLLM's rotary tables when not one table of max_position_embeddings: a linear or YaRN table has
    factor × positions (YaRN's of original_max_position_embeddings), and Gemma-3's local layers have their own."""
    params = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if isinstance(params, dict) and isinstance(params.get("full_attention"), dict):  # per-layer-type (gemma3)
        params = params["full_attention"]
    kind = params.get("rope_type", params.get("type")) if isinstance(params, dict) else None
    rows = max_ctx
    if kind in ("linear", "yarn"):
        base = max_ctx
        if kind == "yarn" and params.get("original_max_position_embeddings"):
            base = _int(params, "original_max_position_embeddings")
        rows = int(base * _positive_float(params, "factor", 1.0))
    if model_type.startswith("gemma3") and cfg.get("sliding_window"):
        rows += max_ctx  # the local layers' table (rope_local_base_freq)
    return rows if rows != max_ctx else None


def _flatten(config: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The text model's keys (``text_config`` merged over the top level) and its model_type."""
    top_type = str(config.get("model_type", "") or "")
    text = config.get("text_config")
    if text is None:
        cfg, model_type = dict(config), top_type
    else:
        if not isinstance(text, dict):
            raise SpecError(f"config.json: 'text_config' must be a mapping, got {type(text).__name__}")
        model_type = str(text.get("model_type") or (f"{top_type}_text" if top_type else ""))
        # top-level keys first (tie_word_embeddings, torch_dtype, quantization_config live there),
        # the text model's own keys win
        cfg = {k: v for k, v in config.items() if k not in ("text_config", "vision_config", "audio_config")}
        cfg.update(text)
    if model_type == "gemma3" and text is None and "vision_config" not in config:
        model_type = "gemma3_text"  # a text-only gemma3 config
    defaults = _MODEL_TYPE_DEFAULTS.get(model_type, {})
    merged = dict(defaults)
    merged.update({k: v for k, v in cfg.items() if v is not None or k not in defaults})
    return merged, model_type


def _moe(cfg: dict[str, Any], num_layers: int, model_type: str) -> tuple[dict[str, Any] | None, int | None]:
    """(moe dict or None, intermediate_size to use for the dense FFN)."""
    found = _find(cfg, "num_experts")
    # granitemoe(shared/hybrid): every layer has a gated MLP of shared_intermediate_size beside its experts, the only
    # FFN where there are none (Granite-4.0-H-1B)
    granite_shared = _int(cfg, "shared_intermediate_size", required=False, default=0, allow_zero=True) \
        if model_type.startswith("granitemoe") else 0
    if found is None or found[1] in (0, None):
        return None, granite_shared or _int(cfg, "intermediate_size")
    n_experts = _int(cfg, "num_experts")
    top_k = _int(cfg, "num_experts_per_tok")
    if cfg.get("moe_intermediate_size") is not None:
        expert_size = _int(cfg, "moe_intermediate_size")
    else:  # mixtral, gpt_oss: intermediate_size is the expert width
        expert_size = _int(cfg, "intermediate_size")
    moe: dict[str, Any] = {
        "num_experts": n_experts,
        "experts_per_token": top_k,
        "expert_intermediate_size": expert_size,
    }
    n_shared = _int(cfg, "n_shared_experts", required=False, default=0, allow_zero=True)
    if n_shared:  # deepseek: one MLP of width moe_intermediate_size x n_shared_experts
        moe["num_shared_experts"] = n_shared
        moe["shared_expert_intermediate_size"] = expert_size
    shared_size = _int(cfg, "shared_expert_intermediate_size", required=False, default=0, allow_zero=True)
    if shared_size:  # qwen2_moe: one gated shared expert
        moe["num_shared_experts"] = moe.get("num_shared_experts", 0) or 1
        moe["shared_expert_intermediate_size"] = shared_size
    if granite_shared:
        moe["num_shared_experts"], moe["shared_expert_intermediate_size"] = 1, granite_shared
    llama4 = model_type in ("llama4", "llama4_text")
    if llama4:  # every MoE layer has one shared expert as wide as a routed one
        moe["num_shared_experts"], moe["shared_expert_intermediate_size"] = 1, expert_size
    dense = dense_layer_count(cfg, num_layers)
    if dense:
        if dense >= num_layers:
            raise SpecError(f"config.json: every layer is dense ({dense} of {num_layers}); not a MoE model")
        moe["num_dense_layers"] = dense
        # llama4: the dense layers' FFN is intermediate_size_mlp wide (intermediate_size is the experts')
        dense_width = "intermediate_size_mlp" if llama4 and "intermediate_size_mlp" in cfg else "intermediate_size"
        return moe, _int(cfg, dense_width)
    return moe, 0


def _attention(cfg: dict[str, Any], hidden: int, heads: int) -> dict[str, Any]:
    kv_found = _find(cfg, "num_key_value_heads")
    kv = _int(cfg, "num_key_value_heads") if kv_found else heads  # missing -> MHA
    if cfg.get("multi_query") is True and not kv_found:
        kv = 1
    if cfg.get("kv_lora_rank"):  # MLA (deepseek_v2 / deepseek_v3)
        rope = _int(cfg, "qk_rope_head_dim")
        nope = _int(cfg, "qk_nope_head_dim")
        att = {
            "kind": "mla",
            "num_heads": heads,
            "num_kv_heads": kv if heads % kv == 0 else heads,
            "head_dim": nope + rope,
            "v_head_dim": _int(cfg, "v_head_dim"),
            "kv_lora_rank": _int(cfg, "kv_lora_rank"),
            "q_lora_rank": _int(cfg, "q_lora_rank", required=False, default=0, allow_zero=True),
            "qk_rope_head_dim": rope,
            "qk_nope_head_dim": nope,
        }
        return att
    if heads % kv:
        raise SpecError(
            f"config.json: 'num_attention_heads' ({heads}) is not a multiple of 'num_key_value_heads' ({kv})"
        )
    if cfg.get("head_dim") is not None:
        head_dim = _int(cfg, "head_dim")
    else:
        if hidden % heads:
            raise SpecError(
                f"config.json: missing 'head_dim' and 'hidden_size' ({hidden}) is not a multiple of "
                f"'num_attention_heads' ({heads})"
            )
        head_dim = hidden // heads
    kind = "mha" if kv == heads else ("mqa" if kv == 1 else "gqa")
    return {"kind": kind, "num_heads": heads, "num_kv_heads": kv, "head_dim": head_dim}


def _hf_repo(config: dict[str, Any], hf_repo: str | None) -> str:
    if hf_repo:
        return hf_repo
    path = config.get("_name_or_path")
    if isinstance(path, str) and control_char_problem(path):  # it would reach names, comments, manifests
        raise SpecError(f"config.json: '_name_or_path' {control_char_problem(path)}")
    if isinstance(path, str) and path.count("/") == 1 and not path.startswith((".", "/", "~")):
        return path
    return ""


# ---------------------------------------------------------------------------------------------- API


def hf_config_to_model_dict(
    config: dict,
    model_id: str,
    name: str | None = None,
    published_total_params: float | None = None,
    *,
    hf_repo: str | None = None,
    today: str | None = None,
) -> dict:
    """A dict that validates as :class:`ModelSpec`, built from a Hugging Face config.json.

    ``published_total_params`` is the authors' parameter count; when it is None the count from
    the architecture fields (``count_params``) is used instead and ``params_source.note`` says so.
    ``hf_repo`` (e.g. ``"Qwen/Qwen3-30B-A3B"``) becomes the sources' URL; without it the config's
    ``_name_or_path`` is used when it looks like a hub id, else ``'local config.json'``.
    """
    if not isinstance(config, dict):
        raise SpecError(f"config.json: expected a JSON object, got {type(config).__name__}")
    cfg, model_type = _flatten(config)
    refuse_unsupported(cfg, model_type)

    hidden = _int(cfg, "hidden_size")
    num_layers = _int(cfg, "num_hidden_layers")
    heads = _int(cfg, "num_attention_heads")
    vocab = _int(cfg, "vocab_size")
    max_ctx = _int(cfg, "max_position_embeddings")
    tie = cfg.get("tie_word_embeddings", False)
    if not isinstance(tie, bool):
        raise SpecError(f"config.json: 'tie_word_embeddings' must be true or false, got {tie!r}")

    attention = _attention(cfg, hidden, heads)
    moe, intermediate = _moe(cfg, num_layers, model_type)
    window, n_sliding, n_linear = layer_layout(cfg, model_type, num_layers, max_ctx)
    state, linear_params = linear_state_bytes(cfg, n_linear), linear_layer_params(cfg, hidden, n_linear)

    architectures = config.get("architectures")
    architecture = architectures[0] if isinstance(architectures, list) and architectures else ""
    repo = _hf_repo(config, hf_repo)
    date = today or _dt.date.today().isoformat()
    url = f"https://huggingface.co/{repo}" if repo else "local config.json"

    d: dict[str, Any] = {
        "id": model_id,
        "name": name or (repo.split("/")[-1] if repo else model_id),
        "hf_repo": repo,
        "architecture": architecture,
        "hidden_size": hidden,
        "num_layers": num_layers,
        "intermediate_size": intermediate,
        "vocab_size": vocab,
        "max_context_tokens": max_ctx,
        "rope_theta": _rope_theta(cfg),
        "tie_word_embeddings": tie,
        "gated_mlp": model_type not in _UNGATED_MODEL_TYPES,
        "attention": attention,
    }
    rows = _rope_cache_positions(cfg, model_type, max_ctx)
    if rows:
        d["rope_cache_positions"] = rows
    if window:
        d["sliding_window_tokens"] = window
        d["num_sliding_layers"] = n_sliding
    if n_linear:
        d["num_linear_layers"] = n_linear
    if state:
        d["linear_state_bytes_per_layer"] = state
    if linear_params:
        d["linear_layer_params"] = linear_params
    if chunk := mamba_chunk_tokens(cfg, n_linear):
        d["mamba_chunk_tokens"] = chunk
    if moe:
        d["moe"] = moe
    d["native_dtype"] = _native_dtype(cfg)

    # count from the architecture fields (validating the nested parts first, so errors name them)
    where = f"{model_id} (from config.json)"
    att_spec = parse_spec(AttentionSpec, attention, f"{where} attention")
    moe_spec = parse_spec(MoeSpec, moe, f"{where} moe") if moe else None
    provisional = ModelSpec.model_construct(
        **{**d, "attention": att_spec, "moe": moe_spec, "sliding_window_tokens": window,
           "num_sliding_layers": n_sliding, "num_linear_layers": n_linear}
    )
    counted = count_params(provisional)

    params_note = IMPORT_NOTE
    if published_total_params is None:
        d["published_total_params"] = round(counted.total)
        if moe:
            d["published_active_params"] = round(counted.active)
        params_note += (
            "; no published count was given, so published_total_params"
            + (" and published_active_params are" if moe else " is")
            + " the count computed from the architecture fields (count_params)"
        )
    else:
        d["published_total_params"] = published_total_params
    d["params_source"] = {"url": url, "date": date, "note": params_note}
    d["config_source"] = {
        "url": f"{url}/blob/main/config.json" if repo else url,
        "date": date,
        "note": IMPORT_NOTE,
    }
    parse_spec(ModelSpec, d, where)  # raises SpecError naming the field
    return d


def model_dict_to_yaml(d: dict) -> str:
    """YAML text for a models/<id>.yaml file, keys in the order given."""
    return yaml.safe_dump(d, sort_keys=False, default_flow_style=False, allow_unicode=True, width=100)


def model_from_config_bytes(data: bytes, max_bytes: int) -> tuple[ModelSpec | None, str | None]:
    """(model, error) for the bytes of an uploaded config.json: at most ``max_bytes``, parsed as JSON and
    imported as above, with the id ``uploaded-<sha256 prefix>`` (the same file gets the same id).
    Never raises: any problem, however hostile the file, is one readable line in ``error``."""
    if len(data) > max_bytes:
        return None, f"config.json is {len(data):,} bytes; the limit is {max_bytes:,} bytes"
    try:
        config = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        return None, f"config.json is not valid JSON: {err}"
    except RecursionError:
        return None, "config.json is not valid JSON: nested too deeply"
    sha = hashlib.sha256(data).hexdigest()[:12]
    try:
        return ModelSpec.model_validate(hf_config_to_model_dict(config, model_id=f"uploaded-{sha}")), None
    # SpecError, pydantic errors, anything odd in a hostile file: always one readable line
    except Exception as err:  # noqa: BLE001
        return None, f"could not read this config.json: {err}"
