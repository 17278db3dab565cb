"""calibration/steptrace/sitecustomize.py patches vLLM's scheduler and executor when they are imported, in any
process started with the folder on PYTHONPATH: checked here on a stand-in `vllm` package (no vLLM in CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from calibration.serve_bench import trace_env

REPO = Path(__file__).resolve().parents[1]

SCHEDULER = '''
from types import SimpleNamespace as NS
class Req:
    def __init__(self, done): self.num_computed_tokens = done
class Scheduler:
    def __init__(self):
        self.requests = {"a": Req(0), "b": Req(512), "c": Req(900)}
        self.running, self.waiting = ["b", "c"], ["a"]
    def schedule(self, throttle=False):
        return NS(total_num_scheduled_tokens=1025, scheduled_new_reqs=[NS(req_id="a")],
                  num_scheduled_tokens={"a": 700, "b": 324, "c": 1})
    def update_from_output(self, so, mo):
        return {"out": 1}
'''
EXECUTOR = '''
class UniProcExecutor:
    def execute_model(self, so, non_block=False): return "fut"
    def sample_tokens(self, g, non_block=False): return "fut2"
'''
DRIVER = '''
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.executor.uniproc_executor import UniProcExecutor
s, x = Scheduler(), UniProcExecutor()
for _ in range(3):
    so = s.schedule()
    assert x.execute_model(so, non_block=True) == "fut" and x.sample_tokens(None) == "fut2"
    assert s.update_from_output(so, None) == {"out": 1}
'''


def _fake_vllm(root: Path) -> None:
    for mod, text in (("v1/core/sched/scheduler.py", SCHEDULER), ("v1/executor/uniproc_executor.py", EXECUTOR)):
        path = root / "vllm" / mod
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_step_trace_records_each_schedule_with_its_shape_and_the_previous_iteration_times(tmp_path):
    _fake_vllm(tmp_path / "site")
    env = {**os.environ, **trace_env(tmp_path, True, 0.002)}
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(tmp_path / "site")])
    code = DRIVER + "import sys; print(sys.getswitchinterval())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout.split()[-1]) == 0.002  # PLANNER_SWITCH_INTERVAL_S reached the process
    files = list(tmp_path.glob("steps.*.jsonl"))
    assert len(files) == 1  # one process, flushed at exit
    recs = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert len(recs) == 3
    first, second = recs[0], recs[1]
    # the shape: 1,025 tokens = a new 700-token prompt + a 324-token chunk at 512 done + one decode
    assert (first["tok"], first["new"], first["dec"], first["chunks"], first["ctx"]) == (1025, 1, 1, [700, 324],
                                                                                          [0, 512])
    assert (first["run"], first["wait"]) == (2, 1)
    assert "x" not in first and {"x", "y", "u0", "u1"} <= set(second)  # times of the iteration before
    assert first["t0"] <= first["t1"] <= second["u0"] <= second["u1"] <= second["t0"]


def test_trace_env_is_empty_unless_asked_and_puts_the_folder_first(tmp_path):
    assert trace_env(tmp_path, False, 0.0) == {}
    env = trace_env(tmp_path, True, 0.0)
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(REPO / "calibration" / "steptrace")
    assert env["PLANNER_STEP_TRACE"] == str(tmp_path.resolve() / "steps") and "PLANNER_SWITCH_INTERVAL_S" not in env
