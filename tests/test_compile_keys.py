"""The Triton MoE kernels' first-use compiles of step sizes above the CUDA graphs (planner.compile_keys): the
configuration lookup vLLM 0.26 does, the key arithmetic, the warm-up it implies, and the rule checked on every
traced engine step of the committed `vllm serve` traces (calibration/data/h200-2026-12-02-serve-*)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.compile_keys import (
    cold_start_note,
    fused_moe_key,
    keys_at_start,
    mixed_context,
    mxfp4_key,
    step_compile_key,
    warm_up_sizes,
)
from planner.fused_moe_configs import default_config, step_config, tuned_table
from planner.io import catalog
from planner.kernel_families import cudagraph_max_tokens
from planner.serving import EngineConfig, StepCost, simulate
from planner.serving.workloads import make_requests
from planner.specs import Deployment

DATA = Path(__file__).resolve().parent.parent / "calibration" / "data"
H200 = catalog.gpu("h200-sxm")
QWEN, MIXTRAL, MOON = (catalog.model(m) for m in ("qwen3-30b-a3b", "mixtral-8x7b", "moonlight-16b-a3b"))


@pytest.fixture(scope="module")
def profile():
    return catalog.profile_for("h200-sxm", "0.26.0")


def test_the_tuned_configuration_is_the_key_nearest_the_step_and_the_smaller_on_a_tie():
    """E=128,N=768,device_name=NVIDIA_H200.json (Qwen3-30B-A3B bf16): keys ... 512, 1024, 1536 ...; 561 runs 512's
    (BLOCK_SIZE_M 64), 768 is as near 512 as 1024 and takes 512's, 769 takes 1024's (BLOCK_SIZE_M 128, GROUP 16),
    1,281 1536's (GROUP 1).  Moonlight's E=64,N=1408 has no H200 file: the default, BLOCK_SIZE_M 128 above 512
    tokens and GROUP_SIZE_M 1 until an expert averages over 128 tokens (8,256 tokens for 64 experts)."""
    t = tuned_table(QWEN, "bf16", "h200-sxm")
    assert step_config(t, 561, 128, "bf16")["BLOCK_SIZE_M"] == 64 and step_config(t, 768, 128, "bf16") == t[512]
    assert step_config(t, 769, 128, "bf16") == t[1024] == t[4096] and t[1024]["GROUP_SIZE_M"] == 16
    assert step_config(t, 1281, 128, "bf16") == t[1536] == t[3072] != t[1024]
    assert tuned_table(MOON, "bf16", "h200-sxm") is None and tuned_table(QWEN, "int4", "h200-sxm") is None
    assert tuned_table(QWEN, "bf16", "rtx-4090") is None
    d = default_config(1599, 64, "bf16")
    assert (d["BLOCK_SIZE_M"], d["BLOCK_SIZE_N"], d["BLOCK_SIZE_K"], d["GROUP_SIZE_M"]) == (128, 128, 64, 1)
    assert default_config(8256 + 64, 64, "bf16")["GROUP_SIZE_M"] == 16
    assert default_config(1599, 64, "fp8")["BLOCK_SIZE_K"] == 128  # fp8 elements are half as wide


def test_the_fused_moe_key_is_the_configuration_and_two_multiples_of_16():
    """Qwen3 (E 128, k 8), 1,599 tokens, BLOCK_SIZE_M 128: EM = 1,599 × 8 + 128 × 127 = 29,048 (≡ 8 mod 16),
    M·k = 12,792 (≡ 8): (config, False, False); 1,456: EM 27,904 and 11,648, both multiples of 16.
    Mixtral (E 8, k 2), 980: EM = 1,960 + 8 × 127 = 2,976 (= 16 × 186), M·k = 1,960 (≡ 8 mod 16):
    (config, True, False)."""
    t = tuned_table(QWEN, "bf16", "h200-sxm")
    assert fused_moe_key(t, 128, 8, "bf16", 1599)[1:] == (False, False)
    assert fused_moe_key(t, 128, 8, "bf16", 1456)[1:] == (True, True)
    assert fused_moe_key(tuned_table(MIXTRAL, "bf16", "h200-sxm"), 8, 2, "bf16", 980)[1:] == (True, False)
    assert mxfp4_key(2010) == (62, False) and mxfp4_key(2048) == (64, True)
    dense = Deployment.for_gpu(H200)
    assert step_compile_key(catalog.model("llama-3.1-8b"), dense) is None
    assert step_compile_key(QWEN, Deployment.for_gpu(H200, weight_dtype="int4")) is None  # Marlin, not Triton


def test_a_fresh_engine_lacks_four_keys_on_qwen3_five_on_mixtral_one_on_moonlight_448_on_gpt_oss():
    """vllm serve's 8,192 tokens per step on an H200, graphs up to 512 tokens.  Qwen3: configurations A (512 key),
    B (1024 = 4096) and C (1536 = 2048 = 3072) × M even or odd; B-even is the start-up run's (8,192), A-even the 512
    capture's: 513 (A odd), 769 (B odd), 1,281 (C odd), 1,282 (C even).  Mixtral (EM ≡ 8 + 2M mod 16): X = every
    key but 2048's, Y = 2048's; M ≡ 0, 4 or else mod 8; X-0 compiled at start: 513, 516, 1,793, 1,796, 1,800.
    Moonlight (default configuration, one above 512 tokens; 6M ≡ 0 mod 16 iff M ≡ 0 mod 8): 513.  gpt-oss: 448."""
    dep = Deployment.for_gpu(H200)
    assert warm_up_sizes(dep, QWEN) == [513, 769, 1281, 1282]
    assert warm_up_sizes(dep, MIXTRAL) == [513, 516, 1793, 1796, 1800]
    assert warm_up_sizes(dep, MOON) == [513]
    oss = catalog.model("gpt-oss-20b")
    assert len(warm_up_sizes(Deployment.for_gpu(H200, weight_dtype="mxfp4"), oss)) == 448
    assert warm_up_sizes(Deployment.for_gpu(H200, max_num_batched_tokens=512), QWEN) == []  # all inside the graphs
    # the MXFP4 kernel's 1,024 capture does not compile the 1,040-token step's key (traced, k/): only the start-up
    assert keys_at_start(Deployment.for_gpu(H200, weight_dtype="mxfp4"), oss) == {mxfp4_key(8192)}


@given(st.sampled_from(["qwen3-30b-a3b", "mixtral-8x7b", "moonlight-16b-a3b", "deepseek-v2-lite", "gpt-oss-20b"]),
       st.sampled_from([1024, 2048, 4096, 8192]), st.integers(1, 8192))
def test_after_the_warm_up_no_step_size_compiles(model_id, budget, tokens):
    """Invariant: every step size up to the budget has a key the start-up or the warm-up prompts compiled, and each
    warm-up prompt brings a key nothing before it had."""
    m = catalog.model(model_id)
    dep = Deployment.for_gpu(H200, weight_dtype="mxfp4" if model_id.startswith("gpt-oss") else "bf16",
                             max_num_batched_tokens=budget)
    key, sizes = step_compile_key(m, dep), warm_up_sizes(dep, m)
    done = set(keys_at_start(dep, m)) | {key(s) for s in sizes}
    assert len({key(s) for s in sizes}) == len(sizes) and not {key(s) for s in sizes} & keys_at_start(dep, m)
    assert tokens > budget or tokens <= cudagraph_max_tokens(dep, m) or key(tokens) in done


F_TRACE = "h200-2026-12-02-serve-steps/f/serve-mixtral-8x7b-trace"
L_TRACE = "h200-2026-12-02-serve-fusedmoe/l/serve-moonlight-16b-a3b-trace"
TRACED = [("h200-2026-12-02-serve-steps/b/serve-qwen3-30b-a3b-trace", "qwen3-30b-a3b", (4, 0, 279, 0)),
          ("h200-2026-12-02-serve-fusedmoe/n/serve-deepseek-v2-lite-trace", "deepseek-v2-lite", (1, 0, 493, 1)),
          ("h200-2026-12-02-serve-fusedmoe/o/serve-moonlight-16b-a3b-trace2", "moonlight-16b-a3b", (1, 0, 579, 1)),
          ("h200-2026-12-02-serve-fusedmoe/p/serve-mixtral-8x7b-warmed", "mixtral-8x7b", (5, 0, 58, 0)),
          ("h200-2026-12-02-serve-steps/d/serve-qwen3-30b-a3b-gil", "qwen3-30b-a3b", (4, 0, 142, 0)),
          ("h200-2026-12-02-serve-steps/f/serve-mixtral-8x7b-trace", "mixtral-8x7b", (4, 0, 101, 0)),
          ("h200-2026-12-02-serve-fusedmoe/l/serve-moonlight-16b-a3b-trace", "moonlight-16b-a3b", (1, 0, 554, 1)),
          ("h200-2026-12-02-serve-fusedmoe/m/serve-qwen3-30b-a3b-warmed", "qwen3-30b-a3b", (4, 0, 287, 0)),
          ("h200-2026-12-02-serve-mxfp4/g/serve-gpt-oss-120b-trace", "gpt-oss-120b", (21, 0, 116, 0)),
          ("h200-2026-12-02-serve-mxfp4/h/serve-gpt-oss-20b-trace", "gpt-oss-20b", (58, 0, 230, 0)),
          ("h200-2026-12-02-serve-mxfp4/j/serve-gpt-oss-20b-sweep", "gpt-oss-20b", (231, 0, 143, 0)),
          ("h200-2026-12-02-serve-mxfp4/k/serve-gpt-oss-20b-warmed", "gpt-oss-20b", (192, 1, 298, 0))]


@pytest.mark.parametrize("folder,model_id,counts", TRACED, ids=[t[0].split("/")[-2] for t in TRACED])
def test_every_traced_eager_step_stalls_exactly_when_its_key_is_new(folder, model_id, counts):
    """(new keys, of them no stall, seen keys, of them stalled) per traced engine, every step above the graphs from
    the engine's start: 525 of the 526 new keys stalled (k/'s exception: one MXFP4 sweep key), 3 of the 3,280 seen
    ones (the three MLA engines' early prompt chunk with context: MLA's own Triton kernel, not a MoE key)."""
    from calibration.trace_points import shape_compiles

    c = shape_compiles(DATA / folder, model_id)
    assert (c.new_keys, c.quiet_new, c.compiled_steps, c.stalled_compiled) == counts


def test_the_fused_moe_stall_is_fitted_per_moe_layer_on_qwen3_and_held_out_on_mixtral_and_moonlight(profile):
    """Qwen3-30B-A3B's trace (b/): 4 stalls, median 1.662 s over its seen keys' eager call = 34.6 ms per MoE layer
    (48).  Held out: Mixtral-8x7B (32 layers) 1.108 s predicted, 1.482 measured (−25 %); Moonlight-16B-A3B (26 MoE
    layers, the MLA variant takes the same kernel's term) 0.900 s, 0.990 measured (−9 %)."""
    from calibration.refit import FUSED_COMPILE_FIT
    from calibration.trace_points import shape_compiles
    from planner.compile_keys import shape_compile_s

    b = shape_compiles(DATA / FUSED_COMPILE_FIT[0], FUSED_COMPILE_FIT[1])
    assert b.median_s == pytest.approx(1.662, abs=0.001)
    assert profile.moe.shape_compile_layer_s == pytest.approx(b.median_s / 48, rel=1e-9)
    assert profile.moe_variants["mla"].shape_compile_layer_s == profile.moe.shape_compile_layer_s
    f = shape_compiles(DATA / F_TRACE, "mixtral-8x7b")
    m = shape_compiles(DATA / L_TRACE, "moonlight-16b-a3b")
    assert shape_compile_s(MIXTRAL, "bf16", profile) / f.median_s - 1 == pytest.approx(-0.252, abs=0.005)
    assert shape_compile_s(MOON, "bf16", profile) / m.median_s - 1 == pytest.approx(-0.091, abs=0.005)


def test_a_cold_fused_moe_engine_stalls_once_per_new_key_and_a_replay_carries_keys_from_run_to_run(profile):
    """Prompts of 1,599, 1,600 (C, even: new), 1,601 (C odd: seen) and 8,000 (B even: the start-up run's) tokens, 10 s
    apart, on a cold Qwen3 engine: two stalls of 48 × 34.6 ms; a warm one (plans) none.  Mixtral's traced engine (f/)
    stalled 1, 2 and 1 times in its three runs; replayed in order, each starting with the keys the runs before it
    compiled, the simulator predicts 1, 2 and 2 (1, 2 and 1 before the fused-MoE kernel law: with its step times the
    simulated chat4 batches reach one step size above the graphs more that the runs before had not compiled)."""
    from calibration.serving_points import replay_folder

    dep = Deployment.for_gpu(H200)
    cost = StepCost.from_specs(QWEN, H200, dep, profile)
    reqs = make_requests(np.array([1599, 1600, 1601, 8000]), np.full(4, 2), np.arange(4) * 10.0)
    warm = simulate(reqs, cost, EngineConfig(200_000, max_num_batched_tokens=8192))
    cold = simulate(reqs, cost, EngineConfig(200_000, max_num_batched_tokens=8192, cold_step_shapes=True))
    assert cold.num_compile_stalls == 2 and warm.num_compile_stalls == 0
    assert cold.ttft_s - warm.ttft_s == pytest.approx([cost.shape_compile_s, cost.shape_compile_s, 0, 0])
    assert [c.predicted["compile_stalls"] for c in replay_folder(DATA / F_TRACE, "mixtral-8x7b", profile)] == \
        [1, 2, 2]


def test_the_plans_warm_up_left_held_out_mixtral_without_a_stall(profile):
    """p/: Mixtral-8x7B cold, the five prompts warm_up_sizes lists (513, 516, 1,793, 1,796, 1,800 tokens) each
    stalled 1.6-1.95 s, then chat at 4 req/s ran 58 eager steps without one (f/, unwarmed: 4 stalls in 140
    requests); the replay, starting with the sweep's keys, predicts none."""
    from calibration.serving_points import replay_folder
    from calibration.trace_points import stalls
    from planner.io.jsonl import read_jsonl

    p = DATA / "h200-2026-12-02-serve-fusedmoe/p/serve-mixtral-8x7b-warmed"
    swept = [t for r in read_jsonl(p / "serve_bench.jsonl") if r["type"] == "size_sweep" for t in r["prompt_tokens"]]
    assert swept == warm_up_sizes(Deployment.for_gpu(H200), MIXTRAL)
    assert stalls(p)["chat4"]["stalls"] == 0 and stalls(p)["chat4"]["eager_steps"] == 58
    assert [c.predicted["compile_stalls"] for c in replay_folder(p, "mixtral-8x7b", profile)] == [0]


def test_the_plan_names_the_fused_moe_warm_up_prompts(profile):
    note = cold_start_note(QWEN, Deployment.for_gpu(H200), profile)
    each = 48 * profile.moe.shape_compile_layer_s
    assert "Triton fused MoE" in note and "4 keys from 513 to 8,192 tokens" in note
    assert f"~{each:.1f} s each here, ~{4 * each:.0f} s in all" in note
    assert "prompts of 513, 769, 1,281, 1,282 tokens" in note
    assert "1 key from 513" in cold_start_note(MOON, Deployment.for_gpu(H200), profile)
    assert "keys from" not in cold_start_note(QWEN, Deployment.for_gpu(H200, max_num_batched_tokens=512), profile)


def test_the_warm_up_prompts_fit_the_engines_max_model_len(profile, tmp_path):
    """vLLM refuses a prompt over --max-model-len, so only the keys of steps up to it can be warmed one prompt at a
    time.  Qwen3-30B-A3B at --max-model-len 1,200: 513 and 769 of its four sizes (1,281 and 1,282 are left to the
    first traffic).  gpt-oss-120b at 2,000 + 400 tokens (the plan's --max-model-len 2,400): buckets k = 32..74,
    since 32 x 74 + 17 = 2,385 <= 2,400 < 32 x 75 + 17 = 2,417: 2 x 43 = 86 of its 448 keys; at 1,024 (inside its
    graphs' 1,024 + 17) none, and the other way, --max-num-batched-tokens 1024, is named.  `planner deploy` writes
    the note of the engine it writes (its --max-model-len)."""
    note = cold_start_note(QWEN, Deployment.for_gpu(H200), profile, 1200)
    assert "Warm it with 2 requests" in note and "prompts of 513, 769 tokens" in note
    assert "the other 2 keys are of steps of more than 1,200 tokens" in note and note.endswith("first traffic")
    oss = catalog.model("gpt-oss-120b")
    dep = Deployment.for_gpu(H200, weight_dtype="mxfp4")
    note = cold_start_note(oss, dep, profile, 2400)
    assert "Warm it with 86 requests" in note and "k = 32..74" in note and "the other 362 keys" in note
    assert "; or serve with --max-num-batched-tokens 1024" in note
    none = cold_start_note(oss, dep, profile, 1024)
    assert "Warm it" not in none and "The 448 keys are of steps of more than 1,024 tokens" in none
    assert cold_start_note(oss, dep, profile) == cold_start_note(oss, dep, profile, 8192)  # every key sendable
    assert "k = 32..255 (measured: no stall afterwards), or serve" in cold_start_note(oss, dep, profile)
    from typer.testing import CliRunner

    from planner.cli.app import app

    res = CliRunner().invoke(app, ["deploy", "--model", "gpt-oss-120b", "--gpu", "h200-sxm", "--rate", "1",
                                   "--prompt-tokens", "2000", "--output-tokens", "400", "--max-model-len", "4000",
                                   "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    # 32 x 124 + 17 = 3,985 <= 4,000: k = 32..124, 2 x 93 = 186 keys
    assert "Warm it with 186 requests" in (tmp_path / "README.md").read_text()


def test_the_configuration_table_is_written_as_vllm_reads_it(tmp_path):
    """calibration.moe_configs keeps each file's {M: config} with triton_version dropped and equal configurations
    stored once; the committed table has the wheel's 326 files, and a bad folder is refused naming it (exit 2)."""
    from calibration.moe_configs import collect, main
    from planner.fused_moe_configs import _data

    a = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 3}
    b = dict(a, BLOCK_SIZE_M=128)
    (tmp_path / "E=8,N=64,device_name=X.json").write_text(json.dumps({"triton_version": "3.1", "16": a, "2": a,
                                                                         "1024": b}))
    (tmp_path / "E=4,N=64,device_name=X.json").write_text(json.dumps({"1": b}))
    out = collect(tmp_path)
    assert out["count"] == 2 and len(out["configs"]) == 2
    # files in name order: E=4 first, so its config (b) is index 0
    assert out["files"]["E=8,N=64,device_name=X.json"] == {"2": 1, "16": 1, "1024": 0}
    assert main([str(tmp_path / "missing")]) == 2
    assert _data()["count"] == 326 and "E=128,N=768,device_name=NVIDIA_H200.json" in _data()["files"]


def test_an_mla_engine_stalls_once_on_an_early_context_chunk_and_the_note_says_so(profile):
    """Steps with a prompt chunk that has context, stalled without a new MoE key: Moonlight its first (l/ 0.55 s, o/
    0.50 s), DeepSeek-V2-Lite its second (n/ 0.70 s), nothing after; no such stall on the GQA engines (Qwen3 b/,
    Mixtral f/, Llama c/)."""
    from calibration.trace_points import context_stalls

    fused = "h200-2026-12-02-serve-fusedmoe/"
    got = {f: [(i, round(s, 2)) for i, s in context_stalls(DATA / fused / f, m)] for f, m in (
        ("l/serve-moonlight-16b-a3b-trace", "moonlight-16b-a3b"),
        ("n/serve-deepseek-v2-lite-trace", "deepseek-v2-lite"),
        ("o/serve-moonlight-16b-a3b-trace2", "moonlight-16b-a3b"))}
    assert list(got.values()) == [[(0, 0.55)], [(1, 0.70)], [(0, 0.50)]]
    assert context_stalls(DATA / TRACED[0][0], "qwen3-30b-a3b") == []
    assert context_stalls(DATA / F_TRACE, "mixtral-8x7b") == []
    assert context_stalls(DATA / "h200-2026-12-02-serve-steps/c/serve-llama-trace", "llama-3.1-8b") == []
    assert "MLA engine also stalls once" in cold_start_note(MOON, Deployment.for_gpu(H200), profile)
    assert "MLA" not in cold_start_note(QWEN, Deployment.for_gpu(H200), profile)


#: the five traced MLA engines: 2026-12-02 l/, n/, o/ (the context compile's fit) and 2026-12-05 a/, b/ (held out)
MLA_TRACES = (("h200-2026-12-02-serve-fusedmoe/l/serve-moonlight-16b-a3b-trace", "moonlight-16b-a3b"),
              ("h200-2026-12-02-serve-fusedmoe/n/serve-deepseek-v2-lite-trace", "deepseek-v2-lite"),
              ("h200-2026-12-02-serve-fusedmoe/o/serve-moonlight-16b-a3b-trace2", "moonlight-16b-a3b"),
              ("h200-2026-12-05-mla-long/a/serve-moonlight-long", "moonlight-16b-a3b"),
              ("h200-2026-12-05-mla-long/b/serve-dsv2lite-long", "deepseek-v2-lite"))


def test_the_mla_context_compile_comes_on_a_step_mixing_a_chunk_with_context_and_a_fresh_prompt(profile):
    """Of each traced MLA engine's steps, the one that stalled without a new MoE key (over STALL_S = 0.3 s) is its
    first step mixing a prompt chunk with context on MLA's prefill pathway (more than 512 tokens) and a fresh prompt,
    on all five (n/'s first step mixing a 9..512-token chunk with context did not: the decode pathway); a/ and b/
    ran 1 and 6 lone chunks with context before it (b/ with 8,191-13,944 tokens of context), none stalled.  The
    profile's stall is the median of the fit engines' 0.553, 0.702, 0.504 s = 0.553 s; held out, a/ 0.496 s (-10 %)
    and b/ 0.620 s (+12 %)."""
    from calibration.serving_points import chunk_starts, traced_steps
    from calibration.trace_points import STALL_S, context_stalls

    where, stalls = [], []
    for folder, model in MLA_TRACES:
        mixed = [s for s in traced_steps(DATA / folder) if mixed_context(chunk_starts(s), s["chunks"])]
        stalled = [i for i, s in enumerate(mixed) if (s.get("exec_s") or 0.0) > STALL_S]
        where.append(stalled[:1])
        stalls += [round(x, 3) for _, x in context_stalls(DATA / folder, model)]
    assert where == [[0], [0], [0], [0], [0]]
    assert stalls == [0.553, 0.702, 0.504, 0.496, 0.62]
    assert profile.mla_context_compile_s == pytest.approx(float(np.median(stalls[:3])), abs=5e-4)
    assert mixed_context([0, 640], [900, 513]) and not mixed_context([0, 640], [900, 512])
    assert not mixed_context([1500], [900]) and not mixed_context([0, 0], [900, 900])
    assert not mixed_context([0, 640], [900, 600], float("inf"))  # attention of one pathway: no such step


def test_the_cold_start_note_says_which_prompts_make_the_mla_compile(profile):
    """Moonlight at vllm serve's 8,192 tokens a step: the stall (the profile's 0.55 s) comes on a chunk of more than
    512 tokens with context beside a fresh prompt; prompts totalling more than 8,192 + 512 = 8,704 tokens sent at once,
    then a short one, make one (each within --max-model-len: a single 8,704-token prompt would not fit a 4,096-token
    engine).  Dense models say nothing of it."""
    note = cold_start_note(MOON, Deployment.for_gpu(H200), profile, 4096)
    assert "stalls once, 0.55 s" in note and "more than 512 tokens with context beside a fresh prompt" in note
    assert "total more than 8,704 tokens (each within the engine's --max-model-len), then a short one" in note
    assert "MLA" not in cold_start_note(catalog.model("llama-3.1-8b"), Deployment.for_gpu(H200), profile, 4096)


def test_a_hosts_own_traces_give_its_mla_context_compile(profile):
    """What `planner calibrate +serve` fits on a host (calibration.serve_floor.with_traces): the traced MLA engines'
    median stall, a/ alone 0.496 s; a trace of no MLA engine leaves the profile's 0.553 s."""
    from calibration.serve_floor import with_context_compile

    quiet = {"log": lambda _: None}
    folder, model = MLA_TRACES[3]
    assert with_context_compile(profile, [(DATA / folder, model)], **quiet).mla_context_compile_s == pytest.approx(
        0.496, abs=1e-3)
    assert with_context_compile(profile, [(DATA / F_TRACE, "mixtral-8x7b")], **quiet) is profile


def test_the_simulated_mla_engine_pays_its_context_compile_once(profile):
    """A burst of 40 prompts of 3,000 tokens at 8,192 tokens a step: the third prompt's chunk (1,192 of 3,000, the
    rest next step beside the fourth prompt) mixes context and a fresh prompt: Moonlight pays the MoE's new step-size
    keys and the context compile once, 0.553 s; the same engine without the term, and a GQA MoE, pay only the MoE
    keys."""
    reqs = make_requests(np.full(40, 3000), np.full(40, 16), np.zeros(40))
    dep = Deployment.for_gpu(H200)

    def run(model, prof):
        cost = StepCost.from_specs(model, H200, dep, prof)
        cfg = EngineConfig(400_000, 256, 8192, cold_step_shapes=True)
        return simulate(reqs, cost, cfg), cost

    moon, cost = run(MOON, profile)
    bare, _ = run(MOON, profile.model_copy(update={"mla_context_compile_s": 0.0}))
    assert bare.num_compile_stalls >= 1  # the MoE's new step-size keys
    qwen, qcost = run(QWEN, profile)
    assert cost.context_compile_s == pytest.approx(0.553, abs=1e-3) and qcost.context_compile_s == 0.0
    qwen_bare, _ = run(QWEN, profile.model_copy(update={"mla_context_compile_s": 0.0}))
    assert qwen.num_compile_stalls == qwen_bare.num_compile_stalls >= 1 and qwen.duration_s == qwen_bare.duration_s
    assert moon.num_compile_stalls == bare.num_compile_stalls + 1
    assert moon.duration_s - bare.duration_s == pytest.approx(cost.context_compile_s, rel=0.05)


def test_planner_replay_pays_the_compiles_once_per_engine_and_not_on_a_warm_one():
    """`planner replay` of f/'s three runs in the order they ran on one engine: 1, 2 and 2 compile stalls predicted
    (measured 1, 2, 1; see above); --warm-engine: none; the chat4 run alone, as a fresh engine's first traffic, pays
    its own."""
    from typer.testing import CliRunner

    from planner.cli.app import app

    f = DATA / F_TRACE
    args = ["--model", "mixtral-8x7b", "--gpu", "h200-sxm", "--json"]
    files = [str(f / f"bench-{r}.json") for r in ("warm", "chat2", "chat4")]

    def stalls(*extra):
        r = CliRunner().invoke(app, ["replay", *extra, *args])
        assert r.exit_code == 0, r.output
        return [x["predicted"]["compile_stalls"] for x in json.loads(r.output)["runs"]]

    assert stalls(*files) == [1, 2, 2]
    assert stalls(*files, "--warm-engine") == [0, 0, 0]
    assert stalls(files[2])[0] >= 1
