"""calibration/serve_plan.py and serve_probe.py without vLLM or a GPU: the plan, arrivals, prompts, record arithmetic,
and a --dry-run end to end (a fake engine) whose records replay through the simulator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from calibration import serve_plan
from calibration import serve_probe as sp
from planner.io import catalog
from planner.serving import load_records, replay
from planner.serving.workloads import poisson_arrivals

ROOT = Path(__file__).resolve().parent.parent


def test_module_imports_without_vllm():
    code = "import sys, calibration.serve_probe; print('vllm' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_default_plan():
    phases = serve_plan.build_plan(sp.parse_args([]))
    assert [p.engine_id for p in phases] == ["A-prefix-caching-on", "B-prefix-caching-off"]
    a, b = phases
    assert a.enable_prefix_caching and not b.enable_prefix_caching and b.optional
    rates = [r.rate_per_s for r in a.runs if r.shared_prefix_tokens == 0 and not r.warmup]
    assert rates == [4, 16, 40, 80]
    # light load is capped at 45 s of arrivals: 4/s × 45 s = 180 requests
    assert [r.num_requests for r in a.runs if r.rate_per_s == 4] == [180]
    names = [r.name for p in phases for r in p.runs]
    assert len(names) == len(set(names))
    # the caching-off engine replays exactly the caching-on shared runs (same seeds, lengths, rates)
    on = [r for r in a.runs if r.shared_prefix_tokens]
    off = [r for r in b.runs if r.shared_prefix_tokens]
    assert [(r.seed, r.rate_per_s, r.num_requests, r.total_prompt_tokens) for r in on] == \
           [(r.seed, r.rate_per_s, r.num_requests, r.total_prompt_tokens) for r in off]
    assert on[0].total_prompt_tokens == 2304 and on[0].output_tokens == 64
    assert serve_plan.plan_estimate_s(phases, 80) < 350  # fits the default budget


def test_plan_variants_and_validation():
    assert len(serve_plan.build_plan(sp.parse_args(["--skip-prefix-off"]))) == 1
    only = serve_plan.build_plan(sp.parse_args(["--only-prefix-off"]))
    assert len(only) == 1 and not only[0].enable_prefix_caching and not only[0].optional
    assert len(serve_plan.build_plan(sp.parse_args(["--shared-prefix-tokens", "0"]))) == 1
    for bad in (["--rates", "1,x"], ["--rates", "0"], ["--max-model-len", "600"], ["--num-requests", "0"],
                ["--gpu-memory-utilization", "1.5"]):
        with pytest.raises(SystemExit):
            serve_plan.build_plan(sp.parse_args(bad))


def test_arrivals_are_the_simulators_poisson_process():
    run = serve_plan.RunSpec("r", 16.0, 200, 512, 128, seed=3)
    np.testing.assert_array_equal(serve_plan.arrival_offsets(run), poisson_arrivals(200, 16.0, seed=3))
    assert serve_plan.arrival_offsets(run)[-1] == pytest.approx(200 / 16, rel=0.2)
    assert (serve_plan.arrival_offsets(serve_plan.RunSpec("b", None, 8, 10, 10)) == 0).all()


def test_prompts_avoid_special_ids_and_share_only_the_prefix():
    run = serve_plan.RunSpec("s", 8.0, 20, 256, 64, shared_prefix_tokens=2048, seed=1)
    ps = serve_plan.make_prompts(run, 32768)
    assert len(ps) == 20 and all(len(p) == 2304 for p in ps)
    assert min(min(p) for p in ps) >= 3 and max(max(p) for p in ps) < 32768
    assert all(p[:2048] == ps[0][:2048] for p in ps)
    assert len({tuple(p[2048:2064]) for p in ps}) == 20  # unique parts differ from their first block
    other = serve_plan.make_prompts(serve_plan.RunSpec("t", 8.0, 2, 256, 64, shared_prefix_tokens=2048, seed=2), 32768)
    assert other[0][:16] != ps[0][:16]  # another run never hits this run's cached prefix
    plain = serve_plan.make_prompts(serve_plan.RunSpec("u", 8.0, 3, 512, 8, seed=1), 32768)
    assert plain[0][:16] != plain[1][:16]


def test_token_stats_by_hand():
    """Sent at 1.0 s; tokens at 1.2, 1.3, 1.3, 1.5: TTFT 0.2, TPOT (1.5 − 1.2)/3 = 0.1, E2E 0.5."""
    s = serve_plan.token_stats(1.0, [1.2, 1.3, 1.3, 1.5])
    assert s["ttft_s"] == pytest.approx(0.2) and s["tpot_s"] == pytest.approx(0.1)
    assert s["e2e_s"] == pytest.approx(0.5) and s["num_output_tokens"] == 4
    assert serve_plan.token_stats(0.0, [0.3])["tpot_s"] is None
    assert serve_plan.token_stats(0.0, [])["ttft_s"] is None


def test_engine_metrics_intervals():
    m = SimpleNamespace(queued_ts=10.0, scheduled_ts=10.5, first_token_ts=10.6, last_token_ts=11.6,
                        num_generation_tokens=11, arrival_time=1.7e9, first_token_latency=0.7)
    e = serve_plan.engine_metrics(m)
    assert e["engine_queue_s"] == pytest.approx(0.5) and e["engine_prefill_s"] == pytest.approx(0.1)
    assert e["engine_tpot_s"] == pytest.approx(0.1)
    assert serve_plan.engine_metrics(None) == {}


def _dry(tmp_path, *extra):
    out = tmp_path / "serve.jsonl"
    rc = sp.main(["--dry-run", "--out", str(out), "--work-dir", str(tmp_path / "work"), "--rates", "20,60",
                  "--num-requests", "40", "--min-requests", "10", "--shared-num-requests", "30",
                  "--shared-rates", "10", "--budget-s", "100000", *extra])
    assert rc == 0
    return out


def test_dry_run_end_to_end_and_replay(tmp_path):
    out = _dry(tmp_path)
    recs = load_records(out)
    kinds = [r["type"] for r in recs]
    assert kinds.count("engine") == 2 and kinds.count("run") == kinds.count("run_end") == 6
    eng = [r for r in recs if r["type"] == "engine"]
    assert eng[0]["dry_run"] and eng[0]["kv_cache_tokens"] == 50_000 * 16 and eng[0]["enable_prefix_caching"]
    assert not eng[1]["enable_prefix_caching"]
    reqs = [r for r in recs if r["type"] == "request"]
    assert len(reqs) == 2 * 8 + 2 * 40 + 2 * 30
    r0 = next(r for r in reqs if r["run"].startswith("fixed"))
    assert r0["num_output_tokens"] == 128 and len(r0["token_times_s"]) == 128 and r0["ttft_s"] > 0
    assert r0["token_times_s"][0] == pytest.approx(r0["ttft_s"], abs=1e-5)
    assert all(r["ok"] for r in recs if r["type"] == "run_end")
    assert (tmp_path / "work" / "mistral-7b-v0.3" / "config.json").exists()
    # the simulator replays the records (the fake engine's timings are not a measurement: no accuracy check)
    rep = replay(out, catalog.model("mistral-7b-v0.3"), catalog.gpu("h200-sxm"))
    assert len(rep.rows) == 4  # warm-ups skipped
    assert {r.prefix_caching for r in rep.rows if r.shared_prefix_tokens} == {True, False}
    assert rep.prefix_caching_gain["predicted_ttft_mean_ratio_off_over_on"] > 1
    json.dumps(rep.as_dict())


def test_records_survive_a_torn_line(tmp_path):
    out = _dry(tmp_path, "--skip-prefix-off")
    with open(out, "a") as f:
        f.write('{"type": "request", "run": "x", "ttft')  # a crash mid-write
    recs = load_records(out)
    assert recs and all(isinstance(r, dict) for r in recs)


def test_a_failing_request_and_a_failing_engine_do_not_lose_the_rest(tmp_path, monkeypatch):
    real = sp.FakeEngine.generate

    async def flaky(self, prompt, params, request_id):
        if request_id.endswith("-3"):
            raise RuntimeError("synthetic request failure")
        async for o in real(self, prompt, params, request_id):
            yield o

    monkeypatch.setattr(sp.FakeEngine, "generate", flaky)
    calls = {"n": 0}
    orig_init = sp.FakeEngine.__init__

    def init(self, args, pc, speedup):
        calls["n"] += 1
        if not pc:
            raise RuntimeError("synthetic engine start failure")
        orig_init(self, args, pc, speedup)

    monkeypatch.setattr(sp.FakeEngine, "__init__", init)
    out = _dry(tmp_path)
    recs = load_records(out)
    bad = [r for r in recs if r["type"] == "request" and "error" in r]
    assert bad and all("synthetic request failure" in r["error"] for r in bad)
    assert any(r["type"] == "error" and r["engine_id"] == "B-prefix-caching-off" for r in recs)
    ends = [r for r in recs if r["type"] == "run_end"]
    assert len(ends) == 4 and all(e["failed"] == 1 for e in ends if not e["run"].startswith("warmup"))


def test_budget_skips_runs_with_a_record(tmp_path):
    out = tmp_path / "s.jsonl"
    sp.main(["--dry-run", "--out", str(out), "--rates", "5", "--num-requests", "50", "--shared-prefix-tokens", "0",
             "--budget-s", "8", "--dry-run-speedup", "1000"])
    recs = load_records(out)
    assert any(r["type"] == "skipped" and "budget" in r["reason"] for r in recs)
