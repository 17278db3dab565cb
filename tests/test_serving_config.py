"""planner.serving.config: speculative decoding's expected tokens and presets; engine_setup."""

from __future__ import annotations

import pytest

from planner.io import catalog
from planner.serving import SPEC_PRESETS, engine_setup, spec_expected_tokens, spec_speedup
from planner.specs import Deployment


def test_spec_expected_tokens_by_hand():
    """(1 − α^(k+1))/(1 − α): k=4, α=0.8 → (1 − 0.32768)/0.2 = 3.3616; α=0 → 1; α=1 → k+1;
    k=3, α=0.5 → 1 + .5 + .25 + .125 = 1.875."""
    assert spec_expected_tokens(4, 0.8) == pytest.approx(3.3616)
    assert spec_expected_tokens(3, 0.5) == pytest.approx(1.875)
    assert spec_expected_tokens(5, 0.0) == 1.0
    assert spec_expected_tokens(5, 1.0) == 6.0
    # Leviathan et al. Thm 3.8 with a free verify: 3.3616 / (0.05 × 4 + 1) = 2.8013
    assert spec_speedup(4, 0.8, 0.05) == pytest.approx(3.3616 / 1.2)
    with pytest.raises(ValueError, match="spec_acceptance"):
        spec_expected_tokens(4, 1.5)


def test_spec_presets_have_sources():
    for p in SPEC_PRESETS.values():
        assert "arXiv" in p.source and 0 < p.acceptance_rate < 1 and p.num_speculative_tokens >= 1


def test_engine_setup_uses_the_memory_budget():
    from planner.memory import memory_budget

    m, g = catalog.model("mistral-7b-v0.3"), catalog.gpu("h200-sxm")
    dep = Deployment.for_gpu(g)
    _, c = engine_setup(m, g, dep)
    assert c.kv_capacity_tokens == memory_budget(m, g, dep).kv_capacity_tokens
    with pytest.raises(ValueError, match="gpu"):
        engine_setup(catalog.model("llama-3.1-405b"), g, dep)
