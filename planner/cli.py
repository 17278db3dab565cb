"""``planner`` command line: models, gpus, size, sweep, import-hf (calibrate/validate/simulate plug in).

Exit codes: 0 ok, 2 bad input (one line ``error: <field>: <reason>`` on stderr), 1 internal error.
Every command takes ``--json`` for machine-readable output on stdout.

Other command modules register on the same app::

    from planner.cli import app, cli_errors

    @app.command()
    @cli_errors
    def calibrate(...): ...

and are imported at the bottom of this file.
"""

from __future__ import annotations

import functools
import importlib
import json
import math
import re
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from typer.core import TyperGroup

try:  # typer ≥ 0.20 vendors its own click; older versions use click itself
    from typer._click import exceptions as _cx
except ImportError:  # pragma: no cover
    from click import exceptions as _cx

from planner.units import BILLION, GB, MS, TB_PER_S, TFLOPS, fmt_gb, fmt_gib, fmt_int, fmt_usd

# ------------------------------------------------------------------------------------ error helpers


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", str(text)).strip()


def error_exit(field: str | None, reason: str, code: int = 2) -> typer.Exit:
    """Print ``error: <field>: <reason>`` (one line) on stderr; return the Exit to raise."""
    msg = f"{field}: {reason}" if field else reason
    typer.echo(f"error: {_one_line(msg)}", err=True)
    return typer.Exit(code)


def cli_errors(fn):
    """Decorator for command functions: SpecError / ValueError / pydantic ValidationError become the
    exit-2 one-liner; any other exception becomes ``internal error: ...`` with exit 1."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from planner.catalog import format_validation_error

        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, _cx.ClickException):
            raise
        except ValidationError as err:
            raise error_exit(None, format_validation_error(err)) from None
        except ValueError as err:  # SpecError is a ValueError
            raise error_exit(None, str(err)) from None
        except FileNotFoundError as err:
            raise error_exit(err.filename, "no such file") from None
        except Exception as err:  # noqa: BLE001 - the CLI's last line of defence
            typer.echo(f"internal error: {type(err).__name__}: {_one_line(err)}", err=True)
            raise typer.Exit(1) from None

    return wrapper


class _OneLineErrorGroup(TyperGroup):
    """Click usage errors (unknown flag, bad value, missing option) as one line naming the flag."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var,
                              standalone_mode=False, **extra)
        except _cx.UsageError as e:
            if not standalone_mode:
                raise
            if type(e).__name__ == "NoArgsIsHelpError":  # bare `planner`: show the help
                e.show()
                sys.exit(0)
            field = None
            param = getattr(e, "param", None)
            if param is not None:
                field = (param.opts[0] if getattr(param, "opts", None) else param.name) or None
            elif isinstance(e, _cx.NoSuchOption):
                field = e.option_name
                e.message = "no such option" + (
                    f" (did you mean {', '.join(e.possibilities)}?)" if getattr(e, "possibilities", None) else "")
            reason = e.message if (field and e.message) else e.format_message()
            if isinstance(e, _cx.MissingParameter):
                reason = "missing (required)"
            typer.echo(f"error: {_one_line(f'{field}: {reason}' if field else reason)}", err=True)
            sys.exit(2)
        except _cx.ClickException as e:
            if not standalone_mode:
                raise
            typer.echo(f"error: {_one_line(e.format_message())}", err=True)
            sys.exit(e.exit_code)
        except typer.Abort:
            if not standalone_mode:
                raise
            typer.echo("aborted", err=True)
            sys.exit(1)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    name="planner",
    help="LLM inference capacity planner: memory, latency, throughput and cost of serving a model.",
    cls=_OneLineErrorGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _finite(name: str, positive: bool = True, allow_zero: bool = False):
    """A typer callback rejecting nan/inf (and ≤ 0 unless allowed) with the flag's name."""

    def check(value):
        if value is None:
            return value
        if not math.isfinite(value) or (positive and (value < 0 or (value == 0 and not allow_zero))):
            raise typer.BadParameter(f"must be a finite number {'≥' if allow_zero else '>'} 0, got {value}",
                                     param_hint=name)
        return value

    return check


def _emit_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=2, allow_nan=False, default=str))


# --------------------------------------------------------------------------------- shared options

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout instead of a table.")]


_FLAG_OF_FIELD = {
    "prompt_tokens": "--context",
    "output_tokens": "--output-tokens",
    "ttft_slo_s": "--ttft-slo-ms",
    "tpot_slo_s": "--tpot-slo-ms",
    "request_rate_per_s": "--rate",
    "concurrency": "--concurrency",
    "num_gpus": "--gpus",
    "tensor_parallel": "--tp",
    "pipeline_parallel": "--pp",
    "weight_dtype": "--weight-dtype",
    "kv_cache_dtype": "--kv-dtype",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "max_num_seqs": "--max-num-seqs",
}


def _build(make, data: dict, root_flag: str):
    """Validate CLI values as a spec, ``make(**data)`` (a spec class, or a constructor such as
    ``Deployment.for_gpu`` with its GPU bound); errors name the flag (``--tp: ...``)."""
    try:
        return make(**data)
    except ValidationError as err:
        e = err.errors()[0]
        loc = [str(x) for x in e["loc"]]
        field = _FLAG_OF_FIELD.get(loc[0], loc[0]) if loc else root_flag
        msg = e["msg"].removeprefix("Value error, ")
        raise error_exit(field, msg) from None


# ------------------------------------------------------------------------------------------ models


@app.command("models")
@cli_errors
def models_cmd(json_out: JsonOpt = False) -> None:
    """List the model catalog (models/*.yaml)."""
    from planner import catalog
    from planner.memory import kv_bytes_per_token
    from planner.specs import count_params

    rows = []
    for m in catalog.models().values():
        p = count_params(m)
        rows.append({
            "id": m.id,
            "name": m.name,
            "total_params": p.total,
            "active_params": p.active,
            "num_layers": m.num_layers,
            "attention_kind": m.attention.kind,
            "kv_bytes_per_token_bf16": kv_bytes_per_token(m, "bf16"),
            "max_context_tokens": m.max_context_tokens,
            "moe": m.is_moe,
            "quality_benchmark": m.quality.benchmark if m.quality else None,
            "quality_score": m.quality.score if m.quality else None,
        })
    if json_out:
        _emit_json(rows)
        return
    _table(
        ["id", "params", "active", "layers", "attn", "KV B/token (bf16)", "max ctx", "quality"],
        [[r["id"], f"{r['total_params'] / BILLION:,.1f}B", f"{r['active_params'] / BILLION:,.1f}B", r["num_layers"],
          r["attention_kind"], fmt_int(r["kv_bytes_per_token_bf16"]), fmt_int(r["max_context_tokens"]),
          f"{r['quality_score']:.1f} {r['quality_benchmark']}" if r["quality_score"] is not None else "—"]
         for r in rows],
    )


# -------------------------------------------------------------------------------------------- gpus


@app.command("gpus")
@cli_errors
def gpus_cmd(json_out: JsonOpt = False) -> None:
    """List the GPU catalog (hardware/*.yaml) with prices and their sources."""
    from planner import catalog

    rows = []
    for g in catalog.gpus().values():
        rows.append({
            "id": g.id,
            "name": g.name,
            "memory_bytes": g.memory_bytes,
            "memory_marketed": g.memory_marketed,
            "hbm_bandwidth_bytes_per_s": g.hbm_bandwidth_bytes_per_s,
            "peak_flops_per_s": dict(g.peak_flops_per_s),
            "interconnect": g.interconnect,
            "interconnect_bandwidth_bytes_per_s": g.interconnect_bandwidth_bytes_per_s,
            "max_gpus_per_node": g.max_gpus_per_node,
            "price_usd_per_hour": g.price_usd_per_hour,
            "price_source": g.price_source.url,
            "price_date": g.price_source.date,
        })
    if json_out:
        _emit_json(rows)
        return
    _table(
        ["id", "memory (GB | GiB)", "HBM TB/s", "bf16 TFLOP/s", "fp8 TFLOP/s", "link GB/s", "per node", "$/GPU-h",
         "price date"],
        [[r["id"], f"{fmt_gb(r['memory_bytes'])} | {fmt_gib(r['memory_bytes'])}",
          f"{r['hbm_bandwidth_bytes_per_s'] / TB_PER_S:.2f}",
          f"{r['peak_flops_per_s'].get('bf16', r['peak_flops_per_s'].get('fp16', 0)) / TFLOPS:,.0f}",
          f"{r['peak_flops_per_s']['fp8'] / TFLOPS:,.0f}" if "fp8" in r["peak_flops_per_s"] else "—",
          f"{r['interconnect_bandwidth_bytes_per_s'] / GB:,.0f}", r["max_gpus_per_node"],
          fmt_usd(r["price_usd_per_hour"]), r["price_date"]] for r in rows],
    )


# -------------------------------------------------------------------------------------------- size

WeightDtypeOpt = Annotated[str, typer.Option("--weight-dtype", help="bf16, fp16, fp8, int8, int4, nf4, mxfp4.")]
KvDtypeOpt = Annotated[str, typer.Option("--kv-dtype", help="KV-cache dtype: bf16, fp16, fp8.")]
ContextOpt = Annotated[int, typer.Option("--context", min=1, help="Prompt (input) tokens per request.")]
OutputOpt = Annotated[int, typer.Option("--output-tokens", min=1, help="Generated tokens per request.")]
TtftOpt = Annotated[float | None, typer.Option("--ttft-slo-ms", callback=_finite("--ttft-slo-ms"),
                                               help="Time-to-first-token target, milliseconds.")]
TpotOpt = Annotated[float | None, typer.Option("--tpot-slo-ms", callback=_finite("--tpot-slo-ms"),
                                               help="Time-per-output-token target, milliseconds.")]
ProfileOpt = Annotated[str, typer.Option(
    "--profile", help="Calibration: 'auto' (the committed profile for the GPU, else the ideal roofline), "
    "'none' (ideal roofline) or a profile YAML path.")]


@app.command("size")
@cli_errors
def size_cmd(
    model: Annotated[str, typer.Option("--model", "-m", help="Model id (see `planner models`).")],
    gpu: Annotated[str, typer.Option("--gpu", "-g", help="GPU id (see `planner gpus`).")],
    gpus: Annotated[int | None, typer.Option("--gpus", min=1, help="GPUs in the deployment (default TP × PP).")] = None,
    tp: Annotated[int, typer.Option("--tp", min=1, help="Tensor-parallel GPUs per replica.")] = 1,
    pp: Annotated[int, typer.Option("--pp", min=1, help="Pipeline-parallel stages per replica.")] = 1,
    weight_dtype: WeightDtypeOpt = "bf16",
    kv_dtype: KvDtypeOpt = "bf16",
    context: ContextOpt = 4096,
    output_tokens: OutputOpt = 512,
    ttft_slo_ms: TtftOpt = None,
    tpot_slo_ms: TpotOpt = None,
    rate: Annotated[float | None, typer.Option("--rate", callback=_finite("--rate"),
                                               help="Target request rate, requests/s (sizes the fleet).")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", min=1,
                                                    help="Target requests in flight (sizes the fleet).")] = None,
    gpu_memory_utilization: Annotated[float, typer.Option(
        "--gpu-memory-utilization", callback=_finite("--gpu-memory-utilization"),
        help="Fraction of GPU memory vLLM may use (0-1].")] = 0.92,
    max_num_batched_tokens: Annotated[int | None, typer.Option(
        "--max-num-batched-tokens", min=1,
        help="Chunked-prefill token budget per step (default: vLLM serve's for the GPU: 8192, or 2048 "
             "below 70 GiB and on A100).")] = None,
    max_num_seqs: Annotated[int | None, typer.Option(
        "--max-num-seqs", min=1, help="Max sequences per step (default: vLLM serve's: 1024, or 256).")] = None,
    price_usd_per_hour: Annotated[float | None, typer.Option(
        "--price-usd-per-hour", callback=_finite("--price-usd-per-hour"),
        help="Override the catalog price per GPU-hour, USD.")] = None,
    profile: ProfileOpt = "auto",
    json_out: JsonOpt = False,
) -> None:
    """Size one deployment: memory breakdown, max concurrency, TTFT, TPOT, throughput, $/Mtok, bound."""
    from planner import catalog
    from planner.plan import plan
    from planner.report import report_text
    from planner.specs import Deployment, Source, Workload

    m = catalog.model(model)
    g = catalog.gpu(gpu)
    if price_usd_per_hour is not None:
        sources = dict(g.sources)
        sources["price_usd_per_hour"] = Source(url="--price-usd-per-hour (command line)",
                                               date=_today(), note="user override")
        g = g.model_copy(update={"price_usd_per_hour": price_usd_per_hour, "sources": sources})
    dep = _build(functools.partial(Deployment.for_gpu, g), {
        "num_gpus": gpus if gpus is not None else tp * pp, "tensor_parallel": tp,
        "pipeline_parallel": pp, "weight_dtype": weight_dtype, "kv_cache_dtype": kv_dtype,
        "gpu_memory_utilization": gpu_memory_utilization,
        **({"max_num_batched_tokens": max_num_batched_tokens} if max_num_batched_tokens is not None else {}),
        **({"max_num_seqs": max_num_seqs} if max_num_seqs is not None else {}),
    }, "--gpus")
    wl = _build(Workload, {
        "prompt_tokens": context, "output_tokens": output_tokens, "concurrency": concurrency,
        "request_rate_per_s": rate,
        "ttft_slo_s": ttft_slo_ms * MS if ttft_slo_ms is not None else None,
        "tpot_slo_s": tpot_slo_ms * MS if tpot_slo_ms is not None else None,
    }, "--context")
    prof, mode_line = catalog.resolve_profile(profile, g.id, field="--profile")
    report = plan(m, g, dep, wl, prof)
    if json_out:
        d = report.to_dict()
        d["calibration_note"] = mode_line
        _emit_json(d)
        return
    typer.echo(report_text(report, mode_line))


def _today() -> str:
    import datetime

    return datetime.date.today().isoformat()


# ------------------------------------------------------------------------------------------- sweep


@app.command("sweep")
@cli_errors
def sweep_cmd(
    model: Annotated[str, typer.Option("--model", "-m", help="Model id (see `planner models`).")],
    gpu: Annotated[list[str] | None, typer.Option("--gpu", "-g", help="GPU id; repeat for several (default all).")] = None,
    weight_dtype: Annotated[list[str] | None, typer.Option("--weight-dtype", help="Repeatable (default all).")] = None,
    kv_dtype: Annotated[list[str] | None, typer.Option("--kv-dtype", help="Repeatable (default bf16, fp8).")] = None,
    tp: Annotated[list[int] | None, typer.Option("--tp", min=1, help="Repeatable (default 1, 2, 4, 8).")] = None,
    context: Annotated[list[int] | None, typer.Option("--context", min=1, help="Prompt tokens; repeatable.")] = None,
    batch: Annotated[list[int] | None, typer.Option("--batch", min=1, help="Batch sizes; repeatable.")] = None,
    output_tokens: OutputOpt = 512,
    ttft_slo_ms: TtftOpt = None,
    tpot_slo_ms: TpotOpt = None,
    profile: Annotated[str, typer.Option("--profile", help="'auto' (per-GPU committed profile) or 'none'.")] = "auto",
    csv: Annotated[Path | None, typer.Option("--csv", help="Write every ranked row to this CSV file.")] = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Rows to print (and to emit with --json).")] = 20,
    only_feasible: Annotated[bool, typer.Option("--only-feasible", help="Keep rows that meet the SLO only.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Rank every GPU × weight dtype × KV dtype × TP × context × batch configuration by $/M output tokens.

    Ranked by the all-in cost (all GPU time, prefill included, over the generated tokens); rows that
    meet the SLO come first.  With --profile auto each GPU uses its committed calibration profile
    when it has one (the 'mode' column says which), so ideal and calibrated rows can be mixed.
    """
    from planner import catalog
    from planner.report import write_csv
    from planner.specs import Workload
    from planner.sweep import sweep

    m = catalog.model(model)
    gpus = [catalog.gpu(x) for x in gpu] if gpu else None
    contexts = list(context) if context else [4096]
    wl = _build(Workload, {
        "prompt_tokens": contexts[0], "output_tokens": output_tokens,
        "ttft_slo_s": ttft_slo_ms * MS if ttft_slo_ms is not None else None,
        "tpot_slo_s": tpot_slo_ms * MS if tpot_slo_ms is not None else None,
    }, "--context")
    if profile not in ("auto", "none"):
        raise error_exit("--profile", f"expected auto or none, got '{profile}'")
    df = sweep(m, wl, gpus=gpus, weight_dtypes=weight_dtype or None, kv_dtypes=kv_dtype or None,
               tensor_parallels=tp or None, contexts=contexts, batch_sizes=batch or None,
               profile_for=lambda g: catalog.resolve_profile(profile, g)[0])
    if only_feasible:
        df = df[df["meets_slo"]].reset_index(drop=True)
    if csv is not None:
        write_csv(df, csv)
    head = df.head(top)
    if json_out:
        from planner.report import frame_json

        typer.echo(frame_json(head))
        return
    typer.echo(f"{len(df):,} configurations of {m.name}; {int(df['meets_slo'].sum()):,} meet the SLO"
               + (f"; written to {csv}" if csv else ""))
    _table(
        ["#", "gpu", "w", "kv", "TP", "prompt", "batch", "fits", "SLO", "TTFT ms", "TPOT ms", "tok/s/GPU",
         "$/M out (all-in)", "mode"],
        [[int(r.rank), r.gpu_id, r.weight_dtype, r.kv_cache_dtype, int(r.tensor_parallel), f"{r.prompt_tokens:,}",
          int(r.batch_size), "y" if r.fits else "n", "y" if r.meets_slo else "n", f"{r.ttft_s / MS:,.1f}",
          f"{r.tpot_s / MS:,.2f}", f"{r.output_tokens_per_s_per_gpu:,.0f}",
          f"{r.cost_usd_per_million_output_tokens_all_in:,.4f}", r.calibration_mode] for r in head.itertuples()],
    )


# --------------------------------------------------------------------------------------- import-hf


@app.command("import-hf")
@cli_errors
def import_hf_cmd(
    config: Annotated[Path, typer.Argument(help="Path to a Hugging Face config.json (no network access).")],
    model_id: Annotated[str | None, typer.Option("--id", help="Catalog id (default: from the config's name).")] = None,
    name: Annotated[str | None, typer.Option("--name", help="Display name.")] = None,
    params: Annotated[float | None, typer.Option("--params", callback=_finite("--params"),
                                                 help="Published total parameter count (e.g. 7.248e9).")] = None,
    hf_repo: Annotated[str | None, typer.Option("--hf-repo", help="Hub repo id, e.g. mistralai/Mistral-7B-v0.3.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the YAML here (default: print it).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Turn a Hugging Face config.json into a models/<id>.yaml entry."""
    from planner.hf_import import hf_config_to_model_dict, model_dict_to_yaml

    try:
        cfg = json.loads(Path(config).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error_exit(str(config), "no such file") from None
    except json.JSONDecodeError as err:
        raise error_exit(Path(config).name, f"malformed JSON at line {err.lineno}, column {err.colno}: {err.msg}") from None
    if model_id is None:
        raw = cfg.get("_name_or_path", "") if isinstance(cfg, dict) else ""
        model_id = re.sub(r"[^a-z0-9.\-]+", "-", str(raw).rstrip("/").split("/")[-1].lower()).strip("-.")
        if not model_id:
            raise error_exit("--id", "cannot derive an id from config.json (no _name_or_path); pass --id")
    d = hf_config_to_model_dict(cfg, model_id, name, params, hf_repo=hf_repo)
    text = model_dict_to_yaml(d)
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text, encoding="utf-8")
    if json_out:
        _emit_json(d)
    elif out is not None:
        typer.echo(f"wrote {out}")
    else:
        typer.echo(text, nl=False)


# ------------------------------------------------------------------------------------------ tables


def _table(headers: list[str], rows: list[list]) -> None:
    cells = [[str(x) for x in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(vals):
        return "  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(vals, widths))).rstrip()

    typer.echo(line(headers))
    typer.echo("  ".join("-" * w for w in widths))
    for r in cells:
        typer.echo(line(r))


def main() -> None:  # pragma: no cover - console entry point alias
    app()


for _mod in ("planner.cli_calibrate", "planner.cli_simulate"):
    try:
        importlib.import_module(_mod)  # these modules add commands to `app`
    except ModuleNotFoundError as e:
        if e.name != _mod:
            raise

# --- `planner deploy` (issue #11): planner/cli_deploy.py registers on `app` when imported.  Like the modules
# above it takes its shared helpers from this module (a cli <-> module cycle) until they move to cli_common.
for _mod in ("planner.cli_deploy",):
    importlib.import_module(_mod)

if __name__ == "__main__":  # pragma: no cover - `python -m planner.cli`: run the imported module's app,
    from planner.cli import app as _app  # which is the one the plug-in modules registered on

    _app()
