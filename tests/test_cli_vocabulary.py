"""The CLI speaks one vocabulary (planner.cli.options, README's table): one flag name per concept and one default
per concept across every subcommand, exit 2 on bad input and exit 1 on an infeasible plan, each with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from planner.cli.app import COMMANDS, app
from planner.cli.options import DEFAULT_OUTPUT_TOKENS, DEFAULT_PROMPT_TOKENS, RENAMED

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()
MODEL, GPU = "mistral-7b-v0.3", "h200-sxm"


def run(*args: str):
    return runner.invoke(app, list(args))


def one_line_error(r) -> str:
    err = r.stderr.strip()
    assert err.count("\n") == 0 and err.startswith("error: "), err
    return err


def options() -> dict[str, dict[str, object]]:
    """command -> {flag: click parameter} for every registered command."""
    group = typer.main.get_command(app)
    return {name: {o: p for p in group.commands[name].params for o in getattr(p, "opts", [])}
            for name, _ in COMMANDS}


def test_no_command_uses_an_old_name():
    for cmd, opts in options().items():
        old = set(RENAMED) & set(opts) - ({"--concurrency"} if cmd == "simulate" else set())
        assert not old, (cmd, old)


def test_one_name_and_one_default_per_concept():
    """--prompt-tokens / --output-tokens default to 4,096 / 512 wherever they appear; a GPU count is --num-gpus,
    GPU ids are --gpu; the latency targets are --ttft-slo-ms / --tpot-slo-ms."""
    opts = options()
    for cmd, o in opts.items():
        if "--prompt-tokens" in o and cmd not in ("sweep",):
            assert o["--prompt-tokens"].default == DEFAULT_PROMPT_TOKENS, cmd
        if "--output-tokens" in o:
            assert o["--output-tokens"].default == DEFAULT_OUTPUT_TOKENS, cmd
    for cmd in ("size", "sweep", "report", "simulate", "slo-search", "deploy", "verify"):
        assert {"--prompt-tokens", "--output-tokens"} <= set(opts[cmd]), cmd
        if cmd != "simulate":  # simulate checks no target: it reports the percentiles
            assert {"--ttft-slo-ms", "--tpot-slo-ms"} <= set(opts[cmd]), cmd
    assert {"--num-gpus", "--gpu"} <= set(opts["size"]) and "--num-gpus" in opts["report"]
    assert opts["slo-search"]["--gpu"].multiple and opts["sweep"]["--gpu"].multiple
    assert "--tp" in opts["calibrate"] and "--rate" in opts["slo-search"]
    for cmd in ("size", "report", "deploy"):
        assert {"--rate", "--users", "--think-time-s"} <= set(opts[cmd]), cmd


@pytest.mark.parametrize(("cmd", "checked"), [("size", "simulated requests"), ("sweep", "steady-state"),
                                              ("report", "simulated requests"), ("deploy", "simulated requests"),
                                              ("slo-search", "p99 over the simulated"), ("verify", "p99 of the requests")])
def test_latency_target_help_says_which_percentile_is_checked(cmd, checked):
    o = options()[cmd]
    for flag in ("--ttft-slo-ms", "--tpot-slo-ms"):
        assert checked in o[flag].help, (cmd, flag)


def test_profile_auto_help_says_it_transfers():
    for cmd, o in options().items():
        if "--profile" in o:
            assert "transferred" in o["--profile"].help, cmd
            assert "else the ideal roofline" not in o["--profile"].help, cmd


@pytest.mark.parametrize(("args", "new"), [
    (("size", "-m", MODEL, "-g", GPU, "--context", "4096"), "--prompt-tokens"),
    (("size", "-m", MODEL, "-g", GPU, "--gpus", "2"), "--num-gpus"),
    (("size", "-m", MODEL, "-g", GPU, "--concurrency", "2"), "--users"),
    (("slo-search", "-m", MODEL, "--ttft-p99-ms", "500", "--tpot-slo-ms", "50"), "--ttft-slo-ms"),
    (("slo-search", "-m", MODEL, "--target-rate", "5"), "--rate"),
    (("slo-search", "-m", MODEL, "--gpus", "h200-sxm"), "--num-gpus for a GPU count, --gpu"),
    (("calibrate", "--gpu", GPU, "--tensor-parallel", "2"), "--tp"),
])
def test_an_old_flag_exits_2_naming_its_new_name(args, new):
    r = run(*args)
    assert r.exit_code == 2
    assert f"renamed {new}" in one_line_error(r)


def test_gpu_ids_repeat_or_comma_separate_and_csv_takes_a_path(tmp_path):
    """--gpu a,b == --gpu a --gpu b; --csv PATH writes the file, --csv - prints the CSV instead of the table."""
    base = ("sweep", "-m", MODEL, "--weight-dtype", "bf16", "--kv-dtype", "bf16", "--tp", "1", "--batch", "8",
            "--profile", "none")
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    assert run(*base, "--gpu", "h200-sxm,l4", "--csv", str(a)).exit_code == 0
    assert run(*base, "--gpu", "h200-sxm", "--gpu", "l4", "--csv", str(b)).exit_code == 0
    assert a.read_bytes() == b.read_bytes() and set(pd.read_csv(a)["gpu_id"]) == {"h200-sxm", "l4"}
    r = run(*base, "--gpu", "h200-sxm,l4", "--csv", "-")
    assert r.exit_code == 0 and r.stdout.encode() == a.read_bytes()


def test_unwritable_csv_is_bad_input_not_an_internal_error():
    r = run("sweep", "-m", MODEL, "-g", GPU, "--tp", "1", "--batch", "1", "--csv", "/nonexistent/dir/x.csv")
    assert r.exit_code == 2
    line = one_line_error(r)
    assert line.startswith("error: --csv: cannot write '/nonexistent/dir/x.csv'")


@pytest.mark.parametrize(("args", "field"), [
    (("size", "-m", MODEL, "-g", GPU, "--rate", "2", "--users", "10"), "--users"),
    (("size", "-m", MODEL, "-g", GPU, "--think-time-s", "5"), "--think-time-s"),
    (("size", "-m", MODEL, "--num-gpus", "2"), "--num-gpus"),
    (("sweep", "-m", MODEL, "--tp", "x"), "--tp"),
    (("slo-search", "-m", MODEL, "--ttft-slo-ms", "500", "--tpot-slo-ms", "50", "--csv", "-", "--json"), "--csv"),
    (("report", "-m", MODEL, "-g", GPU, "--weight-dtype", "int3"), "--weight-dtype"),
])
def test_bad_input_exits_2_with_one_line_naming_the_flag(args, field):
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert field in one_line_error(r)


@pytest.mark.parametrize("args", [
    ("size", "-m", "llama-3.1-70b", "-g", "l4", "--tp", "1"),  # without --tp the fleet engine picks TP 8
    ("size", "-m", MODEL, "--tpot-slo-ms", "0.5"),  # no GPU of the catalog meets it
    ("report", "-m", MODEL, "-g", GPU, "--tpot-slo-ms", "0.5"),
    ("sweep", "-m", MODEL, "-g", GPU, "--tp", "1", "--tpot-slo-ms", "0.5"),
    ("simulate", "-m", "llama-3.1-70b", "-g", "l4", "--rate", "1", "-n", "10"),
])
def test_an_infeasible_plan_exits_1_with_one_line(args):
    r = run(*args)
    assert r.exit_code == 1, r.output
    assert one_line_error(r).startswith("error: infeasible: ")


def test_validate_prints_each_value_in_its_unit():
    """ms, tokens and GiB in separate columns, never one e-notation column of mixed units."""
    r = run("validate", str(ROOT / "calibration" / "data" / "h200-validation.csv"))
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "measured ms" in out and "predicted ms" in out and "measured tokens" in out
    assert "e-0" not in out and "e+0" not in out
    rows = json.loads(run("validate", str(ROOT / "calibration" / "data" / "h200-validation.csv"), "--json").stdout)
    kv = next(x for x in rows["rows"] if x["metric"] == "kv_cache_tokens")
    assert f"{float(kv['measured']):,.0f}" in out


def test_readme_lists_the_vocabulary():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for flag in ("--prompt-tokens", "--output-tokens", "--num-gpus", "--gpu", "--ttft-slo-ms", "--tpot-slo-ms",
                 "--rate", "--users", "--think-time-s", "--csv", "--profile"):
        assert f"`{flag}" in readme, flag
