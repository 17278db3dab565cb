"""Shared by the serving simulator's tests: engine configs, a calibrated profile, hypothesis settings.

Step times come from the ideal roofline (IDEAL_PROFILE) unless a test says otherwise, so every
expected number in these tests is ``StepCost.step_s`` of a batch one can write down by hand.
"""

from __future__ import annotations

from hypothesis import settings
from conftest import make_gpu, mistral_7b

from planner.serving import EngineConfig, StepCost
from planner.profile import CalibrationProfile
from planner.specs import Deployment

PROPS = settings(max_examples=25, deadline=None, derandomize=True)
CAL = CalibrationProfile(mode="calibrated", matmul_efficiency_max=0.8, matmul_half_tokens=64.0,
                         attention_compute_efficiency=0.6, weight_bandwidth_efficiency=0.85,
                         kv_bandwidth_efficiency=0.7, step_overhead_s=4e-4, per_seq_overhead_s=2e-6,
                         per_token_overhead_s=1e-7, request_overhead_s=2e-3)


def mistral_cost() -> StepCost:
    """Step costs of Mistral 7B on a 3.35 TB/s, 989 TFLOP/s test GPU (ideal roofline)."""
    m, g = mistral_7b(), make_gpu()
    return StepCost.from_specs(m, g, Deployment.for_gpu(g))


def cfg(**kw) -> EngineConfig:
    kw.setdefault("kv_capacity_tokens", 500_000)
    return EngineConfig(**kw)
