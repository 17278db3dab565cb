"""Real load-test results in, predicted vs measured out (planner.serving.loadtests, planner replay,
planner verify's plumbing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from planner.io import catalog
from planner.cli.app import app
from planner.serving.loadtests import engine_hints, read_guidellm, read_load_test, read_multiturn, read_vllm_bench

ROOT = Path(__file__).resolve().parent.parent
SERVE = ROOT / "calibration" / "data" / "h200x2-2026-11-30" / "serve-llama-3.1-8b"
GUIDELLM = Path(__file__).resolve().parent / "data" / "loadtests" / "guidellm-mock-fixed.json"


def test_vllm_bench_serve_result_is_read_with_its_per_request_timings():
    t = read_vllm_bench(SERVE / "bench-r26.json")
    d = json.loads((SERVE / "bench-r26.json").read_text())
    assert t.arrival_s.size == d["num_prompts"] == 468 and t.arrival_s.min() == 0.0
    i = 7  # E2E = TTFT + the request's inter-token gaps; TPOT = their sum / (output - 1)
    assert t.e2e_s[i] == pytest.approx(d["ttfts"][i] + sum(d["itls"][i]))
    assert t.tpot_s[i] == pytest.approx(sum(d["itls"][i]) / (d["output_lens"][i] - 1))
    assert t.closed_loop == 0 and t.info["request_rate"] == 26.0


def test_guidellm_report_is_read():
    (t,) = read_guidellm(GUIDELLM)
    assert t.tool == "guidellm" and t.arrival_s.size >= 10 and np.all(t.prompt_tokens > 0)
    assert np.median(np.diff(t.arrival_s)) == pytest.approx(1 / 5.0, rel=0.05)  # constant rate 5/s
    assert np.all(t.ttft_s > 0) and np.all(t.e2e_s >= t.ttft_s) and t.info["rate"] == 5.0


def test_multiturn_records_keep_their_parents():
    t = read_multiturn(SERVE / "serve_bench.jsonl")
    assert t.arrival_s.size == 96  # 24 sessions x 4 turns
    first = t.parent < 0
    assert first.sum() == 24 and np.all(t.think_s[first] == 0.0)
    child = np.flatnonzero(~first)[0]  # a later turn's prompt holds its parent's prompt and reply
    assert t.prompt_tokens[child] > t.prompt_tokens[t.parent[child]] + t.output_tokens[t.parent[child]]


@pytest.mark.parametrize("text,why", [("{", "x.json: malformed JSON at line 1"), ('{"a": 1}', "--save-detailed"),
                                      ('{"benchmarks": []}', "no successful requests")])
def test_bad_files_are_one_clear_error(tmp_path, text, why):
    f = tmp_path / "x.json"
    f.write_text(text)
    with pytest.raises(ValueError, match=why):
        read_load_test(f)


def test_engine_hints_come_from_the_boot_record():
    h = engine_hints(SERVE / "bench-r26.json")
    assert h == {"kv_capacity_tokens": (57489 - 1) * 16, "max_num_seqs": 1024, "max_num_batched_tokens": 8192,
                 "prefix_caching": True, "served_model": "llama-3.1-8b"}


def test_replay_of_the_real_h200_runs():
    """Held-out real runs (vLLM 0.26 serve + bench serve, Llama-3.1-8B, 1,024/128 tokens at 26 req/s; the
    24-session agentic run): the issue's targets below saturation are throughput 3 %, TPOT p50 7 %,
    TTFT p50 10 %, TTFT p99 20 %.  The simulator reuses the whole previous turn as vLLM's prefix cache does:
    89.9 % hit rate simulated, 89.9 % reported by vLLM.  Pinned as they are, so that a change is seen: bench-r26
    TTFT p50 +8.3 %, p99 -9.4 %, TPOT p50 -2.2 % (end-to-end p50 -2.4 %); the agentic run TTFT p50 +8.9 %, p99
    +3.6 %, TPOT p50 +3.3 % (its turns' prompts, the whole history as text, grow to ~2,500 tokens that the OpenAI
    server tokenises, 1.5 us each in the profile: before that, http_frontend_token_s, TTFT +6.5 / -10.0 % and +0.5 /
    -2.4 %; before the OpenAI server's output handling, stream_output_overhead_s: TTFT +0.9 / -12.9 %
    and -3.2 / -2.6 %; before the per-layer step term: -1.3 / -13.9 / -8.3 / -7.3 % and -1.8 / -8.7 / +1.2 %;
    its turns compute ~130 new tokens each after a cached history: their steps run inside
    the CUDA graphs as piecewise graphs, whose launch the profile now carries; -14.9 / -27.6 % without it)."""
    r = CliRunner().invoke(app, ["replay", str(SERVE / "bench-r26.json"), str(SERVE / "serve_bench.jsonl"),
                                 "--model", "llama-3.1-8b", "--gpu", "h200-sxm", "--json"])
    assert r.exit_code == 0, r.output
    runs = {x["name"]: x for x in json.loads(r.output)["runs"]}
    want = {"bench-r26": {"ttft_p50_s": 8.3, "ttft_p99_s": -9.4, "tpot_p50_s": -2.2, "e2e_p50_s": -2.4},
            "serve_bench": {"ttft_p50_s": 8.9, "ttft_p99_s": 3.6, "tpot_p50_s": 3.3, "e2e_p50_s": 3.5}}
    for name, errs in want.items():
        e = runs[name]["error_pct"]
        assert abs(e["output_tokens_per_s"]) <= 3.0, name
        for k, v in errs.items():
            assert e[k] == pytest.approx(v, abs=0.5), (name, k)
    assert runs["serve_bench"]["predicted"]["prefix_cache_hit_rate"] == pytest.approx(0.899, abs=0.02)


def test_replay_names_a_missing_file():
    r = CliRunner().invoke(app, ["replay", "/nonexistent.json", "--model", "llama-3.1-8b", "--gpu", "h200-sxm"])
    assert r.exit_code == 2 and "/nonexistent.json" in r.output


def test_verify_plumbing_against_a_stand_in_server(tmp_path):
    """planner verify end to end against tests/fake_vllm's stand-in server (no GPU): it predicts the knee,
    boots the planned command, runs the two loads and replays them (the stand-in's timings mean nothing)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "tests" / "fake_vllm"), str(ROOT)]))
    r = subprocess.run([sys.executable, "-m", "planner.cli.app", "verify", "--model", "llama-3.1-8b", "--gpu", "h200-sxm",
                        "--ttft-slo-ms", "500", "--tpot-slo-ms", "50", "--duration-s", "1", "--out", str(tmp_path),
                        "--port", "8187", "--json"], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads(r.stdout)
    assert s["predicted_knee_per_s"] < s["predicted_saturation_per_s"]
    assert set(s["runs"]) == {"half-knee", "knee"} and all("measured" in x for x in s["runs"].values())
    assert (tmp_path / "verify.json").exists() and (tmp_path / "serve.log").exists()


DAY2 = ROOT / "calibration" / "data" / "h200x2-2026-12-01"


def test_failed_requests_of_a_bench_file_are_left_out_and_counted():
    """planner verify's first H200 run: vLLM refused 74 of 294 requests (HTTP 400, the synthetic tokenizer's
    text-length bug); the replay keeps the 220 that were served, 294 - 74 = 220, and says how many it left out."""
    f = DAY2 / "refused-verify-llama" / "bench-half-knee.json"
    d = json.loads(f.read_text())
    t = read_vllm_bench(f)
    assert (d["num_prompts"], d["completed"], d["failed"]) == (294, 220, 74)
    assert t.arrival_s.size == 220 and t.info["failed_left_out"] == 74 and t.arrival_s.min() == 0.0
    assert np.all(t.output_tokens == 128) and np.all(np.isfinite(t.e2e_s))


def test_a_run_where_every_request_failed_is_refused_by_name(tmp_path):
    f = DAY2 / "refused-verify-llama" / "bench-knee.json"
    d = json.loads(f.read_text())
    d["errors"] = ["Bad Request"] * len(d["errors"])
    bad = tmp_path / "bench-all-failed.json"
    bad.write_text(json.dumps(d))
    with pytest.raises(ValueError, match="bench-all-failed.json: none of its 587 requests succeeded"):
        read_vllm_bench(bad)


def test_a_random_prefix_run_is_replayed_with_its_shared_prefix():
    """vllm bench serve --random-prefix-len 2048 (+ 256 unique, 64 out) at 20 req/s, prefix caching on: the
    serve_bench record names the prefix, so the replay shares it. Simulated hit rate: the first request
    misses, each of the other 299 finds the 2,048 shared tokens (128 whole blocks of 16) of its 2,304:
    299/300 x 2048/2304 = 0.88593; vLLM's own counters over the run say 0.886 too (measured below)."""
    f = DAY2 / "serve-llama-chat" / "bench-prefix20.json"
    hints = engine_hints(f)
    assert hints["shared_prefix_tokens"] == 2048 and hints["prefix_caching"] is True
    r = CliRunner().invoke(app, ["replay", str(f), "--model", "llama-3.1-8b", "--gpu", "h200-sxm", "--json"])
    assert r.exit_code == 0, r.output
    run = json.loads(r.output)["runs"][0]
    assert run["predicted"]["prefix_cache_hit_rate"] == pytest.approx(299 / 300 * 2048 / 2304, abs=1e-4)
    rec = next(json.loads(x) for x in (DAY2 / "serve-llama-chat" / "serve_bench.jsonl").read_text().splitlines()
               if '"bench-prefix20.json"' in x)
    hits = rec["metrics_after"]["vllm:prefix_cache_hits_total"] - rec["metrics_before"]["vllm:prefix_cache_hits_total"]
    queries = (rec["metrics_after"]["vllm:prefix_cache_queries_total"]
               - rec["metrics_before"]["vllm:prefix_cache_queries_total"])
    assert hits / queries == pytest.approx(run["predicted"]["prefix_cache_hit_rate"], abs=0.01)
