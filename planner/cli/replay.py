"""``planner replay``: real load-test results (``vllm bench serve``, GuideLLM, multi-turn records) replayed
through the simulator with the same arrivals and lengths; predicted vs measured per percentile.

Command function only; :mod:`planner.cli.app` registers it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from planner.cli.common import JsonOpt, build, cli_errors, emit_json, error_exit, refuse_unless_starts, table
from planner.cli.options import (
    CudagraphCaptureOpt,
    GpuOpt,
    KvDtypeOpt,
    MaxNumBatchedTokensOpt,
    MaxNumSeqsOpt,
    ModelOpt,
    PrefixCachingOpt,
    ProfileOpt,
    TpOpt,
    WeightDtypeOpt,
)
from planner.units import MS

ROWS = (("TTFT p50", "ttft_p50_s", MS), ("TTFT p90", "ttft_p90_s", MS), ("TTFT p99", "ttft_p99_s", MS),
        ("TPOT p50", "tpot_p50_s", MS), ("TPOT p90", "tpot_p90_s", MS), ("TPOT p99", "tpot_p99_s", MS),
        ("E2E p50", "e2e_p50_s", MS), ("E2E p99", "e2e_p99_s", MS), ("output tok/s", "output_tokens_per_s", 1.0))


@cli_errors
def replay_cmd(
    files: Annotated[list[Path], typer.Argument(help="vllm bench serve JSON (--save-result --save-detailed), GuideLLM "
                                                     "JSON report, or multi-turn request records (.jsonl)")],
    model: ModelOpt,
    gpu: GpuOpt,
    tp: TpOpt = 1,
    weight_dtype: WeightDtypeOpt = None,
    kv_dtype: KvDtypeOpt = "bf16",
    kv_capacity_tokens: Annotated[int | None, typer.Option(
        "--kv-capacity-tokens", min=16, help="The engine's KV pool in tokens (default: read from a serve_bench.jsonl "
                                             "beside the file, else the memory model's)")] = None,
    max_num_seqs: MaxNumSeqsOpt = None,
    max_num_batched_tokens: MaxNumBatchedTokensOpt = None,
    max_cudagraph_capture_size: CudagraphCaptureOpt = None,
    prefix_caching: PrefixCachingOpt = None,
    http: Annotated[bool, typer.Option("--http/--in-process", help="Requests went through vLLM's OpenAI server (its "
                                                                    "per-request overhead is added) or in-process")] = True,
    cold: Annotated[bool, typer.Option("--cold-engine/--warm-engine", help="The engine started as vllm serve starts "
                                       "it: a MoE model's steps above the CUDA graphs compile each new kernel key once "
                                       "(planner.compile_keys; files beside one serve_bench.jsonl, given in the order "
                                       "they ran, pass their keys on); --warm-engine: every key compiled")] = True,
    profile: ProfileOpt = "auto",
    json_out: JsonOpt = False,
) -> None:
    """Replay real load tests through the simulator: predicted vs measured TTFT/TPOT/E2E percentiles and
    throughput (the same arrivals, lengths, multi-turn parents and think times).

    A deployment vLLM would not start with max_model_len = the file's longest request (the start-up rule of
    every command, :mod:`planner.startup`) exits 1 with one line `error: infeasible: <flag or file>: <reason>`."""
    from planner.io import catalog
    from planner.serving import EngineConfig, StepCost
    from planner.serving.config import http_terms, pool_blocks, pool_terms, prefix_caching_for
    from planner.serving.loadtests import engine_hints, read_load_test, replay_load_test, with_shared_prefix
    from planner.specs import Deployment
    from planner.startup import startup_check

    m, g = catalog.model(model), catalog.gpu(gpu)
    prof, mode_line = catalog.resolve_profile(profile, g.id, field="--profile")
    results, compiled = [], {}  # engine folder -> the compile keys its replayed runs left
    for f in files:
        if not f.is_file():
            raise error_exit(str(f), "no such file")
        hints = engine_hints(f)
        served = hints.pop("served_model", None)
        if served is not None and served != m.id:
            raise error_exit("--model", f"the serve_bench.jsonl beside {f.name} says its engine served '{served}', "
                                        f"not '{m.id}' (its KV pool and limits would not apply)")
        fields = {"num_gpus": tp, "tensor_parallel": tp, "weight_dtype": weight_dtype or m.native_dtype,
                  "kv_cache_dtype": kv_dtype}
        for name, value in (("max_num_seqs", max_num_seqs or hints.get("max_num_seqs")),
                            ("max_num_batched_tokens", max_num_batched_tokens or hints.get("max_num_batched_tokens")),
                            ("max_cudagraph_capture_tokens",
                             max_cudagraph_capture_size or hints.get("max_cudagraph_capture_tokens"))):
            if value:
                fields[name] = int(value)
        dep = build(lambda **kw: Deployment.for_gpu(g, **kw), fields, "--tp")
        if dep.max_num_batched_tokens < dep.max_num_seqs:
            raise error_exit("--max-num-batched-tokens", f"must be >= --max-num-seqs ({dep.max_num_seqs}), as vLLM requires")
        # the pool: the flag in the memory model's tokens (every attention layer holding every token); a record's
        # vLLM blocks x block size (a sliding-window model has 1 + its sliding groups blocks per block of tokens)
        caching = prefix_caching_for(m, hints.get("prefix_caching", prefix_caching))
        terms = pool_terms(m, dep, caching)
        bs = terms["block_size"]
        hinted = None if kv_capacity_tokens else hints.get("kv_capacity_tokens")
        cap = kv_capacity_tokens or (hinted // (1 + terms["window_groups"]) if hinted else None)
        tests = [with_shared_prefix(t, hints.get("shared_prefix_tokens")) for t in read_load_test(f)]
        longest = max(int((t.prompt_tokens + t.output_tokens).max()) for t in tests)
        check = startup_check(m, g, dep, longest, prof, kv_capacity_tokens=cap)
        refuse_unless_starts(check, {"max_model_len": str(f), "kv_capacity_tokens": "--kv-capacity-tokens"})
        blocks = hinted // bs if hinted else pool_blocks(cap or check.kv_capacity_tokens, terms)
        cfg = EngineConfig(blocks * bs, dep.max_num_seqs, dep.max_num_batched_tokens,
                           enable_prefix_caching=caching, cold_step_shapes=cold, **http_terms(prof, http), **terms)
        cost = StepCost.from_specs(m, g, dep, prof)
        engine = f.resolve().parent if hints else f.resolve()  # a serve_bench folder is one engine
        for t in tests:
            done = compiled.get(engine, frozenset())
            results.append(replay_load_test(t, cost, replace(cfg, compiled_step_keys=done)))
            compiled[engine] = results[-1].compiled_step_keys
    if json_out:
        emit_json({"model": m.id, "gpu": g.id, "calibration": mode_line, "runs": [r.as_dict() for r in results]})
        return
    typer.echo(f"{m.id} on {g.id}: {mode_line}")
    for r in results:
        typer.echo(f"\n{r.name} ({r.tool}, {r.num_requests} requests)")
        rows = []
        for label, key, scale in ROWS:
            meas, pred = r.measured.get(key), r.predicted.get(key)
            err = r.error_pct(key)
            rows.append([label, "—" if meas is None else f"{meas / scale:,.1f}",
                         "—" if pred is None else f"{pred / scale:,.1f}", "—" if err != err else f"{err:+.1f}%"])
        table(["", "measured", "predicted", "error"], rows)
        typer.echo(capacity_line(r.measured, r.predicted))
        if r.predicted.get("prefix_cache_hit_rate"):
            typer.echo(f"simulated prefix-cache hit rate {r.predicted['prefix_cache_hit_rate']:.1%}")


def capacity_line(measured: dict, predicted: dict) -> str:
    """Whether the run's queue kept growing to the end of its arrivals, measured and simulated
    (:func:`planner.serving.result.over_capacity`): where it did, the run had no steady state and its latency
    percentiles grow with its length."""
    from planner.serving.result import over_capacity

    def said(d: dict) -> str:
        if d.get("in_system_q2") is None:
            return "—"
        return f"{d['in_system_q2']:,.0f} -> {d['in_system_q4']:,.0f}" + (", still growing" if over_capacity(d) else "")

    grew = over_capacity(measured)
    return (f"in flight, 2nd -> last quarter of the arrivals: measured {said(measured)}, simulated {said(predicted)}"
            + (": over capacity (no steady state; its latencies grow with the run's length)" if grew else ""))
