"""Throughput, $/Mtok and the fleet (planner.cost), by hand arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_deployment, make_gpu, mistral_7b

from planner.cost import fleet_for, prefill_busy_costs, throughput, token_cost
from planner.roofline import hw_coeffs, model_costs


def test_cost_arithmetic():
    """$3.60/GPU-h = $0.001/s. Batch 10, TPOT 20 ms, 100 output tokens → decode 2 s; prefill 0.5 s for
    10 prompts of 1,000: output $/M = 0.001 × 2 / (10 × 100) × 1e6 = $2.00; input $/M = 0.001 × 0.5 /
    (10 × 1,000) × 1e6 = $0.05; blended 0.001 × 2.5 / 11,000 × 1e6 = $0.227; tokens/s = 10 × 100 / 2.5 = 400."""
    tp = throughput(10, 0.020, 0.5, 1000, 100, gpus_per_replica=1)
    c = token_cost(tp, 3.6)
    assert tp.output_tokens_per_s == pytest.approx(400)
    assert tp.requests_per_s == pytest.approx(4)
    assert c.usd_per_million_output_tokens == pytest.approx(2.0)
    assert c.usd_per_million_input_tokens == pytest.approx(0.05)
    assert c.usd_per_million_tokens_blended == pytest.approx(0.001 * 2.5 / 11_000 * 1e6)
    assert c.usd_per_request == pytest.approx(0.00025)


def test_fleet_for_rate():
    """10 req/s at 2.6 req/s per 2-GPU replica: ceil(3.85) = 4 replicas = 8 GPUs."""
    f = fleet_for(10.0, 2.6, 2, 64)
    assert (f.replicas, f.num_gpus) == (4, 8)
    assert f.utilization == pytest.approx(10 / (4 * 2.6))
    assert fleet_for(None, 2.6, 1, 64, concurrency=200).replicas == 4  # ceil(200 / 64)


def test_prefill_busy_per_request_never_rises_with_batch():
    mc, hw = model_costs(mistral_7b(), make_deployment()), hw_coeffs(make_gpu(), "bf16")
    b = np.arange(1, 400)
    per = prefill_busy_costs(mc, hw, 100, b, 8192) / b
    assert np.all(np.diff(per) <= 1e-15)

