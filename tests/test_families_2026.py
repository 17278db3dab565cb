"""The 2026 families (issue #21) on the REAL H200 measurements of 2026-12-01 (calibration/data/h200-2026-12-01):
config writers, MXFP4 weight bytes, the KV pool of every engine (V1-runner terms, hybrid layer slots), the
committed family terms against held-out engines, and the cold-start records the warm-up note quotes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calibration.family_fit import DATA, FIT_ON, RAW, load_points, table, warm
from calibration.hfconfig import hf_config
from calibration.records import parse_engine_log
from calibration.variants import probe_model
from planner.compile_keys import cold_start_note, shape_compile_s
from planner.io import catalog
from planner.kernel_families import (cudagraph_max_tokens, experts_touched, graph_capture_limit, kv_layer_slots,
                                     moe_variant, uses_v1_runner)
from planner.memory import weight_bytes
from planner.specs import Deployment
from planner.units import GiB
from planner.validate import error_pct, predict



@pytest.fixture(scope="module")
def points():
    return load_points()


@pytest.fixture(scope="module")
def profile():
    import yaml

    from planner.profile import CalibrationProfile

    path = DATA.parent / "profiles" / "h200-sxm-vllm-0.26.0.yaml"
    return CalibrationProfile.model_validate(yaml.safe_load(path.read_text()))


def test_config_writers_follow_the_published_layouts():
    oss = hf_config(catalog.model("gpt-oss-120b"), "mxfp4")
    assert oss["model_type"] == "gpt_oss" and oss["quantization_config"]["quant_method"] == "mxfp4"
    assert oss["layer_types"].count("sliding_attention") == 18 and oss["num_local_experts"] == 128
    ds = hf_config(catalog.model("deepseek-v2-lite"))
    assert (ds["kv_lora_rank"], ds["q_lora_rank"], ds["n_routed_experts"], ds["n_shared_experts"]) == (512, None, 64, 2)
    moon = hf_config(catalog.model("moonlight-16b-a3b"))
    assert moon["model_type"] == "deepseek_v3" and moon["scoring_func"] == "sigmoid"
    g = hf_config(catalog.model("gemma-3-27b"))
    assert g["model_type"] == "gemma3_text" and g["layer_types"].count("full_attention") == 10


def test_a_bf16_asked_mxfp4_moe_is_recorded_and_replayed_as_the_mxfp4_engine_it_ran():
    """serve_bench asked bf16 for gpt-oss-20b on 2026-12-05 (c/): the config.json kept the checkpoint's MXFP4
    quantization_config and vLLM loaded 13.03 GiB of weights (bf16 would be 20.91e9 x 2 B = 39 GiB): the replay reads
    that record as the MXFP4 engine, whose plan's KV pool is within 0.1 % of the logged 120.16 GB."""
    from calibration.hfconfig_families import loaded_weight_dtype
    from calibration.serving_points import recorded_deployment
    from planner.deploy import serve_command
    from planner.io.jsonl import read_jsonl

    oss, dense = catalog.model("gpt-oss-20b"), catalog.model("llama-3.1-8b")
    assert hf_config(oss, "bf16")["quantization_config"]["quant_method"] == "mxfp4"
    assert (loaded_weight_dtype(oss, "bf16"), loaded_weight_dtype(oss, "mxfp4"), loaded_weight_dtype(dense, "bf16"),
            loaded_weight_dtype(dense, "fp8")) == ("mxfp4", "mxfp4", "bf16", "fp8")
    recs = read_jsonl(DATA / "h200-2026-12-05-mla-long/c/serve-oss20-long/serve_bench.jsonl")
    deploy, boot = (next(r for r in recs if r["type"] == t) for t in ("deploy", "boot"))
    assert deploy["weight_dtype"] == "bf16" and "Model loading took 13.03 GiB" in (
        DATA / "h200-2026-12-05-mla-long/c/serve-oss20-long/serve.log").read_text()
    dep = recorded_deployment(deploy)
    assert dep.weight_dtype == "mxfp4"
    g = catalog.gpu("h200-sxm")
    cmd = serve_command(probe_model("gpt-oss-20b"), g, dep, max_model_len=16384,
                        profile=catalog.profile_for(g.id, transfer=True))
    assert abs(error_pct(cmd.predicted_kv_pool_bytes_per_gpu, boot["kv_available_bytes"])) < 0.1


def test_the_engines_ran_the_kernels_the_families_model():
    logs = {p.name: p.read_text(errors="replace") for p in (DATA / "h200-2026-12-01").rglob("*.log")}
    text = "".join(logs.values())
    assert "Using 'TRITON' Mxfp4 MoE backend" in text and "OAITritonMxfp4ExpertsMonolithic" in text
    assert "Using FLASH_ATTN_MLA attention backend" in text
    assert uses_v1_runner(catalog.model("gpt-oss-20b")) and not uses_v1_runner(catalog.model("deepseek-v2-lite"))
    assert "Using V2 Model Runner" in logs["h200-families.deepseek-v2-lite.auto.fit.log"]
    assert "Using V2 Model Runner" not in logs["h200-families.moonlight-16b-a3b.auto.validate.log"]


def test_graph_capture_limit_is_what_the_engines_recorded():
    recs = [json.loads(line) for name in RAW for line in (DATA / name).read_text().splitlines()]
    for r in (r for r in recs if r.get("type") == "engine"):
        m = probe_model(r["model"])
        d = Deployment.for_gpu(catalog.gpu("h200-sxm"), max_num_seqs=r["max_num_seqs"],
                               max_num_batched_tokens=r["max_num_batched_tokens"])
        assert cudagraph_max_tokens(d, m) == r["max_cudagraph_capture_size"] == graph_capture_limit(m)


def test_mxfp4_weights_are_experts_only_at_4_25_bits():
    for mid, measured_gib in (("gpt-oss-120b", 61.43), ("gpt-oss-20b", 13.03)):  # "Model loading took"
        pred = weight_bytes(catalog.model(mid), "mxfp4").total_bytes / GiB
        assert abs(pred - measured_gib) / measured_gib < 0.02, (mid, pred)


def test_kv_pool_within_about_1pct_on_every_engine(points, profile):
    kv = [p for p in points if p.metric == "kv_cache_tokens"]
    assert {p.model.id for p in kv} == {"gpt-oss-120b", "gpt-oss-20b", "deepseek-v2-lite", "moonlight-16b-a3b",
                                        "gemma-3-12b", "gemma-3-27b", "qwen3-30b-a3b", "mixtral-8x7b",
                                        "qwen3-235b-a22b-l16"}
    for p in kv:
        assert abs(error_pct(predict(p, profile), p.measured)) <= 1.2, p.model.id
    assert kv_layer_slots(catalog.model("gemma-3-27b")) == 70 and kv_layer_slots(catalog.model("gemma-3-12b")) == 48


def test_committed_family_terms_and_held_out_errors(points, profile):
    assert set(profile.moe_variants) == {"mxfp4", "mla", "fp8"} and profile.hybrid_step_overhead_s > 0
    assert moe_variant(catalog.model("gpt-oss-20b"), "mxfp4") == "mxfp4"
    assert moe_variant(catalog.model("moonlight-16b-a3b"), "bf16") == "mla"
    assert moe_variant(catalog.model("qwen3-30b-a3b"), "fp8") == "fp8"
    assert moe_variant(catalog.model("qwen3-30b-a3b"), "bf16") == "default"
    rows = {(r["family"], r["role"]): r for r in table(profile, points)}
    for fam, model in FIT_ON.items():
        assert rows[(fam, "fit")]["models"] == [model]
        if fam == "moe-fp8":  # held out: Mixtral-8x7B and Qwen3-235B-A22B-l16 fp8's probes (the second measured for
            # the kernel law, h200-2026-12-03-moe-kernel/kb), and the fit model's first engine's KV pool only
            held = rows[(fam, "held out")]
            assert held["models"] == ["mixtral-8x7b", "qwen3-235b-a22b-l16", model] and held["kv"][0] == 3
            assert held["decode"][0] == 16
            # Mixtral's 8 decode steps: +43.8 % (median) before planner.kernel_families.moe_coeffs (bf16 router, tuned
            # configuration); Qwen3-235B-A22B-l16's router is quantised (dummy routing collapses): +24 .. -18 %.  With the
            # per-layer step term: median 3.6 %, two steps at 12 % (median <= 3.0, p90 <= 8.0 % before it)
            errs = np.abs([error_pct(predict(p, profile), p.measured) for p in points if p.model.id == "mixtral-8x7b"
                           and p.deployment.weight_dtype == "fp8" and p.metric == "decode_step_s"])
            assert errs.size == 8 and np.median(errs) <= 4.0 and np.percentile(errs, 90) <= 12.5
            continue
        assert model not in rows[(fam, "held out")]["models"]
    # what the committed profile achieves on the held-out engines (the report gives every figure)
    assert rows[("hybrid-swa", "held out")]["decode"][1] <= 5.0
    assert rows[("moe-mla", "held out")]["decode"][1] <= 8.0
    assert rows[("moe-mxfp4", "held out")]["decode"][1] <= 15.0


def test_expert_touch_fraction_saturates_on_a_share_of_the_experts():
    assert experts_touched(128, 4, 1) == pytest.approx(4.0)
    assert experts_touched(128, 4, 10_000) == pytest.approx(128.0)
    assert experts_touched(128, 4, 10_000, 0.25) == pytest.approx(32.0)


def test_cold_start_records_and_the_warm_up_note(profile):
    recs = [json.loads(line) for line in (DATA / RAW[0]).read_text().splitlines()]
    cold = [r for r in recs if r.get("type") == "cold_start"]
    first = {r["prompt_tokens"]: r["measured"] for r in cold if r["model"] == "gpt-oss-120b" and r["phase"] == "cold"}
    again = {r["prompt_tokens"]: r["measured"] for r in cold if r["model"] == "gpt-oss-120b" and r["phase"] == "warm"}
    assert max(first.values()) > 1.0 and max(again.values()) < 0.2  # Triton compiles on first use only
    h200, oss = catalog.gpu("h200-sxm"), catalog.model("gpt-oss-120b")
    prof = profile
    # vllm serve's 8,192 tokens per step: keys (T // 32, T % 16 == 0) of T = 1,025..8,192: buckets 32..255 twice,
    # (256, True) of 8,192 compiled at start-up: 448 of them, each the fitted s per expert x (offset + 128 experts)
    note = cold_start_note(oss, Deployment.for_gpu(h200, weight_dtype="mxfp4"), prof)
    each = shape_compile_s(oss, "mxfp4", prof)  # 8.73 ms x (96.0 + 128 experts) = 1.956 s: g/'s median
    assert "1-1024 tokens" in note and "448 keys from 1,025 to 8,192 tokens" in note
    assert f"~{each:.1f} s each here, ~{448 * each / 60:.1f} min in all" in note and 1.5 < each < 2.5
    assert "prompts of 32k + 16 and 32k + 17 tokens for k = 32..255" in note and "--max-num-batched-tokens 1024" in note
    assert "0.6-6 s each on an H200" in cold_start_note(oss, Deployment.for_gpu(h200, weight_dtype="mxfp4"))  # no profile
    inside = cold_start_note(oss, Deployment.for_gpu(h200, weight_dtype="mxfp4", max_num_batched_tokens=1024), prof)
    assert "no step is larger" in inside and "warm it" in inside and "keys from" not in inside
    assert "Triton MXFP4" not in cold_start_note(catalog.model("llama-3.1-8b"), Deployment.for_gpu(h200), prof)


def test_warm_drops_compile_samples_only():
    r = {"metric": "prefill_s", "measured": 2.2, "wall_samples_s": [0.0717, 0.0731, 2.2094]}
    assert warm(r)["measured"] == pytest.approx(0.0717)  # the lower median of the warm samples
    r = {"metric": "prefill_s", "measured": 0.1, "wall_samples_s": [0.1, 0.11]}
    assert warm(r)["measured"] == pytest.approx(0.1)


def test_log_terms_include_the_v1_graph_estimate():
    t = parse_engine_log((DATA / "h200-2026-12-01/mxfp4/h200-families.gpt-oss-120b.wmxfp4.auto.fit.log").read_text())
    assert t["cudagraph_estimate_bytes"] == pytest.approx(0.82 * GiB)
    assert np.isclose(t["kv_available_bytes"], 63.21 * GiB)


def test_fp8_moe_coefficients_follow_the_router_and_the_tuned_configuration(profile):
    """The fp8 family was fitted on Qwen3-30B-A3B fp8: per-tensor scales have no tuned H200 configuration for
    E=128,N=768 (only block_shape [128,128]) and its router is quantised with the experts (vLLM 0.26 qwen3_moe.py
    passes quant_config to the gate).  Mixtral-8x7B's router stays bf16 and E=8,N=14336 fp8 is tuned on the H200:
    it takes the bf16 stage's touch share and GEMM efficiency; on a GPU without a tuned file, only the touch share."""
    from planner.fused_moe_configs import fused_moe_tuned
    from planner.kernel_families import moe_coeffs

    qwen, mixtral = catalog.model("qwen3-30b-a3b"), catalog.model("mixtral-8x7b")
    fp8, bf16 = profile.moe_variants["fp8"], profile.moe
    assert not fused_moe_tuned(qwen, "fp8", "h200-sxm") and fused_moe_tuned(qwen, "bf16", "h200-sxm")
    assert fused_moe_tuned(mixtral, "fp8", "h200-sxm") and fused_moe_tuned(mixtral, "bf16", "h200-sxm")
    assert not fused_moe_tuned(mixtral, "fp8", "rtx-4090") and not fused_moe_tuned(mixtral, "int4", "h200-sxm")
    assert moe_coeffs(qwen, "fp8", profile, "h200-sxm") == fp8 and fp8.expert_touch_fraction < 0.2
    m = moe_coeffs(mixtral, "fp8", profile, "h200-sxm")
    assert (m.expert_touch_fraction, m.matmul_efficiency_max, m.matmul_half_tokens) == (
        bf16.expert_touch_fraction, bf16.matmul_efficiency_max, bf16.matmul_half_tokens)
    assert m.layer_overhead_s == fp8.layer_overhead_s
    assert m.weight_bandwidth_efficiency == bf16.weight_bandwidth_efficiency
    untuned = moe_coeffs(mixtral, "fp8", profile, "rtx-4090")
    assert untuned.expert_touch_fraction == bf16.expert_touch_fraction
    assert untuned.matmul_efficiency_max == fp8.matmul_efficiency_max
    # with the fused-MoE kernel law both stages take it as it is (share 1): its fp8 and bf16 terms tell them apart
    assert fp8.matmul_efficiency_max == bf16.matmul_efficiency_max == 1.0
    assert profile.moe_kernel.dtypes["fp8"] != profile.moe_kernel.dtypes["bf16"]
    assert moe_coeffs(mixtral, "bf16", profile, "h200-sxm") == bf16  # the other families as fitted
    assert moe_coeffs(catalog.model("llama-3.1-8b"), "fp8", profile, "h200-sxm") == bf16  # dense: unused
