"""The dashboard's pure modules (planner.dashboard.scenario, views, inputs, headline, cost_view, compare, deploy_view): the
frames agree with the planner numbers they are drawn beside (the same report, the same SLO search, the same
memory budget, the same ranking as `planner sweep`), and the input rules say what they change."""

from __future__ import annotations

import json

import numpy as np
import pytest

from planner.io import catalog
from planner.dashboard import compare, cost_view, deploy_view, headline, inputs, views
from planner import ranking
from planner.bands import band
from planner.cost import with_price
from planner.io.hf_import import model_from_config_bytes
from planner.profile import CalibrationProfile, Residuals
from planner.report import csv_bytes, write_csv
from planner.dashboard.scenario import Planned, Scenario, plan_scenario, scenario_gpu, scenario_problems, scenario_profile
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


def test_gpu_memory_is_shown_one_way():
    """#13 defect 9: the GPU's memory appeared as 80.0 / 79.7 / 79.66 GiB.  Every memory value of the table is
    binary GiB from one formatter, and the GPU's memory is the budget's (what vLLM multiplies)."""
    from planner.memory import device_total_bytes

    p = planned(scenario(gpu_id="a100-sxm-80gb"))
    t = views.memory_table(p)
    mem_rows = t[~t["value"].str.endswith(" B")]
    assert mem_rows["value"].str.fullmatch(r"[\d,]+\.\d+ GiB").all()
    gpu_mem = t.loc[t["quantity"] == "GPU memory", "value"].item()
    assert gpu_mem == views.mem(device_total_bytes(p.gpu, p.profile)) == "79.7 GiB"
    assert t.loc[t["quantity"] == "Usable per GPU", "also"].item().endswith(f"of {gpu_mem}")
    assert views.mem(0.5 * 2**30) == "0.500 GiB"


# ------------------------------------------------------------------------------------------- latency


def test_latency_crossing_is_the_slo_search_batch_when_tpot_binds():
    p = planned(scenario())
    f = views.latency_frames(p)
    assert p.report.slo.binding == "tpot"
    assert f.crossing == p.report.batch_size
    assert f.kv_limit_batch == min(p.report.max_concurrency, p.deployment.max_num_seqs)
    assert set(f.tpot_context["batch_size"]) == {1, p.report.batch_size, f.kv_limit_batch}


def test_latency_throughput_curve_is_the_sweeps_rows():
    """The throughput frame is computed as planner.sweep computes a row (same formulas, pinned here)."""
    from planner.sweep import sweep

    p = planned(scenario())
    f = views.latency_frames(p)
    d = p.deployment
    sw = sweep(p.model, p.workload, gpus=[p.gpu], weight_dtypes=[d.weight_dtype], kv_dtypes=[d.kv_cache_dtype],
               tensor_parallels=[1], batch_sizes=f.throughput["batch_size"].tolist(), profile_for=lambda _g: p.profile)
    m = f.throughput.merge(sw, on="batch_size", suffixes=("", "_sweep"))
    assert len(m) == len(f.throughput)
    for col in ("output_tokens_per_s", "tpot_s", "decode_step_s"):
        np.testing.assert_allclose(m[col], m[f"{col}_sweep"], rtol=1e-9)
    assert (m["fits"] == m["fits_sweep"]).all() and (m["meets_slo"] == m["meets_slo_sweep"]).all()


def test_latency_frames_at_tp16_beyond_a_node():
    """#13 defect 1: TP 16 (offered in the dropdown) is more than one node of 8 GPUs; the sweep skips such a
    TP, which left the throughput frame empty (object dtype) and the Latency view failed.  Every curve is
    there, in floats, and a note says the replica spans nodes."""
    from planner.dashboard import charts

    p = planned(scenario(num_gpus=16, tensor_parallel=16))
    f = views.latency_frames(p)
    assert len(f.throughput) == len(f.tpot_batch) > 10
    assert f.throughput["output_tokens_per_s"].dtype == float and f.throughput["output_tokens_per_s"].gt(0).all()
    charts.throughput_vs_batch(f.throughput, p.report.batch_size or None, p.report.batch_size or None)
    charts.ttft_vs_prompt(f.ttft, 2.0, 4096)
    [note] = views.scenario_notes(p)
    assert "TP 16 is more GPUs than one node" in note and "TP 8 × PP 2" in note


def test_latency_frames_carry_the_error_band_of_each_prediction():
    p = planned(scenario())
    f = views.latency_frames(p)
    short = band(p.profile, p.model, p.deployment, "prefill_short").pct
    long = band(p.profile, p.model, p.deployment, "prefill_long").pct
    dec = band(p.profile, p.model, p.deployment, "decode").pct
    assert set(f.ttft.loc[f.ttft["prompt_tokens"] <= 2048, "band_pct"]) == {short}
    assert set(f.ttft.loc[f.ttft["prompt_tokens"] > 2048, "band_pct"]) == {long}
    assert set(f.tpot_batch["band_pct"]) == set(f.throughput["band_pct"]) == {dec}
    ideal = views.latency_frames(planned(scenario(calibrated=False)))
    assert ideal.ttft["band_pct"].isna().all() and "no measured basis" in ideal.band_basis


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
    """The Cost view's question for the default scenario (its dtypes, every batch up to the 160 users)."""
    return cost_view.ranking_sweep(catalog.model(MODEL), scenario(), same_dtypes=True)


@pytest.fixture(scope="module")
def triangle_frame():
    return views.triangle_frame(cost_view.triangle_sweep(catalog.model(MODEL), scenario()), 512)


def test_triangle_latency_is_ttft_plus_tpot_times_output(triangle_frame):
    df, corners = triangle_frame
    np.testing.assert_allclose(df["latency_s"], df["ttft_s"] + 512 * df["tpot_s"])
    assert df["pareto"].any()
    assert set(corners["corner"]) == {"quality + latency", "quality + throughput", "latency + throughput"}
    assert set(corners["label"]) <= set(df.loc[df["pareto"], "label"])


def test_triangle_draws_the_whole_front_and_a_thinned_cloud(triangle_frame):
    """Thousands of candidates, at most 200 drawn: every Pareto point, the rest one per chart cell."""
    df, _ = triangle_frame
    pts = views.triangle_points(df)
    assert len(df) > 2000 and len(pts) <= 200
    assert pts["pareto"].sum() == df["pareto"].sum()
    assert (~pts["pareto"]).sum() > 50  # the cloud keeps its shape


def test_scenario_point_on_the_triangle():
    r = planned(scenario()).report
    pt = views.scenario_point(r, 512)
    assert pt["latency_s"] == pytest.approx(r.slo.ttft_s + 512 * r.tpot_effective_s)
    assert views.scenario_point(planned(scenario(tpot_slo_s=0.5 * MS)).report, 512) is None


# ------------------------------------------------------------------------------- the one ranking (#13 part 2)


def test_the_cost_views_rows_are_in_the_one_ranking(sweep_frame):
    """planner.ranking's order: every row meeting every target (TTFT, TPOT, context, no more requests per replica
    than users) before any that misses one, then the all-in cost."""
    ok = ranking.meets_targets(sweep_frame, 160).to_numpy()
    assert ok.any() and not ok.all()
    assert not (np.diff(ok.astype(int)) > 0).any()  # never a meeting row after a missing one
    assert sweep_frame.loc[ok, ranking.RANK_KEY].is_monotonic_increasing
    assert list(sweep_frame["rank"]) == list(range(1, len(sweep_frame) + 1))
    assert sweep_frame["batch_size"].max() == 160 and sweep_frame["batch_size"].nunique() == 160


@pytest.mark.parametrize("same", [True, False])
def test_cost_view_cheapest_is_planner_sweeps_first_row(same):
    """The Cost view's first row, the Sizing report's first row and `planner sweep --json`'s first row are the
    same configuration: the command the dashboard prints, run through the CLI."""
    import shlex

    from typer.testing import CliRunner

    from planner.cli.app import app as cli

    sc = scenario(target_users=40)
    sw = cost_view.ranking_sweep(catalog.model(MODEL), sc, same)
    best = views.cheapest_per_gpu(sw, sc.target_users)
    argv = shlex.split(views.sweep_command(sc, MODEL, same))[1:]
    argv = argv[: argv.index("--csv")] + ["--json", "--top", "1"]
    res = CliRunner().invoke(cli, argv)
    assert res.exit_code == 0, res.output
    [cli_top] = json.loads(res.output)
    top = best.iloc[0]
    assert ranking.config_key(top) == ranking.config_key(cli_top) == ranking.config_key(sw.iloc[0])
    assert int(top["csv_rank"]) == 1 == cli_top["rank"] and cli_top["meets_slo"]
    assert top[ranking.RANK_KEY] == pytest.approx(cli_top[ranking.RANK_KEY], rel=1e-9)


def test_cheapest_per_gpu_only_rows_meeting_the_targets_in_ranking_order(sweep_frame):
    best = views.cheapest_per_gpu(sweep_frame, 160)
    assert best["gpu_id"].is_unique and best["meets_slo"].all() and (best["batch_size"] <= 160).all()
    assert best["csv_rank"].is_monotonic_increasing and best["csv_rank"].iloc[0] == 1
    assert best[ranking.RANK_KEY].is_monotonic_increasing
    r = planned(scenario()).report
    row = best[best["gpu_id"] == GPU].iloc[0]
    if int(row["tensor_parallel"]) == 1:  # the scenario's own configuration: plan()'s batch and cost
        assert int(row["batch_size"]) == r.batch_size
        assert row[ranking.RANK_KEY] == pytest.approx(float(r.cost.usd_per_million_output_tokens_all_in))


def test_cost_table_has_tp_quality_calibration_and_the_error_band(sweep_frame):
    best = views.cheapest_per_gpu(sweep_frame, 160)
    t = views.cost_table(best, {k: g.name for k, g in catalog.gpus().items()})
    assert list(t.columns[:2]) == ["rank in CSV", "configuration"]
    assert list(t.columns[5:7]) == ["batch", ranking.RANK_LABEL]  # the ranking key first among the money columns
    assert list(t.columns).index("$/M output") > list(t.columns).index(ranking.RANK_LABEL)
    for col in ("TP", "quality", "calibration", "error band", "rank in CSV", "price source"):
        assert col in t.columns, col
    modes = dict(zip(best["gpu_id"].astype(str), best["calibration_mode"].astype(str)))
    marked = dict(zip(best["gpu_id"].astype(str), t["calibration"]))
    assert modes["h200-sxm"] == "calibrated" and not marked["h200-sxm"].startswith("⚠")
    assert modes["mi300x"] == "transferred" and marked["mi300x"].startswith("⚠ transferred")
    bands = dict(zip(best["gpu_id"].astype(str), t["error band"]))
    assert bands["h200-sxm"].startswith("±") and bands["mi300x"] == "no measured basis"


def test_cheapest_sentence_marks_a_transferred_winner(sweep_frame):
    best = views.cheapest_per_gpu(sweep_frame, 160)
    row = best[best["gpu_id"].astype(str) == "mi300x"].iloc[0]
    text = cost_view.cheapest_sentence(row, "AMD Instinct MI300X")
    assert "transferred from another GPU's calibration" in text and "no measured basis" in text
    assert "all-in" in text
    assert "prefill included" in cost_view.RANKING_DEFINITION and "more requests per replica" in cost_view.RANKING_DEFINITION


def test_sweep_key_ignores_what_a_sweep_does_not_depend_on():
    a = cost_view.sweep_key(scenario(num_gpus=4, tensor_parallel=4, weight_dtype="int4"), False)
    assert a == cost_view.sweep_key(scenario(), False)
    assert a != cost_view.sweep_key(scenario(target_users=999), False)  # the users cap the Cost view's batch
    assert cost_view.sweep_key(scenario(target_users=10), None) == cost_view.sweep_key(scenario(), None)  # Triangle
    assert a != cost_view.sweep_key(scenario(prompt_tokens=8192), False)
    assert cost_view.sweep_key(scenario(), True) != cost_view.sweep_key(scenario(weight_dtype="fp8"), True)
    assert cost_view.sweep_key(scenario(price_usd_per_hour=1.0), False).gpu_id == GPU


def test_sweep_command_is_the_cost_views_question():
    assert views.sweep_command(scenario(calibrated=False), MODEL) == (
        "planner sweep -m mistral-7b-v0.3 --prompt-tokens 4096 --output-tokens 512 --ttft-slo-ms 2000 "
        "--tpot-slo-ms 50 --users 160 --weight-dtype bf16 --kv-dtype bf16 --profile none --csv sweep.csv")
    assert "--weight-dtype" not in views.sweep_command(scenario(), MODEL, same_dtypes=False)
    assert views.cost_grid(scenario(target_users=20), True) == {
        "batch_sizes": tuple(range(1, 21)), "weight_dtypes": ("bf16",), "kv_dtypes": ("bf16",)}
    assert cost_view.overrides_note(scenario(), "H200") is None
    assert "$9.00/GPU-hour" in cost_view.overrides_note(scenario(price_usd_per_hour=9.0), "H200")


def test_csv_bytes_are_what_write_csv_writes(sweep_frame, tmp_path):
    assert csv_bytes(sweep_frame) == write_csv(sweep_frame, tmp_path / "s.csv").read_bytes()


def test_pareto_frame_front_is_not_dominated_and_only_meets_the_targets(sweep_frame):
    pf = cost_view.pareto_frame(sweep_frame, 160, max_points=120)
    assert len(pf) <= 120 and pf["pareto"].any()
    ranks = set(sweep_frame.loc[ranking.meets_targets(sweep_frame, 160), "rank"])
    assert set(pf["rank"]) <= ranks
    front = pf[pf["pareto"]]
    for _, r in front.iterrows():
        better = pf[(pf["per_user_tokens_per_s"] >= r["per_user_tokens_per_s"]) & (pf["cost"] <= r["cost"])
                    & ((pf["per_user_tokens_per_s"] > r["per_user_tokens_per_s"]) | (pf["cost"] < r["cost"]))]
        assert better.empty
    np.testing.assert_allclose(pf["per_user_tokens_per_s"], 1 / pf["tpot_s"])


def test_picked_config_reads_a_points_customdata():
    assert cost_view.picked_config({"customdata": ["l40s", "fp8", "fp8", 2, 1, 61.0]}) == {
        "gpu": "l40s", "wdtype": "fp8", "kvdtype": "fp8", "tp": 2, "pp": 1}
    assert cost_view.picked_config({"customdata": ["h200-sxm", "bf16", "bf16", 8, 2]})["pp"] == 2
    assert cost_view.picked_config({"x": 1}) is None


def test_pareto_pick_plans_across_nodes_as_the_fleet_engine_does():
    """Issue #19 ("Pareto pick forces PP 1"): the cost–speed chart was drawn from PP 1 rows only and a pick set PP
    1, so DeepSeek-V3 in bf16 had no H200 point (no 8 × H200 node holds it).  Its points now include the fleet
    engine's layout across nodes (TP 8 × PP k on 16+ GPUs, `planner size --gpu h200-sxm` answers the same) and a
    pick carries that PP and keeps the number of replicas."""
    from planner.fleet import FleetQuestion, plan_fleet

    sc = scenario(model_key="deepseek-v3", target_users=64, ttft_slo_s=10.0, tpot_slo_s=0.2)
    pf = cost_view.pareto_frame(cost_view.ranking_sweep(catalog.model("deepseek-v3"), sc, True), 64)
    h200 = pf[pf["gpu_id"] == "h200-sxm"]
    assert not h200.empty and (h200["pipeline_parallel"] > 1).all()
    engine = plan_fleet(FleetQuestion(model_id="deepseek-v3", gpu_ids=("h200-sxm",), weight_dtype="bf16",
                                      rate_per_s=0.5, prompt_tokens=4096, output_tokens=512)).best
    tp, pp = engine.tensor_parallel, engine.pipeline_parallel
    assert set(zip(h200["tensor_parallel"], h200["pipeline_parallel"])) == {(tp, pp)} and pp > 1
    row = h200.iloc[0]
    assert row["label"].startswith(f"{tp * pp} × h200-sxm TP {tp} × PP {pp}, bf16")
    point = {"customdata": [row[c] for c in cost_view.PICK_FIELDS], "text": row["label"] + "<br>x"}
    assert cost_view.picked_state([point], gpus=32.0, gpus_per_replica=16) == {
        "gpu": "h200-sxm", "wdtype": "bf16", "kvdtype": "bf16", "tp": tp, "pp": pp, "gpus": float(2 * tp * pp),
        "picked": row["label"]}


# ---------------------------------------------------------------------------------------------- load


def test_load_view_says_why_nothing_can_be_simulated():
    """#13 defect 6: a prompt too long for one request's KV reached the simulator and showed "rate: must be a
    finite number > 0, got np.float64(0.0)".  The view gets a plain sentence instead."""
    p = planned(scenario(prompt_tokens=1_000_000))  # the start-up rule's first problem: Mistral's 32,768 limit
    assert views.load_problem(p.report) == ("Nothing to simulate: context (prompt + output) 1,000,512 tokens "
                                            "exceeds the model's 32,768-token limit.")
    with pytest.raises(ValueError, match="Nothing to simulate"):
        views.load_view(p, 200)
    # within Llama-3.1-8B's 131,072 limit but not the L4's pool: 120,512 x 131,072 B = 14.7 GiB of KV
    why = views.load_problem(planned(scenario(model_key="llama-3.1-8b", gpu_id="l4", prompt_tokens=120_000)).report)
    assert why.startswith("Nothing to simulate: one request of 120,512 tokens needs 14.7 GiB of KV per GPU")
    assert "does not fit: needs" in views.load_problem(planned(scenario(gpu_memory_utilization=0.1)).report)
    assert views.load_problem(planned(scenario()).report) is None


def test_load_view_reports_progress(two_gpus):
    seen = []
    views.load_view(two_gpus, 200, progress=lambda f, rate: seen.append(f))
    assert seen[0] > 0 and seen[-1] == 1.0 and seen == sorted(seen)
    assert len(seen) > 5


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


def test_profile_caption_follows_the_chosen_latency_model():
    """#13 defect 9: the sidebar said "Transferred calibration…" while "ideal roofline" was selected."""
    assert views.profile_caption(scenario_profile("l4", False)).startswith("Ideal roofline (speed of light)")
    assert views.profile_caption(scenario_profile("l4", True)).startswith("Transferred calibration")
    assert len(views.profile_caption(scenario_profile(GPU, True))) < 700  # a caption, not a page


# ------------------------------------------------------------------------------------ inputs (#13 part 7)


@pytest.mark.parametrize("key,raw,used,fragment", [
    ("gpus", -5, 1, "GPUs: -5 is below the minimum 1; using 1"),
    ("context", 1e9, 10_000_000,
     "Context length: 1,000,000,000 tokens is above the limit 10,000,000 tokens; using 10,000,000 tokens"),
    ("gpus", 2.5, 3, "GPUs: 2.5 is not a whole number; using 3"),
    ("tpot_ms", float("nan"), 50, "TPOT target: 'nan' is not a number; using 50 ms"),
    ("ttft_ms", 0, 0.1, "TTFT target: 0 ms is below the minimum 0.1 ms; using 0.1 ms"),
])
def test_clean_number_says_what_it_used_instead(key, raw, used, fragment):
    v, why = inputs.clean_number(inputs.NUMBERS[key], raw)
    assert v == used and why == fragment


def test_clean_number_leaves_good_values_alone():
    assert inputs.clean_number(inputs.NUMBERS["context"], 4608.0) == (4608.0, None)
    assert inputs.clean_number(inputs.NUMBERS["tpot_ms"], 12.5) == (12.5, None)


def test_context_splits_into_prompt_and_output():
    assert inputs.split_context(4608, 512) == (4096, 512, None)
    prompt, out, why = inputs.split_context(512, 512)
    assert (prompt, out) == (1, 511) and "leave no prompt" in why and "using 511" in why


def test_url_warnings_name_the_parameter_and_what_was_used():
    """#13 defect 7: model=gpt-5, tp=3, util=5 were silently replaced by defaults."""
    choices = {"model": ["mistral-7b-v0.3", "llama-3.1-8b"], "tp": [1, 2, 4, 8, 16], "cost_same_dtypes": [True, False]}
    defaults = {"model": "mistral-7b-v0.3", "tp": 1, "cost_same_dtypes": True}
    w = inputs.url_warnings({"model": "gpt-5", "tp": "3", "util": "5", "gpus": "abc", "context": "8192",
                             "cost_same_dtypes": "false", "gpu": "ignored-not-checked"}, choices, defaults,
                            inputs.URL_LABELS)
    assert set(w) == {"model", "tp", "util", "gpus"}
    why = "URL parameter model=gpt-5: model 'gpt-5' is not one of mistral-7b-v0.3, llama-3.1-8b; using mistral-7b-v0.3"
    assert w["model"] == (why, "mistral-7b-v0.3")
    assert w["tp"][0].startswith("URL parameter tp=3: tensor parallel '3' is not one of 1, 2, 4, 8, 16; using 1")
    assert w["util"] == ("URL parameter util=5: gpu_memory_utilization must lie in 0.10–1.00; using 0.92", 0.92)
    assert w["gpus"][0] == "URL parameter gpus=abc: GPUs is not a number; using 1"
    assert inputs.still_shown(w, {"model": "mistral-7b-v0.3", "tp": 2, "util": 0.92, "gpus": 1.0}) == [
        w["model"][0], w["util"][0], w["gpus"][0]]  # tp was changed since: its warning is gone


def test_old_links_carry_prompt_and_output_into_the_context():
    assert inputs.legacy_context({"prompt": "16384", "output": "512"}) == 16896.0
    assert inputs.legacy_context({"prompt": "16384"}) == 16384.0 + 512
    assert inputs.legacy_context({"prompt": "1", "context": "9"}) is None


def test_preset_state_sets_the_context_and_numbers_as_floats():
    from planner.dashboard.presets import PRESETS, resolve

    v = inputs.preset_state(resolve(PRESETS["premium chat"], list(catalog.models()), list(catalog.gpus())))
    assert v["context"] == 4096.0 + 512 and v["output"] == 512.0 and v["tpot_ms"] == pytest.approx(20.0)
    assert v["model"] == "llama-3.1-70b" and isinstance(v["gpus"], float)


# ------------------------------------------------------------------------------- the fleet headline


def test_the_headline_fleet_is_planner_size_for_the_demand():
    """The dashboard's headline fleet is the fleet engine's across GPUs (planner.fleet), what `planner size
    --rate` / `--users --think-time-s` prints: the command it shows gives the same layout, replicas, GPUs and
    $/month."""
    import shlex

    from typer.testing import CliRunner

    from planner.cli.app import app as cli

    sc = scenario()
    p = planned(sc)
    for demand in (headline.Demand("requests/s", rate_per_s=10.0),
                   headline.Demand("users + think time", active_users=2000, think_s=30.0)):
        fa = headline.demand_fleet(p, demand, sc).across.best
        res = CliRunner().invoke(cli, [*shlex.split(headline.fleet_command(sc, MODEL, demand))[1:], "--json"])
        assert res.exit_code == 0, res.output
        cli_fleet = json.loads(res.output)["fleet"]
        assert (cli_fleet["gpu_id"], cli_fleet["tensor_parallel"], cli_fleet["replicas"], cli_fleet["num_gpus"]) == (
            fa.gpu_id, fa.tensor_parallel, fa.replicas, fa.num_gpus)
        assert cli_fleet["usd_per_month"] == pytest.approx(fa.usd_per_month)
        assert fa.usd_per_month == pytest.approx(fa.num_gpus * fa.price_usd_per_gpu_hour * 730)


def test_the_headline_across_gpus_answers_at_the_pinned_tp_and_pp_as_planner_size_does():
    """Issue #19: a PP (or TP) pinned in the sidebar was ignored by the headline across GPUs, which answered with
    the engine's own layout.  Pinned, every GPU is tried at it — what `planner size --pp 2` (no --gpu) answers, the
    command the headline shows — and the caption says so; auto (0) is the engine's choice, as before."""
    import shlex

    from typer.testing import CliRunner

    from planner.cli.app import app as cli

    sc, demand = scenario(model_key="llama-3.1-70b"), headline.Demand("requests/s", rate_per_s=2.0)
    auto = headline.scenario_fleet(sc, demand).best
    assert auto.pipeline_parallel == 1
    for pins in ((0, 2), (8, 2)):
        plan = headline.demand_fleet(planned(sc), demand, sc, pins).across
        b = plan.best
        assert b is not None and b.pipeline_parallel == 2 and (pins[0] in (0, b.tensor_parallel))
        assert all(c.pipeline_parallel == 2 for c in plan.candidates)
        cmd = headline.fleet_command(sc, "llama-3.1-70b", demand, pins)
        assert "--pp 2" in cmd and ("--tp 8" in cmd) == bool(pins[0])
        res = CliRunner().invoke(cli, [*shlex.split(cmd)[1:], "--json"])
        assert res.exit_code == 0, res.output
        f = json.loads(res.output)["fleet"]
        assert (f["gpu_id"], f["tensor_parallel"], f["pipeline_parallel"], f["replicas"], f["num_gpus"]) == (
            b.gpu_id, b.tensor_parallel, b.pipeline_parallel, b.replicas, b.num_gpus)
        assert f["usd_per_month"] == pytest.approx(b.usd_per_month)
        assert "as the sidebar pins it" in headline.best_fleet_caption(plan, demand)
    assert "--pp" not in headline.fleet_command(sc, "llama-3.1-70b", demand)
    assert "pins" not in headline.best_fleet_caption(headline.scenario_fleet(sc, demand), demand)


def test_fleet_from_users_and_think_time_is_littles_law():
    """2,000 users each asking once per (30 s + E2E) send 2,000 / (30 + E2E) requests/s."""
    fa = headline.demand_fleet(planned(scenario()), headline.Demand("users + think time", active_users=2000,
                                                                    think_s=30.0)).fleet
    assert fa.request_rate_per_s == pytest.approx(2000 / (30.0 + fa.e2e_s))
    assert fa.replicas >= int(np.ceil(fa.request_rate_per_s / fa.requests_per_s_per_replica))


def test_fleet_band_brackets_the_answer_and_says_when_there_is_no_basis():
    fa = headline.demand_fleet(planned(scenario()), headline.Demand("requests/s", rate_per_s=50.0)).fleet
    assert fa.replicas_low <= fa.replicas <= fa.replicas_high and fa.throughput_band_pct > 0
    assert headline.fleet_sentence(fa, headline.Demand("requests/s", 50.0)).endswith(f"Error band: {fa.band_text()}.")
    ideal = headline.demand_fleet(planned(scenario(calibrated=False)), headline.Demand("requests/s", 50.0)).fleet
    assert ideal.throughput_band_pct is None and "no error band" in ideal.band_text()


def test_no_fleet_without_a_feasible_batch():
    d = headline.Demand("requests/s", 5.0)
    fa = headline.demand_fleet(planned(scenario(tpot_slo_s=0.5 * MS)), d).fleet
    assert fa.batch_size_per_replica == 0 and headline.fleet_sentence(fa, d).startswith("**No fleet can be sized")


def test_headline_metric_rows():
    p = planned(scenario())
    fa = headline.demand_fleet(p, headline.Demand("requests/s", 10.0)).fleet
    rows = headline.fleet_metrics(fa, "src")
    assert [x[0] for x in rows] == ["Replicas", "GPUs", "$ / hour", "$ / month"]
    assert rows[1][1] == f"{fa.num_gpus:,}" and "Error band" in rows[0][2]
    rows = headline.detail_metrics(p.report, 1, views.mem)
    assert [x[0] for x in rows] == ["Max concurrent users", "KV cache pool / GPU", "TTFT (one prompt)",
                                    "SLO-feasible batch", "TPOT at that batch", "$ / M output tokens"]
    assert rows[-1][1] == f"${float(p.report.cost.usd_per_million_output_tokens_all_in):,.3f}"


def test_fits_per_gpu_says_fits_or_needs_and_has():
    p = planned(scenario(model_key="llama-3.1-70b", num_gpus=2, tensor_parallel=2))
    f = headline.fits_per_gpu(p.model, catalog.gpus().values(), p.deployment, 4608, lambda g: scenario_profile(g))
    by = f.set_index("gpu_id")
    assert by.loc["h200-sxm", "fits"] and by.loc["h200-sxm", "sentence"].startswith("fits: ")
    assert not by.loc["l4", "fits"]
    assert by.loc["l4", "sentence"].startswith("does not fit: needs ") and ", has " in by.loc["l4", "sentence"]
    assert set(f["gpu_id"]) == set(catalog.gpus())


def test_fits_per_gpu_needs_what_admitting_one_request_asks():
    """Gemma-3-27B at 16,384 tokens: vLLM 0.26 admits a request with its whole prompt's blocks free in all 7 KV groups
    (7 x 1,024 blocks of 16 x 10 x 8,192 B), where it then holds 1,024 + 6 x 65: the row needs the ask and counts
    what :func:`planner.memory.max_concurrency` counts."""
    from planner.memory import max_concurrency, memory_budget
    from planner.specs import Deployment

    m, g = catalog.model("gemma-3-27b"), catalog.gpu("h200-sxm")
    dep = Deployment.for_gpu(g)
    prof = catalog.profile_for("h200-sxm", "0.26.0")
    row = headline.fits_per_gpu(m, [g], dep, 16384, lambda _: prof).iloc[0]
    b = memory_budget(m, g, dep, prof)
    assert row["needs_bytes"] == b.weight_bytes + b.overhead_bytes + 7 * 1024 * 16 * 10 * 8192
    assert row["max_users_per_replica"] == max_concurrency(m, g, dep, 16384, prof) > 0


def test_premium_preset_on_int4_is_warned():
    assert headline.quality_warning(("quality", "latency"), "int4", 0.97, "premium chat").startswith(
        "The premium chat preset keeps quality, but this configuration serves int4")
    assert headline.quality_warning(("quality", "latency"), "bf16", 1.0) is None
    assert headline.quality_warning(("latency", "throughput"), "int4", 0.97) is None
    assert headline.quality_warning(None, "int4", 0.97) is None


# ------------------------------------------------------------------------------------ compare, deploy


def test_pinned_scenarios_round_trip_through_the_url_token():
    sc = scenario(tpot_slo_s=12.5 * MS, price_usd_per_hour=2.5, calibrated=False, kv_cache_dtype="fp8")
    token = compare.encode(sc)
    assert "~" in token and " " not in token
    back = compare.decode(token)
    assert back._replace(tpot_slo_s=0, ttft_slo_s=0) == sc._replace(tpot_slo_s=0, ttft_slo_s=0)
    assert back.tpot_slo_s == pytest.approx(sc.tpot_slo_s) and back.ttft_slo_s == pytest.approx(sc.ttft_slo_s)
    assert compare.decode("garbage") is None and compare.decode(token.replace("~1~", "~x~", 1)) is None
    assert compare.decode_demand(token) is None  # a pin of an older URL: no demand of its own


def test_a_pin_keeps_its_own_demand():
    """Issue #19: pinned scenarios keep their own demand (a rate, or users and think time) in the token."""
    sc = scenario()
    for demand in (headline.Demand("requests/s", rate_per_s=12.5),
                   headline.Demand("users + think time", active_users=300, think_s=7.5)):
        token = compare.encode(sc, demand)
        assert compare.decode(token) == compare.decode(compare.encode(sc)) and compare.decode_demand(token) == demand
    assert compare.decode_demand(compare.encode(sc) + "~u~-3~1") is None


def test_compare_frame_one_column_per_scenario():
    a, b = planned(scenario()), planned(scenario(kv_cache_dtype="fp8"))
    d = headline.Demand("requests/s", 10.0)
    items = [(n, p, headline.demand_fleet(p, d, sc), "calibrated profile")
             for n, p, sc in (("now", a, scenario()), ("1. fp8", b, scenario(kv_cache_dtype="fp8")))]
    df = compare.compare_frame(items)
    assert list(df.columns) == ["quantity", "now", "1. fp8"]
    q = df.set_index("quantity")
    assert q.loc["weights / KV cache", "1. fp8"] == "bf16 / fp8"
    users = {c: int(q.loc["max concurrent users (deployment)", c].replace(",", "")) for c in ("now", "1. fp8")}
    assert users["1. fp8"] > 1.9 * users["now"]
    assert q.loc["fleet $ / month", "now"].startswith("$") and q.loc["demand", "now"] == "10 requests/s"


def test_deploy_panel_is_planner_deploys_bundle_for_the_chosen_plan():
    import io
    import zipfile

    p = planned(scenario())
    panel = deploy_view.deploy_panel(p, 10.0)
    b = panel.bundle
    assert panel.refusal is None and "vllm serve" in b.serve_command and "mistral" in b.serve_command.lower()
    t = deploy_view.deploy_predictions(b).set_index("predicted")["value"]
    assert t["KV cache pool per GPU"].endswith("tokens)") and "GiB" in t["KV cache pool per GPU"]
    assert b.replicas == headline.demand_fleet(p, headline.Demand("requests/s", 10.0)).fleet.replicas
    names = zipfile.ZipFile(io.BytesIO(deploy_view.files_zip(b.files))).namelist()
    assert sorted(names) == sorted(f"deploy/{n}" for n in b.files) and "deploy/serve.sh" in names


def test_deploy_panel_refuses_in_a_sentence():
    panel = deploy_view.deploy_panel(planned(scenario(num_gpus=16, tensor_parallel=16)), 10.0)
    assert panel.bundle is None and panel.refusal.startswith("vLLM would not start this plan as chosen")
    assert "TP 16" in panel.refusal


def test_plan_report_is_planner_reports_for_the_scenario_and_its_demand():
    p = planned(scenario())
    sc = scenario()
    da = headline.demand_fleet(p, headline.Demand("requests/s", 10.0), sc)
    md = deploy_view.plan_report_markdown(p, da)  # the engine's fleet on the sidebar's GPU and TP
    assert md.startswith("# Plan: Mistral 7B") and f"{da.own.best.num_gpus:,} × " in md and "/month" in md
    assert "vllm serve" in md and "## Fleet" in md


def test_picked_state_keeps_the_number_of_replicas():
    pts = [{"customdata": ["l40s", "fp8", "bf16", 2, 1, 60.0],
            "text": "2 × l40s TP 2, fp8 / KV bf16, batch 64<br>x"}]
    assert cost_view.picked_state(pts, gpus=3.0, gpus_per_replica=1) == {
        "gpu": "l40s", "wdtype": "fp8", "kvdtype": "bf16", "tp": 2, "pp": 1, "gpus": 6.0,
        "picked": "2 × l40s TP 2, fp8 / KV bf16, batch 64"}
    assert cost_view.picked_state([], 1.0, 1) is None and cost_view.picked_state([{"x": 1}], 1.0, 1) is None


def test_add_pin_moves_a_repeat_last_and_keeps_three():
    assert compare.add_pin(["a", "b"], "a") == ["b", "a"]
    assert compare.add_pin(["a", "b", "c"], "d") == ["b", "c", "d"]
    why = "URL parameter pin: a pinned scenario could not be read (or more than 3); left out"
    assert compare.read_pins(["bad"]) == ([], why)


def test_a_pipeline_parallel_pin_round_trips_and_older_pins_stay_pp_1():
    """Issue #19: a scenario planned across nodes (PP) keeps its stages in the pin; an older token (TP only) is PP 1."""
    sc = scenario(num_gpus=16, tensor_parallel=8, pipeline_parallel=2)
    token = compare.encode(sc, headline.Demand("requests/s", rate_per_s=3.0))
    assert "~8p2~" in token and compare.decode(token) == compare.decode(compare.encode(sc)) == sc
    assert compare.decode(compare.encode(sc._replace(pipeline_parallel=1, num_gpus=8))).pipeline_parallel == 1
    for bad in ("~8p0~", "~8px~", "~p2~"):
        assert compare.decode(token.replace("~8p2~", bad)) is None


def test_auto_layout_is_the_engines_choice_on_the_sidebar_gpu():
    """Issue #19: TP/PP "auto" (0) resolves to the layout of the fleet engine's cheapest fleet on the sidebar's GPU
    — what `planner size --gpu X` without --tp answers — and rounds the GPU count to whole replicas of it."""
    from planner.dashboard.layout import resolve_layout

    demand = headline.Demand("requests/s", rate_per_s=2.0)
    sc = scenario(model_key="llama-3.1-70b", gpu_id="h200-sxm", tensor_parallel=0, pipeline_parallel=0, num_gpus=1)
    lay = resolve_layout(sc, demand)
    best = headline.scenario_fleet(sc, demand, across_gpus=False).best
    assert best is not None and lay.plan.best == best
    assert (lay.scenario.tensor_parallel, lay.scenario.pipeline_parallel) == (best.tensor_parallel,
                                                                            best.pipeline_parallel)
    assert best.tensor_parallel >= 2  # a 70B model in bf16 does not start on one H200
    assert lay.scenario.num_gpus == best.gpus_per_replica and scenario_problems(lay.scenario) == []
    assert lay.note.startswith(f"TP and PP auto: the fleet engine chose TP {best.tensor_parallel} × PP 1 on h200-sxm")
    assert f"{best.replicas:,} replica(s)" in lay.note
    fixed = sc._replace(tensor_parallel=8, pipeline_parallel=1, num_gpus=8)
    assert resolve_layout(fixed, demand) == (fixed, None, None)  # nothing left to choose


@pytest.mark.parametrize("model, wdtype, rate", [("llama-3.1-70b", "bf16", 2.0), ("deepseek-v3", "bf16", 1.0)])
def test_auto_layout_is_what_planner_size_gpu_without_tp_answers(model, wdtype, rate):
    """The dashboard's TP/PP auto and `planner size --gpu h200-sxm` without --tp/--pp: the same layout, replicas,
    GPUs and $/month (DeepSeek-V3 in bf16 needs pipeline stages across nodes)."""
    import json

    from typer.testing import CliRunner

    from planner.cli.app import app as cli
    from planner.dashboard.layout import resolve_layout

    sc = scenario(model_key=model, weight_dtype=wdtype, tensor_parallel=0, pipeline_parallel=0)
    lay = resolve_layout(sc, headline.Demand("requests/s", rate_per_s=rate))
    r = CliRunner().invoke(cli, ["size", "-m", model, "--gpu", "h200-sxm", "--rate", f"{rate:g}", "--weight-dtype",
                                 wdtype, "--kv-dtype", "bf16", "--prompt-tokens", "4096", "--output-tokens", "512",
                                 "--ttft-slo-ms", "2000", "--tpot-slo-ms", "50", "--profile", "auto", "--json"])
    assert r.exit_code == 0, r.output
    d, b = json.loads(r.stdout)["fleet"], lay.plan.best
    assert (d["tensor_parallel"], d["pipeline_parallel"], d["replicas"], d["num_gpus"], d["usd_per_month"]) == (
        b.tensor_parallel, b.pipeline_parallel, b.replicas, b.num_gpus, b.usd_per_month)
    assert (lay.scenario.tensor_parallel, lay.scenario.pipeline_parallel) == (b.tensor_parallel, b.pipeline_parallel)
    if model == "deepseek-v3":
        assert b.tensor_parallel == 8 and b.pipeline_parallel >= 2
