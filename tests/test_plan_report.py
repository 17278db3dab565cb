"""planner.plan_report and `planner report`: one configuration's plan as Markdown, HTML and a CSV in human
units, with the engine flags, the fleet, simulated p50/p99 with bands, cost, quality and calibration source."""

from __future__ import annotations

import io
import json
from html.parser import HTMLParser

import pandas as pd
import pytest
from typer.testing import CliRunner

from planner.io import catalog
from planner.cli.app import app
from planner.deploy import serve_command
from planner.cli.flags import PlanFlags
from planner.cli.plan import plan_from_flags
from planner.plan_report import plan_report

MODEL, GPU = "mistral-7b-v0.3", "h200-sxm"


@pytest.fixture(scope="module")
def made():
    """`planner report`'s plan: the fleet engine's answer on the H200 for 200 users thinking 10 s."""
    fp = plan_from_flags(PlanFlags(model=MODEL, gpu=GPU, prompt_tokens=2048, output_tokens=256, users=200,
                                   think_time_s=10.0, ttft_slo_ms=1000, tpot_slo_ms=40))
    pr = plan_report(fp.model, fp.gpu, fp.report, fp.fleet, fp.profile, calibration_note=fp.mode_line)
    return fp.model, fp.gpu, fp.profile, fp.report, fp.fleet, pr


def test_the_report_holds_what_a_manager_acts_on(made):
    m, g, prof, r, f, pr = made
    v = pr.value
    assert v("model") == f"{m.name} ({m.id})" and v("GPU") == f"{g.name} ({g.id})"
    b = f.best
    assert (v("tensor parallel"), v("weights"), v("KV cache")) == (b.tensor_parallel, "bf16", "bf16")
    assert pr.serve_command == serve_command(m, g, r.deployment, max_model_len=2048 + 256, profile=prof).shell()
    assert "vllm serve " in pr.serve_command and "--max-num-seqs" in pr.serve_command
    assert v("users") == 200 and v("think time") == 10.0 and v("request rate") == pytest.approx(b.demand_rate_per_s)
    assert (v("replicas"), v("GPUs")) == (b.replicas, b.num_gpus)
    assert v("cost per month") == round(b.usd_per_month)
    assert v("$ per million output tokens (steady state, all-in)") == pytest.approx(
        float(r.cost.usd_per_million_output_tokens_all_in))
    assert v(r.quality.benchmark) == round(r.quality.score, 1)
    assert v("mode") == "calibrated" and "measured on h200-sxm" in v("source")
    bands = {q: n for _, q, _, _, n in pr.rows}
    assert bands["TTFT p99"].startswith(r.bands["ttft"].text()) and bands["TPOT p99"].startswith(r.bands["tpot"].text())


def test_percentiles_are_the_fleet_engines_at_the_operating_rate(made):
    """The tails are the ones the fleet was sized on: one replica under Poisson arrivals at (1 − headroom) × its
    knee (seeded: the same numbers every time), in ms, and they meet the targets there."""
    m, g, prof, r, f, pr = made
    k = f.best.knee
    assert pr.value("TTFT p99") == pytest.approx(k.ttft_tail_s * 1e3) and pr.value("TPOT p99") == pytest.approx(
        k.tpot_tail_s * 1e3)
    assert pr.value("knee (per replica)") == pytest.approx(k.knee_rate_per_s)
    assert pr.value("TTFT p50") <= pr.value("TTFT p99") and pr.value("p99 meets the targets") is True
    note = next(n for _, q, _, _, n in pr.rows if q == "mode")
    assert plan_report(m, g, r, f, prof, calibration_note=note) == pr  # a pure function: the same report again


def test_csv_is_human_units_a_spreadsheet_reads(made):
    pr = made[-1]
    df = pd.read_csv(io.StringIO(pr.csv_text()))
    assert list(df.columns) == ["section", "quantity", "value", "unit", "band_or_note"]
    row = df[df["quantity"] == "TTFT p99"].iloc[0]
    assert row["unit"] == "ms" and float(row["value"]) == pytest.approx(pr.value("TTFT p99"), rel=1e-3)
    assert float(df[df["quantity"] == "prompt tokens"].iloc[0]["value"]) == 2048  # no thousands separator


def test_markdown_and_html(made):
    pr = made[-1]
    md = pr.markdown()
    assert md.startswith("# Plan: ") and "```bash\n" + pr.serve_command + "\n```" in md
    assert "| TTFT p99 |" in md and "$ per million output tokens (steady state, all-in)" in md

    class Tables(HTMLParser):
        tables = 0

        def handle_starttag(self, tag, attrs):
            self.tables += tag == "table"

    h = Tables()
    h.feed(pr.html())
    assert pr.html().startswith("<!DOCTYPE html>") and h.tables == len(pr.sections())
    assert "&lt;" not in pr.title and "<pre><code>" in pr.html()


def test_cli_report_writes_three_files(tmp_path):
    args = ("report", "-m", MODEL, "-g", GPU, "--prompt-tokens", "2048", "--output-tokens", "256", "--users", "50",
            "--ttft-slo-ms", "1000", "--tpot-slo-ms", "40")
    r = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    assert {p.name for p in (tmp_path / "rep").iterdir()} == {"plan.md", "plan.html", "plan.csv"}
    assert r.stdout.startswith("Fleet: ")
    md = CliRunner().invoke(app, list(args))
    assert md.stdout.startswith("# Plan: Mistral") and md.stdout.strip() == (tmp_path / "rep" / "plan.md").read_text().strip()
    d = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert d["feasible"] and {x["section"] for x in d["rows"]} >= {"Configuration", "Fleet",
                                                                   "Latency, simulated at the p99", "Cost",
                                                                   "Quality", "Calibration"}
