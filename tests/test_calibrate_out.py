"""``planner calibrate --out``: what it writes and where, --resume across days, one writer per folder
(issue #20, items 2 and 3).

The runs use tests/fake_vllm (a stand-in engine: synthetic timings, discarded) and a stand-in environment
record, so they need no GPU; everything else -- the child processes, the raw files, the fit, the lock -- is
the real ``calibration.run.calibrate``."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from calibration.records import first_of_each_point, probe_key, read_records
from calibration.run import campaign_files, fit_campaign
from planner.io.catalog import PROFILES_DIR

ROOT = Path(__file__).resolve().parent.parent
FAKE_VERSION = "0.0.0-fake"

#: One calibrate run in its own process: argv = OUT DAY [flags]; --hold waits inside the lock for a file.
CHILD = r'''
import json, sys, time
from pathlib import Path
import calibration.run as run
out, day, flags = sys.argv[1], sys.argv[2], sys.argv[3:]
run.environment = lambda gpu, force=False: {"type": "env", "gpu": gpu, "vllm_version": "0.0.0-fake",
    "date": f"{day}T00:00:00+00:00", "command": "planner calibrate (test)", "device_name": "stand-in"}
if "--hold" in flags:  # hold the lock until the test says go
    inner = run._calibrate_locked
    def held(*a, **k):
        Path(out, "holding").write_text("1")
        t = time.time()
        while not Path(out, "go").exists() and time.time() - t < 120:
            time.sleep(0.05)
        return inner(*a, **k)
    run._calibrate_locked = held
try:
    s = run.calibrate("h200-sxm", ["mistral-7b-v0.3"], out, quick=True, microbench=False, fit="--fit" in flags,
                      time_budget_s=60, resume="--resume" in flags,
                      overwrite_profile="--overwrite-profile" in flags)
except run.CalibrationError as e:
    print("CalibrationError:", e)
    sys.exit(2)
print(json.dumps({k: v for k, v in s.items() if k != "residuals"}))
'''


def _env(tmp_path: Path) -> dict:
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    return dict(os.environ, TMPDIR=str(tmp),
                PYTHONPATH=os.pathsep.join([str(ROOT / "tests" / "fake_vllm"), str(ROOT)]))


def _start(tmp_path: Path, out: str, day: str, *flags: str, cwd: Path | None = None) -> subprocess.Popen:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    return subprocess.Popen([sys.executable, str(script), out, day, *flags], cwd=cwd or tmp_path,
                            env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _run(tmp_path: Path, out: str, day: str, *flags: str, cwd: Path | None = None) -> tuple[int, str]:
    p = _start(tmp_path, out, day, *flags, cwd=cwd)
    text, _ = p.communicate(timeout=300)
    return p.returncode, text


def _ok_keys(out: Path) -> list[tuple]:
    return [probe_key(r) for f in sorted(out.glob("*.jsonl")) for r in read_records(f)
            if r.get("type") == "probe" and r.get("status") == "ok"]


def _digest(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def test_relative_out_profile_and_temp_files(tmp_path):
    """A relative --out is the caller's (records, logs and the profile land there, not in the repository);
    calibration/profiles/ is untouched; no planner-cal-* folder is left in the temp directory."""
    before = _digest(PROFILES_DIR)
    work = tmp_path / "caller"
    work.mkdir()
    rc, text = _run(tmp_path, "rel-out", "2026-12-01", "--fit", cwd=work)
    assert rc == 0, text
    out = work / "rel-out"
    assert len(_ok_keys(out)) == 18 and not (ROOT / "rel-out").exists()
    assert (out / f"h200-sxm-vllm-{FAKE_VERSION}.yaml").is_file()
    assert json.loads(text.strip().splitlines()[-1])["profile"] == str(out / f"h200-sxm-vllm-{FAKE_VERSION}.yaml")
    assert _digest(PROFILES_DIR) == before
    assert list((tmp_path / "tmp").iterdir()) == []  # the child's config.json folder was removed


def test_existing_profile_is_replaced_only_when_asked(tmp_path):
    out = tmp_path / "out"
    assert _run(tmp_path, str(out), "2026-12-01", "--fit")[0] == 0
    prof = out / f"h200-sxm-vllm-{FAKE_VERSION}.yaml"
    prof.write_text(prof.read_text() + "# a user's edit\n")
    rc, text = _run(tmp_path, str(out), "2026-12-01", "--fit", "--resume")
    assert rc == 2 and "--out: " in text and "exists: pass --overwrite-profile" in text
    assert prof.read_text().endswith("# a user's edit\n")
    rc, text = _run(tmp_path, str(out), "2026-12-01", "--fit", "--resume", "--overwrite-profile")
    assert rc == 0, text
    assert not prof.read_text().endswith("# a user's edit\n")


def test_resume_on_another_day_measures_nothing_twice(tmp_path):
    """Day 1 measures 18 points; 5 of them are lost (a killed run); day 2's --resume continues day 1's file and
    measures exactly those 5 again.  Without --resume, day 2 is refused (the folder holds day 1's campaign)."""
    out = tmp_path / "out"
    assert _run(tmp_path, str(out), "2026-12-01")[0] == 0
    raw = out / f"h200-sxm-vllm{FAKE_VERSION}-2026-12-01.jsonl"
    lines = raw.read_text().splitlines(keepends=True)
    probes = [i for i, line in enumerate(lines) if '"status": "ok"' in line]
    raw.write_text("".join(line for i, line in enumerate(lines) if i not in probes[-5:]))
    rc, text = _run(tmp_path, str(out), "2026-12-02")
    assert rc == 2 and "pass --resume" in text
    rc, text = _run(tmp_path, str(out), "2026-12-02", "--resume")
    assert rc == 0, text
    keys = _ok_keys(out)
    assert len(keys) == 18 == len(set(keys))
    assert campaign_files(out, "h200-sxm", FAKE_VERSION) == [raw]
    rc, text = _run(tmp_path, str(out), "2026-12-03", "--resume")
    assert rc == 0 and "every point already measured" in text and len(_ok_keys(out)) == 18


def test_a_second_writer_on_one_out_is_refused_while_the_first_runs(tmp_path):
    """Two processes, one --out: the second is refused at once (exit 2 naming the holder) while the first
    holds the lock; the first then measures every point once."""
    out = tmp_path / "out"
    out.mkdir()
    a = _start(tmp_path, str(out), "2026-12-01", "--resume", "--hold")
    t = time.time()
    while not (out / "holding").exists():
        assert a.poll() is None and time.time() - t < 120, a.stdout.read() if a.poll() is not None else "slow"
        time.sleep(0.05)
    rc, text = _run(tmp_path, str(out), "2026-12-01", "--resume")
    assert rc == 2 and "--out: another planner calibrate (pid " in text and str(out) in text, text
    (out / "go").write_text("1")
    text_a, _ = a.communicate(timeout=300)
    assert a.returncode == 0, text_a
    keys = _ok_keys(out)
    assert len(keys) == 18 == len(set(keys))


def test_two_writers_racing_never_measure_a_point_twice(tmp_path):
    """Two --resume runs started together (whichever gets the lock first): each point is measured once."""
    out = tmp_path / "out"
    procs = [_start(tmp_path, str(out), "2026-12-01", "--resume") for _ in range(2)]
    results = [(p.wait(timeout=300), p.stdout.read()) for p in procs]
    assert sorted(rc for rc, _ in results)[0] == 0, results
    assert all(rc == 0 or "another planner calibrate" in text for rc, text in results), results
    keys = _ok_keys(out)
    assert len(keys) == 18 == len(set(keys))


def test_fit_counts_a_point_measured_twice_once(tmp_path):
    """Two raw files of one campaign holding the same 18 points (other values): the fit keeps the first of each
    and lists the 18 repeats in excluded_records with both places."""
    out = tmp_path / "out"
    assert _run(tmp_path, str(out), "2026-12-01")[0] == 0
    day1 = out / f"h200-sxm-vllm{FAKE_VERSION}-2026-12-01.jsonl"
    day2 = out / f"h200-sxm-vllm{FAKE_VERSION}-2026-12-02.jsonl"
    recs = [dict(r) for r in read_records(day1)]
    day2.write_text("".join(json.dumps(dict(r, measured=r["measured"] * 1.5) if r.get("type") == "probe" else r)
                            + "\n" for r in recs))
    kept, repeated = first_of_each_point(read_records(day1) + read_records(day2))
    assert len(repeated) == 18 and all(f"{day2.name}:" in x and f"already measured at {day1.name}:" in x
                                       for x in repeated)
    assert sum(1 for r in kept if r.get("type") == "probe" and r.get("status") == "ok") == 18
    path, prof = fit_campaign(campaign_files(out, "h200-sxm", FAKE_VERSION), out / "p.yaml")
    assert sum("point already measured" in x for x in prof.excluded_records) == 18
    assert prof.raw_data == [day1.name, day2.name]
    with pytest.raises(Exception, match="not overwritten"):
        fit_campaign([day1], path)


# ------------------------------------------------ MODEL+serve: the served launch floor of the calibrating host

TRACED_LLAMA = ROOT / "calibration/data/h200-2026-12-02-serve-steps/c/serve-llama-trace"


def test_serve_jobs_parse_and_trace_with_planner_deploys_server(tmp_path):
    """``+serve`` in either order with ``+mixed``; the job serves the model with every step timed into its own
    folder, on a free port, and says so in the raw file; a folder holding a finished chat run is not traced again."""
    from calibration.run import CalibrationError, parse_job
    from calibration.serve_floor import serve_trace, trace_folder

    assert parse_job("mistral-7b-v0.3+mixed+serve")[0] == parse_job("mistral-7b-v0.3+serve+mixed")[0] == {
        "model": "mistral-7b-v0.3", "kv": "auto", "weights": "bf16", "mixed": True, "serve": True}
    assert parse_job("qwen3-30b-a3b")[0]["serve"] is False
    with pytest.raises(CalibrationError, match=r"\+serve\], got 'qwen3-30b-a3b\+served'"):
        parse_job("qwen3-30b-a3b+served")
    calls = []

    def run(argv, log, env, timeout_s):
        calls.append((argv, log, timeout_s))
        return 0, ""

    raw = tmp_path / "raw.jsonl"
    job = parse_job("gpt-oss-20b@mxfp4+serve")[0]
    serve_trace(job, tmp_path, raw, gpu_id="h200-sxm", tensor_parallel=1, run=run, env={})
    (argv, log, timeout_s), = calls
    folder = trace_folder(tmp_path, "gpt-oss-20b", "mxfp4", 1)
    assert folder.name == "serve-gpt-oss-20b.wmxfp4-trace" and log.name == "raw.serve-gpt-oss-20b.wmxfp4-trace.log"
    assert argv[1:3] == ["-m", "calibration.serve_bench"] and "--step-trace" in argv
    assert argv[argv.index("--out") + 1] == str(folder) and argv[argv.index("--weight-dtype") + 1] == "mxfp4"
    assert 1024 <= int(argv[argv.index("--port") + 1]) <= 65535 and argv.count("--run") == 2
    assert read_records(raw)[-1] == {"type": "serve_trace", "model": "gpt-oss-20b", "weight_dtype": "mxfp4",
                                     "kv_cache_dtype": "auto", "folder": folder.name, "returncode": 0}
    folder.mkdir()
    (folder / "serve_bench.jsonl").write_text(json.dumps({"type": "bench", "run": "chat"}) + "\n")
    serve_trace(job, tmp_path, raw, gpu_id="h200-sxm", tensor_parallel=1, run=run, env={})
    assert len(calls) == 1


def test_fit_puts_the_served_floor_of_a_trace_in_out_last(tmp_path):
    """A calibrate folder holding a ``+serve`` trace (here Llama-3.1-8B's of 2026-12-02: eager calls 25.67 ms, graph
    steps 1.70 ms): the fitted profile's launch floor is 23.97 ms / 32 layers = 0.749 ms per layer, the trace's
    serve_bench.jsonl is listed in raw_data with its sha256, and a trace without timed steps is left out."""
    import shutil

    from calibration.serve_floor import traced_engines
    from calibration.trace_points import launch_floor

    out = tmp_path / "out"
    assert _run(tmp_path, str(out), "2026-12-01")[0] == 0
    files = campaign_files(out, "h200-sxm", FAKE_VERSION)
    _, plain = fit_campaign(files, out / "plain.yaml")
    shutil.copytree(TRACED_LLAMA, out / "serve-llama-3.1-8b-trace")
    (out / "serve-qwen2.5-7b-trace").mkdir()  # booted, never traced a step
    (out / "serve-qwen2.5-7b-trace" / "serve_bench.jsonl").write_text(
        json.dumps({"type": "deploy", "model": "qwen2.5-7b"}) + "\n")
    (out / "serve-x-trace").mkdir()  # a model no catalog has, and a damaged line
    (out / "serve-x-trace" / "serve_bench.jsonl").write_text(json.dumps({"type": "deploy", "model": "=cmd|x"}) + "\n{")
    (out / "serve-x-trace" / "steps.1.jsonl").write_text("")
    said = []
    assert traced_engines(out, log=said.append) == [(out / "serve-llama-3.1-8b-trace", "llama-3.1-8b")]
    assert len(said) == 1 and said[0].startswith("  serve-x-trace: left out (")
    _, prof = fit_campaign(files, out / "served.yaml")
    floor = launch_floor(TRACED_LLAMA, "llama-3.1-8b")
    assert prof.eager_layer_launch_s == pytest.approx(floor.seconds / 32, rel=1e-12) == pytest.approx(7.49e-4, rel=1e-3)
    assert plain.eager_layer_launch_s != prof.eager_layer_launch_s
    assert prof.raw_data[-1] == "serve-llama-3.1-8b-trace/serve_bench.jsonl"
    assert prof.raw_data_sha256[-1] == hashlib.sha256((TRACED_LLAMA / "serve_bench.jsonl").read_bytes()).hexdigest()


def test_a_refused_writer_waits_for_the_holders_line(tmp_path):
    """Two runs started together: the loser can read the lock file between the winner's flock and its 'pid N' line
    (tests/test_fuzz.py's concurrent writers saw "(another process)" about once in ten). lock_holder reads again for
    up to a second; a holder that never writes is still "another process"."""
    import threading

    from calibration.records import lock_holder

    path = tmp_path / ".calibrate.lock"
    path.write_text("")
    with open(path, "a+", encoding="utf-8") as f:
        assert lock_holder(f, wait_s=0.05) == "another process"
        timer = threading.Timer(0.1, lambda: path.write_text("pid 42, since 2026-12-02T14:50:00+00:00\n"))
        timer.start()
        try:
            assert lock_holder(f, wait_s=2.0) == "pid 42, since 2026-12-02T14:50:00+00:00"
        finally:
            timer.join()
