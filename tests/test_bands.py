"""planner.bands: which measured families a prediction's "±x %" comes from.

The calibration stores one error band per ``<family>/<regime>`` under the family a measurement identifies
(calibration.families.family_of, which is :func:`planner.bands.kernel_family`); a plan looks its bands up under every
family it runs through (:func:`planner.bands.families`) and shows the widest.  Before 2026-12-05 a plan knew only the
weight format, ``moe``, ``kv-fp8`` and ``tp``: gpt-oss at mxfp4 had "no measured basis" although the profile held
gpt-oss-20b's held-out band, and Gemma-3 / DeepSeek took the dense / bf16-MoE bands instead of their own families'.
"""

from __future__ import annotations

import pytest
from conftest import deepseek_v3, gemma_3_27b, gpt_oss_120b, make_deployment, make_model, mistral_7b

from calibration.families import family_of
from planner.bands import band, families, kernel_family
from planner.profile import IDEAL_PROFILE, ErrorBand
from planner.specs import MoeSpec
from planner.validate import Measurement


def qwen3_moe():
    """A Qwen3-30B-A3B-like MoE (128 experts, top-8, width 768) with standard GQA attention."""
    from planner.specs import AttentionSpec

    return make_model(id="qwen3-moe", hidden_size=2048, num_layers=48, intermediate_size=0, vocab_size=151936,
                      max_context_tokens=40960, attention=AttentionSpec(kind="gqa", num_heads=32, num_kv_heads=4,
                                                                        head_dim=128),
                      moe=MoeSpec(num_experts=128, experts_per_token=8, expert_intermediate_size=768))


@pytest.mark.parametrize("model, fields, primary, every", [
    (gpt_oss_120b, {"weight_dtype": "mxfp4"}, "moe-mxfp4", ("moe-mxfp4",)),
    (gpt_oss_120b, {"weight_dtype": "bf16"}, "moe", ("moe",)),  # bf16 experts: the Triton fused MoE
    (deepseek_v3, {"weight_dtype": "fp8", "tensor_parallel": 8, "num_gpus": 8}, "moe-mla",
     ("moe-mla", "moe-fp8", "tp")),
    (deepseek_v3, {"weight_dtype": "bf16"}, "moe-mla", ("moe-mla",)),
    (qwen3_moe, {"weight_dtype": "fp8"}, "moe-fp8", ("moe-fp8",)),
    (qwen3_moe, {"weight_dtype": "bf16", "kv_cache_dtype": "fp8"}, "moe", ("moe", "kv-fp8")),
    (qwen3_moe, {"weight_dtype": "int4"}, "moe", ("moe", "int4")),
    (gemma_3_27b, {"weight_dtype": "bf16"}, "hybrid-swa", ("hybrid-swa",)),
    (gemma_3_27b, {"weight_dtype": "fp8", "tensor_parallel": 2, "num_gpus": 2}, "hybrid-swa",
     ("hybrid-swa", "fp8", "tp")),
    (mistral_7b, {"weight_dtype": "bf16"}, "dense", ("dense",)),
    (mistral_7b, {"weight_dtype": "fp8", "kv_cache_dtype": "fp8"}, "fp8", ("fp8", "kv-fp8")),
    (mistral_7b, {"weight_dtype": "bf16", "kv_cache_dtype": "fp8"}, "kv-fp8", ("kv-fp8",)),
    (mistral_7b, {"weight_dtype": "fp8", "tensor_parallel": 2, "num_gpus": 2}, "tp", ("tp", "fp8")),
])
def test_a_prediction_runs_through_its_kernel_family_and_the_formats_it_does_not_cover(model, fields, primary, every):
    m, d = model(), make_deployment(**fields)
    assert kernel_family(m, d) == primary
    assert families(m, d) == every
    # the calibration files a measurement of the same engine under the same family
    assert family_of(Measurement(model=m, deployment=d, metric="decode_step_s", batch_size=1, prompt_tokens=512,
                                 output_tokens=1, measured=0.01)) == primary


def _profile(**pcts):
    """A calibrated profile with these bands: ``moe_fp8__kv_capacity=0.49`` -> 'moe-fp8/kv_capacity': ±0.49 %."""
    def key(k):
        fam, regime = k.split("__")
        return f"{fam.replace('_', '-')}/{regime}"
    bands = {key(k): ErrorBand(pct=v, median_pct=v / 2, n=5, basis=f"held-out: {k}") for k, v in pcts.items()}
    return IDEAL_PROFILE.model_copy(update={"mode": "calibrated", "error_bands": bands})


def test_gpt_oss_takes_the_mxfp4_family_band_and_deepseek_the_widest_of_its_three():
    prof = _profile(moe_mxfp4__decode=11.25, moe_mla__decode=11.62, moe_fp8__decode=15.82, tp__decode=4.6,
                    moe__decode=7.28, fp8__decode=10.03, all__kv_capacity=0.57, moe_fp8__kv_capacity=0.49)
    b = band(prof, gpt_oss_120b(), make_deployment(weight_dtype="mxfp4"), "decode")
    assert b.pct == 11.2 and b.basis == "moe-mxfp4: held-out: moe_mxfp4__decode"  # round(11.25, 1) == 11.2
    # max(11.62, 15.82, 4.6) == 15.82 -> 15.8: neither the bf16 fused MoE's 7.28 nor the dense fp8 10.03
    b = band(prof, deepseek_v3(), make_deployment(weight_dtype="fp8", tensor_parallel=8, num_gpus=8), "decode")
    assert b.pct == 15.8 and b.basis.startswith("moe-mla: ")
    # a mixed step's band falls back to its family's decode band; the KV pool's to the pooled memory model's, named so
    assert band(prof, gpt_oss_120b(), make_deployment(weight_dtype="mxfp4"), "mixed").pct == 11.2
    kv = band(prof, deepseek_v3(), make_deployment(weight_dtype="fp8", tensor_parallel=8, num_gpus=8), "kv_capacity")
    assert kv.pct == 0.6 and kv.basis.startswith("all: ") and "moe-fp8: " in kv.basis  # max(0.57, 0.49, 0.57)
    assert kv.basis.count("all: ") == 1  # moe-mla and tp both fall back to the pooled band: named once


def test_a_family_without_a_band_says_so():
    prof = _profile(moe_mla__decode=11.62, tp__decode=4.6)  # no moe-fp8 band
    b = band(prof, deepseek_v3(), make_deployment(weight_dtype="fp8", tensor_parallel=8, num_gpus=8), "decode")
    assert b.pct is None and b.basis == "no measured basis for moe-fp8 (decode)"
