"""planner.scenario and planner.views: the dashboard's frames agree with the planner numbers they are drawn
beside (the same report, the same SLO search, the same memory budget), and the sidebar's helpers behave."""

from __future__ import annotations

import json

import numpy as np
import pytest

from planner import catalog, views
from planner.cost import with_price
from planner.hf_import import model_from_config_bytes
from planner.profile import CalibrationProfile, Residuals
from planner.ranking import RANK_KEY
from planner.report import csv_bytes, write_csv
from planner.scenario import Planned, Scenario, plan_scenario, scenario_gpu, scenario_problems, scenario_profile
from planner.specs import Source
from planner.units import MS

MODEL, GPU = "mistral-7b-v0.3", "h200-sxm"


def scenario(**kw) -> Scenario:
    base = {"model_key": MODEL, "gpu_id": GPU, "num_gpus": 1, "tensor_parallel": 1, "weight_dtype": "bf16",
            "kv_cache_dtype": "bf16", "gpu_memory_utilization": 0.92, "prompt_tokens": 4096, "output_tokens": 512,
            "target_users": 160, "ttft_slo_s": 2000 * MS, "tpot_slo_s": 50 * MS, "price_usd_per_hour": 0.0,
            "calibrated": True}
    return Scenario(**{**base, **kw})


def planned(sc: Scenario) -> Planned:
    return plan_scenario(sc, catalog.model(sc.model_key), scenario_gpu(sc.gpu_id, sc.price_usd_per_hour),
                               scenario_profile(sc.gpu_id, sc.calibrated))


@pytest.fixture(scope="module")
def two_gpus() -> Planned:
    return planned(scenario(num_gpus=2))


# ------------------------------------------------------------------------------------------ scenario


def test_scenario_problems_name_each_bad_input():
    assert scenario_problems(scenario()) == []
    probs = scenario_problems(scenario(prompt_tokens=0, tpot_slo_s=0.0, tensor_parallel=4, num_gpus=2,
                                             gpu_memory_utilization=1.5))
    assert probs == ["prompt length must be at least 1 (got 0)", "TPOT target must be above 0 ms (got 0.0 ms)",
                     "tensor parallel 4 needs at least 4 GPUs; the deployment has 2",
                     "gpu_memory_utilization must be in (0, 1], got 1.5"]


def test_scenario_gpu_price_override_carries_its_source():
    catalog_price = catalog.gpu(GPU).price_usd_per_hour
    assert scenario_gpu(GPU, 0.0).price_usd_per_hour == catalog_price
    g = scenario_gpu(GPU, 2 * catalog_price)
    assert g.price_usd_per_hour == 2 * catalog_price
    assert g.price_source.url == "price override (dashboard sidebar)"
    assert f"catalog price {catalog_price:g} USD/h replaced" == g.price_source.note


def test_with_price_keeps_the_other_sources():
    g = catalog.gpu(GPU)
    src = Source(url="quote", date="2026-01-01")
    h = with_price(g, 9.5, src)
    assert h.price_usd_per_hour == 9.5 and h.sources["price_usd_per_hour"] == src
    assert {k: v for k, v in h.sources.items() if k != "price_usd_per_hour"} == {
        k: v for k, v in g.sources.items() if k != "price_usd_per_hour"}


def test_deployment_users_is_per_replica_concurrency_times_replicas(two_gpus):
    """2 GPUs at TP 1 = 2 replicas: twice the KV limit of one."""
    r = two_gpus.report
    assert two_gpus.deployment.replicas == 2
    assert views.deployment_users(r) == 2 * r.max_concurrency


# -------------------------------------------------------------------------------------------- memory


def test_memory_bar_parts_add_up_to_the_gpu(two_gpus):
    """weights + activations + (non-torch + CUDA graphs) + KV pool + the (1 − utilisation) headroom = memory."""
    bar = views.memory_bar(two_gpus.report, "x").iloc[0]
    parts = ["weights_bytes", "activation_bytes", "overhead_bytes", "kv_pool_bytes", "headroom_bytes"]
    assert sum(bar[p] for p in parts) == pytest.approx(bar["memory_bytes"], rel=1e-12)
    assert bar["headroom_bytes"] == pytest.approx(0.08 * bar["memory_bytes"], rel=1e-9)


def test_users_vs_context_agrees_with_the_plan(two_gpus):
    df, max_ctx = views.users_vs_context(two_gpus, 160)
    assert (np.diff(df["max_users"]) <= 0).all()  # longer contexts never fit more users
    r = two_gpus.report
    assert views.deployment_users(r) >= 160 and max_ctx >= two_gpus.workload.context_tokens
    _, exact = views.users_vs_context(two_gpus, views.deployment_users(r))
    assert exact >= two_gpus.workload.context_tokens  # the plan's own answer holds at its own context
    _, none = views.users_vs_context(two_gpus, 10**9)
    assert none is None


def test_memory_table_kv_bytes_per_token():
    """Mistral-7B bf16 KV: 2 × 32 layers × 8 KV heads × 128 dims × 2 B = 131,072 B per token."""
    t = views.memory_table(planned(scenario()))
    row = t[t["quantity"] == "KV bytes per token (whole model)"].iloc[0]
    assert row["value"] == "131,072 B"


# ------------------------------------------------------------------------------------------- latency


def test_latency_crossing_is_the_slo_search_batch_when_tpot_binds():
    p = planned(scenario())
    f = views.latency_frames(p)
    assert p.report.slo.binding == "tpot"
    assert f.crossing == p.report.batch_size
    assert f.kv_limit_batch == min(p.report.max_concurrency, p.deployment.max_num_seqs)
    # the throughput curve (the sweep) and the TPOT curve (phases + cost) are the same numbers
    m = f.throughput.merge(f.tpot_batch, on="batch_size", suffixes=("_sweep", "_curve"))
    np.testing.assert_allclose(m["tpot_s_sweep"], m["tpot_s_curve"], rtol=1e-9)
    assert set(f.tpot_context["batch_size"]) == {1, p.report.batch_size, f.kv_limit_batch}


def test_roofline_points_and_ridge():
    p = planned(scenario())
    rv = views.roofline_view(p)
    g = p.gpu
    assert rv.ridge_flops_per_byte == pytest.approx(rv.peak_flops_per_s / g.hbm_bandwidth_bytes_per_s)
    bounds = dict(zip(rv.points["label"], rv.points["bound"]))
    assert bounds["prefill"] == "compute" and bounds["decode, batch 1"] == "memory"
    assert rv.points.set_index("label").loc["prefill", "time_s"] == pytest.approx(float(p.report.ttft.time_s))
    assert list(rv.table["bound"]) == [b + "-bound" for b in rv.points["bound"]]


# ------------------------------------------------------------------------------------- triangle, cost


@pytest.fixture(scope="module")
def sweep_frame():
    from planner.specs import Workload
    from planner.sweep import sweep

    sc = scenario()
    wl = Workload(prompt_tokens=sc.prompt_tokens, output_tokens=sc.output_tokens, concurrency=sc.target_users,
                  ttft_slo_s=sc.ttft_slo_s, tpot_slo_s=sc.tpot_slo_s)
    grid = views.cost_grid(sc, same_dtypes=True)
    return sweep(catalog.model(MODEL), wl, gpus=[scenario_gpu(g, 0.0) for g in catalog.gpus()],
                 weight_dtypes=list(grid["weight_dtypes"]), kv_dtypes=list(grid["kv_dtypes"]),
                 batch_sizes=list(grid["batch_sizes"]), profile_for=lambda g: scenario_profile(g))


def test_triangle_latency_is_ttft_plus_tpot_times_output(sweep_frame):
    df, corners = views.triangle_frame(sweep_frame, 512)
    np.testing.assert_allclose(df["latency_s"], df["ttft_s"] + 512 * df["tpot_s"])
    assert df["fits"].all() and df["pareto"].any()
    assert set(corners["corner"]) == {"quality + latency", "quality + throughput", "latency + throughput"}
    assert set(corners["label"]) <= set(df.loc[df["pareto"], "label"])


def test_scenario_point_on_the_triangle():
    r = planned(scenario()).report
    pt = views.scenario_point(r, 512)
    assert pt["latency_s"] == pytest.approx(r.slo.ttft_s + 512 * r.tpot_effective_s)
    assert views.scenario_point(planned(scenario(tpot_slo_s=0.5 * MS)).report, 512) is None


def test_cost_grid():
    sc = scenario(target_users=20)
    assert views.cost_grid(sc, True) == {"batch_sizes": tuple(range(1, 21)), "weight_dtypes": ("bf16",),
                                         "kv_dtypes": ("bf16",)}
    # any dtype: the same every-size grid (a coarser one could name another cheapest configuration than plan())
    assert views.cost_grid(sc, False) == {"batch_sizes": tuple(range(1, 21))}
    assert views.cost_grid(scenario(target_users=5000), True)["batch_sizes"][-1] == 1024


def test_cheapest_per_gpu_matches_the_plan_on_the_scenario_gpu(sweep_frame):
    best = views.cheapest_per_gpu(sweep_frame, 160)
    assert best["gpu_id"].is_unique and best["meets_slo"].all() and (best["batch_size"] <= 160).all()
    assert best[RANK_KEY].is_monotonic_increasing  # the one ranking key: all-in $/M output tokens
    r = planned(scenario()).report
    row = best[best["gpu_id"] == GPU].iloc[0]
    assert int(row["batch_size"]) == r.batch_size
    assert row["cost_usd_per_million_output_tokens"] == pytest.approx(float(r.cost.usd_per_million_output_tokens))
    assert row[RANK_KEY] == pytest.approx(float(r.cost.usd_per_million_output_tokens_all_in))
    table = views.cost_table(best)
    assert list(table["configuration"]) == list(best["label"]) and table["$/M output"].str.startswith("$").all()


def test_sweep_command_is_the_cli_call():
    assert views.sweep_command(scenario(calibrated=False), MODEL) == (
        "planner sweep -m mistral-7b-v0.3 --prompt-tokens 4096 --output-tokens 512 --ttft-slo-ms 2000 "
        "--tpot-slo-ms 50 --profile none --csv sweep.csv")


def test_csv_bytes_are_what_write_csv_writes(sweep_frame, tmp_path):
    assert csv_bytes(sweep_frame) == write_csv(sweep_frame, tmp_path / "s.csv").read_bytes()


# ---------------------------------------------------------------------------------------------- load


def test_load_view_knee_and_fleet(two_gpus):
    lv = views.load_view(two_gpus, 200)
    assert set(lv.frame["metric"]) == {"TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99"}
    assert lv.knee is not None and lv.knee > lv.lightest_rate
    assert lv.deployment_knee == pytest.approx(2 * lv.knee)
    assert lv.lightest_rate == pytest.approx(0.01 * lv.burst_rate)


# ------------------------------------------------------------------------------------- text, uploads


def test_profile_caption_and_latency_label():
    prof = CalibrationProfile(
        mode="calibrated", gpu_id=GPU, engine="vllm", engine_version="0.26.0", created="2026-11-29T10:00:00",
        matmul_efficiency_max=0.7, weight_bandwidth_efficiency=0.8, kv_bandwidth_efficiency=0.8, step_overhead_s=0.002,
        residuals={"decode": Residuals(n=24, median_abs_error_pct=3.2, p90_abs_error_pct=7.5)})
    assert views.profile_caption(prof) == ("Calibrated profile: vllm 0.26.0, fitted 2026-11-29. "
                                           "Fit error, median |error|: decode 3.2% (p90 7.5%).")
    assert views.latency_model_label("transferred") == "calibration transferred from another GPU"
    assert views.latency_model_label("ideal") == "ideal roofline (speed of light)"


def test_model_from_config_bytes():
    cfg = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
           "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 32768, "max_position_embeddings": 32768}
    data = json.dumps(cfg).encode()
    spec, err = model_from_config_bytes(data, 1024)
    assert err is None and spec.id.startswith("uploaded-") and spec.num_layers == 32
    assert model_from_config_bytes(data, 1024)[0].id == spec.id  # content-addressed
    assert "the limit is 10 bytes" in model_from_config_bytes(data, 10)[1]
    assert "not valid JSON" in model_from_config_bytes(b"{nope", 1024)[1]
    assert "nested too deeply" in model_from_config_bytes(b"[" * 100_000 + b"]" * 100_000, 10**6)[1]
    assert model_from_config_bytes(b"[1]", 1024)[1].startswith("could not read this config.json")
