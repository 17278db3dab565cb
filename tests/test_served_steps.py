"""The step formula on the steps a real vllm serve ran (calibration.served_steps), on recorded traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibration.served_steps import ServedRun, gpu_step_s, mean_decode_context, replay_steps, served_runs
from calibration.serving_points import serving_setup
from planner.io import catalog

DATA = Path(__file__).resolve().parent.parent / "calibration/data"
LLAMA = DATA / "h200-2026-12-02-timeline/c/serve-llama-trace"
PROFILE = catalog.profile_for("h200-sxm", "0.26.0")


@pytest.fixture(scope="module")
def llama_cost():
    return serving_setup(LLAMA, "llama-3.1-8b", PROFILE)[0]


def test_a_graph_step_costs_what_the_simulator_charges(llama_cost):
    # 40 decodes at 1,000 tokens computed each + a fresh 300-token chunk: the same terms StepCost.step_s adds (a step
    # inside the CUDA graphs has no launch floor): 32 layers x 40 x 1,001 attended by the decodes.  The trace reads
    # the contexts after vLLM's schedule() advanced them by the step (decodes 40 x 1,001, the chunk 0 + 300)
    c = llama_cost
    step = {"tok": 340, "dec": 40, "dctx": 40_040, "chunks": [300], "ctx": [300]}
    attended = 32 * 40 * 1001.0
    want = c.step_s(340, 41, c.attended_prefill(0, 300), attended, attended + c.prefill_kv_read(0))
    assert gpu_step_s(c, step, None) == pytest.approx(want, rel=1e-12)
    # without a traced dctx the run's mean context stands in for each decode
    assert gpu_step_s(c, {k: v for k, v in step.items() if k != "dctx"}, 1000.0) == pytest.approx(want, rel=1e-12)


def test_an_eager_step_is_its_gpu_work_not_its_launch_floor(llama_cost):
    c = llama_cost
    step = {"tok": 2048, "dec": 0, "chunks": [2048], "ctx": [2048]}
    assert c.launch_s(2048, 1, True) > 0  # above the graphs: step_s would take max(GPU, launch)
    const, ac, am = c.parts(2048, 1, c.attended_prefill(0, 2048), 0.0, 0.0)
    assert gpu_step_s(c, step, None) == pytest.approx(const + max(ac, am), rel=1e-12)


def test_the_timeline_overlaps_cpu_calls_with_the_last_steps_gpu_work(llama_cost):
    # three decode steps of 1 ms CPU each (schedule 0.1 + launch 0.4 + output 0.5 ms) whose GPU work g is longer:
    # step n+1 is scheduled once step n-1's output is back, so after the first the loop runs at the GPU's pace
    c = llama_cost
    g = gpu_step_s(c, {"tok": 8, "dec": 8, "dctx": 8000, "chunks": [], "ctx": []}, None)
    steps = [{"t0": 0.01 * i, "t1": 0.01 * i + 1e-4, "exec_s": 4e-4, "tok": 8, "dec": 8, "dctx": 8000, "chunks": [],
              "ctx": [], "y": 2e-4, "u0": 0.0, "u1": 3e-4} for i in range(4)]
    span, total = replay_steps(c, steps)
    assert total == pytest.approx(3 * g, rel=1e-12)
    # first: scheduled at 0, launched 0.1-0.5 ms, no step before it: next schedule at 0.5 + 0.5 = 1.0 ms; second:
    # launched 1.1-1.5 ms, waits for the first's GPU end (0.1 ms + g), then 0.5 ms; third waits for the second's end
    assert g > 1e-3
    t1 = 1e-3
    end1 = 1e-4 + g
    t2 = max(t1 + 5e-4, end1) + 5e-4
    end2 = max(end1, t1 + 1e-4) + g
    t3 = max(t2 + 5e-4, end2) + 5e-4
    assert span == pytest.approx(t3, rel=1e-9)


def test_mean_decode_context_from_lengths(tmp_path):
    # prompts 100 and 300, outputs 2 and 4: contexts 100, 101 and 300..303 -> (201 + 1206) / 6
    f = tmp_path / "b.json"
    f.write_text(json.dumps({"input_lens": [100, 300], "output_lens": [2, 4]}))
    assert mean_decode_context(f) == pytest.approx((100 + 101 + 300 + 301 + 302 + 303) / 6)


def test_recorded_llama_runs_on_a_held_out_host():
    # Llama-3.1-8B chat on the 2026-12-02 timeline host: the formula's steps fill the spans (GPU-bound), and their
    # spans come out within 3.5 % (+0.8 % at 10 req/s, +1.1 % at 24, -3.2 % at 36 over capacity, +1.4 % shared prefix;
    # +1.9 / +3.3 / -1.4 / +1.5 % while the chunks' contexts were read as their starts, +0.8 / +1.3 / -2.5 / -0.9 %
    # before the per-layer step term)
    runs = {r.run: r for r in served_runs(LLAMA, "llama-3.1-8b", PROFILE)}
    assert set(runs) == {"bench-chat10", "bench-chat24", "bench-chat36", "bench-prefix20"}
    want = {"bench-chat10": 0.8, "bench-chat24": 1.1, "bench-chat36": -3.2, "bench-prefix20": 1.4}
    for name, err in want.items():
        r = runs[name]
        assert r.error_pct == pytest.approx(err, abs=0.1)
        assert r.formula_share > 0.9 and not r.exact_contexts
    assert runs["bench-chat24"].steps == 1191 and runs["bench-chat24"].measured_s == pytest.approx(15.96, abs=0.01)


def test_a_launch_bound_run_fills_little_of_its_span():
    # gpt-oss-20b at 10 req/s with 8,192-token steps: Triton MXFP4 compiles and eager launches take the time
    runs = served_runs(DATA / "h200-2026-12-02-serve-mxfp4/h/serve-gpt-oss-20b-trace", "gpt-oss-20b", PROFILE)
    chat10 = next(r for r in runs if r.run == "bench-chat10")
    assert chat10.formula_share < 0.3


def test_error_and_share_are_ratios():
    r = ServedRun("x", 10, 2.0, 2.1, 1.5, True)
    assert r.error_pct == pytest.approx(5.0) and r.formula_share == pytest.approx(0.75)


def test_runs_traced_with_their_decode_contexts():
    # 2026-12-02's fourth campaign traced every step's decode contexts (dctx): Llama-3.1-8B chat 10/20/28 and a
    # shared prefix, GPU-bound (the formula fills >= 97 % of each span): +0.9 / +0.6 / -1.7 / +0.7 % (+2.1 / +2.7 / +0.2 /
    # +0.8 % while the chunks' contexts after the step were read as their starts; +0.8 / +0.7 / -1.7 / -2.4 % before the
    # per-layer step term); Moonlight at 30 req/s -0.7 %, its eager mixed steps launch-bound (the formula's GPU work 52 %
    # of the span): +11.8 % while the MLA variant's eager MoE launch was an additive GPU cost, 2,000-6,000-token steps
    # priced 75-92 ms over the launch where the engine took 60-68 ms (+13.1 % with the chunks' ends as starts, +11.3 %
    # before the layer term, +10.7 % before the fused-MoE kernel law)
    served = DATA / "h200-2026-12-02-served-steps"
    runs = {r.run: r for r in served_runs(served / "q/serve-llama-steps", "llama-3.1-8b", PROFILE)}
    want = {"bench-chat10": 0.9, "bench-chat20": 0.6, "bench-chat28": -1.7, "bench-prefix20": 0.7}
    for name, err in want.items():
        assert runs[name].exact_contexts and runs[name].formula_share > 0.95
        assert runs[name].error_pct == pytest.approx(err, abs=0.1)
    moon = {r.run: r for r in served_runs(served / "s/serve-moonlight-16b-a3b-steps", "moonlight-16b-a3b", PROFILE)}
    assert moon["bench-chat30"].error_pct == pytest.approx(-0.7, abs=0.1) and moon["bench-chat30"].formula_share < 0.6


def test_a_chunk_with_context_starts_where_its_computed_tokens_were_before_the_step(llama_cost):
    # a 512-token chunk traced with 2,560 computed tokens (after schedule()): it attends positions 2,048..2,559 and
    # reads the 2,048 tokens' KV before it, as the simulator prices a chunk starting at 2,048
    c = llama_cost
    step = {"tok": 512, "dec": 0, "chunks": [512], "ctx": [2560]}
    const, ac, am = c.parts(512, 1, c.attended_prefill(2048, 512), 0.0, c.prefill_kv_read(2048))
    assert gpu_step_s(c, step, None) == pytest.approx(const + max(ac, am), rel=1e-12)
    assert gpu_step_s(c, step, None) < gpu_step_s(c, {**step, "ctx": [3072]}, None)
