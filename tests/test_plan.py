"""plan(): one deployment sized into a SizingReport, with its reasons in plain sentences."""

from __future__ import annotations

from conftest import make_deployment, make_gpu, mistral_7b

from planner.plan import plan
from planner.specs import Deployment, Workload


def test_plan_reasons_name_the_numbers():
    m, g = mistral_7b(), make_gpu()
    r = plan(m, g, make_deployment(), Workload(prompt_tokens=1024, output_tokens=128, tpot_slo_s=0.001))
    assert not r.feasible
    assert any(x.startswith("TPOT target 1.0 ms is below the") and "single sequence" in x for x in r.reasons)
    r2 = plan(m, g, make_deployment(), Workload(prompt_tokens=40000, output_tokens=128))
    assert any("exceeds the model's 32,768-token limit" in x for x in r2.reasons)



def test_batch_note_says_what_its_limit_counts():
    """The dashboard's default scenario (Mistral 7B, H200, 160 users, TPOT ≤ 50 ms): the TPOT target holds the
    batch below the 160 users, who are the limit — not '160 that fit in memory' (memory holds more: 202).
    Without a users target the limit is what fits in memory, and the note says that number."""
    from planner.io import catalog

    m, g = catalog.model("mistral-7b-v0.3"), catalog.gpu("h200-sxm")
    prof = catalog.resolve_profile("auto", g.id)[0]
    d = Deployment.for_gpu(g)
    r = plan(m, g, d, Workload(prompt_tokens=4096, output_tokens=512, concurrency=160, tpot_slo_s=0.05), prof)
    assert r.slo.binding == "tpot" and r.batch_size < 160 < r.max_concurrency
    [note] = [n for n in r.notes if "holds the batch" in n]
    assert note == (f"the TPOT target holds the batch to {r.batch_size:,} of the 160 requests in flight the workload "
                    f"asks for (memory holds {r.max_concurrency:,} per replica)")
    r = plan(m, g, d, Workload(prompt_tokens=4096, output_tokens=512, tpot_slo_s=0.05), prof)
    [note] = [n for n in r.notes if "holds the batch" in n]
    assert note == f"the TPOT target holds the batch to {r.batch_size:,} of the {r.max_concurrency:,} that fit in memory"


def test_a_deployment_short_of_its_fleet_is_a_warning_not_a_note():
    """4 GPUs for a workload that needs more: a warning that says the deployment misses its targets as given."""
    from planner.io import catalog

    m, g = catalog.model("llama-3.1-70b"), catalog.gpu("h200-sxm")
    d = Deployment.for_gpu(g, num_gpus=4, tensor_parallel=4)
    r = plan(m, g, d, Workload(prompt_tokens=4096, output_tokens=512, concurrency=32, tpot_slo_s=0.02,
                               ttft_slo_s=0.5), catalog.resolve_profile("auto", g.id)[0])
    assert r.feasible and r.fleet.num_gpus > 4
    [w] = r.warnings
    assert w.startswith(f"the deployment has 4 GPU(s) but the workload needs {r.fleet.replicas} replica(s) = "
                        f"{r.fleet.num_gpus} GPUs") and "misses its targets" in w
    assert not any("replica(s)" in n for n in r.notes)
    assert r.to_dict()["warnings"] == [w]
