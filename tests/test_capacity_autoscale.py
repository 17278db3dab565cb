"""The autoscaling policy, its lead time from measured boots, and the policy replay (the simulator in the loop)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.capacity.autoscale import MEASURED_BOOTS, RateTable, derive_policy, lead_time
from planner.capacity.demand import DemandCurve, demand_from_shape
from planner.capacity.engine import replica_knee, workload_maker
from planner.capacity.replay import replay_direct, replay_policy
from planner.capacity.schedule import plan_schedule
from planner.io import catalog

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def setup():
    m, g = catalog.model("llama-3.1-8b"), catalog.gpu("h200-sxm")
    k = replica_knee(m, g, catalog.resolve_profile("auto", g.id)[0], workload_maker(1024, 128), 0.5, 0.05)
    lt = lead_time(m)
    table = RateTable(k)
    return m, k, lt, table


def test_measured_boots_are_the_files():
    """Every boot in the table is the boot record of its file, and the engine's log beside it says the same
    "init engine … took X s"."""
    for b in MEASURED_BOOTS:
        recs = [json.loads(line) for line in (ROOT / b.source).read_text().splitlines() if line.strip()]
        boot = next(r for r in recs if r.get("type") == "boot")
        argv = next(r["argv"] for r in recs if "argv" in r)
        assert int(argv[argv.index("--tensor-parallel-size") + 1]) == b.tensor_parallel
        assert boot["model"] == b.model_id and round(boot["boot_s"], 1) == b.boot_s
        assert round(boot["init_engine_s"], 2) == pytest.approx(b.init_engine_s, abs=0.011)
        log = (ROOT / b.source).with_name("serve.log").read_text(errors="replace")
        took = [float(x) for x in re.findall(r"init engine \(profile, create kv cache, warmup model\) took ([0-9.]+) s",
                                             log)]
        assert b.init_engine_s in took


def test_the_boot_table_is_every_boot_under_calibration_data():
    """planner/data's table is what calibration.boots collects from the committed serve_bench.jsonl files (79 boots
    of 15 models, 2026-11-30 to 2026-12-05, six on an H100, two of them with 8,192-token CUDA graphs, and two more
    with them on an H200): a campaign
    that adds a boot must write it (python -m calibration.boots --write), and none is typed by hand."""
    from calibration.boots import BOOTS_TABLE, table

    assert json.loads(BOOTS_TABLE.read_text()) == table()
    assert len(MEASURED_BOOTS) == 79 and len({b.model_id for b in MEASURED_BOOTS}) == 15


def test_lead_time_arithmetic():
    """Llama-3.1-8B: polling 30 + scrape 15 + node 0 + the slowest of its 18 measured boots (144.1 s) +
    16.06e9 B at 1 GB/s = 205.16 s; gpt-oss-120b its one boot (258.2 s, the Triton MXFP4 MoE compiled in the profiling
    pass) + 65.1e9 B; a model never booted takes the slowest boot of all (gpt-oss-120b's)."""
    lt = lead_time(catalog.model("llama-3.1-8b"))
    assert lt.boot_s == 144.1 and lt.total_s == pytest.approx(45 + 144.1 + 16.0605, abs=0.01)
    assert "slowest of 18 measured boot(s) of llama-3.1-8b" in lt.boot_basis
    oss = lead_time(catalog.model("gpt-oss-120b"))
    assert oss.boot_s == 258.2 and "of gpt-oss-120b" in oss.boot_basis and "no boot" not in oss.boot_basis
    other = lead_time(catalog.model("qwen2.5-72b"), node_provision_s=240)
    assert other.boot_s == 258.2 and "no boot of qwen2.5-72b measured" in other.boot_basis
    assert other.node_provision_s == 240
    with pytest.raises(ValueError, match="--node-provision-s"):
        lead_time(catalog.model("llama-3.1-8b"), node_provision_s=-1)


def test_rate_table_matches_the_knee(setup):
    """At the knee (p99 TTFT and TPOT met by construction) at least 99 % of requests meet both targets; far
    below it all do; the in-system count grows faster than the rate (why the policy scales on the rate)."""
    _, k, _, table = setup
    assert table.at(k.knee_rate_per_s).met_fraction >= 0.985
    assert table.at(0.2 * k.knee_rate_per_s).met_fraction == 1.0
    lo, hi = table.at(0.4 * k.knee_rate_per_s), table.at(0.8 * k.knee_rate_per_s)
    assert hi.in_system > 2 * lo.in_system


@settings(max_examples=40, deadline=None)
@given(st.floats(0.05, 0.95), st.integers(1, 20))
def test_policy_asks_for_the_schedule_in_steady_state(setup, frac, n):
    """Below the knee the rate metric asks for ⌈λ ÷ target⌉ (the schedule's rule) and the alarm asks for no more,
    whatever the current replica count (no flapping between n and n + 1)."""
    _, k, lt, table = setup
    pol = derive_policy(k, table, lt, min_replicas=1, max_replicas=1000)
    lam = frac * k.knee_rate_per_s * n
    need = max(1, int(np.ceil(lam / k.target_rate_per_s - 1e-9)))
    for current in (need, need + 1):
        per = lam / current
        want = pol.desired(lam, current * table.at(per).in_system, current)
        assert want in (need, current) and want <= max(need, current)
        assert want >= need or abs(lam / (k.target_rate_per_s * current) - 1) <= pol.tolerance


def test_replay_follows_the_schedule_and_meets_the_targets(setup):
    """A diurnal day peaking at 60 req/s: the replayed fleet follows the hourly schedule (its hourly mean of ready
    replicas within one of it) and serves ≥ 99 % of ~2.6M requests within the targets."""
    _, k, lt, table = setup
    d = demand_from_shape(60, 4, days=1)
    s = plan_schedule(d, k, lead_time_s=lt.total_s)
    pol = derive_policy(k, table, lt, min_replicas=1, max_replicas=s.max_replicas)
    r = replay_policy(d, pol, table)
    assert r.total_requests == pytest.approx(d.requests, rel=0.01)
    assert np.all(np.abs(r.ready_mean - s.replicas) <= 1.0)
    assert r.overall_attainment >= 0.99


def test_a_capped_fleet_misses_in_the_replay(setup):
    """The same day with max 1 replica: the peak hours pile up a backlog and miss."""
    _, k, lt, table = setup
    d = demand_from_shape(60, 4, days=1)
    pol = derive_policy(k, table, lt, min_replicas=1, max_replicas=1)
    r = replay_policy(d, pol, table)
    assert r.attainment[14] < 0.5 and r.attainment[2] == 1.0
    assert 14 in r.hours_below_target


def test_replay_shortcut_agrees_with_the_direct_simulation(setup):
    """A business day at 1/10 the volume (~17k requests) with a 30-minute ramp: per-hour attainment from the
    per-rate table vs one representative replica simulated request by request through the replay's timeline."""
    _, k, lt, table = setup
    d = DemandCurve(demand_from_shape(20, 0.5, shape="business", ramp_hours=0.5).rate_per_s / 10, "t")
    pol = derive_policy(k, table, lt, min_replicas=1, max_replicas=4)
    r = replay_policy(d, pol, table)
    direct = replay_direct(d, r, table)
    assert np.max(np.abs(direct - r.attainment)) <= 0.02


def test_a_replica_runs_the_models_own_weight_format_by_default():
    """As planner size, simulate, replay and sweep: gpt-oss-20b is planned at mxfp4 (its published format), not bf16
    (planner capacity's old default, which doubled gpt-oss-120b's GPUs per replica)."""
    g = catalog.gpu("h200-sxm")
    k = replica_knee(catalog.model("gpt-oss-20b"), g, catalog.resolve_profile("auto", g.id)[0],
                     workload_maker(1024, 128), 0.5, 0.05)
    assert k.weight_dtype == "mxfp4" and k.knee_rate_per_s > 0


def test_the_cold_start_note_quotes_the_measured_boots_of_its_gpu():
    """The plan's cold-start note takes its engine-start range from the boots table (planner.boots), the GPU's own
    boots where any were measured (the H100's four default-graph boots: 132-154 s), else every GPU's; boots with
    larger CUDA graphs are left out (they start longer: Moonlight 294 s with 8,192-token graphs)."""
    import statistics

    from planner.boots import boot_range_words, default_graph_boots
    from planner.compile_keys import cold_start_note
    from planner.io import catalog
    from planner.specs import Deployment

    h100 = default_graph_boots("h100-sxm")
    assert len(h100) == 4 and all(b.gpu_id == "h100-sxm" and b.max_cudagraph_capture_tokens is None for b in h100)
    s = sorted(b.boot_s for b in h100)
    assert boot_range_words("h100-sxm") == (f"{s[0]:.0f}-{s[-1]:.0f} s over 4 boots on h100-sxm, median "
                                            f"{statistics.median(s):.0f} s")
    assert len(default_graph_boots("a100-sxm-80gb")) == len(default_graph_boots()) == 75  # none on an A100: all
    g = catalog.gpu("h100-sxm")
    note = cold_start_note(catalog.model("llama-3.1-8b"), Deployment.for_gpu(g), None, 4096)
    assert f"(measured engine starts: {boot_range_words('h100-sxm')})" in note
