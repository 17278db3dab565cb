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
    GpuListOpt,
    GpuMemoryUtilizationOpt,
    KvDtypeListOpt,
    ModelOpt,
    OutputTokensOpt,
    ProfileAutoNoneOpt,
    PromptTokensListOpt,
    TpListOpt,
    WeightDtypeListOpt,
    infeasible_exit,
    int_list,
    slo_options,
    write_csv_out,
    writes_stdout,
)
from planner.cli.flags import plan_flags
from planner.units import MS, fmt_usd

TtftOpt, TpotOpt = slo_options(STEADY)
SizeTpOpt = Annotated[int | None, typer.Option("--tp", min=1, help=(
    "Tensor-parallel GPUs per replica (default 1; without --gpu, left out: every TP of 1, 2, 4, 8 is a candidate)."))]
PriceOpt = Annotated[float | None, typer.Option("--price-usd-per-hour", callback=finite("--price-usd-per-hour"),
                                                help="Override the catalog price per GPU-hour, USD (needs --gpu).")]

# -------------------------------------------------------------------------------------------- size


def candidates_table(plan, top: int = 12) -> None:
    """The fleet engine's candidates in ranking order: the whole fleet each needs, its knee and its band."""
    rows = []
    for c in plan.candidates[:top]:
        k = c.knee
        sized = c.feasible
        rows.append([c.gpu_id, c.weight_dtype, c.tensor_parallel, c.pipeline_parallel, c.status,
                     f"{k.knee_rate_per_s:,.3g}" if k and k.knee_rate_per_s else "—",
                     f"{c.replicas:,}" if sized else "—", f"{c.num_gpus:,}" if sized else "—",
                     fmt_usd(c.usd_per_month, 0) if sized else (f"≥ {fmt_usd(c.lower_bound_usd_per_month, 0)}"
                                                                if c.status == "pruned" else "—"),
                     fmt_usd(c.usd_per_million_output_tokens, 3) if c.usd_per_million_output_tokens else "—",
                     f"±{c.band_pct:.0f} %" if c.band_pct is not None else "none", c.confidence])
    table(["gpu", "w", "TP", "PP", "status", "knee req/s", "replicas", "GPUs", "$/month", "$/Mtok", "band", "basis"],
          rows)
    if len(plan.candidates) > top:
        typer.echo(f"  … {len(plan.candidates) - top} more candidate(s) (--json lists all)")


def fleet_json(fp) -> dict:
    """The fleet answer every command emits the same way: the best fleet (replicas, GPUs, $/month, …), the
    best measured alternative, the engine's question and every candidate."""
    return {"fleet": fp.fleet.best.as_dict() if fp.fleet.best else None, "fleet_plan": fp.fleet.as_dict()}


@cli_errors
@plan_flags
def size_cmd(flags, json_out: JsonOpt = False) -> None:
    """The cheapest whole fleet for a demand, then one replica explained.

    For every GPU × weight format (the checkpoint's native one by default) × TP × PP that vLLM would start,
    the serving simulator finds the knee: the highest request rate one replica serves with the TTFT and TPOT
    targets held at --tail (p99 by default).  Each replica runs --headroom-pct below its knee (20 %);
    replicas = ceil(demand / that rate) (+1 with --n-plus-one); the fleets are ranked by $/month (ties: fewer
    GPUs).  The steady-state batch formula is the first guess and the explanation of one replica.  An
    infeasible plan exits 1 after printing it, with one line `error: infeasible: <reason>` on stderr.
    """
    from planner.cli.plan import gpus_given_note, plan_from_flags
    from planner.report import report_text

    fp = plan_from_flags(flags)
    r = fp.report
    warn = gpus_given_note(fp)
    if json_out:  # the replica's report at the top level (as before the fleet engine), the fleet beside it
        rd = r.to_dict() if r is not None else {}
        rd.pop("fleet", None)  # the steady-state fleet of one replica: the engine's fleet replaces it
        emit_json({**fleet_json(fp), **rd, "feasible": fp.best is not None,
                   "reasons": fp.fleet.reasons(), "calibration_note": fp.mode_line,
                   "fleet_warnings": [warn] if warn else []})
    else:
        typer.echo("\n".join(fp.fleet.lines() + ([f"  warning: {warn}"] if warn else [])))
        typer.echo("")
        candidates_table(fp.fleet)
        if r is not None:
            typer.echo("\nOne replica at the steady state (the first guess and its explanation):")
            typer.echo(report_text(r, fp.mode_line))
    if fp.best is None:
        raise infeasible_exit(fp.fleet.reasons())


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
            [[int(r.rank), r.gpu_id, r.weight_dtype, r.kv_cache_dtype,  # TP, "8×PP2" across nodes
              f"{r.tensor_parallel}" + (f"×PP{r.pipeline_parallel}" if r.pipeline_parallel > 1 else ""),
              f"{r.prompt_tokens:,}",
              int(r.batch_size), "y" if r.starts else "n", "y" if r.fits else "n", "y" if met else "n",
              f"{r.ttft_s / MS:,.1f}", f"{r.tpot_s / MS:,.2f}", f"{r.output_tokens_per_s_per_gpu:,.0f}",
              f"{r.cost_usd_per_million_output_tokens_all_in:,.4f}", r.calibration_mode]
             for r, met in zip(head.itertuples(), ok.head(top))],
        )
    if n_ok == 0:
        raise infeasible_exit(["no configuration of the sweep meets every target"])
