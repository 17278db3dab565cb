"""Property-based fuzzing, as a hostile user would (issue #10): every ``planner`` subcommand with options
*discovered from the typer/click app at test time* (so a renamed or new flag is fuzzed without editing this
file), hostile files for every path (directories, FIFOs, /dev/zero, BOMs, non-UTF-8, CSV fields past the
field limit, JSON nested 100,000 deep, duplicate YAML keys), and the readers on their own (traces,
measurement CSVs, HF config.json, load-test results, calibration records).

Asserted of every CLI run: exit 0, or exit 2 with exactly one line ``error: ...`` naming the offending flag,
field or file (exit 1 with such a line only from a command whose help says it exits 1 for a plan that cannot
start); never ``internal error``, never a traceback, nothing on stderr on success, ``--json`` output that
parses, and an answer within :data:`EXAMPLE_TIMEOUT_S` (a hang fails the example).  Of every reader: a result,
or a ValueError of one line naming the file.

Scale: ``PLANNER_FUZZ_EXAMPLES`` examples per command (CI default 24) and ``PLANNER_FUZZ_READER_EXAMPLES`` per
reader; ``PLANNER_FUZZ_REPORT=path`` writes the outcome counts (command × exit code) as JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
import types
import typing
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import typer.main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fleet_helpers import fleet_plan_report

from planner.io import catalog
from planner.cli.app import app
from planner.dtypes import KV_BYTES, WEIGHT_BITS

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "calibration" / "data"
GROUP = typer.main.get_command(app)
EXAMPLES = int(os.environ.get("PLANNER_FUZZ_EXAMPLES", "24"))
READER_EXAMPLES = int(os.environ.get("PLANNER_FUZZ_READER_EXAMPLES", "40"))
EXAMPLE_TIMEOUT_S = float(os.environ.get("PLANNER_FUZZ_TIMEOUT_S", "60"))
OUTCOMES: Counter = Counter()
runner = CliRunner()
SETTINGS = dict(deadline=None, derandomize=os.environ.get("PLANNER_FUZZ_RANDOM") is None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class Hang(BaseException):
    """An example that did not answer in time (a BaseException: no ``except Exception`` swallows it)."""


@contextlib.contextmanager
def time_limit(seconds: float):
    def on_alarm(signum, frame):
        raise Hang(f"no answer within {seconds:g} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="module", autouse=True)
def short_trials_and_report():
    """SLO-search trials of 200-400 requests instead of 2,000-20,000 (the search's code paths, at fuzz speed);
    the outcome counts written to $PLANNER_FUZZ_REPORT at the end."""
    from planner.serving import load

    mp = pytest.MonkeyPatch()
    mp.setattr(load, "MIN_TRIAL_REQUESTS", 200)
    mp.setattr(load, "MAX_TRIAL_REQUESTS", 400)
    yield
    mp.undo()
    report = os.environ.get("PLANNER_FUZZ_REPORT")
    if report:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        cli = {k: n for k, n in OUTCOMES.items() if not k[0].startswith("reader ")}
        by = {f"{c} exit {e}": n for (c, e), n in sorted(cli.items())}
        totals = Counter()
        for (_, e), n in cli.items():
            totals[f"exit {e}"] += n
        readers = {f"{c}: {e}": n for (c, e), n in sorted(OUTCOMES.items()) if c.startswith("reader ")}
        Path(f"{report}.{worker}.json").write_text(json.dumps(
            {"inputs": sum(cli.values()), "by_exit_code": dict(sorted(totals.items())), "by_command": by,
             "reader_inputs": sum(n for k, n in OUTCOMES.items() if k[0].startswith("reader ")),
             "readers": readers}, indent=2))


# ------------------------------------------------------------------------------- hostile files

VALID_MEAS = ("model,gpu,metric,measured,batch_size,prompt_tokens,output_tokens\n"
              "mistral-7b-v0.3,h200-sxm,prefill_s,0.05,1,1024,1\n"
              "mistral-7b-v0.3,h200-sxm,decode_step_s,0.007,8,512,64\n")
HF_CONFIG = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "_name_or_path": "mistralai/Mistral-7B",
             "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
             "head_dim": 128, "intermediate_size": 14336, "vocab_size": 32768, "max_position_embeddings": 32768,
             "rope_theta": 1e6, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def bench_result(n: int = 20) -> dict:
    rng = np.random.default_rng(0)
    return {"start_times": np.cumsum(rng.exponential(0.2, n)).tolist(), "input_lens": [512] * n,
            "output_lens": [64] * n, "ttfts": [0.05] * n, "itls": [[0.01] * 63 for _ in range(n)],
            "request_rate": 5.0, "max_concurrency": None}


def multiturn_lines() -> str:
    rows = []
    for s in range(3):
        for t in range(2):
            k = 2 * s + t
            rows.append({"type": "request", "index": k, "parent": k - 1 if t else -1, "think_s": 0.5 * t,
                         "arrival_offset_s": float(s), "prompt_tokens": 300 + 400 * t, "output_tokens": 50,
                         "ttft_s": 0.05, "tpot_s": 0.01, "e2e_s": 0.6, "shared_prefix_tokens": 100, "prefix_group": 0})
    return "\n".join(json.dumps(r) for r in rows) + "\n"


def make_pool(d: Path) -> dict[str, str]:
    """Name -> path of every hostile (and a few valid) input files, fresh in ``d`` for one example."""
    files: dict[str, bytes] = {
        "empty.csv": b"", "meas.csv": VALID_MEAS.encode(), "bom_meas.csv": b"\xef\xbb\xbf" + VALID_MEAS.encode(),
        "latin1.csv": VALID_MEAS.encode() + b"mistral-7b-v0.3,h200-sxm,prefill_s,0.1\xe9,1,1,1\n",
        "header_only.csv": b"model,gpu,metric,measured\n",
        "wide.csv": b"model,gpu,metric,measured\n" + b"x" * 140_000 + b",a,b,1\n",
        "meas_bad.csv": (VALID_MEAS + "mistral-7b-v0.3,h200-sxm,prefill_s,inf,1e300,1.7,-1\n").encode(),
        "trace.csv": b"arrival_s,prompt_tokens,output_tokens\n" + b"".join(b"%d,256,32\n" % i for i in range(20)),
        "trace.jsonl": b"".join(json.dumps({"arrival_s": i * 0.1, "prompt_tokens": 128, "output_tokens": 16}).encode()
                                + b"\n" for i in range(20)),
        "trace_bad.csv": b"arrival_s,prompt_tokens,output_tokens\nnan,1e30,-1\n0,abc,\n",
        "deep.json": b"[" * 100_000 + b"]" * 100_000,
        "config.json": json.dumps(HF_CONFIG).encode(),
        "config_bad.json": json.dumps({**HF_CONFIG, "hidden_size": -1, "num_attention_heads": 1e300}).encode(),
        "bench.json": json.dumps(bench_result()).encode(),
        "guidellm.json": (ROOT / "tests" / "data" / "loadtests" / "guidellm-mock-fixed.json").read_bytes(),
        "multiturn.jsonl": multiturn_lines().encode(),
        "garbage.bin": bytes(range(256)) * 8,
        "profile.yaml": next((ROOT / "calibration" / "profiles").glob("*.yaml")).read_bytes(),
        "profile_dup.yaml": b"mode: calibrated\ngpu_id: h200-sxm\nmode: ideal\n",
        "profile_bad.yaml": b"mode: calibrated\nweight_bandwidth_efficiency: -3\nunknown_field: 1\n",
    }
    out = {}
    for name, data in files.items():
        (d / name).write_bytes(data)
        out[name] = str(d / name)
    (d / "dir").mkdir()
    os.mkfifo(d / "fifo")
    out.update({"dir": str(d / "dir"), "fifo": str(d / "fifo"), "devzero": "/dev/zero", "devnull": "/dev/null",
                "missing": str(d / "missing.csv"), "out.csv": str(d / "out.csv"), "out.yaml": str(d / "o" / "m.yaml"),
                "outdir": str(d / "outdir"), "nul": str(d / "a\x00b")})
    return out


POOL_NAMES = sorted([  # the names make_pool returns, for the strategies
    "empty.csv", "meas.csv", "bom_meas.csv", "latin1.csv", "header_only.csv", "wide.csv", "meas_bad.csv", "trace.csv",
    "trace.jsonl", "trace_bad.csv", "deep.json", "config.json", "config_bad.json", "bench.json", "guidellm.json",
    "multiturn.jsonl", "garbage.bin", "profile.yaml", "profile_dup.yaml", "profile_bad.yaml", "dir", "fifo", "devzero",
    "devnull", "missing", "out.csv", "out.yaml", "outdir", "nul"])


# ------------------------------------------------------------------------ options, by introspection


def kind_of(p) -> str:
    """'bool', 'int', 'float', 'path' or 'str' for a click/typer parameter (typer's annotation where it has one,
    else click's type name)."""
    if getattr(p, "is_flag", False):
        return "bool"
    ann = getattr(getattr(p, "type_descriptor", None), "annotation", None)
    if ann is not None:
        while typing.get_origin(ann) in (list, tuple, typing.Union, types.UnionType):
            ann = next(a for a in typing.get_args(ann) if a is not type(None))
        return {bool: "bool", int: "int", float: "float", Path: "path"}.get(ann, "str")
    name = getattr(getattr(p, "type", None), "name", "text")
    return {"boolean": "bool", "integer": "int", "integer range": "int", "float": "float", "float range": "float",
            "path": "path"}.get(name, "str")


HOSTILE_TEXT = ["", " ", "nan", "inf", "-inf", "1e308", "-1", "0", "abc", "../../etc/passwd", "x" * 3000, "\x00",
                "😀", "-", "--", "1,2,,3", "h200-sxm," * 40, "1e400", "0x10", "١٢", " 7", "+5", "1_000", "None"]
HOSTILE_INT = [-1, 0, 1, 2, 3, 7, 16, 64, 2**31, 2**63, 10**9, 10**9 + 1, 10**20, -(10**20)]
HOSTILE_FLOAT = ["nan", "inf", "-inf", "1e308", "-1e308", "1e-320", "-0", "0", "1e400", "0.5", "1", "2", "5", "50",
                 "0.92", "1000", "3.5e12"]
IDS = {"model": lambda: sorted(catalog.models()), "gpu": lambda: sorted(catalog.gpus()),
       "weight_dtype": lambda: list(WEIGHT_BITS), "kv_dtype": lambda: list(KV_BYTES) + ["auto"],
       "workload": lambda: ["chat", "rag", "agentic", "batch"],
       "spec_preset": lambda: ["draft-model", "eagle", "medusa"],
       "profile": lambda: ["auto", "none", "@profile.yaml", "@profile_dup.yaml", "@profile_bad.yaml", "@missing"],
       "tp": lambda: ["auto", "1", "2", "1,2", "8,16"], "fit_kv_dtype": lambda: ["auto", "fp8"]}
#: Workload sizes: valid values small (a million requests is valid and takes 15 s: not a fuzz example's job).
SMALL_INT = {"num_requests": [1, 2, 10, 50, 200, 1000], "top": [1, 5, 20]}


def _ids_for(name: str):
    for key, ids in IDS.items():
        if key == name or name.startswith(key) or name.endswith(key):
            return ids()
    return None


#: Valid-looking files per path option (by a word of its name; any other path option gets any file).
VALID_PATHS = {"measurements": ["meas.csv", "bom_meas.csv"], "trace": ["trace.csv", "trace.jsonl"],
               "files": ["bench.json", "guidellm.json", "multiturn.jsonl"], "config": ["config.json"],
               "out": ["out.csv", "out.yaml", "outdir", "devnull"], "csv": ["out.csv", "devnull"]}
TYPICAL_INT = [1, 2, 4, 8, 16, 64, 128, 512, 1024, 4096, 32768]
TYPICAL_FLOAT = ["0.5", "0.9", "1", "2", "5", "20", "100", "500", "1000"]
#: What a careful user types for an option, by a word of its name (first match wins).
VALID_BY_NAME: list[tuple[str, list]] = [
    ("gpu_memory_utilization", ["0.5", "0.8", "0.9", "0.92", "0.95"]), ("spec_acceptance", ["0.5", "0.8"]),
    ("spec_draft_cost", ["0.05", "0.5"]), ("burstiness_cv", ["0.5", "1", "2", "4"]),
    ("price", ["0.5", "2", "10"]), ("rate", ["0.5", "2", "10"]), ("ttft", ["50", "200", "1000", "5000"]),
    ("tpot", ["10", "30", "100"]), ("network_gbps", ["100", "400"]), ("params", ["7.25e9"]),
    ("time_budget_s", ["60", "300"]), ("duration_s", ["10", "30"]),
    ("kv_capacity_tokens", [16384, 100000, 1000000]), ("max_num_seqs", [16, 64, 256, 1024]),
    ("max_num_batched_tokens", [2048, 8192, 16384]), ("max_model_len", [4096, 32768]),
    ("prompt_tokens", [128, 512, 2048, 8192]), ("context", [128, 512, 2048, 8192]), ("output_tokens", [16, 128, 512]),
    ("shared_prefix_tokens", [0, 128, 1024]), ("concurrency", [1, 8, 64]), ("batch", [1, 8, 64]),
    ("spec_k", [1, 3, 5]), ("seed", [0, 1, 42]), ("port", [8000, 8123]), ("tensor_parallel", [1, 2]),
    ("namespace", ["default", "prod"]), ("hf_repo", ["org/model"]), ("spec_model", ["org/draft"]),
    ("model_path", ["/models/x"]), ("model_dir", ["mistral-7b-v0.3=/nonexistent"]), ("id", ["my-model"]),
    ("name", ["vllm-x"]),
]
VALID_BY_NAME_INT = {"tp": [1, 2, 4, 8], "pp": [1, 2], "gpus": [1, 2, 4, 8, 16]}


def _valid_for(name: str):
    if name in VALID_BY_NAME_INT:
        return VALID_BY_NAME_INT[name]
    return next((v for k, v in VALID_BY_NAME if k in name), None)


def hostile_strategy(p):
    """Values a hostile user types: non-numbers, infinities, astronomically large or negative numbers, paths
    to what is not a regular UTF-8 file, ids that do not exist."""
    kind = kind_of(p)
    if kind == "int":
        valid = SMALL_INT.get(p.name)
        if valid is not None:
            return st.sampled_from(["0", "-5", "1000001", str(2**31), str(10**20), "nan", "1e3", "abc"])
        return st.one_of(st.sampled_from(HOSTILE_INT).map(str), st.integers(-(10**25), 10**25).map(str),
                         st.sampled_from(HOSTILE_TEXT))
    if kind == "float":
        return st.one_of(st.sampled_from(HOSTILE_FLOAT), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                         st.sampled_from(HOSTILE_TEXT))
    if kind == "path":
        return st.sampled_from(POOL_NAMES).map(lambda n: "@" + n)
    return st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=20))


def valid_strategy(p):
    """Values a careful user types (still able to describe a plan that cannot start)."""
    kind, name = kind_of(p), p.name
    if kind == "path":
        names = next((v for k, v in VALID_PATHS.items() if k in name), POOL_NAMES)
        return st.sampled_from(names).map(lambda n: "@" + n)
    ids = _ids_for(name) if kind == "str" else None
    if ids:  # a comma-separated list where the name is plural (slo-search's --gpus, --weight-dtypes)
        lists = st.lists(st.sampled_from(ids), min_size=1, max_size=3).map(",".join)
        return st.one_of(st.sampled_from(ids), lists) if name.endswith("s") or name == "tp" else st.sampled_from(ids)
    valid = SMALL_INT.get(name) if kind == "int" else None
    valid = valid or _valid_for(name) or {"int": TYPICAL_INT, "float": TYPICAL_FLOAT}.get(kind, ["ok-name", "plan-1"])
    return st.sampled_from(valid).map(str)


@st.composite
def value_strategy(draw, p):
    """One option's value: hostile one time in ten, else valid-looking (so examples get past the first check
    and into the planning, where the impossible plans are)."""
    return draw(hostile_strategy(p) if draw(st.integers(0, 9)) == 0 else valid_strategy(p))


def params_of(cmd) -> list:
    return [p for p in cmd.params if p.name != "help"]


def always(p) -> bool:
    """Options given in every example: the required ones, and the GPU choice (left out, slo-search would search
    every GPU in the catalog: valid, but minutes, not a fuzz example)."""
    return p.required or (p.name in ("gpu", "gpus") and kind_of(p) == "str")


@st.composite
def argv_for(draw, name: str):
    cmd = GROUP.commands[name]
    args, positional = [name], []
    for p in params_of(cmd):
        if p.param_type_name == "argument":
            n = 1 if p.nargs == 1 else draw(st.integers(1, 2))
            positional += [draw(value_strategy(p)) for _ in range(n)]
            continue
        if not always(p) and draw(st.integers(0, 2)) != 0:  # each optional option in one example of three
            continue
        if kind_of(p) == "bool":
            args.append(draw(st.sampled_from(list(p.opts) + list(getattr(p, "secondary_opts", [])))))
            continue
        for _ in range(draw(st.integers(1, 3)) if p.multiple else 1):
            args += [draw(st.sampled_from(list(p.opts))), draw(value_strategy(p))]
    return args + positional


def names_something(line: str, cmd, argv: list[str]) -> bool:
    """Does the one-line error name a flag of ``cmd``, a file given in ``argv``, or a field (``model:``,
    ``workload.prompt_tokens:``, ``trace:``, ``line 3:``)?"""
    msg = line.removeprefix("error: ")
    flags = {o for p in cmd.params for o in list(getattr(p, "opts", [])) + list(getattr(p, "secondary_opts", []))}
    if any(re.search(rf"(^|\W){re.escape(f)}(\W|$)", msg) for f in flags if f.startswith("-")):
        return True
    if any(os.sep in a and (a in msg or Path(a).name in msg or repr(a)[1:-1] in msg) for a in argv if a):
        return True
    return bool(re.match(r"[A-Za-z_][\w.\[\]-]*( line \d+)?: \S", msg))


def run_and_check(name: str, argv: list[str]) -> None:
    cmd = GROUP.commands[name]
    d = Path(tempfile.mkdtemp(prefix="fuzz-"))
    try:
        pool = make_pool(d)
        real = [pool[a[1:]] if a.startswith("@") and a[1:] in pool else a for a in argv]
        cwd = os.getcwd()
        os.chdir(d)  # default output folders (calibrate's, verify's) land in the example's own folder
        try:
            with time_limit(EXAMPLE_TIMEOUT_S):
                r = runner.invoke(app, real)
        finally:
            os.chdir(cwd)
    except Hang:
        pytest.fail(f"planner {' '.join(map(repr, argv))}: no answer within {EXAMPLE_TIMEOUT_S:g} s")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    OUTCOMES[name, r.exit_code] += 1
    where = f"planner {' '.join(repr(a)[:80] for a in real)}"
    err, out = r.stderr.strip(), r.stdout
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{where}: raised {r.exception!r}"
    assert "Traceback" not in err + out and "internal error" not in err, f"{where}: {err[-500:]}"
    assert r.exit_code in (0, 1, 2), f"{where}: exit {r.exit_code}"
    if r.exit_code == 0:
        assert err == "", f"{where}: stderr on success: {err[:300]!r}"
        if "--json" in real and out.lstrip()[:1] in ("{", "["):
            json.loads(out)
        return
    assert err.count("\n") == 0 and err.startswith("error: "), f"{where}: not one error line: {err[:500]!r}"
    if r.exit_code == 1:  # an impossible plan: the one prefix, from a command whose help says it exits 1
        assert err.startswith("error: infeasible: "), f"{where}: exit 1 without 'error: infeasible:': {err}"
        assert re.search(r"\bexits? 1\b", cmd.help or "", re.I), f"{where}: exit 1 from a command that does not say it refuses: {err}"
    assert names_something(err, cmd, real), f"{where}: the error names no flag, field or file: {err}"


@pytest.mark.parametrize("name", sorted(GROUP.commands))
def test_fuzz_every_command(name):
    @settings(max_examples=EXAMPLES, **SETTINGS)
    @given(argv_for(name))
    def fuzz(argv):
        run_and_check(name, argv)

    fuzz()


def test_the_fuzz_discovers_every_option():
    """Introspection finds every option of every command with a kind (a new flag is fuzzed automatically)."""
    seen = {(n, p.name): kind_of(p) for n, c in GROUP.commands.items() for p in params_of(c)}
    assert len(GROUP.commands) >= 12 and len(seen) >= 150
    assert seen["simulate", "seed"] == "int" and seen["simulate", "burstiness_cv"] == "float"
    assert seen["validate", "measurements"] == "path" and seen["size", "json_out"] == "bool"


# ------------------------------------------------------------------------------------ the readers

NUMBERS = st.one_of(st.sampled_from(["", "nan", "inf", "-1", "0", "1", "1.5", "1e300", "abc", "1e9", "7", "512"]),
                    st.integers(-10, 10**6).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr))
JSON_VALUES = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-(10**20), 10**20),
                                     st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8)),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                      max_size=3), max_leaves=6)


def one_line_naming(err: BaseException, name: str) -> None:
    """A reader's refusal: a ValueError (SpecError) of one line naming the file."""
    msg = str(err)
    assert isinstance(err, ValueError), f"{type(err).__name__}: {msg}"
    assert "\n" not in msg and name in msg, msg


#: A cell: a valid-looking number three times in four, else a hostile one.
CELLS = st.one_of(st.integers(1, 5000).map(str), st.integers(1, 5000).map(str), st.floats(0.001, 100).map(repr),
                  NUMBERS)
VALID_CELLS = st.integers(1, 5000).map(str)


@st.composite
def rows_of(draw, width: int, max_rows: int = 6):
    """Rows of ``width`` cells: every cell valid-looking in half the examples, hostile cells mixed in in the other."""
    cells = VALID_CELLS if draw(st.booleans()) else CELLS
    return draw(st.lists(st.lists(cells, min_size=width, max_size=width), min_size=1, max_size=max_rows))


@st.composite
def trace_header(draw):
    required = draw(st.permutations(["arrival_s", "prompt_tokens", "output_tokens"]))
    if draw(st.integers(0, 7)) == 0:  # now and then a required column is missing
        required = required[1:]
    optional = draw(st.lists(st.sampled_from(["prefix_group", "prefix_tokens", "x"]), max_size=3, unique=True))
    return list(required) + optional


@settings(max_examples=READER_EXAMPLES, **SETTINGS)
@given(st.sampled_from([".csv", ".jsonl"]), st.booleans(), trace_header(), rows_of(6))
def test_fuzz_trace_reader(suffix, bom, header, rows):
    from planner.io.traces import load_trace

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / f"trace{suffix}"
        if suffix == ".csv":
            text = ",".join(header) + "\n" + "".join(",".join(r[: len(header)]) + "\n" for r in rows)
        else:
            text = "".join(json.dumps(dict(zip(header, r))) + "\n" for r in rows)
        p.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
        try:
            reqs = load_trace(p)
        except Exception as err:  # noqa: BLE001 - what it raises is the property under test
            OUTCOMES["reader trace", "refused"] += 1
            one_line_naming(err, p.name)
            return
        OUTCOMES["reader trace", "read"] += 1
        assert len(reqs) >= 1 and (reqs.prompt_tokens >= 1).all() and np.isfinite(reqs.arrival_s).all()


@st.composite
def measurement_rows(draw):
    """Rows of a measurement CSV: all valid-looking in half the examples, hostile values mixed in in the other."""
    valid = draw(st.booleans())

    def pick(good: list, bad: list):
        return st.sampled_from(good if valid else good + bad)

    cells = VALID_CELLS if valid else CELLS
    return draw(st.lists(st.fixed_dictionaries({
        "model": pick(["mistral-7b-v0.3", "qwen2.5-7b"], ["nope", ""]), "gpu": pick(["h200-sxm", "l4"], ["x"]),
        "metric": pick(["prefill_s", "decode_step_s", "mixed_step_s", "kv_cache_tokens", "weights_bytes"], ["?"]),
        "measured": cells, "batch_size": cells, "prompt_tokens": cells, "output_tokens": cells,
        "tensor_parallel": pick(["", "1", "2"], ["3", "16", "x"]), "chunk_tokens": cells,
        "kv_cache_dtype": pick(["", "auto", "fp8"], ["int4"]),
        "gpu_memory_utilization": pick(["", "0.9"], ["1.5", "nan"])}), min_size=1, max_size=3))


@settings(max_examples=READER_EXAMPLES, **SETTINGS)
@given(measurement_rows())
def test_fuzz_measurement_reader(rows):
    from planner.validate import COLUMNS, choose_profile, read_measurements, validate

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "meas.csv"
        cols = [c for c in COLUMNS if c in (rows[0] if rows else {"model": 1, "gpu": 1, "metric": 1, "measured": 1})]
        p.write_text(",".join(cols) + "\n" + "".join(",".join(r[c] for c in cols) + "\n" for r in rows))
        try:
            ms = read_measurements(p)
        except Exception as err:  # noqa: BLE001
            OUTCOMES["reader measurements", "refused"] += 1
            one_line_naming(err, p.name)
            return
        OUTCOMES["reader measurements", "read"] += 1
        out = validate(ms, choose_profile("none"))
        assert all(np.isfinite(r["error_pct"]) for r in out["rows"])


@settings(max_examples=READER_EXAMPLES, **SETTINGS)
@given(st.lists(st.one_of(JSON_VALUES.map(lambda v: json.dumps(v).encode()),
                          st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=4).map(
                              lambda v: json.dumps(v).encode()),
                          st.binary(max_size=30)), max_size=12))
def test_fuzz_jsonl_reader(lines):
    from planner.io.jsonl import read_jsonl

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "raw.jsonl"
        p.write_bytes(b"\n".join(lines))
        skipped: list = []
        recs = read_jsonl(p, skipped)  # never raises
        OUTCOMES["reader jsonl", "read" if not skipped else "read, lines skipped"] += 1
        lines_used = {r.line for r in recs} | {k for k, _ in skipped}
        assert len(lines_used) == len(recs) + len(skipped)
        assert all(isinstance(r, dict) for r in recs)


@settings(max_examples=READER_EXAMPLES, **SETTINGS)
@given(st.dictionaries(st.sampled_from(sorted(HF_CONFIG) + ["text_config", "num_local_experts", "num_experts_per_tok",
                                                            "sliding_window", "layer_types", "moe_intermediate_size"]),
                       JSON_VALUES, max_size=4))
def test_fuzz_hf_config(changes):
    from planner.io.hf_import import hf_config_to_model_dict, model_dict_to_yaml

    cfg = {**HF_CONFIG, **changes}
    try:
        d = hf_config_to_model_dict(cfg, "fuzzed")
    except Exception as err:  # noqa: BLE001
        OUTCOMES["reader hf-config", "refused"] += 1
        one_line_naming(err, "config.json")
        return
    OUTCOMES["reader hf-config", "read"] += 1
    assert "hidden_size" in model_dict_to_yaml(d)


@pytest.fixture(scope="module")
def replay_engine():
    from planner.serving import engine_setup
    from planner.specs import Deployment

    g = catalog.gpu("h200-sxm")
    return engine_setup(catalog.model("mistral-7b-v0.3"), g, Deployment.for_gpu(g))


@settings(max_examples=READER_EXAMPLES, **SETTINGS)
@given(st.sampled_from(["bench", "guidellm", "multiturn"]), st.integers(0, 10**6),
       st.lists(st.tuples(st.text(max_size=20), JSON_VALUES), max_size=3))
def test_fuzz_load_test_readers(replay_engine, fmt, seed, mutations):
    from planner.serving.loadtests import read_load_test, replay_load_test

    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as d:
        if fmt == "bench":
            data = bench_result(5)
            for key, v in mutations:
                data[rng.choice(sorted(data)) if rng.random() < 0.8 else key] = v
            p = Path(d) / "bench.json"
            p.write_text(json.dumps(data))
        elif fmt == "guidellm":
            data = json.loads((ROOT / "tests" / "data" / "loadtests" / "guidellm-mock-fixed.json").read_text())
            reqs = data["benchmarks"][0]["requests"]["successful"]
            for key, v in mutations:
                r = reqs[int(rng.integers(len(reqs)))]
                r[rng.choice(sorted(r)) if rng.random() < 0.8 else key] = v
            p = Path(d) / "guidellm.json"
            p.write_text(json.dumps(data))
        else:
            rows = [json.loads(x) for x in multiturn_lines().splitlines()]
            for key, v in mutations:
                r = rows[int(rng.integers(len(rows)))]
                r[rng.choice(sorted(r)) if rng.random() < 0.8 else key] = v
            p = Path(d) / "turns.jsonl"
            p.write_text("".join(json.dumps(r) + "\n" for r in rows))
        try:
            tests = read_load_test(p)
            cost, cfg = replay_engine
            for t in tests:
                replay_load_test(t, cost, cfg)
            OUTCOMES[f"reader load-test {fmt}", "read and replayed"] += 1
        except Exception as err:  # noqa: BLE001
            OUTCOMES[f"reader load-test {fmt}", "refused"] += 1
            one_line_naming(err, p.name)


RAW_RECORDS = None


@settings(max_examples=READER_EXAMPLES, **SETTINGS)
@given(st.integers(0, 10**6), st.lists(st.tuples(st.sampled_from(
    ["measured", "batch_size", "prompt_tokens", "output_tokens", "model", "gpu", "metric", "tensor_parallel",
     "weight_dtype", "kv_cache_dtype", "chunk_tokens", "role", "kv_cache_tokens", "weights_bytes"]), JSON_VALUES),
    min_size=1, max_size=6))
def test_fuzz_calibration_records(seed, mutations):
    """Damaged records never break the reading: each one is a point or a reported exclusion, never both, never
    an exception; --resume's bookkeeping (done_keys) takes them too."""
    from calibration.fit import points_from_records
    from calibration.records import done_keys, read_records

    global RAW_RECORDS
    RAW_RECORDS = RAW_RECORDS or read_records(DATA / "h200-fit.jsonl")
    rng = np.random.default_rng(seed)
    recs = [type(r)(dict(r), r.file, r.line) for r in RAW_RECORDS]
    targets = [r for r in recs if r.get("type") in ("probe", "engine_log")]
    for key, value in mutations:
        targets[int(rng.integers(len(targets)))][key] = value
    excluded: list[str] = []
    points = points_from_records(recs, "h200-fit.jsonl", excluded=excluded)
    done_keys(recs)
    OUTCOMES["reader calibration records", "records excluded" if excluded else "all fitted"] += 1
    assert all(np.isfinite(p.measured) and p.measured > 0 and p.batch_size >= 0 for p in points)
    assert all(x.startswith("h200-fit.jsonl:") for x in excluded)
    probe_lines = {r.line for r in recs if r.get("type") == "probe" and r.get("status") == "ok"}
    n_probe_points = sum(p.metric in ("prefill_s", "decode_step_s", "mixed_step_s") for p in points)
    n_probe_excluded = sum(int(x.split(":")[1]) in probe_lines for x in excluded)
    assert n_probe_points + n_probe_excluded == len(probe_lines)  # each probe: a point or a named exclusion


# --------------------------------------------------- names and strings that reach generated files (issue #20)

#: What a hostile config.json, catalog YAML or flag puts in a name: line breaks (LF, CR, NEL, U+2028), quotes,
#: command substitution, backticks, a spreadsheet formula, HTML, shell and Markdown punctuation.
NAME_FRAGMENTS = ["\n", "\r", "\x85", "\u2028", "\t", "'", '"', "$(touch PWNED)", "`touch PWNED`", "; touch PWNED",
                  "&& touch PWNED", "| tee PWNED", "=HYPERLINK(\"http://x\")", "+1", "-1", "@SUM(A1)", "<script>",
                  "</script>", "<img src=x onerror=alert(1)>", "```", "|", "#", "---", "{{ x }}", "\\", "*", "x"]
hostile_names = st.lists(st.one_of(st.sampled_from(NAME_FRAGMENTS), st.text(max_size=4)), min_size=1,
                         max_size=6).map("".join)


def _outside_fences(text: str) -> list[str]:
    """The lines outside fenced code blocks, as CommonMark reads them: a fence opens with 3+ backticks (and an
    info string) and closes only on a line of at least as many backticks and nothing else."""
    out, fence = [], ""
    for line in re.split(r"\r\n|\r|\n", text):  # CommonMark's line endings
        m = re.match(r"(`{3,})", line)
        if not fence and m:
            fence = m.group(1)
        elif fence and re.fullmatch(rf"{fence}`* *", line):
            fence = ""
        elif not fence:
            out.append(line)
    assert not fence, "an unclosed code fence"
    return out


@settings(max_examples=max(6, EXAMPLES // 3), **SETTINGS)
@given(hostile_names, hostile_names, hostile_names)
def test_fuzz_names_reach_generated_files_only_quoted(name, repo, gpu_name):
    """A hostile model name, repository and GPU name (put on the specs past the loader, which would refuse the
    control characters): serve.sh parses with ``sh -n`` and, run with a stand-in ``vllm``, creates no file and
    passes the repository as one argument; every line before the command is a comment; every YAML file parses
    and holds the repository as data; README.md and plan.md hold no raw HTML; no plan.csv text cell starts
    with a formula character."""
    import csv as csv_mod
    import io
    import subprocess

    import yaml

    from planner.deploy import deployment_bundle
    from planner.profile import IDEAL_PROFILE
    from planner.quoting import FORMULA_PREFIXES
    from planner.specs import Deployment, Workload

    m = catalog.model("llama-3.1-8b").model_copy(update={"name": name, "hf_repo": repo.strip() or "r"})
    g = catalog.gpu("h200-sxm").model_copy(update={"name": gpu_name})
    wl = Workload(prompt_tokens=1024, output_tokens=128, request_rate_per_s=2.0)
    if m.hf_repo.startswith("-"):  # vllm serve would take it for an option: refused, naming the field
        with pytest.raises(ValueError, match="^hf_repo: .* starts with '-'"):
            deployment_bundle(m, g, Deployment.for_gpu(g), wl)
        return
    b = deployment_bundle(m, g, Deployment.for_gpu(g), wl)
    d = Path(tempfile.mkdtemp(prefix="fuzz-names-"))
    try:
        (d / "serve.sh").write_text(b.files["serve.sh"])
        subprocess.run(["sh", "-n", "serve.sh"], cwd=d, check=True, timeout=30)
        head = b.files["serve.sh"].partition("\nvllm serve ")[0].splitlines()
        assert head[0] == "#!/bin/sh" and all(x.startswith("#") for x in head), head
        stub = 'vllm() { for a in "$@"; do printf "%s\\0" "$a"; done > argv.bin; }; . ./serve.sh'
        subprocess.run(["sh", "-c", stub], cwd=d, check=True, timeout=30)
        assert sorted(p.name for p in d.iterdir()) == ["argv.bin", "serve.sh"]
        assert (d / "argv.bin").read_bytes().decode().split("\0")[:-1] == list(b.serve.argv[1:])
    finally:
        shutil.rmtree(d, ignore_errors=True)
    for fname, text in b.files.items():
        if fname.endswith(".yaml"):
            assert all(x.startswith("#") for x in text.splitlines()[:2]), fname
            docs = [x for x in yaml.safe_load_all(text) if x]
            assert docs, fname
    dep = next(yaml.safe_load_all(b.files["k8s-deployment.yaml"]))
    assert dep["spec"]["template"]["spec"]["containers"][0]["args"][0] == m.hf_repo
    assert yaml.safe_load(b.files["helm-values-production-stack.yaml"])["servingEngineSpec"]["modelSpec"][0][
        "modelURL"] == m.hf_repo
    assert json.loads(b.files["predictions.json"])["serve_argv"][2] == m.hf_repo
    raw_html = re.compile(r"<(script|/script|img|b)\b", re.I)
    assert not any(raw_html.search(x) for x in _outside_fences(b.files["README.md"]))
    pr = fleet_plan_report(m, g, wl, IDEAL_PROFILE)
    assert not any(raw_html.search(x) for x in _outside_fences(pr.markdown()))
    for row in csv_mod.reader(io.StringIO(pr.csv_text())):
        for cell in row:
            if cell.startswith(FORMULA_PREFIXES):
                float(cell)  # only a number may start with '-' or '+'


@settings(max_examples=max(8, EXAMPLES), **SETTINGS)
@given(hostile_names, st.sampled_from(["_name_or_path", "--name", "--hf-repo"]))
def test_fuzz_import_hf_names(name, where):
    """import-hf with a hostile ``_name_or_path``, ``--name`` or ``--hf-repo``: a name with a control or line-
    separator character is refused naming where it came from; any other is written as YAML data that reads back
    as exactly that string."""
    import yaml

    from planner.quoting import control_char_problem

    d = Path(tempfile.mkdtemp(prefix="fuzz-import-"))
    try:
        cfg = {**HF_CONFIG, "_name_or_path": name if where == "_name_or_path" else "org/m"}
        (d / "config.json").write_text(json.dumps(cfg))
        argv = ["import-hf", str(d / "config.json"), "--id", "m"] + ([where, name] if where != "_name_or_path" else [])
        r = runner.invoke(app, argv)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    err = r.stderr.strip()
    if "\x00" in name and where != "_name_or_path":
        return  # an argv cannot hold NUL: click's runner passes it, a shell never would
    if control_char_problem(name):
        assert r.exit_code == 2 and err.count("\n") == 0, (name, r.output)
        assert err.startswith(f"error: config.json: '_name_or_path' contains" if where == "_name_or_path"
                              else f"error: {where}: contains"), err
        return
    if r.exit_code == 2:  # e.g. an --hf-repo the spec refuses for another reason: named, one line
        assert err.count("\n") == 0 and err.startswith("error: "), err
        return
    assert r.exit_code == 0, r.output
    d = yaml.safe_load(r.stdout)
    if where == "--name":
        assert d["name"] == name
    elif where == "--hf-repo":
        assert d["hf_repo"] == name


@settings(max_examples=max(2, EXAMPLES // 12), **SETTINGS)
@given(st.integers(2, 3), st.lists(st.floats(0, 0.5), min_size=3, max_size=3))
def test_fuzz_concurrent_calibrate_writers(writers, delays):
    """2-3 ``calibrate --resume`` processes on one --out, started at random moments (stand-in engine): each
    either finishes or is refused at once naming the lock's holder, and every probe point is measured once."""
    import subprocess
    import sys
    import time

    from calibration.records import probe_key, read_records
    from test_calibrate_out import CHILD

    d = Path(tempfile.mkdtemp(prefix="fuzz-cal-"))
    try:
        (d / "child.py").write_text(CHILD)
        env = dict(os.environ, TMPDIR=str(d), PYTHONPATH=os.pathsep.join([str(ROOT / "tests" / "fake_vllm"),
                                                                           str(ROOT)]))
        procs = []
        for k in range(writers):
            time.sleep(delays[k])
            procs.append(subprocess.Popen([sys.executable, str(d / "child.py"), str(d / "out"), "2026-12-01",
                                           "--resume"], cwd=d, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        results = [(p.wait(timeout=300), p.stdout.read()) for p in procs]
        assert any(rc == 0 for rc, _ in results), results
        assert all(rc == 0 or (rc == 2 and "another planner calibrate (pid " in text) for rc, text in results)
        keys = [probe_key(r) for f in (d / "out").glob("*.jsonl") for r in read_records(f)
                if r.get("type") == "probe" and r.get("status") == "ok"]
        assert len(keys) == 18 == len(set(keys))
        assert not list(d.glob("planner-cal-*"))  # the children's temp folders are gone
    finally:
        shutil.rmtree(d, ignore_errors=True)
