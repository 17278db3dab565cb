"""The model and GPU catalogs, their sources, the spec loader's errors, and ``import-hf``."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
import yaml

from planner.io import catalog
from planner.io.catalog import SpecError, load_spec_file, parse_spec
from planner.io.hf_import import hf_config_to_model_dict, model_dict_to_yaml
from planner.specs import GpuSpec, ModelSpec, count_params

MODEL_IDS = [
    "mistral-7b-v0.3", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "qwen2.5-7b", "qwen2.5-32b",
    "qwen2.5-72b", "qwen3-30b-a3b", "qwen3-235b-a22b", "mixtral-8x7b", "deepseek-v3", "gpt-oss-20b",
    "gpt-oss-120b", "gemma-3-27b",
]
GPU_IDS = [
    "a10g", "l4", "l40s", "a100-sxm-40gb", "a100-sxm-80gb", "h100-pcie", "h100-sxm", "h200-sxm", "b200",
    "mi300x", "rtx-4090",
]
MODEL_FILES = sorted(catalog.MODELS_DIR.glob("*.yaml"))
GPU_FILES = sorted(catalog.HARDWARE_DIR.glob("*.yaml"))


def _iso_date(s: str) -> dt.date:
    return dt.date.fromisoformat(s)


# ------------------------------------------------------------------------------------ catalogs load


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.name)
def test_every_model_yaml_loads(path: Path) -> None:
    spec = load_spec_file(ModelSpec, path)
    assert spec.id == path.stem


@pytest.mark.parametrize("path", GPU_FILES, ids=lambda p: p.name)
def test_every_gpu_yaml_loads(path: Path) -> None:
    spec = load_spec_file(GpuSpec, path)
    assert spec.id == path.stem


def test_catalog_lists_every_required_id() -> None:
    assert set(MODEL_IDS) <= set(catalog.models())
    assert set(GPU_IDS) <= set(catalog.gpus())
    for mid in MODEL_IDS:
        assert catalog.model(mid).id == mid
    for gid in GPU_IDS:
        assert catalog.gpu(gid).id == gid


def test_unknown_id_is_a_spec_error_listing_the_known_ones() -> None:
    with pytest.raises(SpecError, match="unknown id 'h100-nvl'.*h100-sxm"):
        catalog.gpu("h100-nvl")


# ----------------------------------------------------------------------------------- model numbers


@pytest.mark.parametrize("mid", MODEL_IDS)
def test_counted_params_within_2pct_of_published(mid: str) -> None:
    m = catalog.model(mid)
    c = count_params(m)
    err = abs(c.total - m.published_total_params) / m.published_total_params
    assert err <= 0.02, f"{mid}: counted {c.total / 1e9:.3f}B vs published {m.published_total_params / 1e9:.3f}B"
    if m.is_moe:
        assert m.published_active_params, f"{mid}: a MoE entry needs published_active_params"
        err = abs(c.active - m.published_active_params) / m.published_active_params
        assert err <= 0.02, f"{mid}: active {c.active / 1e9:.3f}B vs {m.published_active_params / 1e9:.3f}B"


@pytest.mark.parametrize(
    "mid, total_b, active_b",
    [
        ("mistral-7b-v0.3", 7.248, None),
        ("llama-3.1-8b", 8.030, None),
        ("llama-3.1-405b", 405.853, None),
        ("qwen3-30b-a3b", 30.532, 3.353),
        ("qwen3-235b-a22b", 235.094, 22.191),
        ("mixtral-8x7b", 46.703, 12.880),
        ("deepseek-v3", 671.026, 37.552),
        ("gpt-oss-20b", 20.908, 4.186),
        ("gpt-oss-120b", 116.789, 5.710),
        ("gemma-3-27b", 27.009, None),
    ],
)
def test_counted_params_pinned(mid: str, total_b: float, active_b: float | None) -> None:
    """The counter's numbers for the catalog, pinned so a field edit that moves them is noticed."""
    c = count_params(catalog.model(mid))
    assert c.total / 1e9 == pytest.approx(total_b, abs=0.001)
    if active_b is not None:
        assert c.active / 1e9 == pytest.approx(active_b, abs=0.001)


def test_architecture_details() -> None:
    ds = catalog.model("deepseek-v3")
    assert ds.attention.kind == "mla" and ds.attention.kv_lora_rank == 512 and ds.attention.qk_rope_head_dim == 64
    assert ds.attention.q_lora_rank == 1536 and ds.attention.qk_nope_head_dim == 128 and ds.attention.value_dim == 128
    assert ds.moe.num_experts == 256 and ds.moe.experts_per_token == 8 and ds.moe.num_shared_experts == 1
    assert ds.moe.num_dense_layers == 3 and ds.moe.expert_intermediate_size == 2048
    assert ds.native_dtype == "fp8"
    gemma = catalog.model("gemma-3-27b")
    assert (gemma.num_layers, gemma.sliding_window_tokens, gemma.num_sliding_layers) == (62, 1024, 52)
    assert gemma.num_full_attention_layers == 10 and gemma.tie_word_embeddings
    for mid, layers in (("gpt-oss-20b", 24), ("gpt-oss-120b", 36)):
        g = catalog.model(mid)
        assert g.num_layers == layers and g.num_sliding_layers == layers // 2 and g.sliding_window_tokens == 128
        assert g.native_dtype == "mxfp4"
    assert catalog.model("mistral-7b-v0.3").sliding_window_tokens is None
    for mid in MODEL_IDS:
        m = catalog.model(mid)
        assert m.attention.num_heads % m.attention.num_kv_heads == 0


@pytest.mark.parametrize("mid", MODEL_IDS)
def test_model_sources_and_quality(mid: str) -> None:
    m = catalog.model(mid)
    for src in (m.params_source, m.config_source):
        assert src.url.startswith("https://"), f"{mid}: {src.url}"
        _iso_date(src.date)
    assert m.quality is not None, f"{mid}: needs a published benchmark score"
    assert m.quality.source.url.startswith("https://")
    _iso_date(m.quality.source.date)
    assert "TODO" not in m.quality.source.note and "TODO" not in m.quality.source.url
    assert re.search(r"MMLU", m.quality.benchmark)


# ------------------------------------------------------------------------------------- GPU numbers


@pytest.mark.parametrize("gid", GPU_IDS)
def test_gpu_has_a_source_for_every_required_field(gid: str) -> None:
    g = catalog.gpu(gid)
    for key in GpuSpec.REQUIRED_SOURCES:
        src = g.sources.get(key)
        assert src is not None, f"{gid}: no source for {key}"
        assert src.url.startswith("https://"), f"{gid}.{key}: url {src.url!r}"
        assert "TODO" not in src.url and "TODO" not in src.note
        assert _iso_date(src.date) <= dt.date(2026, 12, 31)
    assert g.price_source.note, f"{gid}: the price note must name the provider"


@pytest.mark.parametrize("gid", GPU_IDS)
def test_gpu_numbers_are_consistent(gid: str) -> None:
    g = catalog.gpu(gid)
    # the usable capacity is a little under the marketed binary size (ECC / reserved memory)
    marketed = float(re.match(r"[\d.]+", g.memory_marketed).group())
    unit = 2**30 if g.memory_stated_as == "GiB" else 1e9
    assert 0.9 < g.memory_bytes / (marketed * unit) <= 1.0, f"{gid}: {g.memory_bytes} vs {g.memory_marketed}"
    f = g.peak_flops_per_s
    assert f["bf16"] == f["fp16"] or gid == "rtx-4090"
    if "fp8" in f:  # 8-bit tensor cores run at twice the 16-bit rate on every GPU listed
        # (2%: the L40S datasheet prints bf16 362.05 but fp8 733 dense, not 724.1)
        assert f["fp8"] == pytest.approx(2 * f["bf16"], rel=0.02)
    if "fp4" in f:
        assert f["fp4"] == pytest.approx(2 * f["fp8"], rel=0.01)
    assert 1e11 < g.hbm_bandwidth_bytes_per_s < 1e13
    assert 1e10 <= g.interconnect_bandwidth_bytes_per_s <= 1e12
    assert 0.1 < g.price_usd_per_hour < 20


def test_nvidia_smi_capacities() -> None:
    mib = {gid: catalog.gpu(gid).memory_bytes / 2**20 for gid in GPU_IDS}
    assert mib["h100-sxm"] == mib["h100-pcie"] == 81559
    assert mib["a100-sxm-80gb"] == 81920 and mib["a100-sxm-40gb"] == 40960
    assert mib["h200-sxm"] == 143771 and mib["b200"] == 183359
    assert catalog.gpu("mi300x").memory_bytes == 205_822_885_888
    assert catalog.gpu("mi300x").vendor == "amd"
    assert set(catalog.gpu("b200").peak_flops_per_s) == {"bf16", "fp16", "fp8", "int8", "fp4"}
    assert "fp8" not in catalog.gpu("a100-sxm-80gb").peak_flops_per_s


# ---------------------------------------------------------------------------------- loader errors


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_malformed_yaml_is_a_spec_error_with_the_line(tmp_path: Path) -> None:
    p = _write(tmp_path, "broken.yaml", "id: broken\nhidden_size: [4096\nnum_layers: 32\n")
    with pytest.raises(SpecError, match=r"broken\.yaml: malformed YAML at line \d+"):
        load_spec_file(ModelSpec, p)


def _model_doc(**overrides) -> dict:
    doc = yaml.safe_load((catalog.MODELS_DIR / "mistral-7b-v0.3.yaml").read_text())
    doc.update(overrides)
    return doc


def test_wrong_field_type_names_the_field(tmp_path: Path) -> None:
    p = _write(tmp_path, "mistral-7b-v0.3.yaml", yaml.safe_dump(_model_doc(hidden_size="four thousand")))
    with pytest.raises(SpecError) as e:
        load_spec_file(ModelSpec, p)
    msg = str(e.value)
    assert "mistral-7b-v0.3.yaml" in msg and "hidden_size" in msg and "\n" not in msg


def test_wrong_nested_field_type_names_the_path(tmp_path: Path) -> None:
    doc = _model_doc()
    doc["attention"]["num_kv_heads"] = "eight"
    p = _write(tmp_path, "mistral-7b-v0.3.yaml", yaml.safe_dump(doc))
    with pytest.raises(SpecError, match=r"attention\.num_kv_heads"):
        load_spec_file(ModelSpec, p)


def test_typo_key_is_named(tmp_path: Path) -> None:
    p = _write(tmp_path, "mistral-7b-v0.3.yaml", yaml.safe_dump(_model_doc(hiden_size=4096)))
    with pytest.raises(SpecError, match="hiden_size"):
        load_spec_file(ModelSpec, p)


def test_gpu_missing_source_is_named(tmp_path: Path) -> None:
    doc = yaml.safe_load((catalog.HARDWARE_DIR / "h100-sxm.yaml").read_text())
    del doc["sources"]["price_usd_per_hour"]
    p = _write(tmp_path, "h100-sxm.yaml", yaml.safe_dump(doc))
    with pytest.raises(SpecError, match="missing a source for price_usd_per_hour"):
        load_spec_file(GpuSpec, p)


def test_gpu_wrong_type_names_the_field(tmp_path: Path) -> None:
    doc = yaml.safe_load((catalog.HARDWARE_DIR / "h100-sxm.yaml").read_text())
    doc["peak_flops_per_s"]["bf16"] = "fast"
    p = _write(tmp_path, "h100-sxm.yaml", yaml.safe_dump(doc))
    with pytest.raises(SpecError, match=r"peak_flops_per_s\.bf16"):
        load_spec_file(GpuSpec, p)


def test_params_far_from_published_is_rejected() -> None:
    with pytest.raises(SpecError, match="published_total_params"):
        parse_spec(ModelSpec, _model_doc(published_total_params=9e9), "x.yaml")


# ----------------------------------------------------------------------------------------- import-hf
# Real config.json files (hub copies, 2025), trimmed only of keys the importer never reads.

MISTRAL_7B_V03 = {
    "architectures": ["MistralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
    "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.42.0.dev0", "use_cache": True, "vocab_size": 32768,
}

QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144,
    "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe",
    "moe_intermediate_size": 768, "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4, "output_router_logits": False,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001,
    "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0", "use_cache": True, "use_sliding_window": False, "vocab_size": 151936,
}

DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "aux_loss_alpha": 0.001, "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1, "first_k_dense_replace": 3,
    "hidden_act": "silu", "hidden_size": 7168, "initializer_range": 0.02, "intermediate_size": 18432,
    "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256,
    "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 61, "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "pretraining_tp": 1,
    "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
    "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                     "original_max_position_embeddings": 4096, "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "seq_aux": True,
    "tie_word_embeddings": False, "topk_group": 4, "topk_method": "noaux_tc", "torch_dtype": "bfloat16",
    "transformers_version": "4.33.1", "use_cache": True, "v_head_dim": 128, "vocab_size": 129280,
}

# google/gemma-3-27b-it: the text_config leaves vocab_size, rope_theta, max_position_embeddings,
# sliding_window_pattern and tie_word_embeddings to Gemma3TextConfig's defaults.
GEMMA3_27B_IT = {
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
    "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02,
    "mm_tokens_per_image": 256, "model_type": "gemma3",
    "text_config": {
        "head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504, "model_type": "gemma3_text",
        "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16,
        "query_pre_attn_scalar": 168, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        "sliding_window": 1024,
    },
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
    "vision_config": {
        "hidden_size": 1152, "image_size": 896, "intermediate_size": 4304, "model_type": "siglip_vision_model",
        "num_attention_heads": 16, "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False,
    },
}

GPT_OSS_20B = {
    "architectures": ["GptOssForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
    "eos_token_id": 200002, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880,
    "initial_context_length": 4096, "initializer_range": 0.02, "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 12, "max_position_embeddings": 131072,
    "model_type": "gpt_oss", "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 24,
    "num_key_value_heads": 8, "num_local_experts": 32, "output_router_logits": False, "pad_token_id": 199999,
    "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                       "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
                     "rope_type": "yarn", "truncate": False},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
    "tie_word_embeddings": False, "transformers_version": "4.55.0.dev0", "use_cache": True, "vocab_size": 201088,
}

QWEN25_7B = {
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02,
    "intermediate_size": 18944, "max_position_embeddings": 131072, "max_window_layers": 28, "model_type": "qwen2",
    "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.1", "use_cache": True, "use_mrope": False, "use_sliding_window": False,
    "vocab_size": 152064,
}

#: what decides the KV cache (and the weight/FLOP model): must match the catalog entry exactly
KV_FIELDS = (
    "hidden_size", "num_layers", "intermediate_size", "vocab_size", "max_context_tokens", "rope_theta",
    "tie_word_embeddings", "gated_mlp", "attention", "sliding_window_tokens", "num_sliding_layers",
    "num_linear_layers", "moe", "native_dtype",
)


@pytest.mark.parametrize(
    "mid, config, repo",
    [
        ("mistral-7b-v0.3", MISTRAL_7B_V03, "mistralai/Mistral-7B-v0.3"),
        ("qwen3-30b-a3b", QWEN3_30B_A3B, "Qwen/Qwen3-30B-A3B"),
        ("deepseek-v3", DEEPSEEK_V3, "deepseek-ai/DeepSeek-V3"),
        ("gemma-3-27b", GEMMA3_27B_IT, "google/gemma-3-27b-it"),
        ("gpt-oss-20b", GPT_OSS_20B, "openai/gpt-oss-20b"),
        ("qwen2.5-7b", QWEN25_7B, "Qwen/Qwen2.5-7B"),
    ],
)
def test_import_hf_reproduces_the_catalog(mid: str, config: dict, repo: str, tmp_path: Path) -> None:
    want = catalog.model(mid)
    d = hf_config_to_model_dict(config, mid, published_total_params=want.published_total_params, hf_repo=repo)
    if want.published_active_params:
        d["published_active_params"] = want.published_active_params
    got = parse_spec(ModelSpec, d, mid)
    for field in KV_FIELDS:
        assert getattr(got, field) == getattr(want, field), f"{mid}.{field}"
    assert got.architecture == want.architecture
    assert got.params_source.note == "imported by planner import-hf"
    assert got.params_source.url == f"https://huggingface.co/{repo}"
    # YAML text round trip through the real loader
    p = tmp_path / f"{mid}.yaml"
    p.write_text(model_dict_to_yaml(d), encoding="utf-8")
    assert load_spec_file(ModelSpec, p) == got


def test_import_without_published_count_uses_the_computed_one() -> None:
    d = hf_config_to_model_dict(QWEN3_30B_A3B, "qwen3-30b-a3b", today="2026-11-29")
    m = parse_spec(ModelSpec, d, "x")
    c = count_params(m)
    assert m.published_total_params == round(c.total) and m.published_active_params == round(c.active)
    assert "computed" in m.params_source.note and "count_params" in m.params_source.note
    assert m.params_source.url == "local config.json" and m.params_source.date == "2026-11-29"
    assert m.name == "qwen3-30b-a3b"


def test_import_uses_name_or_path_as_the_repo() -> None:
    d = hf_config_to_model_dict({**MISTRAL_7B_V03, "_name_or_path": "mistralai/Mistral-7B-v0.3"}, "m", name="M")
    assert d["hf_repo"] == "mistralai/Mistral-7B-v0.3" and d["name"] == "M"
    assert d["config_source"]["url"] == "https://huggingface.co/mistralai/Mistral-7B-v0.3/blob/main/config.json"
    d = hf_config_to_model_dict({**MISTRAL_7B_V03, "_name_or_path": "/models/mistral"}, "m")
    assert d["hf_repo"] == "" and d["config_source"]["url"] == "local config.json"


# Llama-2-7B shape with the older spelling: no num_key_value_heads, no head_dim
LLAMA_STYLE_MHA = {
    "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 11008,
    "max_position_embeddings": 4096, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
    "rms_norm_eps": 1e-05, "tie_word_embeddings": False, "torch_dtype": "float16", "vocab_size": 32000,
}


def test_import_defaults_mha_and_head_dim() -> None:
    m = parse_spec(ModelSpec, hf_config_to_model_dict(LLAMA_STYLE_MHA, "llama-2-7b"), "x")
    assert m.attention.kind == "mha" and m.attention.num_kv_heads == 32 and m.attention.head_dim == 128
    assert m.native_dtype == "fp16" and m.rope_theta == 10000.0
    assert count_params(m).total / 1e9 == pytest.approx(6.738, abs=0.001)  # Llama-2-7B: 6.74B


def test_import_phi3_and_mixtral_styles() -> None:
    phi3 = {  # microsoft/Phi-3-mini-4k-instruct
        "architectures": ["Phi3ForCausalLM"], "hidden_size": 3072, "intermediate_size": 8192,
        "max_position_embeddings": 4096, "model_type": "phi3", "num_attention_heads": 32, "num_hidden_layers": 32,
        "num_key_value_heads": 32, "rope_theta": 10000.0, "sliding_window": 2047, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "vocab_size": 32064,
    }
    m = parse_spec(ModelSpec, hf_config_to_model_dict(phi3, "phi-3-mini"), "x")
    assert m.attention.head_dim == 96 and m.sliding_window_tokens == 2047 and m.num_sliding_layers == 32
    assert count_params(m).total / 1e9 == pytest.approx(3.82, abs=0.01)  # Phi-3-mini: 3.8B
    mixtral = {
        "architectures": ["MixtralForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
        "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32,
        "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
        "rope_theta": 1e6, "sliding_window": None, "tie_word_embeddings": False, "vocab_size": 32000,
    }
    m = parse_spec(ModelSpec, hf_config_to_model_dict(mixtral, "mixtral-8x7b"), "x")
    want = catalog.model("mixtral-8x7b")
    assert (m.moe, m.intermediate_size, m.attention) == (want.moe, want.intermediate_size, want.attention)


def test_import_qwen2_moe_shared_expert_and_sparse_step() -> None:
    cfg = {  # Qwen/Qwen1.5-MoE-A2.7B shape, with two dense layers added via mlp_only_layers
        "architectures": ["Qwen2MoeForCausalLM"], "decoder_sparse_step": 1, "hidden_size": 2048,
        "intermediate_size": 5632, "max_position_embeddings": 8192, "mlp_only_layers": [0, 1],
        "model_type": "qwen2_moe", "moe_intermediate_size": 1408, "num_attention_heads": 16, "num_experts": 60,
        "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_key_value_heads": 16,
        "shared_expert_intermediate_size": 5632, "tie_word_embeddings": False, "vocab_size": 151936,
    }
    m = parse_spec(ModelSpec, hf_config_to_model_dict(cfg, "qwen-moe"), "x")
    assert m.moe.num_shared_experts == 1 and m.moe.shared_expert_intermediate_size == 5632
    assert m.moe.num_dense_layers == 2 and m.intermediate_size == 5632


def test_import_layer_types_with_linear_layers() -> None:
    cfg = {**MISTRAL_7B_V03, "layer_types": ["linear_attention"] * 3 * 8 + ["full_attention"] * 8}
    m = parse_spec(ModelSpec, hf_config_to_model_dict(cfg, "hybrid"), "x")
    assert m.num_linear_layers == 24 and m.num_sliding_layers == 0 and m.sliding_window_tokens is None


@pytest.mark.parametrize(
    "config, key",
    [
        ({k: v for k, v in MISTRAL_7B_V03.items() if k != "hidden_size"}, "hidden_size"),
        ({k: v for k, v in MISTRAL_7B_V03.items() if k != "vocab_size"}, "vocab_size"),
        ({k: v for k, v in MISTRAL_7B_V03.items() if k != "num_hidden_layers"}, "num_hidden_layers"),
        ({k: v for k, v in MISTRAL_7B_V03.items() if k != "max_position_embeddings"}, "max_position_embeddings"),
        ({k: v for k, v in MISTRAL_7B_V03.items() if k != "intermediate_size"}, "intermediate_size"),
        ({**MISTRAL_7B_V03, "num_attention_heads": "32"}, "num_attention_heads"),
        ({**MISTRAL_7B_V03, "num_key_value_heads": 0}, "num_key_value_heads"),
        ({**MISTRAL_7B_V03, "num_key_value_heads": 5}, "num_key_value_heads"),
        ({**MISTRAL_7B_V03, "hidden_size": 4096.5}, "hidden_size"),
        ({**MISTRAL_7B_V03, "tie_word_embeddings": "no"}, "tie_word_embeddings"),
        ({**MISTRAL_7B_V03, "sliding_window": -1}, "sliding_window"),
        ({**MISTRAL_7B_V03, "rope_theta": "big"}, "rope_theta"),
        ({**MISTRAL_7B_V03, "layer_types": ["full_attention"] * 3}, "layer_types"),
        ({k: v for k, v in QWEN3_30B_A3B.items() if k != "num_experts_per_tok"}, "num_experts_per_tok"),
        ({k: v for k, v in DEEPSEEK_V3.items() if k != "qk_rope_head_dim"}, "qk_rope_head_dim"),
        ({**GEMMA3_27B_IT, "text_config": [1, 2]}, "text_config"),
    ],
)
def test_import_errors_name_the_config_key(config: dict, key: str) -> None:
    with pytest.raises(SpecError) as e:
        hf_config_to_model_dict(config, "bad-model")
    msg = str(e.value)
    assert key in msg, msg
    assert "\n" not in msg


def test_import_rejects_a_non_mapping_and_a_bad_id() -> None:
    with pytest.raises(SpecError, match="expected a JSON object"):
        hf_config_to_model_dict([1, 2], "x")  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="id"):
        hf_config_to_model_dict(MISTRAL_7B_V03, "Not An Id")


# --------------------------------------------------------------------------------- --profile values


def test_resolve_profile_none_auto_and_path(tmp_path):
    """'none' is IDEAL_PROFILE; 'auto' the GPU's own profile, else another GPU's transferred; a path is
    read as it is; a missing path is a SpecError naming the field the caller gives."""
    from planner.profile import IDEAL_PROFILE

    prof, line = catalog.resolve_profile("none", "h200-sxm")
    assert prof is IDEAL_PROFILE and line == "ideal roofline (--profile none)"
    prof, line = catalog.resolve_profile("auto", "h200-sxm")
    assert prof == catalog.profile_for("h200-sxm") and prof.mode == "calibrated"
    assert line.startswith("calibrated (h200-sxm, vllm")
    prof, line = catalog.resolve_profile("auto", "h100-sxm")
    assert prof.mode == "transferred" and line.startswith("transferred calibration: h200-sxm's measured")
    path = min(catalog.PROFILES_DIR.glob("*.yaml"))
    prof, line = catalog.resolve_profile(str(path), "h100-sxm")
    assert prof == catalog.load_profile(path) and f"({path.name}: " in line
    with pytest.raises(SpecError, match=r"^--profile: expected auto, none or a profile YAML path; no such file"):
        catalog.resolve_profile(str(tmp_path / "nope.yaml"), "h200-sxm", field="--profile")



def test_the_c_yaml_parser_reads_every_catalog_file_as_the_python_one_does() -> None:
    """:data:`catalog.UniqueKeyLoader` runs on libyaml's parser where PyYAML has it (the catalog loads at every cold
    start); the documents must be the ones PyYAML's pure-Python SafeLoader builds, file by file, key order included."""

    class PythonLoader(yaml.SafeLoader):
        pass

    PythonLoader.add_constructor("tag:yaml.org,2002:timestamp", catalog._timestamp_as_text)
    dirs = (catalog.MODELS_DIR, catalog.HARDWARE_DIR, catalog.PROFILES_DIR)
    files = [p for d in dirs for p in sorted(d.glob("*.yaml"))]
    assert len(files) > 20
    for p in files:
        ours = catalog.load_yaml_file(p)
        python = yaml.load(p.read_text(encoding="utf-8"), Loader=PythonLoader)  # noqa: S506 - a SafeLoader subclass
        assert ours == python and repr(ours) == repr(python), p.name


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000, "- " * 3000 + "x\n"])
def test_yaml_nested_too_deeply_is_one_spec_error(tmp_path: Path, text: str) -> None:
    """Python's recursion limit (pure-Python parser) or libyaml's 1,000-level limit (C parser): the same sentence."""
    with pytest.raises(SpecError, match=r"deep\.yaml: YAML nested too deeply"):
        catalog.load_yaml_file(_write(tmp_path, "deep.yaml", text))
