"""Issue #10: bad input and faults.  Each hostile input the issue's fuzzing found, pinned: one clean line and
exit 2 (or exit 1 naming why a plan cannot start), never ``internal error``; no impossible plan called
feasible; the catalog and the readers refuse what they cannot read by name.

Flags are looked up by what the command offers (``opt``), so a renamed flag (``--context`` ->
``--prompt-tokens``) keeps these tests meaningful."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from planner.io import catalog
from planner.cli.app import app
from planner.io.files import SpecError, csv_rows, read_json, read_text
from planner.dashboard.scenario import Scenario, scenario_problems
from planner.specs import Deployment, Workload
from planner.startup import startup_check

ROOT = Path(__file__).resolve().parent.parent
MODEL, GPU = "mistral-7b-v0.3", "h200-sxm"
runner = CliRunner()
COMMANDS = typer.main.get_command(app).commands


def opt(command: str, *names: str) -> str:
    """The first of ``names`` that ``planner <command>`` offers (flags are being renamed concurrently)."""
    offered = {o for p in COMMANDS[command].params for o in getattr(p, "opts", [])}
    return next(n for n in names if n in offered)


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def one_error(r, code: int = 2, *fragments: str) -> str:
    """The result's stderr: exactly one line ``error: ...`` with exit ``code``, holding every fragment."""
    err = r.stderr.strip()
    assert r.exit_code == code, (r.exit_code, r.output)
    assert err.count("\n") == 0 and err.startswith("error: ") and "internal error" not in err, err
    for f in fragments:
        assert f in err, (f, err)
    return err


# ------------------------------------------------------------------------------------ input files


def test_readers_refuse_what_is_not_a_regular_file(tmp_path):
    """A directory, a FIFO (opening it would block) and /dev/zero (never ends) are refused by stat alone."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, what in ((tmp_path, "a directory"), (fifo, "a FIFO"), (Path("/dev/zero"), "a character device"),
                       (tmp_path / "missing.csv", "no such file")):
        with pytest.raises(SpecError, match=what):
            read_text(path)


def test_size_cap_bounds_the_read(tmp_path):
    p = tmp_path / "big.json"
    p.write_bytes(b" " * 101)
    with pytest.raises(SpecError, match="big.json: larger than the 100-byte limit"):
        read_text(p, max_bytes=100)
    assert read_text(p, max_bytes=101) == " " * 101


def test_bom_is_accepted_and_non_utf8_is_named(tmp_path):
    p = tmp_path / "m.csv"
    p.write_bytes(b"\xef\xbb\xbfmodel,gpu\nx,y\n")
    header, rows = csv_rows(read_text(p), p.name)
    assert header == ["model", "gpu"] and [r for _, r in rows] == [{"model": "x", "gpu": "y"}]
    p.write_bytes(b"model,gpu\nx,caf\xe9\n")
    with pytest.raises(SpecError, match=r"m.csv: not UTF-8 text \(byte 0xe9 at line 2, column 6\)"):
        read_text(p)


def test_csv_field_limit_and_deep_json_are_one_line_errors(tmp_path):
    with pytest.raises(SpecError, match=r"w.csv line 2: not CSV \(field larger than field limit"):
        list(csv_rows("a,b\n" + "x" * 200_000 + ",1\n", "w.csv")[1])
    p = tmp_path / "deep.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SpecError, match="deep.json: JSON nested too deeply"):
        read_json(p)


VALIDATE_HEADER = "model,gpu,metric,measured,batch_size,prompt_tokens,tensor_parallel,num_gpus\n"


@pytest.mark.parametrize("row,fragments", [
    ("mistral-7b-v0.3,h200-sxm,prefill_s,0.1,inf,512,1,1", ["line 2", "batch_size", "finite"]),
    ("mistral-7b-v0.3,h200-sxm,prefill_s,0.1,1e300,512,1,1", ["line 2", "batch_size", "at most 1,000,000,000"]),
    ("mistral-7b-v0.3,h200-sxm,prefill_s,0.1,1.7,512,1,1", ["line 2", "batch_size", "whole number", "1.7"]),
    ("mistral-7b-v0.3,h200-sxm,prefill_s,0.1,1,512,3,3", ["line 2", "tensor_parallel", "TP 3 does not divide"]),
    ("mistral-7b-v0.3,h200-sxm,prefill_s,0.1,1,40000,1,1", ["line 2", "max_model_len", "32,768-token limit"]),
    (None, ["no measurement rows"]),
])
def test_validate_csv_refuses_bad_rows_naming_file_line_and_field(tmp_path, row, fragments):
    p = tmp_path / "meas.csv"
    p.write_text(VALIDATE_HEADER + (row + "\n" if row else ""))
    one_error(run("validate", p), 2, "meas.csv", *fragments)


def test_validate_reads_a_bom_csv(tmp_path):
    p = tmp_path / "excel.csv"
    p.write_bytes(b"\xef\xbb\xbf" + (VALIDATE_HEADER + "mistral-7b-v0.3,h200-sxm,prefill_s,0.1,1,512,1,1\n").encode())
    r = run("validate", p, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["rows"][0]["batch_size"] == "1"


def test_named_pipes_are_refused_for_output_and_input(tmp_path):
    """Opening a FIFO with nobody at the other end waits forever: every path option refuses one by name."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cfg = ROOT / "tests" / "data" / "loadtests" / "guidellm-mock-fixed.json"
    one_error(run("import-hf", cfg, "--id", "x", "--out", fifo), 2, "--out", "named pipe")
    one_error(run("sweep", "-m", MODEL, "--csv", fifo), 2, "--csv", "named pipe")
    one_error(run("simulate", "-m", MODEL, "-g", GPU, "-n", "5", "--trace", fifo), 2, "--trace", "named pipe")


def test_file_arguments_that_are_directories_or_devices(tmp_path):
    one_error(run("import-hf", tmp_path), 2, "is a directory")
    one_error(run("validate", "/dev/zero"), 2, "/dev/zero", "character device")
    cfg = ROOT / "tests" / "data" / "loadtests" / "guidellm-mock-fixed.json"
    one_error(run("import-hf", cfg, "--id", "x", "--out", tmp_path), 2, "--out", "is a directory")
    one_error(run("simulate", "-m", MODEL, "-g", GPU, "--trace", "/dev/zero"), 2, "/dev/zero")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    one_error(run("import-hf", deep), 2, "deep.json", "nested too deeply")
    one_error(run("replay", deep, "-m", MODEL, "-g", GPU), 2, "deep.json", "nested too deeply")


@pytest.mark.parametrize("rows,fragments", [
    ("0,nan,10", ["trace.csv line 2", "prompt_tokens", "finite"]),
    ("0,1e30,10", ["trace.csv line 2", "prompt_tokens", "out of range"]),
    ("0,10.5,10", ["trace.csv", "prompt_tokens", "whole numbers"]),
    ("0,900000,10", ["--trace", "32,768-token limit"]),
])
def test_trace_values_are_checked_by_name(tmp_path, rows, fragments):
    p = tmp_path / "trace.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens\n" + rows + "\n")
    r = run("simulate", "-m", MODEL, "-g", GPU, "--profile", "none", "--trace", p)
    one_error(r, 1 if "--trace" in fragments else 2, *fragments)


# ------------------------------------------------------------------------------------ numeric flags


@pytest.mark.parametrize("flag,value,fragment", [
    ("--burstiness-cv", "1e308", "between 0.01 and 100"),
    ("--shared-prefix-tokens", "99999999999999999999", "out of range"),
    ("--num-requests", "2147483648", "between 1 and 1,000,000"),
    ("--num-requests", "10000000", "between 1 and 1,000,000"),
    ("-n", "99999999999999999999", "between 1 and 1,000,000"),
    ("--seed", "-1", "between 0 and 4,294,967,295"),
    ("--spec-draft-cost", "1e308", "between 0 and 10"),
])
def test_numeric_flags_are_bounded_and_named(flag, value, fragment):
    r = run("simulate", "-m", MODEL, "-g", GPU, "--rate", "1", "--spec-k", "3", "--spec-acceptance", "0.5",
            flag, value)
    named = "--num-requests" if flag == "-n" else flag
    one_error(r, 2, f"error: {named}: ", fragment)


def test_price_override_is_a_plausible_price():
    one_error(run("size", "-m", MODEL, "-g", GPU, "--price-usd-per-hour", "1e-9"), 2, "--price-usd-per-hour")


def test_closed_pipe_is_quiet():
    """`planner models | head -1`: no BrokenPipeError, no 'internal error', nothing on stderr, exit 0."""
    p = subprocess.run(f"set -o pipefail; {sys.executable} -m planner.cli.app sweep -m {MODEL} --top 5000 | head -1",
                       shell=True, capture_output=True, text=True, executable="/bin/bash", cwd=ROOT, timeout=120,
                       check=False)
    assert p.returncode == 0 and p.stderr == "", (p.returncode, p.stderr)
    assert p.stdout.count("\n") == 1


# ----------------------------------------------------------------- the one start-up rule, everywhere


def _size(*args, code: int = 0):
    r = run("size", "-m", MODEL, "-g", GPU, "--profile", "none", "--json", *args)
    assert r.exit_code == code, r.output  # an infeasible plan: the JSON on stdout, then exit 1
    return json.loads(r.stdout)


@pytest.mark.parametrize("args,fragment", [
    (("--pp", "64", opt("size", "--gpus", "--num-gpus"), "64"), "PP 64 exceeds the model's 32 layers"),
    (("--tp", "16"), "TP 16 spans more GPUs than one h200-sxm node has (8)"),
    (("--max-num-batched-tokens", "16"), "16 is below max_num_seqs 1,024"),
    ((opt("size", "--prompt-tokens", "--context"), "200000"), "exceeds the model's 32,768-token limit"),
    (("--gpu-memory-utilization", "0.999"), "CUDA-graph capture"),
])
def test_size_never_calls_a_deployment_that_cannot_start_feasible(args, fragment):
    d = _size(*args, code=1)
    assert d["feasible"] is False and any(fragment in x for x in d["reasons"]), d["reasons"]


def test_plan_reasons_are_startup_checks_reasons():
    from planner.plan import plan

    m, g = catalog.model(MODEL), catalog.gpu(GPU)
    dep = Deployment.for_gpu(g, num_gpus=16, tensor_parallel=16)
    wl = Workload(prompt_tokens=4096, output_tokens=512)
    check = startup_check(m, g, dep, wl.context_tokens)
    assert not check.ok
    assert [p.reason for p in check.problems] == plan(m, g, dep, wl).reasons


def test_sweep_has_a_starts_column_and_never_meets_with_rows_that_cannot_start():
    from planner.sweep import sweep

    m = catalog.model(MODEL)
    df = sweep(m, Workload(prompt_tokens=200_000, output_tokens=512, tpot_slo_s=1.0), tensor_parallels=[1])
    assert len(df) and not df["starts"].any() and not df["meets_slo"].any()
    df = sweep(m, Workload(prompt_tokens=4096, output_tokens=512), contexts=[4096, 200_000])
    assert df.loc[df["prompt_tokens"] == 200_000, "starts"].eq(False).all()
    assert (df["meets_slo"] <= df["starts"]).all() and df["meets_slo"].any()
    r = run("sweep", "-m", MODEL, opt("sweep", "--prompt-tokens", "--context"), "200000", "--tp", "1")
    assert r.exit_code == 1 and "0 can start" in r.stdout and "0 meet every target" in r.stdout, r.output


def test_sweep_refuses_a_sweep_too_wide_to_hold():
    from planner.sweep import MAX_SWEEP_ROWS, sweep

    m = catalog.model(MODEL)
    with pytest.raises(ValueError, match=f"more than {MAX_SWEEP_ROWS:,}"):
        sweep(m, Workload(prompt_tokens=512, output_tokens=64), contexts=list(range(1, 400)),
              batch_sizes=list(range(1, 400)))


def test_simulate_refuses_what_vllm_would_not_start():
    base = ("simulate", "-m", MODEL, "-g", GPU, "--profile", "none", "-n", "20")
    # exit 1 with the one prefix every impossible plan gets, then the flag that makes it impossible
    one_error(run(*base, "--prompt-tokens", "900000"), 1, "error: infeasible: --prompt-tokens", "32,768-token limit")
    one_error(run(*base, "--tp", "16"), 1, "error: infeasible: --tp", "node has (8)")
    one_error(run(*base, "--kv-capacity-tokens", "100"), 1, "does not fit in the KV pool of 100 tokens")
    r = run(*base, "--prompt-tokens", "1024", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["completed"] == 20


def test_slo_search_does_not_call_a_context_beyond_the_model_fitting():
    r = run("slo-search", "-m", MODEL, "--gpu", GPU, "--ttft-slo-ms", "1000",
            "--tpot-slo-ms", "100", "--prompt-tokens", "10000000", "--profile", "none", "--json")
    one_error(r, 1, "error: infeasible: ")  # no candidate meets the targets: exit 1 after printing
    rows = json.loads(r.stdout)["candidates"]  # every TP the fleet engine tries: none starts
    assert rows and all(x["feasible"] is False and "32,768-token limit" in x["note"] for x in rows)


def test_scenario_problems_use_the_startup_rule():
    sc = Scenario(model_key=MODEL, gpu_id=GPU, num_gpus=16, tensor_parallel=16, weight_dtype="bf16",
                  kv_cache_dtype="bf16", gpu_memory_utilization=0.92, prompt_tokens=1024, output_tokens=128,
                  target_users=8, ttft_slo_s=1.0, tpot_slo_s=0.05, price_usd_per_hour=0.0, calibrated=False)
    assert scenario_problems(sc) == ["tensor parallel: TP 16 spans more GPUs than one h200-sxm node has (8); keep TP "
                                     "inside a node and split across nodes with pipeline parallelism"]
    ok = sc._replace(num_gpus=1, tensor_parallel=1)
    assert scenario_problems(ok) == []
    # context and memory problems are the plan's reasons (the dashboard still draws them), not a stop
    assert scenario_problems(ok._replace(prompt_tokens=10_000_000)) == []
    # an uploaded model is checked when the caller passes it
    assert scenario_problems(sc._replace(model_key="upload:abc")) == []
    assert scenario_problems(sc._replace(model_key="upload:abc"), catalog.model(MODEL))


# ---------------------------------------------------------------------------------------- catalog


@pytest.fixture()
def profiles_dir(tmp_path, monkeypatch):
    """calibration/profiles/ copied to a temp folder the catalog reads instead."""
    d = tmp_path / "profiles"
    shutil.copytree(ROOT / "calibration" / "profiles", d)
    monkeypatch.setattr(catalog, "PROFILES_DIR", d)
    catalog._scan_profiles.cache_clear()
    yield d
    catalog._scan_profiles.cache_clear()


def test_one_broken_profile_only_fails_the_gpu_that_needs_it(profiles_dir):
    (profiles_dir / "l4-vllm-0.26.0.yaml").write_text("mode: calibrated\ngpu_id: l4\nnot_a_field: [1\n")
    # h200 has its own good profile: unaffected, but the skipped file is reported
    prof, line = catalog.resolve_profile("auto", GPU)
    assert prof.mode == "calibrated" and "skipped 1 unreadable profile file(s): l4-vllm-0.26.0.yaml" in line
    r = run("size", "-m", MODEL, "-g", GPU, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["calibration_mode"] == "calibrated"
    # the GPU whose profile it is: a clear error naming the file, not a silent fallback
    one_error(run("size", "-m", MODEL, "-g", "l4"), 2, "l4-vllm-0.26.0.yaml", "malformed YAML")


def test_duplicate_yaml_keys_are_refused_with_key_and_line(tmp_path):
    p = tmp_path / "g.yaml"
    p.write_text("id: g\nmemory_bytes: 1.5e11\nname: G\nmemory_bytes: 8.0e10\n")
    with pytest.raises(SpecError, match=r"g.yaml: malformed YAML at line 4.*duplicate key 'memory_bytes' "
                                        r"\(first at line 2\)"):
        catalog.load_yaml_file(p)


@pytest.mark.parametrize("field,value,hint", [
    ("memory_bytes", 141, "141 GB is 141e9"),
    ("hbm_bandwidth_bytes_per_s", 4.8, "4.8 TB/s is 4.8e12"),
    ("peak_flops_per_s", {"bf16": 989.0}, "989 TFLOP/s is 989e12"),
    ("price_usd_per_hour", 350.0e3, "USD per GPU-hour"),
    ("interconnect_bandwidth_bytes_per_s", 450, "450 GB/s is 450e9"),
])
def test_gpu_values_in_the_wrong_unit_are_refused(field, value, hint):
    d = catalog.gpu(GPU).model_dump()
    with pytest.raises(SpecError, match=field) as e:
        catalog.parse_spec(catalog.GpuSpec, {**d, field: value}, "h200-sxm.yaml")
    assert hint in str(e.value) and "wrong unit" in str(e.value)


def test_streamlit_usage_statistics_are_off():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert cfg["browser"]["gatherUsageStats"] is False
