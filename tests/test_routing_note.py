"""planner.phases.routing_note: a MoE plan says its decode steps carry the dummy-weight probes' routing."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.io import catalog
from planner.io.catalog import profile_for
from planner.kernel_families import moe_coeffs
from planner.phases import decode_step_time, routing_note
from planner.specs import Deployment

GPU = catalog.gpu("h200-sxm")


@pytest.fixture(scope="module")
def profile():
    return profile_for("h200-sxm")


def dep(weights):
    return Deployment.for_gpu(GPU, weight_dtype=weights)


def test_gpt_oss_gets_the_note_with_both_step_times(profile):
    m, d = catalog.model("gpt-oss-120b"), dep("mxfp4")
    planned = float(decode_step_time(m, GPU, d, 16, 1200.0, profile).time_s)
    note = routing_note(m, GPU, d, profile, 16, 1200.0, planned)
    touch = moe_coeffs(m, "mxfp4", profile, GPU.id).expert_touch_fraction
    assert touch < 1.0 and f"({touch:.2f} of uniform routing" in note
    # the same step with every expert a batch of 16 would reach under uniform routing: 128·(1 − (124/128)^16) = 51
    assert "would take up to" in note and f"(here {1e3 * planned:.1f} ms)" in note
    wide = float(note.split("take up to ")[1].split(" ms")[0]) / 1e3
    assert wide > planned + 1e-3  # ~45 more experts × 13.2 MB × 36 layers: milliseconds, not microseconds


def test_no_note_where_routing_spreads_or_nothing_is_routed(profile):
    assert routing_note(catalog.model("qwen3-30b-a3b"), GPU, dep("bf16"), profile, 64, 1200.0, 0.05) is None  # 1.0
    assert routing_note(catalog.model("llama-3.1-8b"), GPU, dep("bf16"), profile, 64, 1200.0, 0.05) is None  # dense
    assert routing_note(catalog.model("gpt-oss-120b"), GPU, dep("mxfp4"), profile, 1, 1200.0, 0.05) is None  # top-k


def test_the_plan_carries_it(profile):
    from planner.plan import plan
    from planner.specs import Workload

    w = Workload(prompt_tokens=1000, output_tokens=200, request_rate_per_s=5.0)
    r = plan(catalog.model("gpt-oss-120b"), GPU, dep("mxfp4"), w, profile)
    assert any(n.startswith("MoE routing:") for n in r.notes)


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(2, 512), ctx=st.floats(64, 32768))
def test_uniform_routing_never_makes_a_step_cheaper(batch, ctx):
    prof = profile_for("h200-sxm")
    for mid, w in (("gpt-oss-120b", "mxfp4"), ("moonlight-16b-a3b", "bf16")):
        m, d = catalog.model(mid), dep(w)
        note = routing_note(m, GPU, d, prof, batch, ctx, float(decode_step_time(m, GPU, d, batch, ctx, prof).time_s))
        wide = float(note.split("take up to ")[1].split(" ms")[0])
        here = float(note.split("(here ")[1].split(" ms")[0])
        assert wide >= here
