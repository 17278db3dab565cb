"""MLA's two attention pathways inside the CUDA graphs (issue #21): vLLM 0.26's FLASH_ATTN_MLA runs a request of up to
512 query tokens down MLA's decode pathway and a longer prompt chunk down its prefill pathway, whose piecewise launch
costs the CPU about twice as much a layer.  The planner's terms (planner.roofline.piecewise_layer_launches, the
simulator's StepCost with the step's longest chunk), their fit from the committed traces
(calibration.mla_pathways) and the committed values."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from calibration.mla_pathways import PathwayLaunch, mla_piecewise_launch, mla_piecewise_terms
from planner.attention_sums import attended_prefill
from planner.io import catalog
from planner.kernel_families import MLA_DECODE_PATH_MAX_QUERY_TOKENS, decode_path_max_tokens
from planner.roofline import hw_coeffs, model_costs, step_time
from planner.serving import StepCost
from planner.specs import Deployment

DATA = Path(__file__).resolve().parent.parent / "calibration/data"
PROF = catalog.profile_for("h200-sxm", "0.26.0")
H200 = catalog.gpu("h200-sxm")
MOONLIGHT = catalog.model("moonlight-16b-a3b")
GRAPHS_8192 = Deployment.for_gpu(H200, max_cudagraph_capture_tokens=8192)


def test_the_decode_pathway_ends_at_512_query_tokens_for_mla_only():
    assert MLA_DECODE_PATH_MAX_QUERY_TOKENS == 512
    assert decode_path_max_tokens(MOONLIGHT) == 512.0
    assert decode_path_max_tokens(catalog.model("llama-3.1-8b")) == math.inf
    assert model_costs(MOONLIGHT, GRAPHS_8192).decode_path_max_tokens == 512.0


def test_the_committed_terms_are_the_eight_h200_engines_median_and_moonlights_ratio():
    """Decode pathway: the median of the eight H200 MLA engines' 0.270-0.530 ms a layer = (0.4232 + 0.4245) / 2 ms;
    prefill pathway: that x the median of Moonlight's two engines with 8,192-token graphs, 0.931 / 0.488 = 1.909 (an
    H100) and 0.764 / 0.432 = 1.768 (an H200): x 1.839, 0.779 ms a layer."""
    assert 1e3 * PROF.mla_piecewise_layer_launch_s == pytest.approx(0.4238, abs=5e-4)
    assert PROF.mla_prefill_layer_launch_s / PROF.mla_piecewise_layer_launch_s == pytest.approx(1.839, abs=2e-3)


def test_a_moonlight_prompt_step_inside_8192_graphs_launches_per_pathway():
    """A 600-token prompt beside 8 decodes: 27 layers x 0.779 ms = 21.0 ms of launch; at 512 tokens 27 x 0.424 =
    11.4 ms; Llama-3.1-8B's 32 layers take the dense 0.212 ms either way; above the graphs the eager launch, the same
    for both."""
    mc, hw = model_costs(MOONLIGHT, GRAPHS_8192), hw_coeffs(H200, "bf16", PROF, MOONLIGHT)
    long, short = (step_time(mc, hw, prefill_tokens=c, prefill_attended=attended_prefill(mc, 0.0, c), decode_seqs=8,
                             decode_attended=8 * 27 * 700.0) for c in (600, 512))
    assert float(long.launch_s) == pytest.approx(27 * PROF.mla_prefill_layer_launch_s)
    assert float(short.launch_s) == pytest.approx(27 * PROF.mla_piecewise_layer_launch_s)
    assert 1e3 * float(long.launch_s) == pytest.approx(21.04, abs=0.05)
    llama = catalog.model("llama-3.1-8b")
    lmc, lhw = model_costs(llama, GRAPHS_8192), hw_coeffs(H200, "bf16", PROF, llama)
    assert float(step_time(lmc, lhw, prefill_tokens=600).launch_s) == float(step_time(lmc, lhw, prefill_tokens=512)
                                                                           .launch_s) == \
        pytest.approx(32 * PROF.piecewise_layer_launch_s)
    default = model_costs(MOONLIGHT, Deployment.for_gpu(H200))  # 512-token graphs: a 600-token step is eager
    assert float(step_time(default, hw, prefill_tokens=600).launch_s) == float(step_time(
        default, hw, prefill_tokens=600, decode_seqs=1).launch_s) > float(long.launch_s)


def test_the_simulators_step_takes_its_longest_chunk():
    """StepCost: two 300-token chunks (600 tokens) stay on the decode pathway; one 600-token chunk does not; its step
    equals the array formula's for the same step bit for bit."""
    cost = StepCost.from_specs(MOONLIGHT, H200, GRAPHS_8192, PROF)
    two = cost.cpu_s(600, 2, True, 300)
    one = cost.cpu_s(600, 1, True, 600)
    assert two == pytest.approx(27 * PROF.mla_piecewise_layer_launch_s)
    assert one == pytest.approx(27 * PROF.mla_prefill_layer_launch_s)
    mc, hw = cost.model_costs, cost.hw_coeffs
    att = attended_prefill(mc, 0.0, 600.0)
    assert cost.step_s(600, 1, float(att), 0.0, 0.0, 600) == float(step_time(mc, hw, prefill_tokens=600,
                                                                              prefill_attended=att).total_s)


def test_the_h100_trace_splits_its_prompt_steps_by_pathway():
    """Moonlight with 8,192-token graphs on an H100 (2026-12-05 capture/c): 139 prompt steps with chunks <= 512 and
    794 with a longer one; their calls beyond a decode-only step's 0.488 and 0.931 ms a layer."""
    p = mla_piecewise_launch(DATA / "h100-2026-12-05-capture/c/serve-moonlight-cg8192", "moonlight-16b-a3b")
    assert (p.decode_path_steps, p.prefill_path_steps) == (139, 794)
    assert [round(1e3 * x, 3) for x in p.per_layer_s] == [0.488, 0.931]
    default = mla_piecewise_launch(DATA / "h100-2026-12-05-capture/d/serve-moonlight-default", "moonlight-16b-a3b")
    assert default.prefill_path_steps == 0 and math.isnan(default.prefill_path_s)  # default graphs: none inside


def test_deepseek_v2_lite_held_out_on_an_h200():
    """DeepSeek-V2-Lite with 8,192-token graphs on an H200 (2026-12-05 mla-graphs/e), held out of the pathway fit:
    0.426 and 0.744 ms a layer (141 and 817 steps), x 1.747: the profile's 0.424 (+0.5 %) and 0.779 ms (-4.5 %),
    x 1.839 (-5.0 %)."""
    p = mla_piecewise_launch(DATA / "h200-2026-12-05-mla-graphs/e/serve-dsv2lite-cg8192", "deepseek-v2-lite")
    assert (p.decode_path_steps, p.prefill_path_steps) == (141, 817)
    assert [round(1e3 * x, 3) for x in p.per_layer_s] == [0.426, 0.744]
    ratio = PROF.mla_prefill_layer_launch_s / PROF.mla_piecewise_layer_launch_s
    assert 100 * ((p.prefill_path_s / p.decode_path_s) / ratio - 1) == pytest.approx(-5.0, abs=0.2)


def test_the_fit_takes_the_median_host_and_the_pathway_ratio():
    """Three engines at 0.3, 0.4 and 0.6 ms a layer (27 layers) -> 0.4; one pathway engine at 10 / 19 ms -> x 1.9;
    without a pathway engine the profile's ratio; no engine: nothing."""
    eng = [PathwayLaunch("moonlight-16b-a3b", 27 * x / 1e3, math.nan, 50, 0) for x in (0.3, 0.4, 0.6)]
    pair = PathwayLaunch("deepseek-v2-lite", 0.010, 0.019, 100, 700)
    t = mla_piecewise_terms(PROF, eng, [pair])
    assert 1e3 * t["mla_piecewise_layer_launch_s"] == pytest.approx(0.4)
    assert 1e3 * t["mla_prefill_layer_launch_s"] == pytest.approx(0.76)
    ratio = PROF.mla_prefill_layer_launch_s / PROF.mla_piecewise_layer_launch_s
    assert mla_piecewise_terms(PROF, eng)["mla_prefill_layer_launch_s"] == pytest.approx(0.4e-3 * ratio)
    assert mla_piecewise_terms(PROF, []) == {}


def test_a_host_launching_slower_scales_both_pathways():
    scaled = PROF.with_launch_scaled(1.2)
    assert scaled.mla_piecewise_layer_launch_s == pytest.approx(1.2 * PROF.mla_piecewise_layer_launch_s)
    assert scaled.mla_prefill_layer_launch_s == pytest.approx(1.2 * PROF.mla_prefill_layer_launch_s)


def test_a_chunk_on_mlas_decode_pathway_attends_in_the_absorbed_form():
    """A fresh 512-token Moonlight prompt attends 512 x 513 / 2 = 131,328 context tokens a layer (27 layers) with the
    decode tokens' FLOPs per context token, 2 x 16 heads x (512 + 64 + 512) = 34,816, where a 513-token one takes the
    MHA form's 2 x 16 x (128 + 64 + 128) = 10,240; Llama's one pathway is unchanged.  StepCost.chunk_sums splits a
    step's chunks the same way."""
    mc, hw = model_costs(MOONLIGHT, GRAPHS_8192), hw_coeffs(H200, "bf16", PROF, MOONLIGHT)
    assert (mc.attn_flops_per_ctx_decode, mc.attn_flops_per_ctx_prefill) == (34816.0, 10240.0)
    for c, per in ((512, 34816.0), (513, 10240.0)):
        att = attended_prefill(mc, 0.0, c)
        assert att == 27 * c * (c + 1) / 2
        bare = step_time(mc, hw, prefill_tokens=c)  # no attention
        full = step_time(mc, hw, prefill_tokens=c, prefill_attended=att)
        assert float(full.flops - bare.flops) == pytest.approx(per * att)
    cost = StepCost.from_specs(MOONLIGHT, H200, GRAPHS_8192, PROF)
    long, short, kv, longest = cost.chunk_sums([(0.0, 600), (0.0, 300), (2000.0, 200)], 5.0)
    assert long == attended_prefill(mc, 0.0, 600) and longest == 600
    assert short == pytest.approx(attended_prefill(mc, 0.0, 300) + attended_prefill(mc, 2000.0, 200))
    assert kv == 5.0 + 27 * 2000.0
    llama = StepCost.from_specs(catalog.model("llama-3.1-8b"), H200, GRAPHS_8192, PROF)
    assert llama.chunk_sums([(0.0, 300)])[1] == 0.0  # one pathway: the prefill sum


def test_the_prefill_pathway_up_projects_a_chunks_cached_context():
    """vLLM 0.26's MLA prefill with context (MLAAttention._compute_prefill_context) gathers each context token's latent
    and runs kv_b_proj on it: 2 x kv_lora_rank 512 x 16 heads x (qk_nope 128 + v 128) = 4,194,304 FLOPs a context token
    a layer on Moonlight, 409.6 of the MHA form's attended tokens (10,240 FLOPs each): 512 x 256 / 320.  A 1,000-token
    chunk after 8,192 cached tokens adds 27 layers x 8,192 x 409.6 attended tokens (2 x 27 x 8,192 x 512 x 16 x 256 =
    0.93 TFLOP); a 500-token chunk (the decode pathway: absorbed, no up-projection) and a fresh prompt add none; Llama's
    attention has no such GEMM."""
    mc, hw = model_costs(MOONLIGHT, GRAPHS_8192), hw_coeffs(H200, "bf16", PROF, MOONLIGHT)
    assert mc.context_upproj_tokens == 512 * 256 / 320 == 409.6
    kv = 27 * 8192.0
    with_ctx = step_time(mc, hw, prefill_tokens=1000, prefill_attended=attended_prefill(mc, 8192.0, 1000),
                         prefill_kv_read_tokens=kv)
    plain = step_time(mc, hw, prefill_tokens=1000, prefill_attended=attended_prefill(mc, 8192.0, 1000))
    assert float(with_ctx.flops - plain.flops) == pytest.approx(2 * 27 * 8192 * 512 * 16 * 256)
    cost = StepCost.from_specs(MOONLIGHT, H200, GRAPHS_8192, PROF)
    long, short, _, _ = cost.chunk_sums([(8192.0, 1000), (0.0, 700), (4096.0, 500)])
    assert long == pytest.approx(attended_prefill(mc, 8192.0, 1000) + 409.6 * kv + attended_prefill(mc, 0.0, 700))
    assert short == attended_prefill(mc, 4096.0, 500)
    llama = StepCost.from_specs(catalog.model("llama-3.1-8b"), H200, GRAPHS_8192, PROF)
    assert llama.model_costs.context_upproj_tokens == 0.0
    assert llama.chunk_sums([(8192.0, 1000)])[0] == attended_prefill(llama.model_costs, 8192.0, 1000)
