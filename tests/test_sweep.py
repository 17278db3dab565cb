"""The vectorised sweep (planner.sweep): every row is what plan() says, ranked cheapest feasible first."""

from __future__ import annotations

import pytest
from conftest import make_gpu, mistral_7b

from planner.io import catalog
from planner.plan import plan
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.specs import Deployment, Workload
from planner.sweep import sweep

CALIBRATED = CalibrationProfile(
    mode="calibrated", gpu_id="test-gpu", matmul_efficiency_max=0.7, matmul_half_tokens=300,
    weight_bandwidth_efficiency=0.85, kv_bandwidth_efficiency=0.8, step_overhead_s=2e-3, per_seq_overhead_s=2e-5,
    non_torch_bytes=0.4e9, cudagraph_bytes=0.3e9, activation_bytes_per_batched_token_per_width=3.0,
    weight_bytes_factor=1.01,
)


@pytest.mark.parametrize("profile", [IDEAL_PROFILE, CALIBRATED], ids=["ideal", "calibrated"])
def test_sweep_rows_match_plan(profile):
    """Every sweep row is what plan() says for the same configuration (same formulas, vectorised)."""
    m, g = mistral_7b(), make_gpu()
    w = Workload(prompt_tokens=2048, output_tokens=256, tpot_slo_s=0.02, ttft_slo_s=0.5)
    df = sweep(m, w, gpus=[g], weight_dtypes=["bf16", "int4"], kv_dtypes=["bf16", "fp8"], tensor_parallels=[1, 2],
               contexts=[512, 2048], batch_sizes=[1, 7, 64], profile_for=lambda gpu_id: profile)
    assert set(df["calibration_mode"]) == {profile.mode if profile else "ideal"}
    assert len(df) == 2 * 2 * 2 * 2 * 3
    for row in df.sample(12, random_state=0).itertuples():
        d = Deployment.for_gpu(g, num_gpus=row.tensor_parallel, tensor_parallel=row.tensor_parallel,
                               weight_dtype=row.weight_dtype, kv_cache_dtype=row.kv_cache_dtype)
        wl = Workload(prompt_tokens=row.prompt_tokens, output_tokens=256, concurrency=row.batch_size)
        r = plan(m, g, d, wl, profile)
        assert row.max_concurrency == r.max_concurrency
        assert row.kv_pool_bytes_per_gpu == pytest.approx(r.memory.kv_pool_bytes)
        if r.slo.batch_size == row.batch_size:
            assert row.tpot_s == pytest.approx(r.tpot_effective_s)
            assert row.decode_step_s == pytest.approx(r.tpot.time_s)
            assert row.ttft_s == pytest.approx(r.slo.ttft_s)
            assert row.output_tokens_per_s == pytest.approx(float(r.throughput.output_tokens_per_s))
            assert row.cost_usd_per_million_output_tokens == pytest.approx(
                float(r.cost.usd_per_million_output_tokens))


def test_sweep_ranks_feasible_cheapest_first():
    m, g = mistral_7b(), make_gpu()
    df = sweep(m, Workload(prompt_tokens=1024, output_tokens=256, tpot_slo_s=0.03), gpus=[g])
    assert list(df["rank"]) == list(range(1, len(df) + 1))
    ok = df[df["meets_slo"]]
    assert ok.index.max() < df[~df["meets_slo"]].index.min()
    assert ok["cost_usd_per_million_output_tokens_all_in"].is_monotonic_increasing


# ------------------------------------------------------------------- catalog GPUs and their profiles


def test_sweep_and_plan_share_the_measured_device_memory():
    """The H200 profile measured CUDA's total (150,109,880,320 B, 0.43 % under nvidia-smi's): plan(),
    memory_budget() and the vectorised sweep all budget from it; a transferred profile applies the
    fraction to the other GPU's catalog total."""
    from planner.memory import device_total_bytes, memory_budget

    prof = catalog.profile_for("h200-sxm")
    g, m = catalog.gpu("h200-sxm"), catalog.model("mistral-7b-v0.3")
    assert device_total_bytes(g, prof) == 150_109_880_320
    assert prof.device_memory_fraction == pytest.approx(150_109_880_320 / g.memory_bytes)
    h100 = catalog.gpu("h100-sxm")
    assert device_total_bytes(h100, catalog.profile_for("h100-sxm", transfer=True)) == pytest.approx(
        h100.memory_bytes * prof.device_memory_fraction)
    df = sweep(m, Workload(prompt_tokens=1024, output_tokens=128), gpus=[g], weight_dtypes=["bf16"],
               kv_dtypes=["bf16"], tensor_parallels=[1], contexts=[1024], batch_sizes=[8],
               profile_for=lambda _g: prof)
    want = memory_budget(m, g, Deployment.for_gpu(g), prof).kv_pool_bytes
    assert df["kv_pool_bytes_per_gpu"].iloc[0] == pytest.approx(want)


def test_sweep_rows_match_plan_for_gpus_with_different_vllm_defaults():
    """One sweep over an H200 (8192 tokens / 1024 seqs by default) and an A100 (2048 / 256): each row
    must use its own GPU's scheduler limits, as plan() does (a shared limit once leaked across GPUs)."""
    m = catalog.model("mistral-7b-v0.3")
    wl = Workload(prompt_tokens=4096, output_tokens=512)
    gpus = [catalog.gpu("h200-sxm"), catalog.gpu("a100-sxm-80gb")]
    prof = {g.id: catalog.profile_for(g.id, transfer=True) for g in gpus}
    df = sweep(m, wl, gpus=gpus, weight_dtypes=["bf16"], kv_dtypes=["bf16"], tensor_parallels=[1],
               batch_sizes=[1, 32, 64], profile_for=prof.get)
    for g in gpus:
        for b in (32, 64):
            row = df[(df.gpu_id == g.id) & (df.batch_size == b)].iloc[0]
            r = plan(m, g, Deployment.for_gpu(g), wl.model_copy(update={"concurrency": b}), prof[g.id])
            assert r.slo.batch_size == b
            assert row["ttft_s"] == pytest.approx(r.slo.ttft_s, rel=1e-9), g.id
            assert row["tpot_s"] == pytest.approx(r.tpot_effective_s, rel=1e-9), g.id
            assert row["decode_step_s"] == pytest.approx(r.tpot.time_s, rel=1e-9), g.id



def test_sweep_plans_across_nodes_where_the_fleet_engine_does():
    """Issue #19: DeepSeek-V3 in bf16 (~1.3 TB of weights) starts on no single 8 × H200 node (8 × 141 GB), so the
    sweep once had no row that starts (the Cost view's Pareto chart had no H200 point).  TPs left out, it now adds
    the fleet engine's layout across nodes (planner.fleet_eval.candidate_layouts: TP 8 × the first PP that
    starts), 16 GPUs a replica, each row what plan() says at that TP × PP; a model one node holds gets no PP rows."""
    from planner.fleet import FleetCandidate, FleetQuestion
    from planner.fleet_eval import candidate_layouts

    m, g = catalog.model("deepseek-v3"), catalog.gpu("h200-sxm")
    prof = catalog.resolve_profile("auto", g.id)[0]
    w = Workload(prompt_tokens=4096, output_tokens=512, tpot_slo_s=0.2, ttft_slo_s=10.0)
    df = sweep(m, w, gpus=[g], weight_dtypes=["bf16"], kv_dtypes=["bf16"], batch_sizes=[1, 8, 64],
               profile_for=lambda gpu_id: prof)
    q = FleetQuestion(model_id=m.id, gpu_ids=(g.id,), weight_dtype="bf16", prompt_tokens=4096, output_tokens=512)
    engine = {(c.tensor_parallel, c.pipeline_parallel) for c, s in candidate_layouts(q, m, g, prof, FleetCandidate)
              if s is not None}
    assert engine and all(pp > 1 for _, pp in engine)  # the engine plans it across nodes only
    started = df[df["starts"]]
    assert not started.empty and set(zip(started["tensor_parallel"], started["pipeline_parallel"])) == engine
    assert not df[df["pipeline_parallel"] == 1]["starts"].any()  # every single-node layout is still listed
    assert (started["num_gpus"] == started["tensor_parallel"] * started["pipeline_parallel"]).all()
    assert started["meets_slo"].any()
    for row in started.itertuples():
        d = Deployment.for_gpu(g, num_gpus=row.num_gpus, tensor_parallel=row.tensor_parallel,
                               pipeline_parallel=row.pipeline_parallel, weight_dtype="bf16", kv_cache_dtype="bf16")
        r = plan(m, g, d, Workload(prompt_tokens=4096, output_tokens=512, concurrency=row.batch_size), prof)
        assert row.max_concurrency == r.max_concurrency
        assert row.kv_pool_bytes_per_gpu == pytest.approx(r.memory.kv_pool_bytes)
        if r.slo.batch_size == row.batch_size:
            assert row.tpot_s == pytest.approx(r.tpot_effective_s)
            assert row.cost_usd_per_million_output_tokens_all_in == pytest.approx(
                float(r.cost.usd_per_million_output_tokens_all_in))
    small = sweep(catalog.model("llama-3.1-8b"), w, gpus=[g], weight_dtypes=["bf16"], kv_dtypes=["bf16"],
                  batch_sizes=[1])
    assert set(small["pipeline_parallel"]) == {1}
