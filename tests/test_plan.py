"""plan(): one deployment sized into a SizingReport, with its reasons in plain sentences."""

from __future__ import annotations

from conftest import make_deployment, make_gpu, mistral_7b

from planner.plan import plan
from planner.specs import Workload


def test_plan_reasons_name_the_numbers():
    m, g = mistral_7b(), make_gpu()
    r = plan(m, g, make_deployment(), Workload(prompt_tokens=1024, output_tokens=128, tpot_slo_s=0.001))
    assert not r.feasible
    assert any(x.startswith("TPOT target 1.0 ms is below the") and "single sequence" in x for x in r.reasons)
    r2 = plan(m, g, make_deployment(), Workload(prompt_tokens=40000, output_tokens=128))
    assert any("exceeds the model's 32,768-token limit" in x for x in r2.reasons)

