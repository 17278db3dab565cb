"""The `planner` CLI through typer's CliRunner (and one real subprocess for PLANNER_DATA_DIR)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from planner.io import catalog
from planner.cli.app import app
from planner.sweep import SWEEP_COLUMNS

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()

MODEL = "mistral-7b-v0.3"
GPU = "h200-sxm"


def run(*args: str):
    return runner.invoke(app, list(args))


def _err_line(result) -> str:
    err = result.stderr.strip()
    assert err.count("\n") == 0, f"more than one line on stderr: {err!r}"
    assert err.startswith("error: "), err
    return err


def test_help_everywhere():
    for cmd in ([], ["size"], ["sweep"], ["models"], ["gpus"], ["import-hf"]):
        r = run(*cmd, "--help")
        assert r.exit_code == 0, (cmd, r.output)
        assert "--json" in r.output or cmd == []


def test_models_and_gpus_json():
    r = run("models", "--json")
    assert r.exit_code == 0
    rows = json.loads(r.stdout)
    assert MODEL in [x["id"] for x in rows]
    assert next(x for x in rows if x["id"] == MODEL)["kv_bytes_per_token_bf16"] == 131_072
    r = run("gpus", "--json")
    assert r.exit_code == 0
    gpus = json.loads(r.stdout)
    assert all(g["price_source"] and g["price_date"] for g in gpus)
    assert run("models").exit_code == 0 and run("gpus").exit_code == 0


def test_size_prints_a_coherent_plan():
    r = run("size", "--model", MODEL, "--gpu", GPU, "--prompt-tokens", "4096", "--profile", "none")
    assert r.exit_code == 0, r.output
    out = r.stdout
    for text in ("GB (1e9 B)", "GiB (2^30 B)", "weights", "KV-cache pool", "Max concurrency", "TTFT", "TPOT",
                 "output tokens/s", "$ per million output tokens", "-bound", "Mode: ideal roofline"):
        assert text in out, text


def test_size_profile_auto_says_which_mode():
    """`--profile auto` uses the committed profile for the GPU when there is one, else the ideal roofline."""
    r = run("size", "--model", MODEL, "--gpu", GPU, "--json")
    d = json.loads(r.stdout)
    prof = catalog.profile_for(GPU)
    assert d["calibration_mode"] == (prof.mode if prof else "ideal")
    assert ("calibrated" in d["calibration_note"]) == bool(prof and prof.mode == "calibrated")


def test_size_json_parses_and_has_units():
    r = run("size", "--model", MODEL, "--gpu", GPU, "--prompt-tokens", "4096", "--output-tokens", "256",
            "--tpot-slo-ms", "30", "--ttft-slo-ms", "500", "--rate", "5", "--profile", "none", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["prompt_tokens"] == 4096 and d["output_tokens"] == 256
    assert d["tpot_slo_s"] == pytest.approx(0.030) and d["ttft_slo_s"] == pytest.approx(0.5)
    assert d["calibration_mode"] == "ideal" and "ideal roofline" in d["calibration_note"]
    assert d["weight_bytes_per_gpu"] == pytest.approx(14.5e9, rel=0.01)
    assert d["feasible"] is True and d["gpus_needed"] >= 1
    assert d["tpot_s"] <= 0.030


def test_size_price_override_and_profile_none():
    r = run("size", "-m", MODEL, "-g", GPU, "--price-usd-per-hour", "1.5", "--profile", "none", "--json")
    d = json.loads(r.stdout)
    assert d["price_usd_per_hour"] == 1.5 and "command line" in d["price_source"]


def test_size_infeasible_prints_the_plan_and_exits_1_with_one_line():
    """An infeasible plan is still printed (JSON on stdout), then exits 1 with `error: infeasible: <reason>`."""
    r = run("size", "-m", MODEL, "-g", GPU, "--tpot-slo-ms", "0.5", "--json")
    assert r.exit_code == 1
    d = json.loads(r.stdout)
    assert d["feasible"] is False and any("TPOT target" in x for x in d["reasons"])
    assert _err_line(r).startswith("error: infeasible: ") and "TPOT target" in _err_line(r)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--tp", "x"], "--tp"),
        (["--prompt-tokens", "0"], "--prompt-tokens"),
        (["--prompt-tokens", "-5"], "--prompt-tokens"),
        (["--ttft-slo-ms", "nan"], "--ttft-slo-ms"),
        (["--tpot-slo-ms", "inf"], "--tpot-slo-ms"),
        (["--rate", "-1"], "--rate"),
        (["--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization"),
        (["--weight-dtype", "int3"], "--weight-dtype"),
        (["--kv-dtype", "int4"], "--kv-dtype"),
        (["--tp", "4", "--num-gpus", "2"], "--num-gpus"),
        (["--bogus", "1"], "--bogus"),
        (["--profile", "/no/such/profile.yaml"], "--profile"),
    ],
)
def test_bad_flags_exit_2_with_one_line_naming_the_field(args, field):
    r = run("size", "--model", MODEL, "--gpu", GPU, *args)
    assert r.exit_code == 2, r.output
    assert field in _err_line(r)


def test_missing_required_flag():
    r = run("size", "--gpu", GPU)
    assert r.exit_code == 2
    assert "--model" in _err_line(r)


def test_unknown_ids_exit_2():
    r = run("size", "--model", "nope", "--gpu", GPU)
    assert r.exit_code == 2
    assert _err_line(r).startswith("error: model: unknown id 'nope'")
    r = run("size", "--model", MODEL, "--gpu", "nope")
    assert r.exit_code == 2 and "gpu: unknown id" in _err_line(r)


def test_sweep_writes_csv_with_expected_columns(tmp_path):
    out = tmp_path / "report.csv"
    r = run("sweep", "--model", MODEL, "--gpu", GPU, "--gpu", "h200-sxm", "--csv", str(out), "--top", "5",
            "--tpot-slo-ms", "40", "--profile", "none")
    assert r.exit_code == 0, r.output
    df = pd.read_csv(out)
    assert list(df.columns) == list(SWEEP_COLUMNS)
    assert len(df) > 5
    assert set(df["calibration_mode"]) == {"ideal"}
    assert df["price_source"].notna().all()
    # raw numbers, not formatted strings
    for col in ("ttft_s", "tpot_s", "weight_bytes_per_gpu", "cost_usd_per_million_output_tokens"):
        assert pd.api.types.is_float_dtype(df[col]), col


def test_sweep_json_top_n():
    r = run("sweep", "-m", MODEL, "-g", GPU, "--weight-dtype", "bf16", "--kv-dtype", "fp8", "--tp", "1",
            "--prompt-tokens", "1024", "--prompt-tokens", "8192", "--top", "3", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert len(rows) == 3 and rows[0]["rank"] == 1


def test_sweep_bad_dtype_exit_2():
    r = run("sweep", "-m", MODEL, "--weight-dtype", "int3")
    assert r.exit_code == 2 and "weight_dtype" in _err_line(r)


def test_import_hf(tmp_path):
    cfg = {
        "architectures": ["MistralForCausalLM"], "model_type": "mistral", "_name_or_path": "mistralai/Mistral-7B-v0.3",
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "head_dim": 128, "intermediate_size": 14336, "vocab_size": 32768, "max_position_embeddings": 32768,
        "rope_theta": 1000000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    out = tmp_path / "models" / "m7.yaml"
    r = run("import-hf", str(path), "--id", "m7", "--out", str(out))
    assert r.exit_code == 0, r.output
    assert out.exists() and "hidden_size: 4096" in out.read_text()
    r = run("import-hf", str(path), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["id"] == "mistral-7b-v0.3"


def test_import_hf_bad_inputs(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    r = run("import-hf", str(bad), "--id", "x")
    assert r.exit_code == 2 and "malformed JSON" in _err_line(r)
    r = run("import-hf", str(tmp_path / "missing.json"), "--id", "x")
    assert r.exit_code == 2 and "no such file" in _err_line(r)
    bad.write_text(json.dumps({"hidden_size": 64}))
    r = run("import-hf", str(bad), "--id", "x")
    assert r.exit_code == 2
    _err_line(r)


def _data_dir_with_bad_model(tmp_path: Path) -> Path:
    (tmp_path / "models").mkdir()
    (tmp_path / "hardware").mkdir()
    shutil.copy(ROOT / "hardware" / f"{GPU}.yaml", tmp_path / "hardware")
    (tmp_path / "models" / "broken.yaml").write_text("id: broken\nname: [unclosed\nhidden_size: 1\n")
    return tmp_path


def test_malformed_yaml_is_one_line_error(tmp_path, monkeypatch):
    """In-process: point the catalog at a temp data dir holding a malformed model YAML."""
    d = _data_dir_with_bad_model(tmp_path)
    monkeypatch.setattr(catalog, "MODELS_DIR", d / "models")
    monkeypatch.setattr(catalog, "HARDWARE_DIR", d / "hardware")
    catalog.models.cache_clear()
    catalog.gpus.cache_clear()
    try:
        r = run("models")
        assert r.exit_code == 2
        line = _err_line(r)
        assert "broken.yaml" in line and "malformed YAML" in line
    finally:
        catalog.models.cache_clear()
        catalog.gpus.cache_clear()


def test_malformed_yaml_in_planner_data_dir_subprocess(tmp_path):
    """The real thing: PLANNER_DATA_DIR set in the environment of a fresh `python -m planner.cli.app`."""
    d = _data_dir_with_bad_model(tmp_path)
    env = {**os.environ, "PLANNER_DATA_DIR": str(d), "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "planner.cli.app", "size", "--model", "broken", "--gpu", GPU],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    assert p.returncode == 2, p.stderr
    err = p.stderr.strip()
    assert err.count("\n") == 0 and err.startswith("error: ") and "broken.yaml" in err


def test_invalid_field_in_yaml_names_it(tmp_path, monkeypatch):
    d = _data_dir_with_bad_model(tmp_path)
    (d / "models" / "broken.yaml").unlink()
    text = (ROOT / "models" / f"{MODEL}.yaml").read_text().replace("hidden_size: 4096", "hidden_size: -4096")
    (d / "models" / f"{MODEL}.yaml").write_text(text)
    monkeypatch.setattr(catalog, "MODELS_DIR", d / "models")
    catalog.models.cache_clear()
    try:
        r = run("size", "-m", MODEL, "-g", GPU)
        assert r.exit_code == 2
        assert "hidden_size" in _err_line(r)
    finally:
        catalog.models.cache_clear()


def test_internal_error_exit_1(monkeypatch):
    import planner.plan

    def boom(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(planner.plan, "plan", boom)
    r = run("size", "-m", MODEL, "-g", GPU)
    assert r.exit_code == 1
    assert r.stderr.strip() == "internal error: RuntimeError: kaboom"
