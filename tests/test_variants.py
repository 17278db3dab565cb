"""calibration.variants: probe-only variants of catalog models (gpt-oss-120b with fewer layers / experts)."""

import json

import pytest

from calibration.fit import check_record, points_from_records
from calibration.hfconfig import hf_config
from calibration.variants import VARIANTS, probe_model
from planner.io import catalog
from planner.io.files import SpecError
from planner.specs import count_params


def test_a_catalog_id_is_the_catalog_model():
    assert probe_model("gpt-oss-120b") == catalog.model("gpt-oss-120b")


def test_the_layer_variant_halves_the_layers_and_keeps_the_sliding_share():
    m, base = probe_model("gpt-oss-120b-l18"), catalog.model("gpt-oss-120b")
    assert (m.num_layers, m.num_sliding_layers, m.moe.num_experts) == (18, 9, 128)
    assert m.hidden_size == base.hidden_size and m.moe.experts_per_token == base.moe.experts_per_token
    # its own parameter count, not the base model's: embeddings + lm_head are the same, the layers half
    per_layer = (count_params(base).total - m.published_total_params) / 18
    assert m.published_total_params == pytest.approx(count_params(base).total - 18 * per_layer)
    assert 58e9 < m.published_total_params < 60e9  # 116.8B - 18 layers of ~3.24B


def test_the_expert_variant_keeps_every_layer_with_a_quarter_of_the_experts():
    m = probe_model("gpt-oss-120b-e32")
    assert (m.num_layers, m.moe.num_experts, m.moe.experts_per_token) == (36, 32, 4)
    cfg = hf_config(m, "mxfp4")
    assert (cfg["num_hidden_layers"], cfg["num_local_experts"], len(cfg["layer_types"])) == (36, 32, 36)


def test_the_variants_are_not_in_the_catalog():
    assert not set(VARIANTS) & set(catalog.models())
    with pytest.raises(SpecError, match="gpt-oss-120b-l18"):
        catalog.model("gpt-oss-120b-l18")


def test_a_variant_record_is_a_measurement_and_an_unknown_model_is_not():
    rec = {"type": "probe", "model": "gpt-oss-120b-l18", "gpu": "h200-sxm", "weight_dtype": "mxfp4",
           "kv_cache_dtype": "auto", "metric": "decode_step_s", "batch_size": 1, "prompt_tokens": 512,
           "output_tokens": 64, "measured": 0.00233, "status": "ok", "role": "fit", "tensor_parallel": 1, "vllm_version": "0.26.0"}
    check_record(rec)
    (p,) = points_from_records([json.loads(json.dumps(rec))], "test")
    assert p.model.num_layers == 18
    with pytest.raises(ValueError, match="model: unknown"):
        check_record(dict(rec, model="gpt-oss-120b-l19"))
