"""One answer everywhere (issue #13, #19): for a dashboard scenario (its URL), the Cost view's cheapest
configuration, the sweep CSV's rank 1 and `planner sweep`'s table name the same configuration (GPU, TP, weight
dtype, KV dtype and batch per replica); `planner size`, `planner report` (without --gpu) and the dashboard's
headline name the same cheapest whole fleet (planner.fleet; tests/test_fleet.py checks every surface over
random scenarios).

Each surface asks the same question — every catalog GPU × TP at the scenario's dtypes, every batch up to the
users, the scenario's targets — and ranks with planner.ranking."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlsplit

import pandas as pd
import pytest
from typer.testing import CliRunner

from planner.io import catalog
from planner.dashboard import headline, views
from planner.dashboard.choose import question_command
from planner.cli.app import app
from planner.ranking import config_key
from planner.dashboard.scenario import Scenario, scenario_gpu, scenario_profile
from planner.specs import Workload
from planner.sweep import sweep
from planner.units import MS

#: app.py's DEFAULTS (the scenario a bare URL opens), as Scenario fields.
DEFAULTS = {"model": "mistral-7b-v0.3", "gpu": "h200-sxm", "gpus": 1, "tp": 1, "wdtype": "bf16", "kvdtype": "bf16",
            "util": 0.92, "prompt": 4096, "output": 512, "users": 160, "ttft_ms": 2000, "tpot_ms": 50.0, "price": 0.0}

URLS = [
    "/?gpus=4&model=llama-3.1-70b&tp=4&tpot_ms=30&ttft_ms=500&users=32",  # the example
    "/",  # the dashboard's default scenario
    "/?model=llama-3.1-70b&kvdtype=fp8&prompt=16384&output=1024&users=160&ttft_ms=10000&tpot_ms=100",  # agents
    "/?model=mistral-7b-v0.3&wdtype=int4&kvdtype=fp8&prompt=1024&output=64&users=160&ttft_ms=200&tpot_ms=25",
]


def scenario_from_url(url: str) -> Scenario:
    q = {**DEFAULTS, **dict(parse_qsl(urlsplit(url).query))}
    return Scenario(model_key=q["model"], gpu_id=q["gpu"], num_gpus=int(q["gpus"]), tensor_parallel=int(q["tp"]),
                    weight_dtype=q["wdtype"], kv_cache_dtype=q["kvdtype"], gpu_memory_utilization=float(q["util"]),
                    prompt_tokens=int(q["prompt"]), output_tokens=int(q["output"]), target_users=int(q["users"]),
                    ttft_slo_s=float(q["ttft_ms"]) * MS, tpot_slo_s=float(q["tpot_ms"]) * MS,
                    price_usd_per_hour=float(q["price"]), calibrated=True)


def cost_view_cheapest(sc: Scenario) -> tuple:
    """What the Cost tab shows first (app.py's _sweep_all + views.cheapest_per_gpu, its default toggle: the
    scenario's dtypes)."""
    wl = Workload(prompt_tokens=sc.prompt_tokens, output_tokens=sc.output_tokens, concurrency=sc.target_users,
                  ttft_slo_s=sc.ttft_slo_s, tpot_slo_s=sc.tpot_slo_s)
    grid = views.cost_grid(sc, same_dtypes=True)
    sw = sweep(catalog.model(sc.model_key), wl, gpus=[scenario_gpu(g, 0.0) for g in catalog.gpus()],
               weight_dtypes=list(grid["weight_dtypes"]), kv_dtypes=list(grid["kv_dtypes"]),
               batch_sizes=list(grid["batch_sizes"]), profile_for=lambda g: scenario_profile(g, sc.calibrated),
               deployment_defaults={"gpu_memory_utilization": sc.gpu_memory_utilization})
    best = views.cheapest_per_gpu(sw, sc.target_users)
    assert not best.empty
    return config_key(best.iloc[0])


def question_flags(sc: Scenario) -> list[str]:
    """The flags of planner.dashboard.choose.question_command (what the dashboard can show beside its Cost view)."""
    cmd = question_command("sweep", sc.model_key, prompt_tokens=sc.prompt_tokens, output_tokens=sc.output_tokens,
                           ttft_slo_s=sc.ttft_slo_s, tpot_slo_s=sc.tpot_slo_s, users=sc.target_users,
                           weight_dtype=sc.weight_dtype, kv_dtype=sc.kv_cache_dtype, calibrated=sc.calibrated)
    assert cmd.startswith("planner sweep ")
    return cmd.split()[2:]


def invoke(*args: str):
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r


@pytest.mark.parametrize("url", URLS)
def test_cost_view_report_sweep_csv_and_cli_name_the_same_configuration(url, tmp_path):
    sc = scenario_from_url(url)
    want = cost_view_cheapest(sc)
    flags = question_flags(sc)

    # the sweep CSV's rank 1, and the first row of the table `planner sweep` prints
    csv = tmp_path / "sweep.csv"
    table = invoke("sweep", *flags, "--csv", str(csv), "--top", "1").stdout.splitlines()
    df = pd.read_csv(csv)
    assert df.loc[0, "rank"] == 1
    assert config_key(df.iloc[0]) == want
    first = next(line.split() for line in table if line.startswith("1 "))
    assert (first[1], int(first[4]), first[2], first[3], int(first[5].replace(",", "")), int(first[6])) == want

    # `planner size` and `planner report` without --gpu answer the fleet question (planner.fleet, issue #19): the
    # cheapest whole fleet for the scenario's users, the same one the dashboard's headline shows across GPUs
    size_flags = [*flags, "--users", str(sc.target_users)] if "--users" not in flags else flags
    d = json.loads(invoke("size", *size_flags, "--json").stdout)["fleet"]
    demand = headline.Demand("users + think time", active_users=sc.target_users, think_s=0.0)
    dash = headline.scenario_fleet(sc, demand).best
    assert (d["gpu_id"], d["tensor_parallel"], d["weight_dtype"], d["replicas"], d["num_gpus"]) == (
        dash.gpu_id, dash.tensor_parallel, dash.weight_dtype, dash.replicas, dash.num_gpus)
    rep = json.loads(invoke("report", *size_flags, "--json").stdout)
    rows = {r["quantity"]: r["value"] for r in rep["rows"]}
    gpu = catalog.gpu(dash.gpu_id)
    assert rows["GPU"] == f"{gpu.name} ({gpu.id})" and rows["replicas"] == dash.replicas
    assert rows["tensor parallel"] == dash.tensor_parallel and rep["fleet"]["usd_per_month"] == dash.usd_per_month
