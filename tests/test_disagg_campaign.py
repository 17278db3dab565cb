"""The 1P1D measurement kit on the CPU (issue #23): the proxy against fake engines over real sockets, the campaign
script's commands through a stub ``python3`` (each ``-m calibration.*`` argv parsed by that module's real
parser), the 1P1D prediction and the accuracy benchmark with and without a measurement.

The benchmark fixtures below reuse real co-located ``vllm bench serve`` files renamed as if they were 1P1D runs:
they exercise the reading and comparing, they are not a measurement of anything disaggregated.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from calibration.pd_proxy import make_server
from calibration.serving_points import serving_setup
from planner.deploy.disagg_replay import PdLink, meets, predict_pd, verdict
from planner.io import catalog
from planner.memory import kv_bytes_per_token
from planner.serving.loadtests import read_vllm_bench

ROOT = Path(__file__).resolve().parent.parent
CHAT = ROOT / "calibration/data/h200x2-2026-12-01/serve-llama-chat"


def _engine(role: str, seen: list):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, dict(self.headers), body))
            if role == "prefill":
                data = json.dumps({"choices": [{"text": "x"}], "kv_transfer_params": {
                    "do_remote_prefill": True, "do_remote_decode": False, "remote_engine_id": "P",
                    "remote_block_ids": [[1, 2]], "remote_host": "127.0.0.1", "remote_port": 5600}}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for i in range(3):
                self.wfile.write(f"data: {{\"choices\": [{{\"text\": \"t{i}\"}}]}}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True

    s = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s


def test_proxy_speaks_the_toy_proxy_protocol(tmp_path):
    """Prefill leg: kv_transfer_params do_remote_decode, max_tokens 1, stream false, no stream_options or
    min_tokens; decode leg: the client's body with the prefill engine's kv_transfer_params, streamed back;
    one X-Request-Id for both legs; /healthcheck."""
    p_seen, d_seen = [], []
    pre, dec = _engine("prefill", p_seen), _engine("decode", d_seen)
    log = tmp_path / "proxy.jsonl"
    proxy = make_server("127.0.0.1", 0, [f"http://127.0.0.1:{pre.server_port}"],
                        [f"http://127.0.0.1:{dec.server_port}"], str(log))
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{proxy.server_port}"
    try:
        with urllib.request.urlopen(base + "/healthcheck", timeout=10) as r:
            assert json.loads(r.read()) == {"status": "ok", "prefill_instances": 1, "decode_instances": 1}
        body = {"model": "m", "prompt": "w5 w6", "max_tokens": 16, "stream": True, "ignore_eos": True,
                "stream_options": {"include_usage": True}, "min_tokens": 4}
        req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read().decode()
        assert text.count("data: ") == 4 and text.endswith("data: [DONE]\n\n")
        (pp, ph, pb), (dp, dh, db) = p_seen[0], d_seen[0]
        assert pp == dp == "/v1/completions"
        assert pb["max_tokens"] == 1 and pb["stream"] is False and pb["kv_transfer_params"]["do_remote_decode"]
        assert "stream_options" not in pb and "min_tokens" not in pb and pb["ignore_eos"] is True
        assert db == {**body, "kv_transfer_params": {"do_remote_prefill": True, "do_remote_decode": False,
                                                     "remote_engine_id": "P", "remote_block_ids": [[1, 2]],
                                                     "remote_host": "127.0.0.1", "remote_port": 5600}}
        assert ph["X-Request-Id"] == dh["X-Request-Id"]
        for _ in range(100):  # the proxy logs the request after its last chunk went out
            if log.exists() and log.read_text().endswith("\n"):
                break
            time.sleep(0.05)
        rec = json.loads(log.read_text().splitlines()[0])
        assert rec["prefill_leg_s"] >= 0 and rec["total_s"] >= rec["prefill_leg_s"]
    finally:
        for s in (proxy, pre, dec):
            s.shutdown()


HARNESS = r'''
import argparse, json, os, runpy, sys
orig = argparse.ArgumentParser.parse_args
def parse(self, args=None, namespace=None):
    ns = orig(self, args, namespace)
    with open(os.environ["STUB_PARSED"], "a") as f:
        f.write(json.dumps({"module": sys.argv[0], "args": vars(ns)}, default=str) + "\n")
    raise SystemExit(0)
argparse.ArgumentParser.parse_args = parse
mod = sys.argv[2]
sys.argv = [mod] + sys.argv[3:]
runpy.run_module(mod, run_name="__main__", alter_sys=True)
'''


def stubbed_env(tmp_path: Path, tools: tuple[str, ...] = ()) -> dict:
    """The environment a campaign script runs in here: a stub ``python3`` on PATH that logs each call (``CUDA=… argv``
    to calls.log) and hands every ``-m calibration.*`` to :data:`HARNESS` (its argv parsed by the module's real parser,
    into parsed.jsonl); ``tools``: the machine's other commands (nvidia-smi, ...) stubbed to succeed."""
    stub = tmp_path / "bin"
    stub.mkdir()
    (tmp_path / "harness.py").write_text(HARNESS)
    (stub / "python3").write_text(
        "#!/usr/bin/env bash\n"
        'echo "CUDA=${CUDA_VISIBLE_DEVICES:-} $*" >> "$STUB_LOG"\n'
        'if [ "$1" = "-m" ] && [[ "$2" == calibration.* ]]; then exec "$REAL_PY" "$HARNESS" "$@"; fi\n'
        "exit 0\n")
    (stub / "python3").chmod(0o755)
    for name in tools:
        (stub / name).write_text("#!/usr/bin/env bash\nexit 0\n")
        (stub / name).chmod(0o755)
    return {**os.environ, "PATH": f"{stub}:{os.environ['PATH']}", "STUB_LOG": str(tmp_path / "calls.log"),
            "STUB_PARSED": str(tmp_path / "parsed.jsonl"), "REAL_PY": sys.executable,
            "HARNESS": str(tmp_path / "harness.py"), "PYTHONPATH": str(ROOT)}


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="no bash/timeout")
def test_campaign_script_commands(tmp_path):
    """`h200x2-disagg.sh all`: the 1P1D job on GPUs 0,1 at 10/20/30 req/s with chat-like lengths, co-located on
    GPU 0 at the same rates and on GPU 1 at half of them; every module argv parses with its real parser."""
    env = stubbed_env(tmp_path)
    out = tmp_path / "out"
    r = subprocess.run(["bash", str(ROOT / "calibration/campaigns/h200x2-disagg.sh"), "all", str(out)], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    calls = (tmp_path / "calls.log").read_text().splitlines()
    parsed = [json.loads(x) for x in (tmp_path / "parsed.jsonl").read_text().splitlines()]
    by_mod = {}
    for p in parsed:
        by_mod.setdefault("calibration." + Path(p["module"]).stem, []).append(p["args"])
    (pd,) = by_mod["calibration.disagg_bench"]
    assert (pd["prefill_gpu"], pd["decode_gpu"], pd["model"]) == ("0", "1", "llama-3.1-8b")
    rates = lambda runs: [float(x.split("rate=")[1]) for x in runs]
    assert rates(pd["run"]) == [10, 20, 30] and all("input=1024,output=128,ratio=0.8" in x for x in pd["run"])
    same, half = sorted(by_mod["calibration.serve_bench"], key=lambda a: a["port"])
    assert rates(same["run"]) == [10, 20, 30] and rates(half["run"]) == [5, 15]
    assert any(c.startswith("CUDA=0,1 -m calibration.disagg_bench") for c in calls)
    assert any(c.startswith("CUDA=0 -m calibration.serve_bench") and "colo-llama" in c for c in calls)
    assert any(c.startswith("CUDA=1 -m calibration.serve_bench") and "colo-half-llama" in c for c in calls)
    assert "nixl importable" in (out / "jobs.log").read_text()


def test_pd_link_golden():
    """1,000 prompt tokens of Llama-3.1-8B in 16-token blocks: 63 blocks = 1,008 tokens × 131,072 B =
    132,120,576 B; over 450e9 B/s NVLink: 0.2936 ms."""
    link = PdLink(kv_bytes_per_token(catalog.model("llama-3.1-8b")), 16, 450e9)
    assert link.transfer_s(np.array([1000]))[0] == pytest.approx(132_120_576 / 450e9)
    assert 132_120_576 / 450e9 == pytest.approx(0.2936e-3, rel=1e-3)


def test_predict_pd_parts():
    """On the chat 10 req/s arrivals: TTFT = the prefill leg + a second request's overheads + the decode side
    (4.5 decode steps: the 0.3 ms hand-off fits in one); TPOT = the decode step at the operating batch."""
    prof = catalog.profile_for("h200-sxm", "0.26.0")
    cost, cfg = serving_setup(CHAT, "llama-3.1-8b", prof)
    link = PdLink(kv_bytes_per_token(catalog.model("llama-3.1-8b")), 16, 450e9)
    pred, parts = predict_pd(read_vllm_bench(CHAT / "bench-chat10.json"), cost, cfg, 1024, link)
    assert parts["rate_per_s"] == pytest.approx(10, rel=0.05)
    assert parts["decode_side_p50_s"] == pytest.approx(4.5 * parts["decode_step_s"])
    assert pred["tpot_p50_s"] == pytest.approx(parts["decode_step_s"])
    assert pred["ttft_p50_s"] > parts["prefill_leg_ttft_p50_s"] + parts["request_overhead_s"]
    assert parts["decode_operating_batch"] == pytest.approx(parts["rate_per_s"] * 128 * parts["decode_step_s"],
                                                            rel=0.25)  # Little's law with the mean output length


def test_verdict_rule():
    ok = {"ttft_p99_s": 0.2, "tpot_p99_s": 0.010}
    slow = {"ttft_p99_s": 0.2, "tpot_p99_s": 0.020}
    assert meets(ok, 0.3, 0.012) and not meets(slow, 0.3, 0.012) and not meets({}, 0.3, 0.012)
    assert verdict(ok, slow, 0.3, 0.012) == "disaggregated wins"
    assert verdict(ok, ok, 0.3, 0.012) == "disaggregated loses"  # both hold: co-located is simpler
    assert verdict(slow, slow, 0.3, 0.012) == "disaggregated loses"


def _run_benchmark(*args):
    return subprocess.run([sys.executable, str(ROOT / "benchmarks/disagg_accuracy.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)


def test_benchmark_skips_without_a_measurement(tmp_path):
    r = _run_benchmark(tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("skip: no 1P1D measurement")
    pd = tmp_path / "pd-llama-3.1-8b"
    pd.mkdir()
    (pd / "pd_bench.jsonl").write_text(
        json.dumps({"type": "nixl", "ok": False, "error": "ModuleNotFoundError: No module named 'nixl'"}) + "\n"
        + json.dumps({"type": "boot_failed", "role": "prefill",
                      "error": "RuntimeError: vllm serve exited with 1: ... RuntimeError: NIXL is not available"}) + "\n")
    r = _run_benchmark(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "No module named 'nixl'" in r.stdout and "skip: the 1P1D pair was not measured" in r.stdout
    assert "NIXL is not available" in r.stdout


def test_benchmark_compares_a_measurement(tmp_path):
    """The reading and comparing on a fixture folder (real co-located files standing in for 1P1D runs)."""
    pd = tmp_path / "pd-llama-3.1-8b"
    pd.mkdir()
    recs = [r for r in map(json.loads, (CHAT / "serve_bench.jsonl").read_text().splitlines())]
    deploy = next(r for r in recs if r.get("type") == "deploy")
    boot = next(r for r in recs if r.get("type") == "boot")
    lines = [{"type": "nixl", "ok": True, "version": "1.5.1"}]
    for role in ("prefill", "decode"):
        lines += [{**deploy, "role": role}, {**boot, "role": role}]
    for name, src in (("pd20", "chat24"), ("pd10", "chat10")):
        shutil.copy(CHAT / f"bench-{src}.json", pd / f"bench-{name}.json")
        lines.append({"type": "bench", "run": name, "file": f"bench-{name}.json"})
    (pd / "pd_bench.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    half = tmp_path / "colo-half-llama-3.1-8b"
    half.mkdir()
    shutil.copy(CHAT / "bench-chat10.json", half / "bench-chat10.json")
    shutil.copy(CHAT / "bench-chat10.json", half / "bench-chat5.json")
    (half / "serve_bench.jsonl").write_text("".join(json.dumps(x) + "\n" for x in [
        deploy, boot, {"type": "bench", "run": "chat10", "file": "bench-chat10.json"},
        {"type": "bench", "run": "chat5", "file": "bench-chat5.json"}]))
    r = _run_benchmark(tmp_path)
    assert r.returncode in (0, 1), r.stderr
    out = r.stdout
    assert "1P1D (pd-llama-3.1-8b)" in out and "bench-pd20" in out and "decode side" in out
    assert "(no colo-llama-3.1-8b" in out
    assert "20 req/s: measured disaggregated" in out and "10 req/s: measured disaggregated" in out


def _fake_nixl_pieces(stage: Path) -> None:
    """stage_nixl.sh's output with two tiny stand-in wheels (pure Python): the tar, its two pieces, the sums."""
    import tarfile
    import zipfile

    wheels = stage / "w"
    wheels.mkdir(parents=True)
    with zipfile.ZipFile(wheels / "nixl-1.5.1-py3-none-any.whl", "w") as z:
        z.writestr("nixl/__init__.py", "")
        z.writestr("nixl/_api.py", "nixl_agent = object\n")
        z.writestr("nixl-1.5.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: nixl\nVersion: 1.5.1\n")
    with zipfile.ZipFile(wheels / "nixl_cu13-1.5.1-cp312-cp312-manylinux_2_28_x86_64.whl", "w") as z:
        z.writestr("nixl_cu13/__init__.py", "")
    with tarfile.open(stage / "nixl_wheels.tar", "w") as t:
        for w in sorted(wheels.iterdir()):
            t.add(w, arcname=w.name)
    data = (stage / "nixl_wheels.tar").read_bytes()
    half = len(data) // 2
    (stage / "nixl_wheels.tar.part00").write_bytes(data[:half])
    (stage / "nixl_wheels.tar.part01").write_bytes(data[half:])
    (stage / "nixl_wheels.tar").unlink()
    sums = subprocess.run(["sha256sum", "nixl_wheels.tar.part00", "nixl_wheels.tar.part01"], cwd=stage,
                          capture_output=True, text=True, check=True).stdout
    import hashlib
    sums = f"{hashlib.sha256(data).hexdigest()}  nixl_wheels.tar\n" + sums
    (stage / "NIXL_SHA256SUMS").write_text(sums)


@pytest.mark.skipif(shutil.which("sha256sum") is None or shutil.which("bash") is None, reason="no coreutils")
@pytest.mark.parametrize("corrupt", [False, True])
def test_campaign_unpacks_the_staged_nixl_pieces(tmp_path, corrupt):
    """Where `import nixl` fails, the pieces are joined, checked against their sums and unpacked into the site
    folder, and the import is tried again (a corrupted piece is refused and the import error recorded)."""
    stage, site, out, stub = tmp_path / "stage", tmp_path / "site", tmp_path / "out", tmp_path / "bin"
    stage.mkdir()
    site.mkdir()
    stub.mkdir()
    _fake_nixl_pieces(stage)
    if corrupt:
        (stage / "nixl_wheels.tar.part01").write_bytes(b"x" + (stage / "nixl_wheels.tar.part01").read_bytes()[1:])
    (stub / "python3").symlink_to(sys.executable)
    env = {**os.environ, "PATH": f"{stub}:{os.environ['PATH']}", "NIXL_STAGE": str(stage), "NIXL_SITE": str(site)}
    r = subprocess.run(["bash", str(ROOT / "calibration/campaigns/h200x2-disagg.sh"), "nixl", str(out)], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    log = (out / "jobs.log").read_text()
    if corrupt:
        assert "FAILED" in log and "unpacked" not in log and "No module named 'nixl'" in log
    else:
        assert "nixl_wheels.tar: OK" in log and log.count("unpacked") == 2 and "nixl: nixl 1.5.1" in log
