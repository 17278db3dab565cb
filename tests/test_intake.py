"""A request's way in, traced (calibration/steptrace/sitecustomize.py's i/p/a records) and split into segments
(calibration/intake.py): checked on stand-in `vllm` modules run in a subprocess (no vLLM in CI), as
tests/test_steptrace.py checks the step records."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from calibration.intake import SEGMENTS, intake_segments
from calibration.serve_bench import trace_env

REPO = Path(__file__).resolve().parents[1]
LLAMA = REPO / "calibration/data/h200-2026-12-04-stream-check/q/serve-llama-steps"

FAKE = {
    "v1/core/sched/scheduler.py": '''
        from types import SimpleNamespace as NS
        class Scheduler:
            def __init__(self):
                self.requests, self.running, self.waiting, self.new = {}, [], [], []
            def add_request(self, request):
                self.requests[request.request_id] = request
                self.new.append(request)
            def schedule(self):
                new, self.new = self.new, []
                for r in new:
                    r.num_computed_tokens = r.n  # as vLLM's _update_after_schedule leaves it
                return NS(total_num_scheduled_tokens=sum(r.n for r in new), scheduled_new_reqs=[
                    NS(req_id=r.request_id) for r in new], num_scheduled_tokens={r.request_id: r.n for r in new})
            def update_from_output(self, so, mo):
                return {}
        ''',
    "v1/engine/input_processor.py": '''
        import time
        from types import SimpleNamespace as NS
        class InputProcessor:
            def process_inputs(self, request_id, prompt, params, tasks, arrival_time=None):
                return NS(request_id=request_id, n=len(prompt), arrival_time=time.time())
        ''',
    "v1/engine/core.py": '''
        class EngineCore:
            def preprocess_add_request(self, request):
                return request, 0
        class EngineCoreProc(EngineCore):  # the engine core process's class inherits the input thread's call
            pass
        ''',
}
# the client sends at perf_counter times; the server stamps, the engine core takes each request and a step
# schedules it; the sends and a serve_bench-style bench record are written for the reader
DRIVER = '''
import json, sys, time
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.engine.core import EngineCoreProc
from vllm.v1.engine.input_processor import InputProcessor
s, core, ip = Scheduler(), EngineCoreProc(), InputProcessor()
sends, wall0 = [], time.time()
for i in range(3):
    sends.append(time.perf_counter())
    time.sleep(0.002)  # the server's HTTP and rendering
    req = ip.process_inputs(f"r{i}", "x" * (100 + i), None, ())
    time.sleep(0.003)  # ZMQ and the input thread's wait
    req, _ = core.preprocess_add_request(req)
    time.sleep(0.004)  # the input queue until the busy loop drains it
    s.add_request(req)
    time.sleep(0.001)
    s.schedule()
json.dump({"start_times": sends}, open(sys.argv[1] + "/bench-chat.json", "w"))
print(json.dumps({"type": "bench", "run": "chat", "file": "bench-chat.json", "wall_start": wall0 - 1,
                  "wall_end": time.time() + 1}))
'''


def _traced_run(folder: Path) -> None:
    site = folder / "site"
    for mod, text in FAKE.items():
        path = site / "vllm" / mod
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    env = {**os.environ, **trace_env(folder, True, 0.0)}
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(site)])
    out = subprocess.run([sys.executable, "-c", DRIVER, str(folder)], env=env, capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    deploy = (LLAMA / "serve_bench.jsonl").read_text(encoding="utf-8").splitlines()[0]  # a real engine's record
    (folder / "serve_bench.jsonl").write_text(deploy + "\n" + out.stdout.strip() + "\n", encoding="utf-8")


def test_each_request_is_stamped_in_the_server_the_input_thread_and_the_busy_loop(tmp_path):
    _traced_run(tmp_path)
    recs = [json.loads(line) for f in tmp_path.glob("steps.*.jsonl") for line in f.read_text().splitlines()]
    kinds = [r["k"] for r in recs]
    assert kinds.count("i") == kinds.count("p") == kinds.count("a") == kinds.count("s") == 3
    # the three stamps of one request carry the arrival time the server gave it
    by_kind = {k: sorted(r["arr"] for r in recs if r["k"] == k) for k in "ipa"}
    assert by_kind["i"] == by_kind["p"] == by_kind["a"] and all(isinstance(x, float) for x in by_kind["i"])
    assert all(r["t0"] <= r["t1"] for r in recs if r["k"] in "ip")


def test_the_wait_splits_into_the_server_the_socket_the_input_queue_and_the_step(tmp_path):
    """The driver sleeps 2 ms in the server, 3 ms before the input thread, 4 ms in the input queue and 1 ms before
    the schedule: each segment at least that, the five summing to the client's send -> the step's start."""
    _traced_run(tmp_path)
    [run] = intake_segments(tmp_path)
    assert run.run == "bench-chat" and len(run.server_s) == 3
    for name, at_least_s in zip(SEGMENTS, (0.002, 0.003, 0.0, 0.004, 0.001)):
        assert all(at_least_s <= x < at_least_s + 0.05 for x in getattr(run, name)), name
    assert run.pct_ms(50)["queued_s"] >= 4.0


def test_a_trace_from_before_the_intake_records_has_no_segments(tmp_path):
    """The committed traces (before 2026-12-05) hold schedule records only."""
    assert intake_segments(LLAMA) == []
    shutil.copy(LLAMA / "serve_bench.jsonl", tmp_path / "serve_bench.jsonl")
    assert intake_segments(tmp_path) == []


@pytest.mark.parametrize("missing", ["v1/engine/core.py", "v1/engine/input_processor.py"])
def test_a_vllm_without_a_patched_call_still_runs_and_traces_its_steps(tmp_path, missing):
    """Another vLLM release may lack a call the trace patches: the module imports, the steps are still traced."""
    site = tmp_path / "site"
    for mod, text in FAKE.items():
        text = "class Other:\n    pass\n" if mod == missing else textwrap.dedent(text)
        path = site / "vllm" / mod
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    env = {**os.environ, **trace_env(tmp_path, True, 0.0)}
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(site)])
    code = ("import vllm.v1.engine.core, vllm.v1.engine.input_processor\n"
            "from vllm.v1.core.sched.scheduler import Scheduler\ns = Scheduler(); s.schedule()")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stderr
    [f] = tmp_path.glob("steps.*.jsonl")
    assert [json.loads(line)["k"] for line in f.read_text().splitlines()] == ["s"]


def test_launch_spread_is_the_slowest_cpus_median_over_the_fastests(tmp_path):
    """calibration.launch_bench.summarise: per CPU the median of its repeats; CPU 8 (its medians 6.0 / 90 us) over
    CPU 0 (4.0 / 60 us): 1.5x for both calls."""
    from calibration.launch_bench import summarise
    from calibration.records import append_record

    path = tmp_path / "launch.jsonl"
    for cpu, adds, layers in ((0, (4.0, 4.1, 3.9), (60, 59, 61)), (8, (6.0, 5.0, 7.0), (90, 91, 89))):
        for r, (a, lay) in enumerate(zip(adds, layers)):
            append_record(path, {"type": "launch", "cpu": cpu, "repeat": r, "add_us": a, "layer_us": lay})
    s = summarise(path)
    assert s.add_us == {0: 4.0, 8: 6.0} and s.layer_us == {0: 60.0, 8: 90.0}
    assert s.spread == {"add_us": 1.5, "layer_us": 1.5}
    append_record(tmp_path / "none.jsonl", {"type": "other"})
    with pytest.raises(ValueError, match="no launch records"):
        summarise(tmp_path / "none.jsonl")


@pytest.mark.parametrize("args, said", [(["--cpus", "x,1"], "--cpus: expected comma-separated CPU ids"),
                                        (["--cpus", "-1"], "CPU ids are >= 0"),
                                        (["--repeats", "0"], "--repeats: expected a whole number >= 1"),
                                        (["--cpus", "100000"], "not among this process's CPUs")])
def test_the_launch_bench_refuses_bad_options_naming_them(tmp_path, args, said, capsys):
    """Exit 2 with the option named, before any GPU is touched (the bench needs CUDA; these never reach it)."""
    from calibration.launch_bench import main

    with pytest.raises(SystemExit) as err:
        main([str(tmp_path / "launch.jsonl"), *args])
    assert err.value.code == 2 and said in capsys.readouterr().err
    assert not (tmp_path / "launch.jsonl").exists()


def test_the_intake_report_names_a_folder_that_is_not_a_served_run(tmp_path, capsys):
    from calibration.intake import main

    assert main([str(tmp_path / "nowhere")]) == 2
    assert "nowhere: not a served run's folder" in capsys.readouterr().err
    assert main([str(LLAMA)]) == 0 and "no intake records" in capsys.readouterr().out
