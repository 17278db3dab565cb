"""calibration.dummy_routing: distinct experts a batch reaches on a vLLM dummy-weight engine (one layer, numpy)."""

import pytest

from calibration.dummy_routing import ROUTER_BIAS_ARCHITECTURES, distinct_experts
from planner.io import catalog
from planner.kernel_families import experts_touched as uniform_experts


def test_uniform_routing_is_the_planner_formula():
    # E·(1 − (1 − k/E)^B): 128 experts, top-8, batch 2 -> 128·(1 − (120/128)^2) = 15.5
    assert uniform_experts(128, 8, 2) == pytest.approx(128 * (1 - (120 / 128) ** 2))
    assert uniform_experts(8, 2, 1) == 2.0


def test_one_token_reaches_its_top_k():
    assert distinct_experts(128, 4, 256, 1, router_bias=True, trials=3) == 4.0
    assert distinct_experts(64, 6, 256, 1, router_bias=False, trials=3) == 6.0


def test_a_router_without_bias_spreads_as_uniform_routing_does():
    # 128 experts, top-8, 32 tokens: uniform 112 distinct; each token's own 1e-5 logits pick
    assert distinct_experts(128, 8, 512, 32, router_bias=False, trials=4) >= 0.9 * uniform_experts(128, 8, 32)


def test_a_router_bias_picks_the_same_few_experts_for_every_token():
    # gpt-oss-120b's shape: the 1e-3 bias outweighs the ~1e-5 logits: far below uniform's 111 at batch 64
    n = distinct_experts(128, 4, 2880, 64, router_bias=True, trials=4)
    assert 4 <= n <= 16 < uniform_experts(128, 4, 64)


def test_the_bias_architectures_are_in_the_catalog():
    arch = {catalog.model(m).architecture for m in catalog.models()}
    assert ROUTER_BIAS_ARCHITECTURES <= arch
