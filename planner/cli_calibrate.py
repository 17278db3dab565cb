"""``planner calibrate`` and ``planner validate`` (command functions; :mod:`planner.cli` registers them).

``calibrate`` imports calibration (torch, vllm) lazily, inside the command, so the rest of the CLI
works on a laptop.  ``validate`` is pure planner."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.cli_common import JsonOpt, cli_errors, emit_json, error_exit, table


@cli_errors
def calibrate_cmd(
    gpu: Annotated[str, typer.Option("--gpu", help="Catalog GPU id of this machine's GPU, e.g. h200-sxm.")],
    model: Annotated[list[str], typer.Option("--model", help="Catalog model(s) to fit on (repeatable).")] = None,
    validate_model: Annotated[list[str], typer.Option(
        "--validate-model", help="Held-out model(s) measured for validation, not fitted (repeatable).")] = None,
    fp8_kv_model: Annotated[list[str], typer.Option(
        "--fp8-kv-model", help="Held-out model(s) measured with an fp8 KV cache (repeatable).")] = None,
    fit_kv_dtype: Annotated[list[str], typer.Option(
        "--fit-kv-dtype", help="KV dtypes of the fit engines: auto (bf16) and/or fp8.")] = None,
    tensor_parallel: Annotated[int, typer.Option("--tensor-parallel", min=1, help=(
        "vLLM tensor_parallel_size of every engine; fit with one model that needs TP and one that fits on "
        "one GPU to separate the all-reduce cost (NVLink multicast is kept off)."))] = 1,
    model_dir: Annotated[list[str], typer.Option(
        "--model-dir", help="ID=PATH: measure that catalog model from a local directory with real weights "
                            "instead of dummy weights (repeatable).")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="A smaller sweep (about 2 minutes per GPU).")] = False,
    resume: Annotated[bool, typer.Option("--resume", help="Continue a raw file: skip points already measured.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Run even if the device name does not match --gpu.")] = False,
    out: Annotated[Path, typer.Option("--out", help="Folder for the raw JSONL, logs and the fitted profile.")] = Path(
        "calibration/data"),
    time_budget_s: Annotated[float, typer.Option("--time-budget-s", min=30,
                                                 help="Probe time for all engines together, s.")] = 300.0,
    json_out: JsonOpt = False,
) -> None:
    """Measure this GPU with real vLLM probes (dummy weights) and fit a calibration profile."""
    try:
        from calibration.run import CalibrationError, calibrate, parse_model_dirs
    except ImportError as err:
        raise error_exit("calibrate", f"needs the calibrate extra (pip install '.[calibrate]'): {err}") from None
    try:
        dirs = parse_model_dirs(list(model_dir or []))
        summary = calibrate(gpu, list(model or ["mistral-7b-v0.3"]), out, validate_models=list(validate_model or []),
                            fp8_kv_models=list(fp8_kv_model or []), fit_kv_dtypes=tuple(fit_kv_dtype or ["auto"]),
                            quick=quick, resume=resume, force=force, time_budget_s=time_budget_s,
                            tensor_parallel=tensor_parallel, model_dirs=dirs)
    except CalibrationError as err:
        raise error_exit("calibrate", str(err)) from None
    if json_out:
        emit_json(summary)
    else:
        typer.echo(f"raw records: {summary['raw']}\nprofile: {summary.get('profile')}\n"
                   f"GPU time: {summary['elapsed_s']:.0f} s")


@cli_errors
def validate_cmd(
    measurements: Annotated[Path, typer.Argument(help="CSV of measured points (see planner/validate.py).")],
    profile: Annotated[str, typer.Option("--profile", help="auto (committed profile per GPU and engine "
                                         "version), none (ideal roofline) or a profile YAML path.")] = "auto",
    json_out: JsonOpt = False,
) -> None:
    """Compare the planner's predictions with measurements: signed % error per row, and per metric
    the median and p90 of |error|."""
    from planner.validate import choose_profile, read_measurements, validate

    chooser = choose_profile(profile, field="--profile")
    result = validate(read_measurements(measurements), chooser)
    if json_out:
        emit_json(result)
        return
    rows = [[r["model"], r["kv_cache_dtype"] or "auto", r["metric"], r["batch_size"], r["prompt_tokens"],
             f"{float(r['measured']):.6g}", f"{r['predicted']:.6g}", f"{r['error_pct']:+.1f}%", r["calibration_mode"]]
            for r in result["rows"]]
    table(["model", "kv", "metric", "batch", "prompt", "measured", "predicted", "error", "mode"], rows)
    typer.echo("")
    table(["metric", "n", "median |error|", "p90 |error|"],
          [[k, v["n"], f"{v['median_abs_error_pct']:.1f}%", f"{v['p90_abs_error_pct']:.1f}%"]
           for k, v in result["summary"].items()])
