"""The MoE-traffic GPU campaign (calibration/campaigns/h200-moe-traffic.sh, run on 2026-12-05: part a on an H100, then
all parts on an H200, calibration/data/h*-2026-12-05-moe-traffic) and the CUDA-graph one (h200-capture.sh) run
here through a stub ``python3``: each ``-m calibration.*`` command is parsed by that module's real argument
parser, so a flag the module does not take, or a run spec it cannot read, is found before device time is spent on it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from test_disagg_campaign import stubbed_env

from calibration.variants import probe_model
from planner.io import catalog

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "calibration/campaigns/h200-moe-traffic.sh"


def run_part(tmp_path: Path, *parts: str, gpu: str | None = None, script: Path = SCRIPT) -> tuple[list[dict], str]:
    env, out = stubbed_env(tmp_path, ("nvidia-smi",)), tmp_path / "out"
    if gpu:
        env["GPU"] = gpu
    r = subprocess.run(["bash", str(script), str(out), "3000", *parts], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    parsed = [json.loads(x) for x in (tmp_path / "parsed.jsonl").read_text().splitlines()]
    return [p["args"] for p in parsed if Path(p["module"]).stem == "serve_bench"], (out / "jobs.log").read_text()


def rates(runs: list[str]) -> list[float]:
    return [float(x.split("rate=")[1].split(",")[0]) for x in runs]


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="no bash/timeout")
def test_part_a_serves_qwen3_with_a_shared_prefix_and_sessions_caching_on_then_off(tmp_path):
    """Two engines of Qwen3-30B-A3B: caching on (prefix at 8 and 16 req/s, 24 agentic sessions), then off (the
    prefix at 8 req/s and the sessions again); every step traced, the bf16 compile keys warmed first."""
    (on, off), log = run_part(tmp_path, "a")
    assert on["model"] == off["model"] == "qwen3-30b-a3b" and on["step_trace"] and off["step_trace"]
    assert rates(on["run"]) == [8, 16] and rates(off["run"]) == [8]
    assert all("prefix=2048" in x for x in on["run"] + off["run"])
    assert on["agentic"] and on["agentic"] == off["agentic"] and "sessions=24" in on["agentic"]
    assert not on["no_prefix_caching"] and off["no_prefix_caching"]
    assert [len(x["size_sweep"]) for x in (on, off)] == [3, 3]  # the four compile-key sizes: 513, 769, 1,281-1,282
    assert on["port"] != off["port"] and log.count("START") == 2


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="no bash/timeout")
def test_parts_run_in_the_order_given_and_a_names_its_gpu(tmp_path):
    """a1 and a2 are part a's two engines, so that a device call can hold one; parts share the seconds, in order;
    GPU in the environment names the GPU the records are filed under (the H200's default otherwise)."""
    (off, gemma), log = run_part(tmp_path, "a2", "b", gpu="h100-sxm")
    assert off["no_prefix_caching"] and gemma["model"] == "gemma-3-27b"
    assert off["gpu"] == gemma["gpu"] == "h100-sxm" and log.index("qwen3-prefix-off") < log.index("gemma-long")
    (tmp_path / "2").mkdir()
    (on,), _ = run_part(tmp_path / "2", "a1")
    assert not on["no_prefix_caching"] and on["gpu"] == "h200-sxm"


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="no bash/timeout")
def test_part_b_serves_gemma_long_prompts_on_a_small_pool(tmp_path):
    (gemma,), _ = run_part(tmp_path, "b")
    assert gemma["model"] == "gemma-3-27b" and float(gemma["gpu_memory_utilization"]) == 0.5
    assert int(gemma["max_model_len"]) == 16384 and rates(gemma["run"]) == [0.6, 4]
    catalog.model(gemma["model"])  # a catalog model


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="no bash/timeout")
def test_part_c_serves_the_32_expert_gpt_oss_variant(tmp_path):
    (oss,), _ = run_part(tmp_path, "c")
    assert oss["model"] == "gpt-oss-120b-e32" and probe_model(oss["model"]).moe.num_experts == 32
    assert rates(oss["run"]) == [2, 10] and int(oss["max_model_len"]) >= 8000 + 32


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="no bash/timeout")
def test_capture_campaign_serves_each_moe_engine_with_larger_graphs_and_its_default_control(tmp_path):
    """h200-capture.sh: Qwen3-30B-A3B and Moonlight-16B-A3B with --max-cudagraph-capture-size 8192 (no warm-up: the
    captures compile the keys) and each with vLLM's default graphs (Qwen3's keys warmed), the same chat runs."""
    runs, log = run_part(tmp_path, "a", "b", "c", "d", script=ROOT / "calibration/campaigns/h200-capture.sh")
    qa, qb, ma, mb = runs
    assert [r["model"] for r in runs] == ["qwen3-30b-a3b"] * 2 + ["moonlight-16b-a3b"] * 2
    assert qa["max_cudagraph_capture_size"] == ma["max_cudagraph_capture_size"] == 8192
    assert qb["max_cudagraph_capture_size"] is None and mb["max_cudagraph_capture_size"] is None
    assert qa["run"] == qb["run"] and rates(qa["run"]) == [8, 14, 20] and rates(ma["run"]) == [10, 20, 30]
    assert qa["size_sweep"] == [] and len(qb["size_sweep"]) == 3 and all(r["step_trace"] for r in runs)
    assert len({r["port"] for r in runs}) == 4 and log.count("START") == 4


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="no bash/timeout")
def test_mla_graphs_campaign_holds_deepseek_v2_lite_out_with_larger_graphs_and_its_control(tmp_path):
    """h200-mla-graphs.sh: DeepSeek-V2-Lite with --max-cudagraph-capture-size 8192 and with vLLM's default graphs,
    then Moonlight-16B-A3B with 8192 on the same host; the same chat runs, every step traced, the GPU named."""
    runs, log = run_part(tmp_path, "e", "f", "g", gpu="h100-sxm",
                         script=ROOT / "calibration/campaigns/h200-mla-graphs.sh")
    assert [r["model"] for r in runs] == ["deepseek-v2-lite"] * 2 + ["moonlight-16b-a3b"]
    assert [r["max_cudagraph_capture_size"] for r in runs] == [8192, None, 8192]
    assert all(r["run"] == runs[0]["run"] and r["step_trace"] and r["gpu"] == "h100-sxm" for r in runs)
    assert rates(runs[0]["run"]) == [10, 20, 30] and len({r["port"] for r in runs}) == 3 and log.count("START") == 3


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="no bash/timeout")
def test_intake_campaign_serves_moonlight_default_graphs_and_llama_at_the_loads_whose_wait_grew(tmp_path):
    """h200-intake.sh (not yet run): Moonlight-16B-A3B with vLLM's default graphs at 10 / 20 / 30 req/s and
    Llama-3.1-8B at 10 / 24 / 36, every step traced (the trace's intake records come with --step-trace)."""
    runs, log = run_part(tmp_path, "m", "l", script=ROOT / "calibration/campaigns/h200-intake.sh")
    moon, llama = runs
    assert (moon["model"], llama["model"]) == ("moonlight-16b-a3b", "llama-3.1-8b")
    assert rates(moon["run"]) == [10, 20, 30] and rates(llama["run"]) == [10, 24, 36]
    assert moon["max_cudagraph_capture_size"] is None and moon["step_trace"] and llama["step_trace"]
    assert moon["port"] != llama["port"] and log.count("START") == 2


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="no bash/timeout")
def test_intake_campaign_part_c_times_the_hosts_launch_on_each_cpu_beside_its_topology(tmp_path):
    env, out = stubbed_env(tmp_path, ("nvidia-smi", "lscpu")), tmp_path / "out"
    r = subprocess.run(["bash", str(ROOT / "calibration/campaigns/h200-intake.sh"), str(out), "600", "c"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    [call] = [json.loads(x) for x in (tmp_path / "parsed.jsonl").read_text().splitlines()]
    assert Path(call["module"]).stem == "launch_bench" and call["args"]["repeats"] == 3
    assert call["args"]["out"].endswith("launch.jsonl") and call["args"]["cpus"] == []  # every CPU it may use
    assert (out / "lscpu.txt").exists() and (out / "topo.txt").exists()
