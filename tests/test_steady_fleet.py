"""planner.fleet and `planner size`'s headline: the fleet answer (replicas, GPUs, $/hour, $/month, error band)
from a request rate or from users and their think time."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from planner.io import catalog
from planner.cli.app import app
from planner.steady_fleet import HOURS_PER_MONTH, e2e_s, plan_for_demand
from planner.specs import Deployment, Workload

MODEL, GPU = "llama-3.1-70b", "h200-sxm"
WL = Workload(prompt_tokens=4096, output_tokens=512, ttft_slo_s=0.5, tpot_slo_s=0.03)


@pytest.fixture(scope="module")
def specs():
    g = catalog.gpu(GPU)
    return catalog.model(MODEL), g, Deployment.for_gpu(g, num_gpus=4, tensor_parallel=4), \
        catalog.resolve_profile("auto", GPU)[0]


def test_users_who_think_send_users_over_think_plus_e2e(specs):
    """32 users thinking 30 s: rate = 32 / (30 + E2E), in flight = rate × E2E (Little's law), and the plan's
    workload carries both; E2E = TTFT joining the batch + TPOT × (output − 1)."""
    m, g, d, prof = specs
    r, f = plan_for_demand(m, g, d, WL, prof, users=32, think_time_s=30.0)
    e2e = r.slo.ttft_s + r.tpot_effective_s * 511
    assert f.e2e_s == pytest.approx(e2e) == pytest.approx(e2e_s(r))
    assert f.request_rate_per_s == pytest.approx(32 / (30 + e2e), rel=1e-3)
    assert r.workload.request_rate_per_s == f.request_rate_per_s
    assert r.workload.concurrency == math.ceil(f.request_rate_per_s * e2e - 1e-9) < 32
    assert f.requests_in_flight == pytest.approx(f.request_rate_per_s * e2e)


def test_users_with_no_think_time_are_all_in_flight(specs):
    m, g, d, prof = specs
    r, f = plan_for_demand(m, g, d, WL, prof, users=32)
    assert r.workload.concurrency == 32 and f.request_rate_per_s == pytest.approx(32 / f.e2e_s)
    assert f.replicas == max(math.ceil(f.request_rate_per_s / f.requests_per_s_per_replica - 1e-9),
                             math.ceil(32 / r.batch_size))


def test_fleet_costs_and_band(specs):
    """$/hour = GPUs × price per GPU-hour, $/month = $/hour × 730; the band's replicas bracket the answer.  The band
    is the binding target's (here the TPOT target holds the batch: the TPOT band, not the wider TTFT one)."""
    m, g, d, prof = specs
    r, f = plan_for_demand(m, g, d, WL, prof, rate_per_s=5.0, size_deployment=True)
    assert f.replicas == math.ceil(5.0 / f.requests_per_s_per_replica - 1e-9)
    assert f.num_gpus == f.replicas * 4 == r.deployment.num_gpus and not r.warnings
    assert f.usd_per_hour == pytest.approx(f.num_gpus * g.price_usd_per_hour)
    assert f.usd_per_month == pytest.approx(f.usd_per_hour * 730) and HOURS_PER_MONTH == 730
    assert r.slo.binding == "tpot" and r.bands["ttft"].pct > r.bands["tpot"].pct
    b = r.bands["tpot"].pct
    assert f.throughput_band_pct == b and f.band_basis.startswith("the TPOT band: its target holds the batch")
    assert f.replicas_low == math.ceil(5.0 / (f.requests_per_s_per_replica * (1 + b / 100)) - 1e-9)
    assert f.replicas_high == math.ceil(5.0 / (f.requests_per_s_per_replica * (1 - b / 100)) - 1e-9)
    assert f.replicas_low <= f.replicas <= f.replicas_high
    d_ = f.as_dict()
    assert d_["usd_per_month_high"] == pytest.approx(f.replicas_high * 4 * g.price_usd_per_hour * 730)


def test_a_contradictory_demand_is_refused(specs):
    m, g, d, prof = specs
    with pytest.raises(ValueError, match="^users:"):
        plan_for_demand(m, g, d, WL, prof, rate_per_s=1.0, users=3)
    with pytest.raises(ValueError, match="^think_time_s:"):
        plan_for_demand(m, g, d, WL, prof, think_time_s=3.0)


def run(*args):
    return CliRunner().invoke(app, list(args))


def test_size_prints_the_fleet_first_and_in_json():
    args = ("size", "-m", MODEL, "-g", GPU, "--tp", "4", "--users", "32", "--think-time-s", "30", "--ttft-slo-ms",
            "500", "--tpot-slo-ms", "30")
    r = run(*args)
    assert r.exit_code == 0, r.output
    first, second = r.stdout.splitlines()[:2]
    assert first.startswith("Fleet: ") and "/hour" in first and "/month" in first and "band" in first
    assert "for 32 users thinking 30 s" in second
    d = json.loads(run(*args, "--json").stdout)
    assert next(iter(d)) == "fleet"  # the fleet engine's answer first (planner.fleet)
    f = d["fleet"]
    assert {"replicas", "num_gpus", "usd_per_hour", "usd_per_month", "demand_rate_per_s", "error_band_pct",
            "replicas_high", "knee_rate_per_s", "usable_rate_per_s"} <= set(f)
    assert f["usd_per_month"] == pytest.approx(f["usd_per_hour"] * 730)
    assert d["fleet_plan"]["question"]["users"] == 32 and d["fleet_warnings"] == []


def test_size_with_too_few_gpus_warns_first():
    r = run("size", "-m", MODEL, "-g", GPU, "--tp", "4", "--num-gpus", "4", "--rate", "10", "--tpot-slo-ms", "30")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith("Fleet: ")
    assert any(x.startswith("  warning: --num-gpus 4 holds 1 replica(s)") for x in lines[:6])


def test_the_throughput_band_is_the_binding_targets(specs):
    """TTFT binding -> the TTFT band; memory (no target binds) -> the wider of the two (planner.steady_fleet)."""
    from planner.steady_fleet import throughput_band

    m, g, d, prof = specs
    # Llama-3.1-70B on 4 H200s: one 4,096-token prompt takes 300 ms, so TTFT <= 300 ms holds the batch to 6
    tight_ttft = WL.model_copy(update={"ttft_slo_s": 0.3, "tpot_slo_s": None})
    r, _ = plan_for_demand(m, g, d, tight_ttft, prof, rate_per_s=5.0, size_deployment=True)
    assert r.slo.binding == "ttft" and r.slo.batch_size == 6
    assert throughput_band(r)[0] == r.bands["ttft"].pct and throughput_band(r)[1].startswith("the TTFT band")
    free = WL.model_copy(update={"ttft_slo_s": None, "tpot_slo_s": None})
    r, _ = plan_for_demand(m, g, d, free, prof, rate_per_s=5.0, size_deployment=True)
    assert r.slo.binding in ("memory", "max_num_seqs")
    assert throughput_band(r) == (max(r.bands["ttft"].pct, r.bands["tpot"].pct),
                                  throughput_band(r)[1]) and throughput_band(r)[1].startswith("the wider")
