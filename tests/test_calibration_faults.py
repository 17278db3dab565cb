"""Calibration data that cannot be silently corrupted (issue #10): the JSONL reader skips and counts bad lines
with their numbers; the fit leaves out and reports bad records (NaN/0/negative/inf/``true`` measurements, no
model, non-integer batch, duplicates) instead of aborting or double-counting; ``--resume`` survives damaged
records; an append after a torn line starts a fresh line; output paths come from validated ids only; and a
process killed mid-append loses nothing once resumed."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from calibration.fit import fit_and_write, profile_path
from calibration.records import append_record, done_keys, probe_key, read_records
from calibration.run import CalibrationError, parse_job, remaining_points
from planner.io.jsonl import read_jsonl
from planner.profile import CalibrationProfile

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "calibration" / "data"
FIT_RAW = DATA / "h200-fit.jsonl"


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_reader_skips_and_counts_bad_lines_with_their_numbers(tmp_path):
    p = tmp_path / "raw.jsonl"
    p.write_bytes(b'{"type": "env", "gpu": "h200-sxm"}\n'
                  b'{"type": "probe", "note": "caf\xe9"}\n'          # not UTF-8
                  b'[1, 2]\n'                                         # not an object
                  b'\n'                                               # blank: not counted
                  b'{"type": "probe", "measured": 0.1}\n'
                  b'{"type": "probe", "mea')                          # torn by a crash
    skipped: list = []
    recs = read_jsonl(p, skipped)
    assert [r.line for r in recs] == [1, 5] and [r.file for r in recs] == ["raw.jsonl"] * 2
    assert [k for k, _ in skipped] == [2, 3, 6]
    assert "not UTF-8" in skipped[0][1] and "not an object" in skipped[1][1] and "not JSON" in skipped[2][1]
    assert recs[1] == {"type": "probe", "measured": 0.1}  # still a plain dict to everyone else


def test_append_after_a_torn_line_starts_a_fresh_line(tmp_path):
    p = tmp_path / "raw.jsonl"
    append_record(p, {"type": "probe", "seq": 0})
    with open(p, "a") as f:
        f.write('{"type": "probe", "seq": 1, "mea')  # killed mid-write: no newline
    append_record(p, {"type": "probe", "seq": 2})
    skipped: list = []
    recs = read_records(p, skipped)
    assert [r["seq"] for r in recs] == [0, 2]  # the new record is whole, not glued to the fragment
    assert [k for k, _ in skipped] == [2]
    assert p.read_bytes().endswith(b'"seq": 2, "type": "probe"}\n')


def test_probe_key_tells_roles_and_gpus_apart_and_survives_damage():
    rec = {"type": "probe", "status": "ok", "gpu": "h200-sxm", "model": "m", "metric": "prefill_s", "batch_size": 1,
           "prompt_tokens": 8, "output_tokens": 1, "role": "fit"}
    assert probe_key(rec) != probe_key({**rec, "role": "validate"})
    assert probe_key(rec) != probe_key({**rec, "gpu": "h100-sxm"})
    assert probe_key({**rec, "batch_size": "abc"}) is None and probe_key({**rec, "model": ["x"]}) is None
    assert done_keys([rec, {**rec, "batch_size": "abc"}, {**rec, "batch_size": True}]) == {probe_key(rec)}


def test_resume_survives_a_damaged_record(tmp_path):
    """`calibrate --resume` on a file where one record's batch_size is "abc" and one engine's TP is garbage."""
    recs = read_records(DATA / "h200-validate.jsonl")
    probe = next(r for r in recs if r.get("type") == "probe")
    engine = next(r for r in recs if r.get("type") == "engine")
    damaged = recs + [{**probe, "batch_size": "abc"}, {**engine, "tensor_parallel": "x", "num_gpu_blocks": None}]
    assert remaining_points(damaged, "llama-3.1-8b", "auto", "validate", quick=False) == 0


def _broken_copy(tmp_path: Path, edits: dict[int, str | None], extra: list[str] = ()) -> Path:
    """h200-fit.jsonl with lines replaced (None: deleted) and lines appended."""
    lines = _lines(FIT_RAW)
    out = [edits.get(k, line) for k, line in enumerate(lines, 1) if edits.get(k, line) is not None] + list(extra)
    p = tmp_path / "h200-fit.jsonl"
    p.write_text("\n".join(out) + "\n")
    return p


def _probe_lines() -> list[int]:
    return [k for k, line in enumerate(_lines(FIT_RAW), 1) if '"type": "probe"' in line and '"status": "ok"' in line]


def _with(line_no: int, **changes) -> str:
    rec = json.loads(_lines(FIT_RAW)[line_no - 1])
    for k, v in changes.items():
        if v is KeyError:
            rec.pop(k)
        else:
            rec[k] = v
    return json.dumps(rec)


@pytest.fixture(scope="module")
def clean_fit(tmp_path_factory):
    _, prof = fit_and_write(FIT_RAW, tmp_path_factory.mktemp("clean"))
    return prof


def test_fit_leaves_out_and_reports_bad_records(tmp_path, clean_fit):
    """NaN, 0, negative, inf and `true` measurements, a record without model, batch_size "abc" and a
    duplicated record: the fit runs on the rest, each one named by file and line; the duplicate does not
    count twice (the residual counts are the clean fit's minus the damaged probes)."""
    k = _probe_lines()
    bad = {k[0]: _with(k[0], measured=float("nan")), k[1]: _with(k[1], measured=0), k[2]: _with(k[2], measured=-1.0),
           k[3]: _with(k[3], measured=float("inf")), k[4]: _with(k[4], measured=True),
           k[5]: _with(k[5], model=KeyError), k[6]: _with(k[6], batch_size="abc"), k[7]: _with(k[7], measured="0.1")}
    dup = _lines(FIT_RAW)[k[8] - 1]
    path, prof = fit_and_write(_broken_copy(tmp_path, bad, [dup]), tmp_path / "out")
    n_lines = len(_lines(FIT_RAW))
    why = {int(x.split(":")[1]): x for x in prof.excluded_records}
    assert set(why) == set(k[:8]) | {n_lines + 1}, prof.excluded_records
    for line, fragment in ((k[0], "measured"), (k[4], "measured"), (k[5], "model"), (k[6], "batch_size"),
                           (k[7], "measured")):
        assert fragment in why[line] and why[line].startswith("h200-fit.jsonl:")
    assert f"duplicate of h200-fit.jsonl:{k[8]}" in why[n_lines + 1]
    n = sum(r.n for r in prof.residuals.values())
    assert n == sum(r.n for r in clean_fit.residuals.values()) - 8
    assert "excluded_records" in path.read_text()


def test_half_a_file_of_garbage_is_not_fitted_silently(tmp_path):
    lines = _lines(FIT_RAW)
    garbage = {k: "#" * 40 for k in range(2, len(lines) + 1, 2)}
    with pytest.raises(ValueError, match=r"h200-fit.jsonl: \d+ of \d+ lines are unreadable \(first at line 2"):
        fit_and_write(_broken_copy(tmp_path, garbage), tmp_path / "out")
    # one torn last line (a killed run) is not garbage
    p = _broken_copy(tmp_path, {}, ['{"type": "probe", "mea'])
    _, prof = fit_and_write(p, tmp_path / "out")
    assert len(prof.excluded_records) == 1
    assert prof.excluded_records[0].startswith(f"h200-fit.jsonl:{len(lines) + 1}: not JSON")


def test_profile_path_comes_from_validated_ids_only(tmp_path):
    out = tmp_path / "profiles"
    for gpu in ("../../x", "..", "a/b", ".hidden", ""):
        with pytest.raises(ValueError, match="gpu"):
            profile_path(out, CalibrationProfile(mode="calibrated", gpu_id=gpu, engine_version="0.26.0"))
    with pytest.raises(ValueError, match="vllm_version"):
        profile_path(out, CalibrationProfile(mode="calibrated", gpu_id="h200-sxm", engine_version="../0.26"))
    with pytest.raises(ValueError, match="profile name"):
        profile_path(out, CalibrationProfile(), name="../evil.yaml")
    assert profile_path(out, CalibrationProfile(gpu_id="h200-sxm", engine_version="0.26.0")) == \
        out / "h200-sxm-vllm-0.26.0.yaml"
    # a raw file whose env record names '../../x' as its GPU: refused, nothing written anywhere
    lines = _lines(FIT_RAW)
    env = next(k for k, line in enumerate(lines, 1) if '"type": "env"' in line)
    with pytest.raises(ValueError, match="gpu"):
        fit_and_write(_broken_copy(tmp_path, {env: _with(env, gpu="../../x")}), out)
    assert not out.exists() and not (tmp_path.parent / "x-vllm-0.26.0.yaml").exists()


def test_job_ids_that_would_name_files_are_checked():
    with pytest.raises(CalibrationError, match="--model"):
        parse_job("../../etc@fp8")
    assert parse_job("llama-3.1-8b@fp8")[0]["model"] == "llama-3.1-8b"


# ------------------------------------------------------------------------------------ fault test

CHILD = r"""
import json, os, sys, time
from calibration.records import append_record, read_records
path, total, pad = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
have = {r["seq"] for r in read_records(path) if r.get("type") == "probe"}
nxt = 0
while nxt in have:
    nxt += 1
print("ready", nxt, flush=True)
for seq in range(nxt, total):
    append_record(path, {"type": "probe", "status": "ok", "seq": seq, "pad": "x" * pad, "check": seq * 7})
    time.sleep(0.002)  # a measurement between records, as calibrate takes them
print("done", flush=True)
"""


def _child(path: Path, total: int, pad: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(total), str(pad)], stdout=subprocess.PIPE,
                            text=True, env=env, cwd=ROOT)


def test_killed_mid_append_then_resumed_loses_nothing_and_glues_nothing(tmp_path):
    """A child appends large records (512 KiB, so a SIGKILL can land inside one write) and is killed at random
    moments, three times, each time resumed from what the file holds; one more run finishes.  Every record
    0..N-1 is then present exactly once and intact; the only unreadable lines are torn fragments, at most one
    per kill; no resumed record was glued to a fragment.  A deterministic torn fragment is added too."""
    path = tmp_path / "raw.jsonl"
    total, pad, kills = 120, 512 * 1024, 3
    rng = random.Random(10)
    for _ in range(kills):
        p = _child(path, total, pad)
        assert p.stdout.readline().startswith("ready")
        time.sleep(rng.uniform(0.02, 0.15))
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
    with open(path, "ab") as f:  # and one fragment for certain, as a kill inside write() leaves
        f.write(b'{"check": 0, "pad": "xxxx')
    p = _child(path, total, pad)
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 0 and "done" in out
    skipped: list = []
    recs = read_records(path, skipped)
    seqs = [r["seq"] for r in recs]
    assert sorted(seqs) == list(range(total)), "a record was lost or written twice"
    assert all(r["check"] == r["seq"] * 7 and len(r["pad"]) == pad for r in recs)
    assert 1 <= len(skipped) <= kills + 1 and all("not JSON" in why for _, why in skipped)
