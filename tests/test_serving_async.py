"""vLLM 0.26's async scheduling in the simulator (planner.serving.engine.Engine.send_outputs, Scheduler.admit_arrivals):
the engine core schedules step N+1 when step N's launch call returns and sends step N's tokens when step N+1's call
returns.  Traced on 2026-12-02 (calibration/data/README.md): a client got its first token 5-9 ms after the next
step's ``execute_model`` call returned, and a prompt that arrived during an eager step's launch went into the next
step.  Hand-checked on Llama-3.1-8B with the committed profile: a 2,048-token prompt is an eager step (above the
512-token CUDA graphs) whose launch call (32 layers x the profile's eager cost per layer, 26.5 ms) is shorter than its
GPU work (~50 ms)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.io import catalog
from planner.serving import EngineConfig, StepCost, simulate
from planner.serving.workloads import make_requests
from planner.specs import Deployment


@pytest.fixture(scope="module")
def llama():
    g = catalog.gpu("h200-sxm")
    return StepCost.from_specs(catalog.model("llama-3.1-8b"), g, Deployment.for_gpu(g),
                               catalog.profile_for("h200-sxm", "0.26.0"))


def steps(cost):
    """(A's prefill step s, its launch call s, the step of B's prefill + A's first decode s, that step's call s)."""
    lf = cost.num_full_layers
    d_a = cost.step_s(2048, 1, cost.attended_prefill(0, 2048), 0.0, 0.0)
    d_2 = cost.step_s(2049, 2, cost.attended_prefill(0, 2048), lf * 2049, lf * 2049)
    return d_a, cost.cpu_s(2048, 1, True), d_2, cost.cpu_s(2049, 2, True)


def test_an_eager_steps_launch_call_is_the_profiles_floor(llama):
    """Dense: the call is the launch floor and the eager per-layer cost the in-process stage fits additively
    (32 x (0.749 + 0.103) ms = 27.3 ms), 0 inside the CUDA graphs; the step's GPU work is longer."""
    d_a, cpu_a, _, _ = steps(llama)
    prof = catalog.profile_for("h200-sxm", "0.26.0")
    assert llama.launch_s(2048, 1, True) == pytest.approx(32 * prof.eager_layer_launch_s)
    assert cpu_a == pytest.approx(32 * (prof.eager_layer_launch_s + prof.eager_layer_overhead_s))
    assert cpu_a == pytest.approx(0.0273, abs=1e-4)
    assert 0.02 < cpu_a < d_a
    assert llama.cpu_s(512, 512) == 0.0 and llama.cpu_s(1, 1) == 0.0


def test_a_prompt_arriving_during_the_launch_call_goes_into_the_next_step(llama):
    """B arrives 5 ms after A, inside A's 26.5 ms launch call: the next step (scheduled when the call returned) takes
    B's prompt with A's first decode.  A's first token leaves when that step's call returns: d_A + its call; B's
    when the step after it (a CUDA-graph decode, no call) starts: d_A + d_2."""
    d_a, _, d_2, cpu_2 = steps(llama)
    res = simulate(make_requests(2048, 4, [0.0, 0.005]), llama, EngineConfig(200_000))
    assert res.first_token_s == pytest.approx([d_a + cpu_2, d_a + d_2], rel=1e-12)
    assert cpu_2 > 0.02  # the delay a client sees: the next eager step's whole call


def test_a_prompt_arriving_after_the_launch_call_waits_one_step(llama):
    """B arrives after A's launch call returned but before A's step ended: the next step was already scheduled
    without it (A's first decode alone, a CUDA graph: A's first token leaves at d_A); B's prompt goes into the one
    after, which starts when that decode ends."""
    d_a, cpu_a, _, _ = steps(llama)
    t_b = (cpu_a + d_a) / 2
    res = simulate(make_requests(2048, 4, [0.0, t_b]), llama, EngineConfig(200_000))
    lf = llama.num_full_layers
    decode = llama.step_s(1, 1, 0.0, lf * 2049, lf * 2049)
    assert res.first_token_s[0] == pytest.approx(d_a, rel=1e-12)
    assert res.first_token_s[1] > d_a + decode + 0.02  # its own 2,048-token step after A's first decode


def test_without_async_scheduling_tokens_leave_when_their_step_ends(llama):
    """--no-async-scheduling: the next step is scheduled when the last one ended (B, arriving during A's step, is in
    it) and the tokens leave at once: A's first token at d_A, B's at d_A + d_2."""
    d_a, cpu_a, d_2, _ = steps(llama)
    for t_b in (0.005, (cpu_a + d_a) / 2):
        res = simulate(make_requests(2048, 4, [0.0, t_b]), llama, EngineConfig(200_000, async_scheduling=False))
        assert res.first_token_s == pytest.approx([d_a, d_a + d_2], rel=1e-12)


def test_a_finished_requests_next_turn_leaves_from_when_its_client_heard(llama):
    """Closed loop of one client: each request (2,048 tokens, 1 output token) finishes in its own prefill step and
    the engine is then idle, so it is sent at once and the next request arrives one request overhead later; every
    request's TTFT is its prefill step, and they come back to back."""
    reqs = make_requests(np.full(3, 2048), np.full(3, 1), np.zeros(3))
    from dataclasses import replace

    res = simulate(replace(reqs, closed_loop=1), llama, EngineConfig(200_000))
    d_a = steps(llama)[0]
    assert res.ttft_s == pytest.approx([d_a + llama.request_overhead_s] * 3, rel=1e-9)
    gaps = np.diff(res.arrival_s)
    assert gaps == pytest.approx([d_a + llama.request_overhead_s] * 2, rel=1e-9)


def test_the_openai_servers_output_handling_delays_first_and_last_tokens_by_the_requests_served(llama):
    """``stream_output_overhead_s``: the server streams every request's token of a step before a first or last token
    reaches its client.  Four 100-token prompts at t = 0 share one step (inside the CUDA graphs: no launch call, sent
    at once); served = 4 running, so each first token is 4 x 1 ms later; their 3rd (last) tokens finish together two
    steps on, served = 0 running + 4 finished: 4 ms later too, so TPOT does not move.  0 (in-process) changes
    nothing."""
    wl = make_requests(100, 3, [0.0] * 4)
    base = simulate(wl, llama, EngineConfig(200_000))
    slow = simulate(wl, llama, EngineConfig(200_000, stream_output_overhead_s=0.001))
    assert np.asarray(slow.first_token_s) - np.asarray(base.first_token_s) == pytest.approx([0.004] * 4, abs=1e-12)
    assert np.asarray(slow.finish_s) - np.asarray(base.finish_s) == pytest.approx([0.004] * 4, abs=1e-12)
    assert simulate(wl, llama, EngineConfig(200_000, stream_output_overhead_s=0.0)).first_token_s == \
        pytest.approx(base.first_token_s, rel=0, abs=0)


@pytest.mark.parametrize("bad", [-1e-6, 60.0, "1"])
def test_stream_output_overhead_must_be_seconds(bad):
    with pytest.raises(ValueError, match="stream_output_overhead_s"):
        EngineConfig(200_000, stream_output_overhead_s=bad)


def test_engine_setup_takes_the_output_handling_only_behind_the_http_server():
    from planner.serving import engine_setup

    g, m = catalog.gpu("h200-sxm"), catalog.model("llama-3.1-8b")
    prof = catalog.profile_for("h200-sxm", "0.26.0")
    assert prof.stream_output_overhead_s == pytest.approx(110.1e-6, abs=0.2e-6)
    _, http = engine_setup(m, g, Deployment.for_gpu(g), prof)
    _, inproc = engine_setup(m, g, Deployment.for_gpu(g), prof, http_frontend=False)
    assert http.stream_output_overhead_s == prof.stream_output_overhead_s and inproc.stream_output_overhead_s == 0.0
