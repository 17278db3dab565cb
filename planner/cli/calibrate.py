"""``planner calibrate`` and ``planner validate`` (command functions; :mod:`planner.cli.app` registers them).

``calibrate`` imports calibration (torch, vllm) lazily, inside the command, so the rest of the CLI
works on a laptop.  ``validate`` is pure planner."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.cli.common import JsonOpt, cli_errors, emit_json, error_exit, finite, table
from planner.cli.options import (
    DEFAULT_OUTPUT_TOKENS,
    DEFAULT_PROMPT_TOKENS,
    P99_MEASURED,
    GpuOpt,
    ModelOpt,
    TpOpt,
    slo_options,
)
from planner.units import MS, GiB

MeasuredTtftOpt, MeasuredTpotOpt = slo_options(P99_MEASURED, required=True)


@cli_errors
def calibrate_cmd(
    gpu: Annotated[str, typer.Option("--gpu", "-g", help="Catalog GPU id of this machine's GPU, e.g. h200-sxm.")],
    model: Annotated[list[str], typer.Option("--model", "-m", help=(
        "MODEL[:KV]\\[@WEIGHTS][+mixed][+serve] to fit on (repeatable), e.g. llama-3.1-8b@fp8 (fp8 weights), "
        "mistral-7b-v0.3:fp8 (fp8 KV cache), qwen3-30b-a3b (MoE), +mixed adds mixed prefill/decode steps, +serve "
        "then serves the model with every engine step timed (the launch floor of an eager step under vllm serve, "
        "and of a prompt step inside the CUDA graphs, is this host CPU's; about 3 more minutes).  Default: one "
        "engine per kernel family — dense bf16 (with mixed steps, served), MoE (served), fp8 weights, int4 weights, "
        "fp8 KV — about 16 minutes of GPU time on an H200 "
        "(each engine: start 50-95 s + 60 s of probes; calibration/data/README.md has the measured times)."))] = None,
    validate_model: Annotated[list[str], typer.Option(
        "--validate-model", help="Held-out model(s) measured for validation, not fitted (repeatable).")] = None,
    fp8_kv_model: Annotated[list[str], typer.Option(
        "--fp8-kv-model", help="Held-out model(s) measured with an fp8 KV cache (repeatable).")] = None,
    fit_kv_dtype: Annotated[list[str], typer.Option(
        "--fit-kv-dtype", help="KV dtypes of the fit engines: auto (bf16) and/or fp8.")] = None,
    tensor_parallel: Annotated[int, typer.Option("--tp", min=1, help=(
        "vLLM tensor_parallel_size of every engine; fit with one model that needs TP and one that fits on "
        "one GPU to separate the all-reduce cost (NVLink multicast is kept off)."))] = 1,
    model_dir: Annotated[list[str], typer.Option(
        "--model-dir", help="ID=PATH: measure that catalog model from a local directory with real weights "
                            "instead of dummy weights (repeatable).")] = None,
    quick: Annotated[bool, typer.Option("--quick/--full", help=(
        "The quick grid per engine (7 prompt lengths, 10 decode points, mixed steps), or the full one "
        "(14 prompt lengths, 24 decode points; about twice the probe time)."))] = True,
    resume: Annotated[bool, typer.Option("--resume", help=(
        "Continue the raw files already in --out (any day): skip every point measured in any of them."))] = False,
    force: Annotated[bool, typer.Option("--force", help="Run even if the device name does not match --gpu.")] = False,
    out: Annotated[Path, typer.Option("--out", help=(
        "Folder for the raw JSONL, logs and the fitted profile <gpu>-vllm-<version>.yaml (a relative path is "
        "taken from the current directory; calibration/profiles/ is never written: copy the profile there to make "
        "it the GPU's default).  One calibrate at a time per folder."))] = Path("calibration/data"),
    overwrite_profile: Annotated[bool, typer.Option(
        "--overwrite-profile", help="Replace a profile already in --out (otherwise calibrate refuses to start).")] = False,
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
        from calibration.run import DEFAULT_PLAN

        summary = calibrate(gpu, list(model or DEFAULT_PLAN), out, validate_models=list(validate_model or []),
                            fp8_kv_models=list(fp8_kv_model or []), fit_kv_dtypes=tuple(fit_kv_dtype or ["auto"]),
                            quick=quick, resume=resume, force=force, time_budget_s=time_budget_s,
                            tensor_parallel=tensor_parallel, model_dirs=dirs, overwrite_profile=overwrite_profile)
    except CalibrationError as err:
        flag, sep, reason = str(err).partition(": ")
        if sep and flag.startswith("--"):  # the error names its flag: say it once
            raise error_exit(flag, reason) from None
        raise error_exit("calibrate", str(err)) from None
    if json_out:
        emit_json(summary)
    else:
        typer.echo(f"raw records: {summary['raw']}\nprofile: {summary.get('profile')}\n"
                   f"GPU time: {summary['elapsed_s']:.0f} s")


#: validate's units: each metric's values are shown in its own unit, in columns that name it.
UNITS = {"ms": (MS, "{:,.3f}"), "tokens": (1.0, "{:,.0f}"), "GiB": (GiB, "{:,.2f}")}
METRIC_UNIT = {"prefill_s": "ms", "decode_step_s": "ms", "mixed_step_s": "ms", "kv_cache_tokens": "tokens",
               "weights_bytes": "GiB"}


@cli_errors
def validate_cmd(
    measurements: Annotated[Path, typer.Argument(help="CSV of measured points (see planner/validate.py).")],
    profile: Annotated[str, typer.Option("--profile", help=(
        "Latency model: 'auto' (per row, the committed profile for its GPU and engine version; a GPU without one "
        "borrows the newest profile, 'transferred'), 'none' (the ideal roofline) or a profile YAML path."))] = "auto",
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
    for unit, (scale, fmt) in UNITS.items():
        rows = [[r["model"], r["kv_cache_dtype"] or "auto", r["metric"], r["batch_size"], r["prompt_tokens"],
                 fmt.format(float(r["measured"]) / scale), fmt.format(r["predicted"] / scale),
                 f"{r['error_pct']:+.1f}%", r["calibration_mode"]]
                for r in result["rows"] if METRIC_UNIT.get(r["metric"], "ms") == unit]
        if rows:
            table(["model", "kv", "metric", "batch", "prompt", f"measured {unit}", f"predicted {unit}", "error",
                   "mode"], rows)
            typer.echo("")
    table(["metric", "n", "median |error|", "p90 |error|"],
          [[k, v["n"], f"{v['median_abs_error_pct']:.1f}%", f"{v['p90_abs_error_pct']:.1f}%"]
           for k, v in result["summary"].items()])


@cli_errors
def verify_cmd(
    model: ModelOpt,
    gpu: GpuOpt,
    ttft_slo_ms: MeasuredTtftOpt,
    tpot_slo_ms: MeasuredTpotOpt,
    tp: TpOpt = 1,
    weight_dtype: Annotated[str, typer.Option("--weight-dtype", help="bf16 or fp8 (online).")] = "bf16",
    kv_dtype: Annotated[str, typer.Option("--kv-dtype", help="bf16 or fp8.")] = "bf16",
    prompt_tokens: Annotated[int, typer.Option("--prompt-tokens", min=1,
                                               help="Prompt tokens per request.")] = DEFAULT_PROMPT_TOKENS,
    output_tokens: Annotated[int, typer.Option("--output-tokens", min=1,
                                               help="Generated tokens per request.")] = DEFAULT_OUTPUT_TOKENS,
    duration_s: Annotated[float, typer.Option("--duration-s", callback=finite("--duration-s"),
                                              help="Seconds of arrivals per load run.")] = 30.0,
    out: Annotated[Path, typer.Option("--out", help="Folder for the server log, bench results and verify.json.")] = Path(
        "verify-out"),
    port: Annotated[int, typer.Option("--port", min=1024, max=65535, help="Port of the vllm serve it starts.")] = 8000,
    json_out: JsonOpt = False,
) -> None:
    """Predict, then verify on this GPU: boot the planned vllm serve (dummy weights), check its KV pool, drive
    vllm bench serve at 50 % of the predicted knee and at the knee, and report predicted vs measured."""
    try:
        import vllm  # noqa: F401 - only to say clearly what is missing

        from calibration.verify import verify
    except ImportError as err:
        raise error_exit("verify", f"needs the calibrate extra and a GPU (pip install '.[calibrate]'): {err}") from None
    summary = verify(model, gpu, ttft_p99_s=ttft_slo_ms * MS, tpot_p99_s=tpot_slo_ms * MS, out=out, tp=tp,
                     weight_dtype=weight_dtype, kv_dtype=kv_dtype, prompt_tokens=prompt_tokens,
                     output_tokens=output_tokens, duration_s=duration_s, port=port)
    if json_out:
        emit_json(summary)
        return
    typer.echo("\n".join(verify_lines(summary)))
    typer.echo(f"records: {out}")


def verify_lines(summary: dict) -> list[str]:
    """``planner verify``'s report in text: the predicted knee, then per load run whether the targets held in
    reality, the prediction's errors and whether its queue kept growing (:func:`planner.cli.replay.capacity_line`)."""
    from planner.cli.replay import capacity_line

    lines = [f"{summary['model']} on {summary['gpu']}: predicted knee {summary['predicted_knee_per_s']:.2f} req/s "
             f"(saturation {summary['predicted_saturation_per_s']:.2f}, {summary['confidence']} confidence)"]
    for name, r in summary["runs"].items():
        if "error" in r:
            lines.append(f"  {name} at {r['rate_per_s']:.2f} req/s: {r['error']}")
            continue
        e = r["error_pct"]
        lines.append(f"  {name} at {r['rate_per_s']:.2f} req/s: targets met in reality: "
                     f"{r['meets_targets_measured']}; error TTFT p50 {e['ttft_p50_s']:+.1f}%, p99 "
                     f"{e['ttft_p99_s']:+.1f}%, TPOT p50 {e['tpot_p50_s']:+.1f}%, throughput "
                     f"{e['output_tokens_per_s']:+.1f}%")
        lines.append("    " + capacity_line(r["measured"], r["predicted"]))
    return lines
