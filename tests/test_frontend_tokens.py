"""The OpenAI server's time per prompt token before the engine schedules a request (issue #21), from the recorded
traces of vllm serve (calibration.trace_points.frontend_token_slope; calibration/data/README.md, 'The prompt's own
time in the OpenAI server').  Within a run, a longer prompt reaches the engine later: the server tokenises its text
(and the engine hashes its blocks).  The simulator adds it to each request's latencies behind the HTTP server
(EngineConfig.frontend_token_overhead_s, SimResult.request_overhead_each_s)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from calibration.refit import DATA, STREAM_OUTPUT_FIT
from calibration.trace_points import UNQUEUED_PCT, client_lags, frontend_token_slope
from planner.io import catalog
from planner.serving import EngineConfig, simulate
from planner.serving.workloads import make_requests
from planner.serving.config import engine_setup, http_terms
from planner.specs import Deployment

PROF = catalog.profile_for("h200-sxm", "0.26.0")


def test_a_run_s_lags_pair_with_its_prompts():
    q = {c.run: c for c in client_lags(DATA / "h200-2026-12-04-stream-check/q/serve-llama-steps")}
    assert {r: len(c.prompt_tokens) for r, c in q.items()} == {"chat10": 200, "chat20": 400, "chat28": 560,
                                                              "prefix20": 300}
    assert set(q["prefix20"].prompt_tokens) == {2304}  # one length: it says nothing of the slope
    c = q["chat10"]
    lag, tokens = np.asarray(c.lags_s), np.asarray(c.prompt_tokens)
    keep = lag <= np.percentile(lag, UNQUEUED_PCT)
    # the longer half of the unqueued requests reached the engine later than the shorter half
    short, long_ = tokens[keep] < np.median(tokens[keep]), tokens[keep] >= np.median(tokens[keep])
    assert np.median(lag[keep][long_]) > np.median(lag[keep][short])


def test_the_slope_fitted_on_the_floor_traces_and_held_out_elsewhere():
    # the 13 runs of the floor traces (Llama-3.1-8B c/ and six Qwen3-30B-A3B hosts): 1.50 us a prompt token
    per_token, runs = frontend_token_slope([DATA / f for f in STREAM_OUTPUT_FIT])
    assert runs == 13 and per_token == pytest.approx(1.504e-6, abs=0.001e-6)
    assert PROF.http_frontend_token_s == pytest.approx(per_token, rel=1e-9)  # what the committed profile carries
    # held out on the 2026-12-04 host of the stream check (Llama q/, Qwen3 r/, Moonlight s/: 9 chat runs; the shared-
    # prefix run has one length): 1.02 us, another host's CPU (the 73 other traced runs: median per run 1.44 us)
    fresh, n = frontend_token_slope([DATA / f"h200-2026-12-04-stream-check/{x}" for x in (
        "q/serve-llama-steps", "r/serve-qwen3-30b-a3b-steps", "s/serve-moonlight-16b-a3b-steps")])
    assert n == 9 and fresh == pytest.approx(1.021e-6, abs=0.001e-6)
    with pytest.raises(ValueError, match="unqueued requests of different prompt lengths"):
        frontend_token_slope([])


def test_each_request_carries_its_own_prompt_s_share(tmp_path):
    # the same 40 requests with and without 20 us a prompt token: the engine runs alike (the term is outside it),
    # so each TTFT and E2E grows by exactly 20 us x its prompt (1,000 tokens: +20 ms), TPOT not at all
    model, gpu = catalog.model("llama-3.1-8b"), catalog.gpu("h200-sxm")
    cost, cfg = engine_setup(model, gpu, Deployment.for_gpu(gpu), PROF)
    rng = np.random.default_rng(0)
    prompts = rng.integers(100, 4000, 40)
    reqs = make_requests(prompts, np.full(40, 64), np.sort(rng.uniform(0, 4, 40)))
    a = simulate(reqs, cost, dataclasses.replace(cfg, frontend_token_overhead_s=0.0))
    b = simulate(reqs, cost, dataclasses.replace(cfg, frontend_token_overhead_s=20e-6))
    np.testing.assert_allclose(b.ttft_s - a.ttft_s, 20e-6 * prompts, rtol=1e-9)
    np.testing.assert_allclose(b.e2e_s - a.e2e_s, 20e-6 * prompts, rtol=1e-9)
    np.testing.assert_allclose(b.tpot_s, a.tpot_s, rtol=1e-12)


def test_only_behind_the_http_server():
    assert http_terms(PROF, False) == {"frontend_overhead_s": 0.0, "frontend_token_overhead_s": 0.0,
                                       "stream_output_overhead_s": 0.0}
    served = http_terms(PROF)
    assert served["frontend_token_overhead_s"] == PROF.http_frontend_token_s > 0
    gpu = catalog.gpu("h200-sxm")
    _, cfg = engine_setup(catalog.model("llama-3.1-8b"), gpu, Deployment.for_gpu(gpu), PROF, http_frontend=False)
    assert cfg.frontend_token_overhead_s == 0.0


@pytest.mark.parametrize("bad", [-1e-6, 1e-3, float("nan"), "1e-6"])
def test_a_bad_per_token_time_names_the_field(bad):
    with pytest.raises(ValueError, match="frontend_token_overhead_s"):
        EngineConfig(160_000, frontend_token_overhead_s=bad)


def test_long_prompts_served_held_out():
    """calibration/data/h200-2026-12-04-budget-check (COMMAND.md): 80 prompts of 838-15,160 tokens at 1 req/s, every
    step traced, two engines on fresh hosts.  Llama-3.1-8B: TTFT p50 -0.5 % (303 ms measured), p99 +1.1 %, TPOT p50
    +5.6 %, throughput +0.0 % (TTFT p50 -5.5 % without the server's time per prompt token); Qwen3-30B-A3B, a cold
    engine: TTFT p50 -3.9 %, p99 -19.0 %, TPOT p50 -12.0 %, its 3 compile stalls predicted.  Each run's own slope:
    2.16 and 2.71 us a token (the profile's 1.50)."""
    from calibration.serving_points import replay_folder

    root = DATA / "h200-2026-12-04-budget-check"
    for folder, model, want, slope in (("b/serve-llama-long", "llama-3.1-8b", (-0.5, 1.1, 5.6), 2.16e-6),
                                       ("c/serve-qwen3-long", "qwen3-30b-a3b", (-3.9, -19.0, -12.0), 2.71e-6)):
        (c,) = replay_folder(root / folder, model, PROF)
        got = tuple(c.error_pct(k) for k in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s"))
        assert got == pytest.approx(want, abs=0.3) and abs(c.error_pct("output_tokens_per_s")) < 0.5
        assert frontend_token_slope([root / folder])[0] == pytest.approx(slope, abs=0.01e-6)
    (bare,) = replay_folder(root / "b/serve-llama-long", "llama-3.1-8b", PROF.model_copy(
        update={"http_frontend_token_s": 0.0}))
    assert bare.error_pct("ttft_p50_s") == pytest.approx(-5.5, abs=0.3)
