"""The largest batch under the TTFT/TPOT targets (planner.batching): TTFT under load, the pick, the search."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_deployment, make_gpu, mistral_7b

from planner.batching import largest_batch_under_slo, pick_largest_batch, ttft_under_load_costs
from planner.phases import decode_step_costs, prefill_time_costs
from planner.roofline import hw_coeffs, model_costs
from planner.specs import Workload

# ---------------------------------------------------------------------------------- TTFT under load


def test_ttft_under_load_equals_idle_prefill_at_batch_1():
    """A request joining 0 running sequences is the idle-engine prefill (prompt ≤ max_num_batched_tokens)."""
    m, g = mistral_7b(), make_gpu()
    mc, hw = model_costs(m, make_deployment()), hw_coeffs(g, "bf16")
    for P in (100, 4096, 8192):
        a = ttft_under_load_costs(mc, hw, P, 1, P + 256, 8192).time_s
        b = prefill_time_costs(mc, hw, P, 1, 8192).time_s
        assert a == pytest.approx(b, rel=1e-9)


def test_ttft_under_load_chunks_long_prompts():
    """16,384 tokens with 8,192-token steps and 191 running sequences: budget 8,001 → ceil(16,384 / 8,001) = 3 steps."""
    mc, hw = model_costs(mistral_7b(), make_deployment()), hw_coeffs(make_gpu(), "bf16")
    t = ttft_under_load_costs(mc, hw, 16384, 192, 16384, 8192)
    assert t.num_steps == 3
    one_chunk = ttft_under_load_costs(mc, hw, 16384 / 3, 192, 16384, 8192)  # same step, no prior chunks
    assert t.time_s > 3 * one_chunk.time_s


# ------------------------------------------------------------------------------------ largest batch


def test_pick_largest_batch():
    b = np.array([1, 2, 4, 8, 16])
    tpot = np.array([1, 2, 3, 4, 5.0])
    ttft = np.array([1, 1, 2, 9, 9.0])
    assert pick_largest_batch(b, tpot, ttft, 3.5, None, 100) == (4, "tpot")
    assert pick_largest_batch(b, tpot, ttft, None, 5, 100) == (4, "ttft")
    assert pick_largest_batch(b, tpot, ttft, 3.5, 5, 100) == (4, "tpot+ttft")
    assert pick_largest_batch(b, tpot, ttft, None, None, 100) == (16, "limit")
    assert pick_largest_batch(b, tpot, ttft, None, None, 3) == (2, "limit")
    assert pick_largest_batch(b, tpot, ttft, 0.5, None, 100) == (0, "tpot")


def test_largest_batch_binds_on_tpot():
    m, g = mistral_7b(), make_gpu()
    w = Workload(prompt_tokens=2048, output_tokens=256, tpot_slo_s=0.012)
    s = largest_batch_under_slo(m, g, make_deployment(), w)
    assert s.binding == "tpot"
    assert s.tpot_s <= 0.012 < s.tpot_candidates_s[s.batch_size]  # next batch breaks it


def test_largest_batch_capped_by_memory_and_max_num_seqs():
    m, g = mistral_7b(), make_gpu()
    w = Workload(prompt_tokens=4096, output_tokens=512)
    s = largest_batch_under_slo(m, g, make_deployment(), w)
    assert s.binding == "memory" and s.batch_size == s.max_concurrency > 0
    s2 = largest_batch_under_slo(m, g, make_deployment(max_num_seqs=16), w)
    assert s2.binding == "max_num_seqs" and s2.batch_size == 16


def test_largest_batch_with_a_huge_limit_is_exact():
    """max_num_seqs 10^6 on a tiny model: the grid-and-refine search lands on the same batch as brute force."""
    from conftest import make_model

    from planner.specs import AttentionSpec

    m = make_model(hidden_size=256, num_layers=2, intermediate_size=512, vocab_size=1000, max_context_tokens=4096,
                   attention=AttentionSpec(kind="mqa", num_heads=4, num_kv_heads=1, head_dim=64))
    g = make_gpu(memory_bytes=192 * 2**30)
    d = make_deployment(max_num_seqs=10**6, max_num_batched_tokens=10**7)
    mc, hw = model_costs(m, d), hw_coeffs(g, "bf16")
    from planner.cost import effective_tpot_s, prefill_busy_costs

    b = np.arange(1, 300_001)
    busy = prefill_busy_costs(mc, hw, 64, b, d.max_num_batched_tokens)
    tpot = effective_tpot_s(decode_step_costs(mc, hw, b, 64 + 8).time_s, b, busy, 16)
    target = float(tpot[123_456])  # exactly the (effective) TPOT of batch 123,457
    s = largest_batch_under_slo(m, g, d, Workload(prompt_tokens=64, output_tokens=16, tpot_slo_s=target))
    assert s.max_concurrency > 300_000
    assert s.batch_size == int(b[tpot <= target].max()) and s.binding == "tpot"

