"""planner.serving.scheduler: chunked prefill, preemption under a small KV pool, rejection of
requests larger than the pool, closed-loop arrivals."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from serving_helpers import cfg

from planner.serving import simulate
from planner.serving.workloads import chat, make_requests, synthetic


def test_chunked_prefill_splits_a_long_prompt(mistral):
    """Prompt 10,000 with max_num_batched_tokens 4,096: chunks 4,096 + 4,096 + 1,808; chunk i
    attends its prior context and reads it from the cache."""
    cost = mistral
    res = simulate(make_requests(10_000, 2), cost, cfg(max_num_batched_tokens=4096))
    t = 0.0
    for s, c in ((0, 4096), (4096, 4096), (8192, 1808)):
        t += cost.step_s(c, 1, cost.attended_prefill(s, c), 0.0, cost.prefill_kv_read(s))
    assert res.ttft_s[0] == pytest.approx(t, rel=1e-12)
    assert res.prefill_tokens_computed == 10_000


def test_tiny_pool_preempts_and_still_completes(mistral):
    """A 6,000-token pool for ~50 concurrent chat requests: recompute preemptions happen, every
    request still finishes with all its tokens, and the block accounting holds after every event."""
    cost = mistral
    res = simulate(chat(300, rate_per_s=40, seed=1), cost, cfg(kv_capacity_tokens=6000, max_num_seqs=64), debug=True)
    assert res.num_preemptions > 0 and res.preemptions_per_request.max() >= 1
    assert res.completed.all()
    assert res.summary()["kv_usage_max"] <= 1.0
    big = simulate(chat(300, rate_per_s=40, seed=1), cost, cfg())
    assert big.num_preemptions == 0
    assert np.mean(res.e2e_s) > np.mean(big.e2e_s)


def test_requests_larger_than_the_pool_are_rejected(mistral):
    cost = mistral
    res = simulate(make_requests([100, 5000, 100], 10, [0.0, 0.1, 0.2]), cost, cfg(kv_capacity_tokens=4096))
    assert res.num_rejected == 1 and np.isnan(res.finish_s[1]) and res.completed[[0, 2]].all()
    assert res.summary()["rejected"] == 1


def test_closed_loop_keeps_concurrency(mistral):
    cost = mistral
    res = simulate(synthetic(400, 256, 64, concurrency=16), cost, cfg())
    assert res.series_running.max() <= 16
    assert res.series_waiting.max() + res.series_running.max() <= 16
    assert res.mean_in_system == pytest.approx(16, rel=0.05)


def test_each_running_request_holds_its_recurrent_state_in_the_pool():
    """Granite-4.0-H-Small on one H200: vLLM's attention blocks of 528 tokens (planner.memory.hybrid_block_tokens, its
    page holding one Mamba-2 layer's 2.15 MB state) and each running request's 36 state pages = 9 blocks of the pool
    (planner.memory.state_blocks_per_request), taken at admission, returned at finish or preemption; the block
    accounting holds after every event.  A burst of 2,000 + 200-token requests peaks at 606 running: at least the 575
    the plan's KV-per-request division promises (5 blocks of tokens + 9 a request at 2,200 tokens), at most the 8,056
    blocks' 619 at 4 + 9 (a prompt's 2,001 tokens); without the state it ran 780 at once (the prompts' pace bounding
    it, not the pool)."""
    from conftest import granite_4_h_small

    from planner.io import catalog
    from planner.memory import max_concurrency
    from planner.serving.config import engine_setup
    from planner.specs import Deployment

    m, gpu = granite_4_h_small(), catalog.gpu("h200-sxm")
    dep = Deployment.for_gpu(gpu)
    prof = catalog.profile_for("h200-sxm", "0.26.0")
    cost, c = engine_setup(m, gpu, dep, prof)
    assert (c.block_size, c.state_blocks, c.num_blocks) == (528, 9, 8056)
    promised = max_concurrency(m, gpu, dep, 2000 + 200, prof)
    assert promised == 8056 * 528 * 16_384 // ((5 + 9) * 528 * 16_384) == 575
    burst = make_requests(np.full(1500, 2000), np.full(1500, 200), np.zeros(1500))
    peak = int(simulate(burst, cost, c).series_running.max())
    assert promised <= peak <= 8056 // (4 + 9) == 619
    plain = simulate(burst, cost, replace(c, state_blocks=0))
    assert plain.series_running.max() > 1.2 * peak
    small = replace(c, kv_capacity_tokens=20 * 528 * 14)  # 20 requests of two blocks and their state: preemptions
    res = simulate(chat(200, rate_per_s=50, seed=2), cost, small, debug=True)
    assert res.completed.all() and res.num_preemptions > 0
