"""planner.serving.block_pool: prefix caching (hits, the last-token cap, multi-turn reuse)."""

from __future__ import annotations

import numpy as np
import pytest
from serving_helpers import cfg

from planner.serving import simulate
from planner.serving.workloads import agentic, make_requests, synthetic


def test_prefix_caching_lowers_ttft_and_prefill_tokens(mistral):
    """2,048 shared + 256 unique prompt tokens: with caching every request after the first hits
    the 128 shared blocks: hit rate = (N − 1)·2048 / (N·2304); prefill computes 2304 + (N−1)·256."""
    cost = mistral
    n = 200
    reqs = synthetic(n, 256, 64, rate_per_s=5, shared_prefix_tokens=2048, seed=2)
    on = simulate(reqs, cost, cfg(enable_prefix_caching=True))
    off = simulate(reqs, cost, cfg(enable_prefix_caching=False))
    assert on.prefix_cache_hit_rate == pytest.approx((n - 1) * 2048 / (n * 2304))
    assert on.prefill_tokens_computed == 2304 + (n - 1) * 256
    assert off.prefill_tokens_computed == n * 2304 and off.prefix_cache_hit_rate == 0
    assert np.mean(on.ttft_s) < 0.5 * np.mean(off.ttft_s)
    assert on.cached_prompt_tokens[0] == 0 and (on.cached_prompt_tokens[1:] == 2048).all()


def test_prefix_cache_hit_capped_below_the_whole_prompt(mistral):
    """An identical 2,048-token prompt hits at most 127 blocks: vLLM recomputes the last token."""
    cost = mistral
    reqs = make_requests(2048, 4, [0.0, 1.0], prefix_group=0, prefix_tokens=2048)
    res = simulate(reqs, cost, cfg())
    assert res.cached_prompt_tokens.tolist() == [0, 2032]


def test_agentic_multi_turn_benefits_from_prefix_caching(mistral):
    cost = mistral
    reqs = agentic(60, turns=5, rate_per_s=1, seed=3)
    on = simulate(reqs, cost, cfg(), debug=True)
    off = simulate(reqs, cost, cfg(enable_prefix_caching=False))
    assert on.prefix_cache_hit_rate > 0.7
    assert np.mean(on.ttft_s) < 0.5 * np.mean(off.ttft_s)
    # turn i+1 arrives after turn i finished (think time >= 0)
    par = reqs.parent
    kids = par >= 0
    assert (on.arrival_s[kids] >= on.finish_s[par[kids]] - 1e-12).all()


def test_follow_up_turn_of_a_short_turn_still_hits(mistral):
    """Turn 1: 40 prompt + 3 output tokens with a 32-token shared prefix (2 blocks) and no full
    block of its own beyond it; turn 2 (73 tokens: turn 1 + 30 new) still reuses the 2 shared blocks."""
    cost = mistral
    first = make_requests([40], [3], [0.0], prefix_group=0, prefix_tokens=32)
    res = simulate(first, cost, cfg())
    assert res.completed.all()
    reqs = make_requests([40, 73], [3, 5], [0.0, np.nan], prefix_group=[0, 0], prefix_tokens=[32, 0],
                         parent=[-1, 0])
    res = simulate(reqs, cost, cfg(), debug=True)
    assert res.cached_prompt_tokens.tolist() == [0, 32]


def test_pool_admit_and_blocks_for_hide_the_block_counters():
    """BlockPool.admit / blocks_for: a 100-token prompt sharing a 64-token (4-block) cached prefix needs
    ⌈100/16⌉ − 4 = 3 new blocks; after admit with 20 new tokens beyond the hit (tokens 64-84) it holds the 4
    cached blocks + ⌈84/16⌉ − 4 = 2 of its own; release frees them back to the pool (the cached ones evictable)."""
    from planner.serving.block_pool import BlockPool
    from planner.serving.request import Request

    pool = BlockPool(num_blocks=20, block_size=16, prefix_caching=True)
    first = Request(0, 64, 1, 0, ((99, 4),))
    second = Request(1, 100, 1, 1, ((99, 4),))
    assert pool.blocks_for(first, 64) == 4
    pool.admit(first, 0, 64)  # computes the shared prefix: its 4 full blocks are cached
    assert (first.num_cached_blocks, first.num_uncached_blocks, pool.num_free()) == (4, 0, 16)
    hit, evictable = pool.lookup(second)
    assert (hit, evictable) == (4, 0)
    assert pool.blocks_for(second, 100, hit) == 7 - 4
    pool.admit(second, hit, 20)
    assert second.num_computed == 64
    assert (second.num_cached_blocks, second.num_uncached_blocks, pool.num_free()) == (4, 2, 14)
    pool.release(second, 84)
    pool.release(first, 64)
    assert pool.num_free() == 20 and pool.num_evictable == 4
