"""``planner size`` (one deployment) and ``planner sweep`` (every configuration, ranked by $/Mtok).

Command functions only; :mod:`planner.cli` registers them on its app."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated

import typer

from planner.cli_common import (
    ContextOpt,
    GpuMemoryUtilizationOpt,
    GpuOpt,
    JsonOpt,
    KvDtypeOpt,
    ModelOpt,
    OutputOpt,
    ProfileOpt,
    TpOpt,
    TpotOpt,
    TtftOpt,
    WeightDtypeOpt,
    build,
    cli_errors,
    emit_json,
    error_exit,
    finite,
    table,
    today,
)
from planner.units import MS

# -------------------------------------------------------------------------------------------- size


@cli_errors
def size_cmd(
    model: ModelOpt,
    gpu: GpuOpt,
    gpus: Annotated[int | None, typer.Option("--gpus", min=1, help="GPUs in the deployment (default TP × PP).")] = None,
    tp: TpOpt = 1,
    pp: Annotated[int, typer.Option("--pp", min=1, help="Pipeline-parallel stages per replica.")] = 1,
    weight_dtype: WeightDtypeOpt = "bf16",
    kv_dtype: KvDtypeOpt = "bf16",
    context: ContextOpt = 4096,
    output_tokens: OutputOpt = 512,
    ttft_slo_ms: TtftOpt = None,
    tpot_slo_ms: TpotOpt = None,
    rate: Annotated[float | None, typer.Option("--rate", callback=finite("--rate"),
                                               help="Target request rate, requests/s (sizes the fleet).")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", min=1,
                                                    help="Target requests in flight (sizes the fleet).")] = None,
    gpu_memory_utilization: GpuMemoryUtilizationOpt = 0.92,
    max_num_batched_tokens: Annotated[int | None, typer.Option(
        "--max-num-batched-tokens", min=1,
        help="Chunked-prefill token budget per step (default: vLLM serve's for the GPU: 8192, or 2048 "
             "below 70 GiB and on A100).")] = None,
    max_num_seqs: Annotated[int | None, typer.Option(
        "--max-num-seqs", min=1, help="Max sequences per step (default: vLLM serve's: 1024, or 256).")] = None,
    price_usd_per_hour: Annotated[float | None, typer.Option(
        "--price-usd-per-hour", callback=finite("--price-usd-per-hour"),
        help="Override the catalog price per GPU-hour, USD.")] = None,
    profile: ProfileOpt = "auto",
    json_out: JsonOpt = False,
) -> None:
    """Size one deployment: memory breakdown, max concurrency, TTFT, TPOT, throughput, $/Mtok, bound."""
    from planner import catalog
    from planner.cost import with_price
    from planner.plan import plan
    from planner.report import report_text
    from planner.specs import Deployment, Source, Workload

    m = catalog.model(model)
    g = catalog.gpu(gpu)
    if price_usd_per_hour is not None:
        g = with_price(g, price_usd_per_hour, Source(url="--price-usd-per-hour (command line)", date=today(),
                                                     note="user override"))
    dep = build(functools.partial(Deployment.for_gpu, g), {
        "num_gpus": gpus if gpus is not None else tp * pp, "tensor_parallel": tp,
        "pipeline_parallel": pp, "weight_dtype": weight_dtype, "kv_cache_dtype": kv_dtype,
        "gpu_memory_utilization": gpu_memory_utilization,
        **({"max_num_batched_tokens": max_num_batched_tokens} if max_num_batched_tokens is not None else {}),
        **({"max_num_seqs": max_num_seqs} if max_num_seqs is not None else {}),
    }, "--gpus")
    wl = build(Workload, {
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
        emit_json(d)
        return
    typer.echo(report_text(report, mode_line))


# ------------------------------------------------------------------------------------------- sweep


@cli_errors
def sweep_cmd(
    model: ModelOpt,
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
    wl = build(Workload, {
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
    typer.echo(f"{len(df):,} configurations of {m.name}; {int(df['starts'].sum()):,} can start (vLLM's start-up "
               f"rule); {int(df['meets_slo'].sum()):,} meet the SLO"
               + (f"; written to {csv}" if csv else ""))
    table(
        ["#", "gpu", "w", "kv", "TP", "prompt", "batch", "starts", "fits", "SLO", "TTFT ms", "TPOT ms", "tok/s/GPU",
         "$/M out (all-in)", "mode"],
        [[int(r.rank), r.gpu_id, r.weight_dtype, r.kv_cache_dtype, int(r.tensor_parallel), f"{r.prompt_tokens:,}",
          int(r.batch_size), "y" if r.starts else "n", "y" if r.fits else "n", "y" if r.meets_slo else "n",
          f"{r.ttft_s / MS:,.1f}",
          f"{r.tpot_s / MS:,.2f}", f"{r.output_tokens_per_s_per_gpu:,.0f}",
          f"{r.cost_usd_per_million_output_tokens_all_in:,.4f}", r.calibration_mode] for r in head.itertuples()],
    )
