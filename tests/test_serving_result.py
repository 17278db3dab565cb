"""planner.serving.result: SimResult's time averages (Little's law)."""

from __future__ import annotations

import numpy as np
import pytest
from serving_helpers import cfg

from planner.serving import simulate
from planner.serving.workloads import chat


def test_littles_law(mistral):
    """Time-averaged requests in the system = throughput × mean time in the system (±5 %)."""
    cost = mistral
    res = simulate(chat(3000, rate_per_s=30, seed=7), cost, cfg())
    lam_w = res.requests_per_s * np.mean(res.e2e_s)
    assert res.mean_in_system == pytest.approx(lam_w, rel=0.05)
