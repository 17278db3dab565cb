"""Helpers of :mod:`planner.io.hf_import`: reading integer keys, the layer layout (which layers are full,
sliding/chunked or linear attention, and which hold experts), the recurrent state of linear-attention layers,
the checkpoint's weight dtype, and the layer-pattern keys the importer cannot interpret, which it refuses
rather than import a model whose layers it would count wrong.

Every problem is a :class:`planner.io.catalog.SpecError` whose one-line message names the config key.
"""

from __future__ import annotations

from typing import Any

from planner.io.catalog import SpecError

ALIASES: dict[str, tuple[str, ...]] = {
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim"),
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "num_key_value_heads": ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num"),
    "intermediate_size": ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"),
    "num_experts": ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),
    "num_experts_per_tok": ("num_experts_per_tok", "experts_per_token", "moe_top_k", "num_experts_per_token"),
}

#: layer_types entries, by what the planner makes of them (anything else is refused)
_FULL_LAYER_TYPES = {"full_attention", "attention", "global_attention", "global"}
_LINEAR_LAYER_TYPES = {"linear_attention", "mamba", "mamba2", "recurrent"}

#: keys that lay layers out in a way ModelSpec cannot hold (per-layer head counts or head dims, Mamba/MoE
#: patterns, layers sharing another's KV): a config that sets one is refused, never imported as uniform layers
UNSUPPORTED_KEYS: dict[str, str] = {
    "hybrid_override_pattern": "Nemotron-H's per-layer Mamba / attention / MLP / MoE pattern",
    "hybrid_layer_pattern": "MiMo's per-layer sliding / full attention pattern, with head counts of its own",
    "global_head_dim": "Gemma-4's global layers, with a head_dim of their own",
    "swa_num_key_value_heads": "sliding layers with KV heads of their own",
    "num_kv_shared_layers": "layers that reuse another layer's KV cache (Gemma-3n / Gemma-4)",
    "layers_block_type": "a per-layer block-type pattern (Jamba / Zamba style)",
    "attn_layer_period": "Jamba's attention-every-n-layers pattern",
    "attn_layer_offset": "Jamba's attention-every-n-layers pattern",
    "expert_layer_period": "Jamba's MoE-every-n-layers pattern",
    "expert_layer_offset": "Jamba's MoE-every-n-layers pattern",
    "attn_type_list": "MiniMax-01's per-layer lightning / softmax attention pattern",
    "block_types": "RecurrentGemma's per-layer recurrent / attention pattern",
    "hybrid_layer_ids": "Zamba2's shared-attention layer ids",
    "attn_layer_indices": "a hybrid model's attention layer indices (Bamba style)",
    "linear_attn_config": "Kimi-Linear's per-layer linear / full attention pattern",
}
UNSUPPORTED_MODEL_TYPES = {"gemma4": "Gemma-4", "gemma4_text": "Gemma-4", "gemma3n": "Gemma-3n",
                           "gemma3n_text": "Gemma-3n",
                           "falcon_h1": "Falcon-H1, attention and a Mamba-2 mixer side by side in every layer",
                           "mamba": "a Mamba state-space model without attention layers",
                           "mamba2": "a Mamba-2 state-space model without attention layers",
                           "falcon_mamba": "a Mamba state-space model without attention layers"}

#: Gated DeltaNet (Qwen3-Next, Qwen3.5) keys that size a linear-attention layer's recurrent state
_GDN_KEYS = ("linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim", "linear_num_key_heads",
             "linear_conv_kernel_dim")

#: Mamba-2 mixer keys (GraniteMoeHybrid's "mamba" layers): heads, head dim, state size, groups, conv kernel
_MAMBA2_KEYS = ("mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_d_conv")

#: compressed-tensors weights (num_bits, type) -> planner weight dtype
_COMPRESSED_TENSORS_DTYPES = {(8, "float"): "fp8", (8, "int"): "int8", (4, "int"): "int4"}


def find(cfg: dict[str, Any], canonical: str) -> tuple[str, Any] | None:
    """(key actually present, value) for the first alias of ``canonical`` with a non-null value."""
    for key in ALIASES.get(canonical, (canonical,)):
        if cfg.get(key) is not None:
            return key, cfg[key]
    return None


def read_int(cfg: dict[str, Any], canonical: str, *, required: bool = True, default: int | None = None,
             allow_zero: bool = False) -> int | None:
    found = find(cfg, canonical)
    if found is None:
        if required and default is None:
            aliases = ALIASES.get(canonical, (canonical,))
            also = f" (also looked for {', '.join(aliases[1:])})" if len(aliases) > 1 else ""
            raise SpecError(f"config.json: missing '{canonical}'{also}")
        return default
    key, value = found
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
        isinstance(value, float) and not value.is_integer()
    ):
        raise SpecError(f"config.json: '{key}' must be an integer, got {value!r}")
    value = int(value)
    if value < 0 or (value == 0 and not allow_zero):
        raise SpecError(f"config.json: '{key}' must be {'>= 0' if allow_zero else '> 0'}, got {value}")
    return value


def _flags(cfg: dict[str, Any], key: str, num_layers: int) -> list[int]:
    """A list of 0/1 flags, one per layer."""
    value = cfg[key]
    if not isinstance(value, list) or len(value) != num_layers or any(
        isinstance(x, bool) or x not in (0, 1) for x in value
    ):
        raise SpecError(f"config.json: '{key}' must be a list of {num_layers} flags (0 or 1), one per layer")
    return value


# ------------------------------------------------------------------------------------------ refusals


def refuse_unsupported(cfg: dict[str, Any], model_type: str) -> None:
    """SpecError for an architecture whose layers ModelSpec cannot describe (see :data:`UNSUPPORTED_KEYS`)."""
    if model_type in UNSUPPORTED_MODEL_TYPES:
        raise SpecError(f"config.json: 'model_type' {model_type!r} ({UNSUPPORTED_MODEL_TYPES[model_type]}) is not "
                        "supported: its layers differ in ways the planner's model spec cannot hold")
    for key, what in UNSUPPORTED_KEYS.items():
        if cfg.get(key) not in (None, 0, "", [], {}):
            raise SpecError(f"config.json: '{key}' ({what}) is not supported: the importer cannot lay out this "
                            "architecture's layers, and would count them wrong")
    # Mamba-2 mixer keys need a layer_types list saying which layers are Mamba (Granite-4.0-H); one listing attention
    # layers only (Granite-4.0-Micro, whose config keeps the mamba_* keys) has none
    mamba_key = next((k for k in _MAMBA2_KEYS if cfg.get(k) is not None), None)
    if mamba_key and cfg.get("layer_types") is None:
        raise SpecError(f"config.json: '{mamba_key}' (Mamba-2 mixers) without a 'layer_types' list is not supported: "
                        "the importer cannot tell which layers are Mamba and would count them as attention")


# -------------------------------------------------------------------------------------- layer layout


def _rule_layer_types(cfg: dict[str, Any], model_type: str, num_layers: int) -> list[str] | None:
    """layer_types for configs that give the layout as a rule rather than a list."""
    if model_type in ("llama4", "llama4_text"):
        # Llama4TextConfig: layers with no_rope_layers[i] == 1 use RoPE and chunked local attention, the
        # rest (by default every no_rope_layer_interval-th, 4th) are global; attention_chunk_size null: none chunk
        if cfg.get("attention_chunk_size", 8192) is None:
            return None
        if cfg.get("no_rope_layers"):
            flags = _flags(cfg, "no_rope_layers", num_layers)
        else:
            every = read_int(cfg, "no_rope_layer_interval", default=4)
            flags = [int((i + 1) % every != 0) for i in range(num_layers)]
        return ["chunked_attention" if f else "full_attention" for f in flags]
    if cfg.get("full_attention_interval") is not None:  # qwen3_next: layer i is full iff (i + 1) % interval == 0
        every = read_int(cfg, "full_attention_interval")
        return ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(num_layers)]
    return None


def _window(cfg: dict[str, Any], key: str, default: int | None = None) -> int | None:
    window = cfg.get(key, default)
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window <= 0):
        raise SpecError(f"config.json: '{key}' must be a positive integer or null, got {window!r}")
    return window


def layer_layout(cfg: dict[str, Any], model_type: str, num_layers: int, max_ctx: int) -> tuple[int | None, int, int]:
    """(sliding_window_tokens, num_sliding_layers, num_linear_layers).  Chunked local attention (Llama-4) is
    held as sliding-window layers whose window is attention_chunk_size: both keep at most that many tokens.  For a
    config :func:`refuse_unsupported` has passed."""
    window = _window(cfg, "sliding_window")
    layer_types = cfg.get("layer_types")
    if layer_types is None:
        layer_types = _rule_layer_types(cfg, model_type, num_layers)
    if layer_types is not None:
        if not isinstance(layer_types, list) or not all(isinstance(t, str) for t in layer_types):
            raise SpecError("config.json: 'layer_types' must be a list of strings")
        if len(layer_types) != num_layers:
            raise SpecError(
                f"config.json: 'layer_types' has {len(layer_types)} entries but num_hidden_layers is {num_layers}"
            )
        for i, t in enumerate(layer_types):
            if t not in _FULL_LAYER_TYPES | _LINEAR_LAYER_TYPES and "sliding" not in t and t != "chunked_attention":
                raise SpecError(f"config.json: 'layer_types' entry {t!r} (layer {i}) is a layer kind the importer "
                                "does not interpret; this architecture is not supported")
        n_linear = sum(1 for t in layer_types if t in _LINEAR_LAYER_TYPES)
        n_sliding = sum(1 for t in layer_types if "sliding" in t)
        n_chunked = layer_types.count("chunked_attention")
        if n_chunked:
            chunk = _window(cfg, "attention_chunk_size", 8192 if model_type.startswith("llama4") else None)
            if not chunk:
                raise SpecError("config.json: 'layer_types' has chunked_attention layers but 'attention_chunk_size' "
                                "is missing")
            if n_sliding and window != chunk:
                raise SpecError(f"config.json: 'layer_types' mixes sliding layers (sliding_window {window}) and "
                                f"chunked layers (attention_chunk_size {chunk}); one window per model is supported")
            window = chunk
        elif n_sliding and not window:
            raise SpecError("config.json: 'layer_types' has sliding layers but 'sliding_window' is missing")
        n_sliding += n_chunked
        return (window if n_sliding else None), n_sliding, n_linear
    if window is None or cfg.get("use_sliding_window") is False or window >= max_ctx:
        return None, 0, 0
    pattern = cfg.get("sliding_window_pattern")
    if pattern is not None:
        if isinstance(pattern, bool) or not isinstance(pattern, int) or pattern <= 0:
            raise SpecError(f"config.json: 'sliding_window_pattern' must be a positive integer, got {pattern!r}")
        # layer i is global when (i + 1) % pattern == 0 (gemma2/gemma3)
        return window, num_layers - num_layers // pattern, 0
    if cfg.get("use_sliding_window") and cfg.get("max_window_layers") is not None:
        # qwen2: layers with index >= max_window_layers use the window
        mwl = read_int(cfg, "max_window_layers", allow_zero=True)
        n = max(0, num_layers - mwl)
        return (window if n else None), n, 0
    # mistral v0.1 / phi3 style: every layer slides (a layer pattern it cannot read was refused before, by the
    # importer's refuse_unsupported)
    return window, num_layers, 0


def _gdn_dims(cfg: dict[str, Any], num_linear: int) -> tuple[int, ...] | None:
    """(value heads, key dim, value dim, key heads, conv kernel) of the config's Gated DeltaNet layers; None where it
    has linear layers without such keys, or none."""
    if not num_linear or all(cfg.get(k) is None for k in _GDN_KEYS):
        return None
    return tuple(read_int(cfg, k) for k in _GDN_KEYS)


def _mamba2_dims(cfg: dict[str, Any], num_linear: int) -> tuple[int, ...] | None:
    """(heads, head dim, state size, groups, conv kernel) of the config's Mamba-2 layers; None where it has linear
    layers without such keys, or none."""
    if not num_linear or all(cfg.get(k) is None for k in _MAMBA2_KEYS):
        return None
    return tuple(read_int(cfg, k) for k in _MAMBA2_KEYS)


def linear_state_bytes(cfg: dict[str, Any], num_linear: int) -> int:
    """Recurrent state one request holds in one linear layer, 2-byte (bf16) numbers.  A Gated DeltaNet layer
    (Qwen3-Next, Qwen3.5): the delta-rule state (value heads × key dim × value dim) and the causal conv's last
    kernel − 1 inputs of the q, k and v channels.  A Mamba-2 layer (Granite-4.0-H; vLLM's MambaMixer2 state): the
    SSM state (heads × head dim × state size) and the conv's last kernel − 1 inputs of its x, B and C channels (heads
    × head dim + 2 × groups × state size).  0 where the config has neither's keys."""
    dims = _gdn_dims(cfg, num_linear)
    if dims is not None:
        v_heads, k_dim, v_dim, k_heads, kernel = dims
        state = v_heads * k_dim * v_dim
        conv = (2 * k_heads * k_dim + v_heads * v_dim) * (kernel - 1)
        return (state + conv) * 2
    dims = _mamba2_dims(cfg, num_linear)
    if dims is None:
        return 0
    heads, head_dim, d_state, groups, kernel = dims
    return (heads * head_dim * d_state + (heads * head_dim + 2 * groups * d_state) * (kernel - 1)) * 2


def mamba_chunk_tokens(cfg: dict[str, Any], num_linear: int) -> int:
    """The chunk of the config's Mamba-2 layers' SSD scan (``mamba_chunk_size``; transformers' GraniteMoeHybridConfig
    default 256), which vLLM 0.26 aligns their cached states to when prefix caching is on; 0 without Mamba-2 layers
    (Gated DeltaNet's state is cached in vLLM's 'align' mode instead)."""
    if _mamba2_dims(cfg, num_linear) is None:
        return 0
    return read_int(cfg, "mamba_chunk_size", default=256)


def linear_layer_params(cfg: dict[str, Any], hidden: int, num_linear: int) -> int:
    """Parameters of one linear layer's mixer.  A Gated DeltaNet layer (Qwen3-Next, Qwen3.5; transformers
    Qwen3NextGatedDeltaNet): the q, k, v and gate projections from the hidden state, the beta and decay projections
    (one per value head each), the depthwise causal conv over q, k and v, the per-head decay terms, the gated norm and
    the output projection.  A Mamba-2 layer (transformers GraniteMoeHybridMambaLayer): the input projection to z, x, B,
    C and dt (2 × inner + 2 × groups × state + heads; biased with ``mamba_proj_bias``), the depthwise conv over x, B and
    C (its bias with ``mamba_conv_bias``, default on), dt bias, A and D per head, the gated norm and the output
    projection.  0 where the config has neither's keys (the parameter count then takes 4 x hidden^2 a layer)."""
    dims = _gdn_dims(cfg, num_linear)
    if dims is not None:
        v_heads, k_dim, v_dim, k_heads, kernel = dims
        key, value = k_heads * k_dim, v_heads * v_dim
        return (hidden * (2 * key + 2 * value) + hidden * 2 * v_heads + (2 * key + value) * kernel + 2 * v_heads
                + v_dim + value * hidden)
    dims = _mamba2_dims(cfg, num_linear)
    if dims is None:
        return 0
    heads, head_dim, d_state, groups, kernel = dims
    inner, proj_bias = heads * head_dim, cfg.get("mamba_proj_bias") is True
    conv = inner + 2 * groups * d_state  # x, B, C
    in_proj = (hidden + proj_bias) * (inner + conv + heads)  # z, x, B, C, dt
    conv_params = conv * (kernel + (cfg.get("mamba_conv_bias", True) is not False))
    return in_proj + conv_params + 3 * heads + inner + (inner + proj_bias) * hidden


def dense_layer_count(cfg: dict[str, Any], num_layers: int) -> int:
    """Layers whose FFN is dense rather than experts, from whichever placement keys the config has: an explicit
    ``moe_layers`` list (Llama-4) or ``moe_layer_freq`` flags, else layer i holds experts when it is past
    ``first_k_dense_replace`` (deepseek), i % ``moe_layer_freq`` == 0 (deepseek), not in ``mlp_only_layers``,
    (i + 1) % ``decoder_sparse_step`` == 0 (qwen2_moe) and (i + 1) % ``interleave_moe_layer_step`` == 0 (Llama-4)."""
    explicit = cfg.get("moe_layers")
    if explicit is not None:
        if not isinstance(explicit, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < num_layers for i in explicit
        ):
            raise SpecError(f"config.json: 'moe_layers' must be a list of layer indices below {num_layers}")
        return num_layers - len(set(explicit))
    if isinstance(cfg.get("moe_layer_freq"), list):
        return _flags(cfg, "moe_layer_freq", num_layers).count(0)
    mlp_only = cfg.get("mlp_only_layers") or []
    if not isinstance(mlp_only, list):
        raise SpecError("config.json: 'mlp_only_layers' must be a list of layer indices")
    first = read_int(cfg, "first_k_dense_replace", required=False, default=0, allow_zero=True)
    freq = read_int(cfg, "moe_layer_freq", required=False, default=1)
    step = read_int(cfg, "decoder_sparse_step", required=False, default=1)
    interleave = read_int(cfg, "interleave_moe_layer_step", required=False, default=1)
    return sum(1 for i in range(num_layers) if i < first or i % freq or i in mlp_only or (i + 1) % step
               or (i + 1) % interleave)


# ------------------------------------------------------------------------------------------ weights


def _compressed_tensors_dtype(q: dict[str, Any]) -> str | None:
    """The weight dtype of a compressed-tensors checkpoint (its config_groups' weights), None if none is quantised."""
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise SpecError("config.json: 'quantization_config.config_groups' must be a non-empty mapping "
                        "(quant_method compressed-tensors)")
    found: set[str] = set()
    for name, group in groups.items():
        where = f"quantization_config.config_groups.{name!r}.weights"
        weights = group.get("weights") if isinstance(group, dict) else None
        if weights is None:
            continue  # activations / KV only
        if not isinstance(weights, dict):
            raise SpecError(f"config.json: '{where}' must be a mapping")
        bits, kind = weights.get("num_bits"), weights.get("type")
        known = isinstance(bits, int) and not isinstance(bits, bool) and isinstance(kind, str)
        dtype = _COMPRESSED_TENSORS_DTYPES.get((bits, kind)) if known else None
        if dtype is None:
            raise SpecError(f"config.json: '{where}' is num_bits {bits!r} type {kind!r}, a weight format the "
                            "planner has no dtype for (it has 8-bit float fp8, 8-bit int int8, 4-bit int int4)")
        found.add(dtype)
    if len(found) > 1:
        raise SpecError(f"config.json: 'quantization_config.config_groups' mix weight formats "
                        f"({', '.join(sorted(found))}); the planner models one weight dtype per checkpoint")
    return found.pop() if found else None


def native_dtype(cfg: dict[str, Any]) -> str:
    q = cfg.get("quantization_config")
    if isinstance(q, dict):
        method = str(q.get("quant_method", "")).lower()
        bits = q.get("bits") or q.get("w_bit")
        if method == "compressed-tensors":
            dtype = _compressed_tensors_dtype(q)
            if dtype:
                return dtype
        elif method in ("fp8", "fbgemm_fp8") or "fp8" in method:
            return "fp8"
        if method == "mxfp4":
            return "mxfp4"
        if method in ("gptq", "awq", "marlin") and bits == 4:
            return "int4"
        if method == "bitsandbytes":
            return "nf4" if q.get("load_in_4bit") else "int8"
        if method in ("gptq", "awq") and bits == 8:
            return "int8"
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16").lower()
    return "fp16" if dtype in ("float16", "fp16", "half") else "bf16"
