"""``planner report``: the plan report of one configuration (:mod:`planner.plan_report`) as Markdown, HTML and a
CSV in human units.

Command function only; :mod:`planner.cli.app` registers it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.cli.common import JsonOpt, cli_errors, emit_json
from planner.cli.options import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_OUTPUT_TOKENS,
    DEFAULT_PROMPT_TOKENS,
    GpuChoiceOpt,
    GpuMemoryUtilizationOpt,
    KvDtypeOpt,
    MaxNumBatchedTokensOpt,
    MaxNumSeqsOpt,
    ModelOpt,
    NumGpusOpt,
    OutputTokensOpt,
    PpOpt,
    ProfileOpt,
    PromptTokensOpt,
    RateOpt,
    SeedOpt,
    ThinkTimeOpt,
    UsersOpt,
    WeightDtypeOpt,
    infeasible_exit,
    make_dir,
)
from planner.cli.size import PriceOpt, SizeTpOpt, TpotOpt, TtftOpt

#: The files ``--out DIR`` writes.
FILES = {"markdown": "plan.md", "html": "plan.html", "csv_text": "plan.csv"}


@cli_errors
def report_cmd(
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
    seed: SeedOpt = 0,
    out: Annotated[Path | None, typer.Option("--out", help=(
        "Write plan.md, plan.html and plan.csv (human units) into this directory; without it the Markdown is "
        "printed."))] = None,
    json_out: JsonOpt = False,
) -> None:
    """A plan report for one configuration: model, GPU, TP, dtypes, the vllm serve command, the demand, the
    fleet (replicas, GPUs, $/hour, $/month with the error band), simulated TTFT/TPOT p50/p99 at the rate with
    their bands, $/Mtok, quality, and the calibration mode with its source.

    Takes `planner size`'s options (without --gpu the cheapest GPU × TP meeting every target is chosen).
    An infeasible plan is still written, then exits 1 with one line `error: infeasible: <reason>`.
    """
    from planner.cli.plan import plan_from_flags
    from planner.io.files import write_text
    from planner.plan_report import plan_report

    fp = plan_from_flags(model=model, gpu=gpu, num_gpus=num_gpus, tp=tp, pp=pp, weight_dtype=weight_dtype,
                         kv_dtype=kv_dtype, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                         ttft_slo_ms=ttft_slo_ms, tpot_slo_ms=tpot_slo_ms, rate=rate, users=users,
                         think_time_s=think_time_s, gpu_memory_utilization=gpu_memory_utilization,
                         max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
                         price_usd_per_hour=price_usd_per_hour, profile=profile)
    if fp.report is None:
        typer.echo(f"{fp.model.name}: {fp.choice.sentence()}")
        raise infeasible_exit([fp.choice.sentence()])
    pr = plan_report(fp.model, fp.gpu, fp.report, fp.fleet, fp.profile, calibration_note=fp.mode_line,
                     chosen=fp.choice.sentence() if fp.choice is not None else None, seed=seed)
    written = []
    if out is not None:
        d = make_dir(out)
        for method, name in FILES.items():
            write_text(d / name, getattr(pr, method)(), "--out")
            written.append(d / name)
    if json_out:
        emit_json({**pr.as_dict(), "files": [str(p) for p in written]})
    elif out is not None:
        typer.echo("\n".join(pr.headline) + f"\nWrote {', '.join(str(p) for p in written)}")
    else:
        typer.echo(pr.markdown())
    if not pr.feasible:
        raise infeasible_exit(pr.reasons)
