"""``planner capacity`` through the CLI: the files it writes (KEDA / HPA validated offline, the summary escaped),
--json, and bad input as one line naming the flag."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from deploy_validation import validate_keda, validate_manifest_text
from typer.testing import CliRunner

from planner.capacity.autoscale import LeadTime, Policy
from planner.capacity.summary import summary_html
from planner.cli.app import app
from planner.deploy.autoscale import autoscale_files, keda_scaled_object, promql_in_system

BASE = ["capacity", "--model", "llama-3.1-8b", "--gpu", "h200-sxm", "--ttft-slo-ms", "500", "--tpot-slo-ms", "50",
        "--prompt-tokens", "1024", "--output-tokens", "128"]


def run(args):
    return CliRunner().invoke(app, args)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("cap")
    r = run(BASE + ["--peak-rate", "40", "--trough-rate", "2", "--days", "2", "--api-usd-per-mtok", "1",
                    "--replay-hours", "6", "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    return out, json.loads(r.stdout)


def policy(**kw) -> Policy:
    base = dict(target_rate_per_s=23.46, threshold_in_system=96.1, in_system_at_target=40.6, running_at_target=40.6,
                kv_usage_at_target=0.05, kv_usage_at_knee=0.11, min_replicas=1, max_replicas=4, polling_interval_s=30,
                cooldown_s=300, lead=LeadTime(45, 0, 103.1, 16.06, "measured"))
    return Policy(**{**base, **kw})


def test_json_and_files(written):
    out, d = written
    assert d["recommended"]["gpu"] == "h200-sxm" and d["demand"]["hours"] == 48
    rec = d["recommended"]
    assert rec["gpu_hours_autoscaled"] <= rec["gpu_hours_static"]
    assert d["replay"]["hours"] == 6 and 0 <= d["replay"]["overall_attainment"] <= 1
    assert d["breakeven"]["api_usd_per_mtok_output"] == 1
    names = {p.name for p in out.iterdir()}
    assert {"hourly.csv", "keda-scaledobject.yaml", "hpa.yaml", "summary.html", "capacity.json"} <= names
    hourly = (out / "hourly.csv").read_text().splitlines()
    assert len(hourly) == 49 and hourly[0].startswith("hour,rate_per_s,replicas_autoscaled")


def test_manifests_validate_offline(written):
    """KEDA against its documented fields, the HPA against Kubernetes 1.30 (strict)."""
    out, d = written
    so = validate_manifest_text((out / "keda-scaledobject.yaml").read_text())[0]
    hpa = validate_manifest_text((out / "hpa.yaml").read_text())[0]
    assert so["spec"]["maxReplicaCount"] == d["autoscaling"]["max_replicas"] == hpa["spec"]["maxReplicas"]
    assert float(so["spec"]["triggers"][0]["metadata"]["threshold"]) == pytest.approx(
        d["autoscaling"]["threshold_rate_per_s_per_replica"], abs=0.005)
    assert so["spec"]["scaleTargetRef"]["name"] == hpa["spec"]["scaleTargetRef"]["name"] == "vllm-llama-3-1-8b"


def test_keda_schema_refuses_what_keda_does_not_document():
    so = keda_scaled_object(policy(), model_id="llama-3.1-8b")
    validate_keda(so)
    for bad in ({"minReplicas": 1}, {"triggers": []}, {"pollingInterval": "30"}):
        with pytest.raises(AssertionError):
            validate_keda({**so, "spec": {**so["spec"], **bad}})
    trig = {**so["spec"]["triggers"][0], "metadata": {**so["spec"]["triggers"][0]["metadata"], "metricName": "x"}}
    with pytest.raises(AssertionError):
        validate_keda({**so, "spec": {**so["spec"], "triggers": [trig]}})


def test_model_name_is_escaped_in_promql_and_yaml():
    q = promql_in_system('x"} or vector(1e9) #')
    assert '\\"' in q and 'model_name="x\\"} or' in q
    text = autoscale_files(policy(), model_id="llama-3.1-8b", namespace="Team A")["keda-scaledobject.yaml"]
    doc = yaml.safe_load(text.split("---")[-1] if "---" in text else text)
    assert doc["metadata"]["namespace"] == "team-a"


def test_summary_html_escapes(written):
    out, _ = written
    html = (out / "summary.html").read_text()
    assert "<h2>Alternatives</h2>" in html and "$/month" in html and "<script" not in html


def test_summary_pdf(written):
    pytest.importorskip("fpdf")
    out, _ = written
    assert (out / "summary.pdf").read_bytes().startswith(b"%PDF-")


def test_out_is_never_overwritten_without_force(written):
    out, _ = written
    r = run(BASE + ["--peak-rate", "10", "--replay-hours", "0", "--out", str(out)])
    assert r.exit_code == 2 and "--out" in r.output and "--force" in r.output


@pytest.mark.parametrize("extra,flag", [
    (["--peak-rate", "10", "--shape", "business", "--ramp-hours", "0"], "--ramp-hours"),
    (["--peak-rate", "10", "--spot-interruption-rate", "1.5"], "--spot-interruption-rate"),
    (["--peak-rate", "10", "--spot-interruption-rate", "-0.1"], "--spot-interruption-rate"),
    (["--peak-rate", "-5"], "--peak-rate"),
    ([], "--peak-rate"),
    (["--peak-rate", "10", "--prometheus-url", "http://x/'; rm -rf /"], "--prometheus-url"),
])
def test_bad_input_exit_2_naming_the_flag(extra, flag):
    r = run(BASE + extra)
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {flag}")


def test_csv_with_negative_and_missing_hours(tmp_path):
    f = tmp_path / "demand.csv"
    f.write_text("hour,rate_per_s\n0,5\n1,-3\n")
    r = run(BASE + ["--demand-csv", str(f)])
    assert r.exit_code == 2 and "line 3: rate_per_s" in r.output
    f.write_text("hour,rate_per_s\n0,5\n2,3\n")
    r = run(BASE + ["--demand-csv", str(f)])
    assert r.exit_code == 2 and "hour: expected hour 1" in r.output


def test_infeasible_targets_exit_1():
    r = run(["capacity", "--model", "llama-3.1-8b", "--gpu", "l4", "--ttft-slo-ms", "1", "--tpot-slo-ms", "1",
             "--peak-rate", "5", "--replay-hours", "0"])
    assert r.exit_code == 1 and r.output.strip().splitlines()[-1].startswith("error: infeasible:")


def test_summary_escapes_a_hostile_workload_name():
    """A user-supplied string (here the workload's description) reaches the HTML only escaped."""
    from planner.capacity.demand import demand_from_shape
    from planner.capacity.engine import workload_maker
    from planner.capacity.plan import plan_capacity
    from planner.io import catalog

    make = workload_maker(1024, 128)
    make.description = "<script>alert(1)</script>"
    g = catalog.gpu("h200-sxm")
    plan = plan_capacity(catalog.model("llama-3.1-8b"), [(g, catalog.resolve_profile("auto", g.id)[0])],
                         demand_from_shape(30, 3), make, 0.5, 0.05, replay_hours=0)
    html = summary_html(plan)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert np.isfinite(plan.schedule.usd_per_month_autoscaled)
