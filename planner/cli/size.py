"""``planner size`` (one deployment, and the fleet a demand needs) and ``planner sweep`` (every configuration,
in the one ranking order of :mod:`planner.ranking`).

Command functions only; :mod:`planner.cli.app` registers them on its app."""

from __future__ import annotations

from typing import Annotated

import typer

from planner.cli.common import JsonOpt, build, cli_errors, emit_json, error_exit, finite, table
from planner.cli.options import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_OUTPUT_TOKENS,
    DEFAULT_PROMPT_TOKENS,
    STEADY,
    CsvOpt,
    GpuChoiceOpt,
    GpuListOpt,
    GpuMemoryUtilizationOpt,
    KvDtypeListOpt,
    KvDtypeOpt,
    MaxNumBatchedTokensOpt,
    MaxNumSeqsOpt,
    ModelOpt,
    NumGpusOpt,
    OutputTokensOpt,
    PpOpt,
    ProfileAutoNoneOpt,
    ProfileOpt,
    PromptTokensListOpt,
    PromptTokensOpt,
    RateOpt,
    ThinkTimeOpt,
    TpListOpt,
    UsersOpt,
    WeightDtypeListOpt,
    WeightDtypeOpt,
    infeasible_exit,
    int_list,
    tpot_help,
    ttft_help,
    write_csv_out,
    writes_stdout,
)
from planner.units import MS

TtftOpt = Annotated[float | None, typer.Option("--ttft-slo-ms", callback=finite("--ttft-slo-ms"), help=ttft_help(STEADY))]
TpotOpt = Annotated[float | None, typer.Option("--tpot-slo-ms", callback=finite("--tpot-slo-ms"), help=tpot_help(STEADY))]
SizeTpOpt = Annotated[int | None, typer.Option("--tp", min=1, help=(
    "Tensor-parallel GPUs per replica (default 1; without --gpu, left out: every TP of 1, 2, 4, 8 is a candidate)."))]
PriceOpt = Annotated[float | None, typer.Option("--price-usd-per-hour", callback=finite("--price-usd-per-hour"),
                                                help="Override the catalog price per GPU-hour, USD (needs --gpu).")]

# -------------------------------------------------------------------------------------------- size


def choice_dict(choice) -> dict | None:
    """How a configuration was chosen without --gpu (None when --gpu was given), JSON-safe."""
    from planner.ranking import RANK_DEFINITION, RANK_KEY, config_key

    if choice is None:
        return None
    row = choice.row
    return {"chosen": None if row is None else dict(zip(("gpu_id", "tensor_parallel", "weight_dtype",
                                                         "kv_cache_dtype", "prompt_tokens", "batch_size"),
                                                        config_key(row))),
            "configurations": choice.configurations, "rows_meeting_every_target": choice.meeting,
            "ranking_key": RANK_KEY, "ranking": RANK_DEFINITION, "sentence": choice.sentence()}


@cli_errors
def size_cmd(
    model: ModelOpt,
    gpu: GpuChoiceOpt = None,
    num_gpus: NumGpusOpt = None,
    tp: SizeTpOpt = None,
    pp: PpOpt = 1,
    weight_dtype: WeightDtypeOpt = "bf16",
    kv_dtype: KvDtypeOpt = "bf16",
    prompt_tokens: PromptTokensOpt = DEFAULT_PROMPT_TOKENS,
    output_tokens: OutputTokensOpt = DEFAULT_OUTPUT_TOKENS,
    ttft_slo_ms: TtftOpt = None,
    tpot_slo_ms: TpotOpt = None,
    rate: RateOpt = None,
    users: UsersOpt = None,
    think_time_s: ThinkTimeOpt = 0.0,
    gpu_memory_utilization: GpuMemoryUtilizationOpt = DEFAULT_GPU_MEMORY_UTILIZATION,
    max_num_batched_tokens: MaxNumBatchedTokensOpt = None,
    max_num_seqs: MaxNumSeqsOpt = None,
    price_usd_per_hour: PriceOpt = None,
    profile: ProfileOpt = "auto",
    json_out: JsonOpt = False,
) -> None:
    """The fleet a demand needs (replicas, GPUs, $/hour, $/month with the error band), then one replica:
    memory breakdown, max concurrency, TTFT, TPOT, throughput, $/Mtok, bound.

    Without --gpu the configuration is chosen: the cheapest GPU × TP of the catalog (the dtypes as given)
    that meets every target, by all-in $ per million output tokens.  An infeasible plan exits 1 after
    printing it, with one line `error: infeasible: <reason>` on stderr.
    """
    from planner.cli.plan import plan_from_flags
    from planner.ranking import RANK_DEFINITION, RANK_KEY
    from planner.report import report_text

    fp = plan_from_flags(model=model, gpu=gpu, num_gpus=num_gpus, tp=tp, pp=pp, weight_dtype=weight_dtype,
                         kv_dtype=kv_dtype, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                         ttft_slo_ms=ttft_slo_ms, tpot_slo_ms=tpot_slo_ms, rate=rate, users=users,
                         think_time_s=think_time_s, gpu_memory_utilization=gpu_memory_utilization,
                         max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
                         price_usd_per_hour=price_usd_per_hour, profile=profile)
    if fp.report is None:  # no configuration meets every target
        if json_out:
            emit_json({"fleet": None, "choice": choice_dict(fp.choice), "feasible": False})
        else:
            typer.echo(f"{fp.model.name}: {fp.choice.sentence()}")
        raise infeasible_exit([fp.choice.sentence()])
    r = fp.report
    if json_out:
        emit_json({"fleet": fp.fleet.as_dict(), "choice": choice_dict(fp.choice), **r.to_dict(),
                   "calibration_note": fp.mode_line, "ranking_key": RANK_KEY, "ranking": RANK_DEFINITION})
    else:
        head = fp.fleet.lines() if r.feasible else []
        if fp.choice is not None:
            head.append(f"  {fp.choice.sentence()}")
        head += [f"  warning: {w}" for w in r.warnings]
        typer.echo("\n".join(head + ([""] if head else []) + [report_text(r, fp.mode_line)]))
    if not r.feasible:
        raise infeasible_exit(r.reasons)


# ------------------------------------------------------------------------------------------- sweep


@cli_errors
def sweep_cmd(
    model: ModelOpt,
    gpu: GpuListOpt = None,
    weight_dtype: WeightDtypeListOpt = None,
    kv_dtype: KvDtypeListOpt = None,
    tp: TpListOpt = None,
    prompt_tokens: PromptTokensListOpt = None,
    batch: Annotated[list[int] | None, typer.Option("--batch", min=1, help=(
        "Batch sizes (requests in flight per replica); repeatable (default: every size to --users, else 1, 2, 4, "
        "… 1024)."))] = None,
    output_tokens: OutputTokensOpt = DEFAULT_OUTPUT_TOKENS,
    ttft_slo_ms: TtftOpt = None,
    tpot_slo_ms: TpotOpt = None,
    users: Annotated[int | None, typer.Option("--users", min=1, help=(
        "Concurrent users: no replica holds more requests than this (a bigger batch misses the target), and "
        "every batch size up to it is tried."))] = None,
    gpu_memory_utilization: GpuMemoryUtilizationOpt = DEFAULT_GPU_MEMORY_UTILIZATION,
    profile: ProfileAutoNoneOpt = "auto",
    csv: CsvOpt = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Rows to print (and to emit with --json).")] = 20,
    only_feasible: Annotated[bool, typer.Option("--only-feasible", help="Keep the rows that meet every target "
                                                                        "only.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Rank every GPU × weight dtype × KV dtype × TP × prompt × batch configuration (planner/ranking.py).

    Rows that meet every target come first (they fit in memory, meet the TTFT and TPOT targets, stay
    within the model's context and hold no more requests than --users), then by all-in $ per million
    output tokens: all GPU time, prefill included, divided by the generated tokens; ties by fewer GPUs,
    lower TPOT, then the ids.  Rank 1 is the cheapest configuration that meets every target; when none
    does the command exits 1 after printing (and writing) the rows.  With --profile auto each GPU uses its
    committed calibration profile, else the newest one transferred to it (the 'mode' column says which).
    """
    from planner.io import catalog
    from planner.ranking import RANK_DEFINITION, RANK_LABEL, batch_grid, meets_targets
    from planner.report import frame_json
    from planner.specs import Workload
    from planner.sweep import sweep

    if writes_stdout(csv) and json_out:
        raise error_exit("--csv", "it and --json would both write standard output; give one")
    m = catalog.model(model)
    gpus = [catalog.gpu(x) for x in gpu] if gpu else None
    prompts = list(prompt_tokens) if prompt_tokens else [DEFAULT_PROMPT_TOKENS]
    wl = build(Workload, {
        "prompt_tokens": prompts[0], "output_tokens": output_tokens, "concurrency": users,
        "ttft_slo_s": ttft_slo_ms * MS if ttft_slo_ms is not None else None,
        "tpot_slo_s": tpot_slo_ms * MS if tpot_slo_ms is not None else None,
    }, "--prompt-tokens")
    if profile not in ("auto", "none"):
        raise error_exit("--profile", f"expected auto or none, got '{profile}'")
    batches = list(batch) if batch else (list(batch_grid(users)) if users else None)
    df = sweep(m, wl, gpus=gpus, weight_dtypes=weight_dtype, kv_dtypes=kv_dtype,
               tensor_parallels=int_list(tp, "--tp"), contexts=prompts, batch_sizes=batches,
               profile_for=lambda g: catalog.resolve_profile(profile, g)[0],
               deployment_defaults={"gpu_memory_utilization": gpu_memory_utilization})
    ok = meets_targets(df, users)
    if only_feasible:
        df, ok = df[ok].reset_index(drop=True), ok[ok].reset_index(drop=True)
    n_ok = int(ok.sum())
    if csv is not None:
        write_csv_out(df, csv)
    if json_out:
        typer.echo(frame_json(df.head(top)))
    elif not writes_stdout(csv):
        head = df.head(top)
        typer.echo(f"{len(df):,} configurations of {m.name}; {int(df['starts'].sum()):,} can start (vLLM's "
                   f"start-up rule); {n_ok:,} meet every target" + (f"; written to {csv}" if csv else "")
                   + f"\nRanked by {RANK_DEFINITION}.")
        table(
            ["#", "gpu", "w", "kv", "TP", "prompt", "batch", "starts", "fits", "targets", "TTFT ms", "TPOT ms",
             "tok/s/GPU", RANK_LABEL, "mode"],
            [[int(r.rank), r.gpu_id, r.weight_dtype, r.kv_cache_dtype, int(r.tensor_parallel), f"{r.prompt_tokens:,}",
              int(r.batch_size), "y" if r.starts else "n", "y" if r.fits else "n", "y" if met else "n",
              f"{r.ttft_s / MS:,.1f}", f"{r.tpot_s / MS:,.2f}", f"{r.output_tokens_per_s_per_gpu:,.0f}",
              f"{r.cost_usd_per_million_output_tokens_all_in:,.4f}", r.calibration_mode]
             for r, met in zip(head.itertuples(), ok.head(top))],
        )
    if n_ok == 0:
        raise infeasible_exit(["no configuration of the sweep meets every target"])
