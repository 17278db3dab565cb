"""planner.serving.scheduler: chunked prefill, preemption under a small KV pool, rejection of
requests larger than the pool, closed-loop arrivals."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import make_gpu
from hypothesis import given, settings
from hypothesis import strategies as st
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


def test_a_prompt_is_admitted_only_when_all_of_it_fits(mistral):
    """vLLM 0.26 admits a waiting request only if its whole prompt's blocks are free (scheduler_reserve_full_isl, on by
    default), not just its first chunk's.  A pool of 100 blocks (1,600 tokens), 512 tokens a step, two 1,000-token
    prompts (63 blocks each) with 300 output tokens at t = 0: the first takes 2 steps (512 + 488); the second's first
    chunk (24 tokens, 2 blocks) would fit beside it, but its 63 blocks do not (37 free) until the first finishes: it
    waits, and nothing is preempted.  Asked only for its chunk (before), it ran beside the first and one of them was
    preempted when their decodes outgrew the pool."""
    cost = mistral
    res = simulate(make_requests([1000, 1000], [300, 300], [0.0, 0.0]), cost,
                   cfg(kv_capacity_tokens=1600, max_num_batched_tokens=512, max_num_seqs=8), debug=True)
    assert res.completed.all() and res.num_preemptions == 0
    assert res.first_token_s[1] > res.finish_s[0]


def test_a_sliding_groups_admission_ask_covers_the_window_and_the_steps_in_flight():
    """vLLM 0.26's SlidingWindowSpec.max_admission_blocks_per_request: Gemma-3-27B (V2 runner) at 8,192 tokens a step,
    2 steps in flight without pipeline parallelism, 3 with two stages: ceil((1,024 - 1 + 2 x 8,192) / 16) + 1 = 1,089
    and ceil((1,023 + 3 x 8,192) / 16) + 1 = 1,601; gpt-oss-120b (V1 runner) 2 steps, window 128: ceil((127 + 16,384) /
    16) + 1 = 1,033; a model without sliding layers asks none."""
    from planner.io import catalog
    from planner.memory import in_flight_steps, window_admission_blocks
    from planner.specs import Deployment

    g = catalog.gpu("h200-sxm")
    gemma, oss, llama = (catalog.model(m) for m in ("gemma-3-27b", "gpt-oss-120b", "llama-3.1-8b"))
    one, two = Deployment.for_gpu(g), Deployment.for_gpu(g, num_gpus=2, pipeline_parallel=2)
    assert (in_flight_steps(gemma, one), in_flight_steps(gemma, two), in_flight_steps(oss, one)) == (2, 3, 2)
    assert in_flight_steps(oss, Deployment.for_gpu(g, num_gpus=2, pipeline_parallel=2, weight_dtype="mxfp4")) == 2
    assert window_admission_blocks(gemma, one) == 1089 and window_admission_blocks(gemma, two) == 1601
    assert window_admission_blocks(oss, Deployment.for_gpu(g, weight_dtype="mxfp4")) == 1033
    assert window_admission_blocks(llama, one) == 0


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


def test_kv_groups_follow_vllms_hybrid_allocator():
    """planner.kernel_families.kv_groups, as vLLM 0.26's _get_kv_cache_groups_uniform_page_size: groups of the smaller
    kind's layer count, the other kind padded to whole groups, unless the larger count is under 1.5x the smaller
    (then groups of the larger)."""
    from conftest import make_model, mistral_7b

    from planner.io import catalog
    from planner.kernel_families import kv_groups, kv_layer_slots
    from planner.specs import AttentionSpec

    assert kv_groups(catalog.model("gemma-3-27b")) == (10, 1, 6)  # 52 sliding, 10 full: 70 slots for 62 layers
    assert kv_layer_slots(catalog.model("gemma-3-27b")) == 70
    assert kv_groups(catalog.model("gemma-3-12b")) == (8, 1, 5)  # 40 / 8
    assert kv_groups(catalog.model("gpt-oss-120b")) == (18, 1, 1)
    assert kv_groups(mistral_7b()) == (32, 1, 0)

    def swa(full, sliding):
        return make_model(id="swa", hidden_size=1024, num_layers=full + sliding, intermediate_size=2048,
                          vocab_size=1000, max_context_tokens=8192, sliding_window_tokens=512,
                          num_sliding_layers=sliding,
                          attention=AttentionSpec(kind="gqa", num_heads=8, num_kv_heads=2, head_dim=128))

    assert kv_groups(swa(20, 28)) == (28, 1, 1)  # 28 < 1.5 x 20: groups of 28, the full layers padded to 28
    assert kv_layer_slots(swa(20, 28)) == 56
    assert kv_groups(swa(10, 40)) == (10, 1, 4)
    assert kv_groups(swa(30, 10)) == (10, 3, 1)


def test_a_sliding_window_request_holds_only_its_window_in_the_sliding_groups():
    """Gemma-3-27B on one H200 (10 full layers, 52 sliding of 1,024 tokens in 6 groups of 10): vLLM's block is 16
    tokens x 10 layers x 8,192 B, and a request holds a block per 16 tokens in the full group plus, in each sliding
    group, the blocks of its last window (1,024 / 16 + 1 = 65).  The plan's KV per request at 2,000 + 500 tokens:
    (2,512 x 10 + 1,040 x 60) x 8,192 B = 716,963,840 B (60 = the sliding groups' slots, padding included).  The
    simulator's pool: the memory model's 140,144 tokens (of all 70 slots) = 8,759 blocks of 70 pages = 61,313 blocks of
    10.  A burst of such requests peaks at no fewer than the plan's 111 (every request at its last token: 157 + 6 x 65
    = 547 blocks, the last one in asking 7 x 157 free); holding every layer's KV at full length (before) it ran 71 at once."""
    from planner.io import catalog
    from planner.memory import kv_bytes_per_request, max_concurrency
    from planner.serving.config import engine_setup
    from planner.specs import Deployment

    m, gpu = catalog.model("gemma-3-27b"), catalog.gpu("h200-sxm")
    dep = Deployment.for_gpu(gpu)
    prof = catalog.profile_for("h200-sxm", "0.26.0")
    assert kv_bytes_per_request(m, "bf16", 2500, 16).total_bytes == (2512 * 10 + 1040 * 60) * 8192 == 716_963_840
    cost, c = engine_setup(m, gpu, dep, prof)
    assert (c.window_groups, c.window_blocks, c.num_blocks, c.pool_tokens) == (6, 65, 61_313, 140_144)
    promised = max_concurrency(m, gpu, dep, 2500, prof)
    # the last request in finds its whole 2,500 tokens free in all 7 groups (vLLM 0.26's admission ask): 1 + the rest
    assert promised == 1 + (61_313 - 7 * 157) // (157 + 6 * 65) == 111
    burst = make_requests(np.full(1000, 2000), np.full(1000, 500), np.zeros(1000))
    res = simulate(burst, cost, c)
    assert promised <= res.series_running.max() <= 61_313 // (126 + 6 * 65)  # at most: every prompt just prefilled
    assert res.summary()["kv_capacity_tokens"] == 140_144
    full_length = simulate(burst, cost, replace(c, kv_capacity_tokens=140_144, window_groups=0, window_blocks=0))
    assert full_length.series_running.max() < 0.7 * promised
    small = replace(c, kv_capacity_tokens=30 * 16 * (57 + 6 * 57))  # ~30 chat requests: preemptions
    short = simulate(chat(200, rate_per_s=50, seed=2), cost, small, debug=True)
    assert short.completed.all() and short.num_preemptions > 0


def test_a_prompt_chunk_holds_its_tokens_in_the_sliding_groups_until_its_step_ends():
    """vLLM 0.26 allocates a chunk's every token in each sliding group and frees what left the window at the request's
    next allocation.  Gemma-3-27B's layout (6 sliding groups, 1,024-token window: 65 blocks of 16), a 16,384-token
    prompt in two 8,192-token chunks: the first holds blocks 0-511 in each sliding group, 447 beyond its 65 side blocks
    (6 x 447 = 2,682 in all); after its step they go; the second holds blocks 448-1,023 (576: 511 beyond).  A prompt
    inside its window holds nothing more.  Admission asks for the chunk's too."""
    from planner.serving.block_pool import BlockPool
    from planner.serving.request import Request

    pool = BlockPool(20_000, 16, False, window_groups=6, window_blocks=65, window_admission_blocks=1089)
    req = Request(0, 16_384, 1, 0, ())
    assert pool.admission_blocks(req, 0, 8192) == 1024 + 6 * 1024  # the whole prompt asked in every group
    pool.admit(req, 0, 8192)
    assert req.window_chunk_blocks == 6 * (512 - 65) == 2682
    assert pool.num_used() == 512 + 6 * 65 + 2682
    pool.end_chunk(req)
    req.num_computed = 8192
    assert pool.num_used() == 512 + 6 * 65
    pool.allocate_chunk(req, 8192)
    assert req.window_chunk_blocks == 6 * (1024 - 448 - 65) == 3066
    pool.release(req, 8192 + 8192)
    assert pool.num_used() == 0 and req.window_chunk_blocks == 0
    short = Request(1, 1000, 10, 1, ())
    assert pool.chunk_window_blocks(short, 0, 1000) == 0


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 12), st.integers(1, 40), st.sampled_from([128, 512, 1024]), st.booleans(),
       st.integers(60, 400))
def test_sliding_window_pools_keep_their_accounting(full, sliding, window, prefix_caching, pool_blocks):
    """Any mix of full and sliding layers (vLLM's KV groups, padding included), a pool from a few requests to a few
    hundred blocks, prefix caching on or off, chat traffic with a shared prefix: the block accounting holds after every
    event (each running request's window blocks counted), every request finishes or is rejected as one that can never
    fit, and the pool ends empty."""
    from conftest import make_model

    from planner.kernel_families import kv_groups
    from planner.serving.config import EngineConfig, pool_terms
    from planner.serving.step_cost import StepCost
    from planner.specs import AttentionSpec, Deployment
    from planner.units import cdiv

    m = make_model(id="swa", hidden_size=1024, num_layers=full + sliding, intermediate_size=2048, vocab_size=1000,
                   max_context_tokens=8192, sliding_window_tokens=window, num_sliding_layers=sliding,
                   attention=AttentionSpec(kind="gqa", num_heads=8, num_kv_heads=2, head_dim=128))
    gpu = make_gpu()
    dep = Deployment.for_gpu(gpu)
    terms = pool_terms(m, dep)
    _, full_groups, sliding_groups = kv_groups(m)
    assert terms["window_groups"] == (sliding_groups if full_groups == 1 else 0)
    cost = StepCost.from_specs(m, gpu, dep)
    c = EngineConfig(pool_blocks * 16, 64, 2048, enable_prefix_caching=prefix_caching, **terms)
    reqs = synthetic(120, 600, 80, rate_per_s=30, shared_prefix_tokens=256, seed=3)
    res = simulate(reqs, cost, c, debug=True)
    blocks = cdiv(reqs.prompt_tokens + reqs.output_tokens, 16)
    # vLLM 0.26's admission asks each sliding group's blocks up to the window and the steps in flight (window_blocks
    # when the request has reached its end): a request asking more than the pool alone can never run
    assert terms["window_admission_blocks"] == (cdiv(window - 1 + 2 * dep.max_num_batched_tokens, 16) + 1
                                               if terms["window_groups"] else 0)
    never_fits = blocks + terms["window_groups"] * np.minimum(blocks, terms["window_admission_blocks"]) > pool_blocks
    assert (res.completed == ~never_fits).all()


def test_align_mode_ends_a_prompts_chunks_on_block_boundaries():
    """vLLM 0.26's Mamba 'align' cache mode (prefix caching on a Gated DeltaNet hybrid; _mamba_block_aligned_split),
    block 528: a 2,000-token prompt runs as 1,584 (its last boundary, 3 x 528) + 416 tokens; with a budget of 1,000 its
    first chunk is 528; a chunk from 528 whose budget reaches no boundary (300) waits; past the last boundary, as asked.
    Simulated (a Granite-4.0-H-Small without its Mamba-2 chunk stands in for a Gated DeltaNet hybrid): the prompt takes
    two steps, so its first token comes later than with the chunk unaligned, and the engine's accounting holds."""
    from types import SimpleNamespace

    from conftest import granite_4_h_small

    from planner.io import catalog
    from planner.serving.config import engine_setup
    from planner.serving.scheduler import Scheduler
    from planner.specs import Deployment

    s = SimpleNamespace(pool=SimpleNamespace(block_size=528))
    req = SimpleNamespace(num_tokens=2000)
    assert [Scheduler.aligned_chunk(s, req, a, b) for a, b in ((0, 2000), (1584, 416), (0, 1000), (528, 300),
                                                                (528, 2000), (1700, 200))] == [1584, 416, 528, 0,
                                                                                               1056, 200]
    gpu, prof = catalog.gpu("h200-sxm"), catalog.profile_for("h200-sxm", "0.26.0")
    gdn_like = granite_4_h_small().model_copy(update={"mamba_chunk_tokens": 0})
    cost, c = engine_setup(gdn_like, gpu, Deployment.for_gpu(gpu), prof, enable_prefix_caching=True)
    assert c.state_aligned_chunks and c.block_size == 528
    one = make_requests(np.array([2000]), np.array([8]), np.array([0.0]))
    aligned, plain = simulate(one, cost, c), simulate(one, cost, replace(c, state_aligned_chunks=False))
    assert aligned.num_steps == plain.num_steps + 1 and aligned.ttft_s[0] > plain.ttft_s[0]
    res = simulate(synthetic(200, 1500, 60, rate_per_s=20, shared_prefix_tokens=1200, seed=1), cost, c, debug=True)
    assert res.completed.all() and res.prefix_cache_hit_rate > 0
    _, mamba2 = engine_setup(granite_4_h_small(), gpu, Deployment.for_gpu(gpu), prof, enable_prefix_caching=True)
    assert not mamba2.state_aligned_chunks and mamba2.block_size == 768  # 'all' mode: the chunk-aligned block
