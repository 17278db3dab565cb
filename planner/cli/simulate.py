"""``planner simulate`` and ``planner slo-search``: serving under load (see :mod:`planner.serving`).

Command functions only; :mod:`planner.cli.app` registers them on its app.
"""

from __future__ import annotations

import csv as csv_mod
import functools
import io
import math
from pathlib import Path
from typing import Annotated

import typer

from planner.cli.common import JsonOpt, build, cli_errors, emit_json, error_exit, finite, refuse_unless_starts, table
from planner.cli.options import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_OUTPUT_TOKENS,
    DEFAULT_PROMPT_TOKENS,
    P99_SIMULATED,
    CsvOpt,
    CudagraphCaptureOpt,
    GpuListOpt,
    GpuMemoryUtilizationOpt,
    GpuOpt,
    KvDtypeOpt,
    ModelOpt,
    PrefixCachingOpt,
    PriceBasisOpt,
    PriceProviderOpt,
    ProfileOpt,
    SeedOpt,
    TpListOpt,
    TpOpt,
    WeightDtypeListOpt,
    WeightDtypeOpt,
    infeasible_exit,
    int_list,
    longest_request,
    slo_options,
    write_csv_out,
    writes_stdout,
)
from planner.quoting import csv_cell
from planner.units import MS, fmt_int, fmt_usd

WORKLOADS = ("chat", "rag", "agentic", "batch")
AGENT_TURNS = 6


# ------------------------------------------------------------------------------------------ helpers


def _workload_maker(*, workload: str | None, num_requests: int, prompt_tokens: int, output_tokens: int,
                    shared_prefix_tokens: int, burstiness_cv: float, seed: int):
    """A function (rate, concurrency, num_requests) -> Requests (rate None: everything at t = 0), fixed seed;
    ``num_requests`` (default: --num-requests) lets the SLO search run trials long enough for steady state."""
    from planner.serving import workloads as wl

    default_n = num_requests
    if workload is None:
        def make(rate=None, concurrency=None, num_requests=None):
            return wl.synthetic(num_requests or default_n, prompt_tokens, output_tokens, rate_per_s=rate,
                                concurrency=concurrency, shared_prefix_tokens=shared_prefix_tokens, cv=burstiness_cv,
                                seed=seed)
        return make
    if workload not in WORKLOADS:
        raise error_exit("--workload", f"unknown workload '{workload}'; known: {', '.join(WORKLOADS)}")
    if workload == "agentic":
        def make(rate=None, concurrency=None, num_requests=None):
            if concurrency is not None:
                raise error_exit("--concurrency", "the agentic workload's sessions arrive at a rate (use --rate)")
            sessions = max(1, math.ceil((num_requests or default_n) / AGENT_TURNS))
            return wl.agentic(sessions, turns=AGENT_TURNS, rate_per_s=rate, seed=seed)
        return make
    if workload == "batch":
        def make(rate=None, concurrency=None, num_requests=None):
            if rate is not None or concurrency is not None:
                raise error_exit("--rate", "the batch workload submits every request at t=0 (drop --rate/--concurrency)")
            return wl.batch(num_requests or default_n, seed=seed)
        return make
    fn = wl.PRESETS[workload]

    def make(rate=None, concurrency=None, num_requests=None):
        return fn(num_requests or default_n, rate_per_s=rate, concurrency=concurrency, cv=burstiness_cv, seed=seed)
    return make


def _spec(spec_preset: str | None, spec_k: int | None, spec_acceptance: float | None, spec_draft_cost: float | None):
    from planner.serving import SPEC_PRESETS, SpecDecode

    if spec_preset is not None:
        if spec_preset not in SPEC_PRESETS:
            raise error_exit("--spec-preset", f"unknown preset '{spec_preset}'; known: {', '.join(SPEC_PRESETS)}")
        base = SPEC_PRESETS[spec_preset]
    else:
        base = None
    if base is None and spec_k is None and spec_acceptance is None:
        return None
    k = spec_k if spec_k is not None else (base.num_speculative_tokens if base else None)
    a = spec_acceptance if spec_acceptance is not None else (base.acceptance_rate if base else None)
    c = spec_draft_cost if spec_draft_cost is not None else (base.draft_cost_ratio if base else 0.05)
    if k is None:
        raise error_exit("--spec-k", "speculative decoding needs --spec-k (draft tokens per step)")
    if a is None:
        raise error_exit("--spec-acceptance", "speculative decoding needs --spec-acceptance (0-1)")
    if not 0 <= a <= 1:
        raise error_exit("--spec-acceptance", f"must be between 0 and 1, got {a}")
    if not 1 <= k <= 15:
        raise error_exit("--spec-k", f"must be between 1 and 15, got {k}")
    if not (math.isfinite(c) and c >= 0):
        raise error_exit("--spec-draft-cost", f"must be a finite number >= 0, got {c}")
    return SpecDecode(k, a, c, base.name if base else "custom", base.source if base else "command line")


def _check_load(rate, concurrency, trace) -> None:
    given = [n for n, v in (("--rate", rate), ("--concurrency", concurrency), ("--trace", trace)) if v is not None]
    if len(given) > 1:
        raise error_exit(given[1], f"give one of --rate, --concurrency, --trace (got {' and '.join(given)})")


def _ms(x):
    return None if x is None else x / MS


# ----------------------------------------------------------------------------------------- simulate


@cli_errors
def simulate_cmd(
    model: ModelOpt,
    gpu: GpuOpt,
    profile: ProfileOpt = "auto",
    rate: Annotated[float | None, typer.Option("--rate", callback=finite("--rate"),
                                               help="Poisson arrival rate, requests/s.")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", min=1,
                                                    help="Closed loop: keep this many requests in flight.")] = None,
    trace: Annotated[Path | None, typer.Option("--trace", help="CSV/JSONL trace: arrival_s, prompt_tokens, "
                                                               "output_tokens per request.")] = None,
    workload: Annotated[str | None, typer.Option("--workload", help="Preset instead of fixed lengths: chat, rag, "
                                                                    "agentic, batch.")] = None,
    num_requests: Annotated[int, typer.Option("--num-requests", "-n", min=1, help="Requests to simulate.")] = 1000,
    prompt_tokens: Annotated[int, typer.Option("--prompt-tokens", min=1, help=(
        "Prompt tokens per request (unique; after --shared-prefix-tokens)."))] = DEFAULT_PROMPT_TOKENS,
    output_tokens: Annotated[int, typer.Option("--output-tokens", min=1,
                                               help="Generated tokens per request.")] = DEFAULT_OUTPUT_TOKENS,
    shared_prefix_tokens: Annotated[int, typer.Option(
        "--shared-prefix-tokens", min=0, help="Tokens every prompt shares before its unique part.")] = 0,
    burstiness_cv: Annotated[float, typer.Option(
        "--burstiness-cv", callback=finite("--burstiness-cv"),
        help="Coefficient of variation of inter-arrival gaps (1 = Poisson, >1 bursty; gamma).")] = 1.0,
    prefix_caching: PrefixCachingOpt = None,
    max_num_seqs: Annotated[int | None, typer.Option(
        "--max-num-seqs", min=1, help="Max sequences per step (default: vLLM serve's for the GPU).")] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option(
        "--max-num-batched-tokens", min=1, help="Token budget per step (default: vLLM serve's for the GPU).")] = None,
    kv_capacity_tokens: Annotated[int | None, typer.Option(
        "--kv-capacity-tokens", min=16, help="KV pool size in tokens (default: from the memory model).")] = None,
    max_cudagraph_capture_size: CudagraphCaptureOpt = None,
    gpu_memory_utilization: GpuMemoryUtilizationOpt = DEFAULT_GPU_MEMORY_UTILIZATION,
    spec_preset: Annotated[str | None, typer.Option("--spec-preset", help="Speculative decoding preset: "
                                                    "draft-model, eagle, medusa.")] = None,
    spec_k: Annotated[int | None, typer.Option("--spec-k", help="Draft tokens per step (speculative decoding).")] = None,
    spec_acceptance: Annotated[float | None, typer.Option(
        "--spec-acceptance", help="Per-token acceptance rate alpha, 0-1.")] = None,
    spec_draft_cost: Annotated[float | None, typer.Option(
        "--spec-draft-cost", help="One draft step ÷ one target decode step (default 0.05).")] = None,
    sequential: Annotated[bool, typer.Option("--sequential", help="Naive baseline: one request at a time, "
                                                                  "no batching (HF generate).")] = False,
    compare_sequential: Annotated[bool, typer.Option(
        "--compare-sequential", help="Also run the sequential baseline and report the speed-up.")] = False,
    seed: SeedOpt = 0,
    weight_dtype: WeightDtypeOpt = None,
    kv_dtype: KvDtypeOpt = "bf16",
    tp: TpOpt = 1,
    series_csv: Annotated[Path | None, typer.Option("--series-csv", help="Write the KV-usage/queue time series "
                                                                         "to this CSV file ('-' = stdout).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Simulate serving under load: TTFT/TPOT/E2E percentiles, throughput, KV usage, preemptions.

    A deployment vLLM would not start with max_model_len = the longest request (TP beyond a node or not
    dividing the heads, a request beyond the model's context limit or the KV pool, weights that do not fit)
    is refused: exit 1, one line `error: <flag>: <reason>` (bad input exits 2)."""
    from planner.deploy.command import prefix_caching_note
    from planner.io import catalog
    from planner.serving import engine_setup, simulate, simulate_sequential
    from planner.specs import Deployment
    from planner.startup import startup_check
    from planner.io.traces import load_trace

    _check_load(rate, concurrency, trace)
    if burstiness_cv <= 0:
        raise error_exit("--burstiness-cv", "must be > 0")
    m = catalog.model(model)
    g = catalog.gpu(gpu)
    dep = build(functools.partial(Deployment.for_gpu, g), {
        "num_gpus": tp, "tensor_parallel": tp, "weight_dtype": weight_dtype or m.native_dtype,
        "kv_cache_dtype": kv_dtype, "gpu_memory_utilization": gpu_memory_utilization,
        **({"max_num_batched_tokens": max_num_batched_tokens} if max_num_batched_tokens else {}),
        **({"max_num_seqs": max_num_seqs} if max_num_seqs else {}),
        **({"max_cudagraph_capture_tokens": max_cudagraph_capture_size} if max_cudagraph_capture_size else {}),
    }, "--tp")
    max_num_batched_tokens, max_num_seqs = dep.max_num_batched_tokens, dep.max_num_seqs
    if max_num_batched_tokens < max_num_seqs:
        raise error_exit("--max-num-batched-tokens", f"must be >= --max-num-seqs ({max_num_seqs}), as vLLM requires")
    spec = _spec(spec_preset, spec_k, spec_acceptance, spec_draft_cost)
    prof, mode_line = catalog.resolve_profile(profile, g.id, field="--profile")
    if writes_stdout(series_csv) and json_out:
        raise error_exit("--series-csv", "it and --json would both write standard output; give one")
    if trace is not None:
        if workload is not None:
            raise error_exit("--workload", "give either --trace or --workload")
        reqs = load_trace(trace)
    else:
        make = _workload_maker(workload=workload, num_requests=num_requests, prompt_tokens=prompt_tokens,
                               output_tokens=output_tokens, shared_prefix_tokens=shared_prefix_tokens,
                               burstiness_cv=burstiness_cv, seed=seed)
        reqs = make(rate, concurrency)
    # vLLM started with max_model_len = the longest request: would it start at all? (exit 1 if not)
    check = startup_check(m, g, dep, longest_request(reqs), prof, kv_capacity_tokens=kv_capacity_tokens)
    refuse_unless_starts(check,
                         {"max_model_len": _length_flag(trace, workload, {
                             "--prompt-tokens": prompt_tokens, "--shared-prefix-tokens": shared_prefix_tokens,
                             "--output-tokens": output_tokens})})
    cost, cfg = engine_setup(m, g, dep, prof, enable_prefix_caching=prefix_caching, spec=spec,
                             kv_capacity_tokens=kv_capacity_tokens or check.kv_capacity_tokens)
    res = simulate_sequential(reqs, cost) if sequential else simulate(reqs, cost, cfg)
    out = res.summary()
    out.update({
        "model": m.id, "gpu": g.id, "tensor_parallel": tp, "weight_dtype": dep.weight_dtype, "kv_cache_dtype": kv_dtype,
        "calibration_note": mode_line, "workload": {"name": reqs.name, **_jsonable(reqs.description)},
        "total_prompt_tokens": reqs.total_prompt_tokens, "total_output_tokens": reqs.total_output_tokens,
    })
    if m.num_linear_layers:  # vLLM's prefix caching on a Mamba / linear-attention hybrid: opt-in, experimental
        out["prefix_caching_note"] = prefix_caching_note(m, dep, cfg.enable_prefix_caching)
    if compare_sequential and not sequential:
        base = simulate_sequential(reqs, cost)
        b = base.summary()
        out["sequential_baseline"] = {k: b[k] for k in ("ttft_s", "tpot_s", "e2e_s", "output_tokens_per_s",
                                                         "requests_per_s", "duration_s")}
        out["speedup_vs_sequential"] = (res.output_tokens_per_s / base.output_tokens_per_s
                                        if base.output_tokens_per_s > 0 else None)
    if series_csv is not None:
        write_csv_out(_series_text(res), series_csv, "--series-csv")
        if writes_stdout(series_csv):
            return
    if json_out:
        emit_json(out)
        return
    _print_sim(out, mode_line, cfg)


def _jsonable(d: dict) -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        out[k] = v
    return out


def _series_text(res) -> str:
    buf = io.StringIO()
    w = csv_mod.writer(buf, lineterminator="\n")
    w.writerow(["t_s", "kv_usage_fraction", "waiting_requests", "running_requests"])
    for row in zip(res.series_t_s.tolist(), res.series_kv_usage.tolist(), res.series_waiting.tolist(),
                   res.series_running.tolist()):
        w.writerow(row)
    return buf.getvalue()


def _print_sim(d: dict, mode_line: str, cfg) -> None:
    def f(x, scale=1.0, digits=1):
        return "—" if x is None else f"{x * scale:,.{digits}f}"

    typer.echo(f"{d['model']} on {d['gpu']} (TP {d['tensor_parallel']}, {d['weight_dtype']} weights, "
               f"{d['kv_cache_dtype']} KV) — {mode_line}")
    kind = "sequential baseline (one request at a time)" if d["sequential"] else "continuous batching"
    typer.echo(f"{d['num_requests']:,} requests, {kind}; KV pool {fmt_int(d['kv_capacity_tokens'])} tokens, "
               f"max_num_seqs {cfg.max_num_seqs}, max_num_batched_tokens {cfg.max_num_batched_tokens}, "
               f"prefix caching {'on' if d['prefix_caching'] else 'off'}"
               + (f"\n{d['prefix_caching_note']}" if d.get("prefix_caching_note") else ""))
    rows = []
    for name, key, scale, digits in (("TTFT ms", "ttft_s", 1 / MS, 1), ("TPOT ms", "tpot_s", 1 / MS, 2),
                                     ("E2E s", "e2e_s", 1.0, 2)):
        p = d[key]
        rows.append([name] + [f(p[q], scale, digits) for q in ("mean", "p50", "p90", "p99")])
    table(["", "mean", "p50", "p90", "p99"], rows)
    typer.echo(f"throughput {d['output_tokens_per_s']:,.0f} output tokens/s, {d['requests_per_s']:,.2f} requests/s "
               f"over {d['duration_s']:,.1f} s; preemptions {d['preemptions']:,}; prefix-cache hit rate "
               f"{d['prefix_cache_hit_rate']:.1%}; KV usage max {d['kv_usage_max']:.1%}; queue max {d['queue_max']:,}; "
               f"mean batch {d['running_mean']:,.1f}")
    if d["rejected"]:
        typer.echo(f"rejected {d['rejected']:,} requests longer than the KV pool")
    if d.get("speedup_vs_sequential"):
        b = d["sequential_baseline"]
        typer.echo(f"sequential baseline: {b['output_tokens_per_s']:,.0f} output tokens/s, p99 TTFT "
                   f"{f(b['ttft_s']['p99'], 1.0, 2)} s -> continuous batching is {d['speedup_vs_sequential']:,.1f}x")


# --------------------------------------------------------------------------------------- slo-search


TtftP99Opt, TpotP99Opt = slo_options(P99_SIMULATED, required=True)


def _length_flag(trace, workload, sizes: dict[str, int]) -> str:
    """The flag a too-long request comes from: --trace, --workload, else the largest of the length flags."""
    return "--trace" if trace is not None else "--workload" if workload else max(sizes, key=sizes.get)


@cli_errors
def slo_search_cmd(
    model: ModelOpt,
    ttft_slo_ms: TtftP99Opt,
    tpot_slo_ms: TpotP99Opt,
    gpu: GpuListOpt = None,
    weight_dtype: WeightDtypeListOpt = None,
    kv_dtype: KvDtypeOpt = "bf16",
    tp: TpListOpt = None,
    rate: Annotated[float | None, typer.Option("--rate", callback=finite("--rate"), help=(
        "Request rate to serve, requests/s: the replicas and $/hour each candidate needs for it."))] = None,
    workload: Annotated[str | None, typer.Option("--workload", help="Preset instead of fixed lengths: chat, rag, "
                                                                    "agentic (rate = sessions/s).")] = None,
    num_requests: Annotated[int, typer.Option("--num-requests", "-n", min=10, help=(
        "Requests of the burst that sizes the search; each trial runs at least max(rate × 120 s, 2,000) requests "
        "(at most 20,000) so its queue reaches steady state, the first 10 % left out as warm-up."))] = 500,
    prompt_tokens: Annotated[int, typer.Option("--prompt-tokens", min=1, help=(
        "Prompt tokens per request (unique; after --shared-prefix-tokens)."))] = DEFAULT_PROMPT_TOKENS,
    output_tokens: Annotated[int, typer.Option("--output-tokens", min=1,
                                               help="Generated tokens per request.")] = DEFAULT_OUTPUT_TOKENS,
    shared_prefix_tokens: Annotated[int, typer.Option("--shared-prefix-tokens", min=0,
                                                      help="Shared prompt prefix tokens.")] = 0,
    burstiness_cv: Annotated[float, typer.Option("--burstiness-cv", callback=finite("--burstiness-cv"),
                                                 help="Inter-arrival coefficient of variation.")] = 1.0,
    max_num_seqs: Annotated[int | None, typer.Option(
        "--max-num-seqs", min=1, help="Default: vLLM serve's for each GPU (1024, or 256).")] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option(
        "--max-num-batched-tokens", min=1, help="Default: vLLM serve's for each GPU (8192, or 2048).")] = None,
    prefix_caching: PrefixCachingOpt = None,
    seed: SeedOpt = 0,
    profile: ProfileOpt = "auto",
    price_basis: PriceBasisOpt = "on-demand",
    price_provider: PriceProviderOpt = None,
    tail: Annotated[str, typer.Option("--tail", help="The percentile the targets hold at: p99, p95 or p50.")] = "p99",
    headroom_pct: Annotated[float, typer.Option("--headroom-pct", callback=finite("--headroom-pct", allow_zero=True),
                                                help="Run each replica this far below its knee, %.")] = 20.0,
    n_plus_one: Annotated[bool, typer.Option("--n-plus-one", help="One replica more than the rate needs.")] = False,
    csv: CsvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """The fleet engine's candidates, every one simulated: per GPU × dtype × TP × PP the highest request rate
    per replica holding the targets at --tail, the replicas and $/month --rate needs, ranked by that fleet's
    cost (the same engine and answer as `planner size`).

    --tp left out: for each GPU and dtype the smallest of 1, 2, 4, 8 that fits.  A candidate vLLM would not
    start (max_model_len = the longest request of the workload) is listed with fits = false and the reason in
    its note.  Exits 1 (after printing) when no candidate meets the targets at any rate."""
    from planner.io import catalog
    from planner.fleet import FleetQuestion, plan_fleet
    from planner.serving.load import MAX_TRIAL_REQUESTS

    if workload == "batch":
        raise error_exit("--workload", "slo-search needs arrivals at a rate; 'batch' has none")
    if tail not in ("p50", "p95", "p99"):
        raise error_exit("--tail", f"expected one of p50, p95, p99, got '{tail}'")
    if not 0 <= headroom_pct < 100:
        raise error_exit("--headroom-pct", f"must be in [0, 100), got {headroom_pct:g}")
    make = _workload_maker(workload=workload, num_requests=num_requests, prompt_tokens=prompt_tokens,
                           output_tokens=output_tokens, shared_prefix_tokens=shared_prefix_tokens,
                           burstiness_cv=burstiness_cv, seed=seed)
    plain = workload is None and not shared_prefix_tokens and burstiness_cv == 1.0
    if plain:
        make = None  # the fleet engine's own stream: the same requests, cached with size's and report's
    else:
        make.cache_key = ("slo-search", workload, prompt_tokens, output_tokens, shared_prefix_tokens, burstiness_cv,
                          seed, num_requests)
    if writes_stdout(csv) and json_out:
        raise error_exit("--csv", "it and --json would both write standard output; give one")
    m = catalog.model(model)
    gs = [catalog.gpu(x) for x in dict.fromkeys(gpu or sorted(catalog.gpus()))]  # each value once, in order
    dtypes = list(dict.fromkeys(weight_dtype or [m.native_dtype]))
    tps = None if tp in (None, ["auto"]) else int_list(tp, "--tp")
    if max_num_batched_tokens and max_num_seqs and max_num_batched_tokens < max_num_seqs:
        raise error_exit("--max-num-batched-tokens", f"must be >= --max-num-seqs ({max_num_seqs}), as vLLM requires")
    longest = (shared_prefix_tokens + prompt_tokens + output_tokens if workload is None
               else longest_request(make(1.0, None, MAX_TRIAL_REQUESTS)))  # the longest any trial can draw
    plans = []
    for dt in dtypes:
        q = build(FleetQuestion, {
            "model_id": m.id, "rate_per_s": rate, "prompt_tokens": prompt_tokens, "max_model_len": longest,
            "output_tokens": output_tokens, "ttft_slo_s": ttft_slo_ms * MS, "tpot_slo_s": tpot_slo_ms * MS,
            "tail": tail, "headroom": headroom_pct / 100, "n_plus_one": n_plus_one,
            "gpu_ids": tuple(g.id for g in gs), "tensor_parallels": tuple(tps) if tps else None,
            "weight_dtype": dt, "kv_cache_dtype": kv_dtype, "max_num_seqs": max_num_seqs,
            "max_num_batched_tokens": max_num_batched_tokens, "profile": profile, "seed": seed, "price_basis":
            price_basis, "price_provider": price_provider,
            "enable_prefix_caching": prefix_caching, "search_all": True}, "--rate")
        plans.append(plan_fleet(q, make_requests=make))
    rows = sorted((c for p in plans for c in p.candidates), key=lambda c: (not c.feasible, c.usd_per_month
                                                                           if c.feasible else 0.0, c.num_gpus))
    best = rows[0] if rows and rows[0].feasible else None
    out_rows = [c.as_dict() for c in rows]
    if csv is not None:
        buf = io.StringIO()
        cols = list(out_rows[0]) if out_rows else []
        w = csv_mod.DictWriter(buf, fieldnames=cols, lineterminator="\n")
        w.writeheader()
        for r in out_rows:
            w.writerow({k: ("" if r.get(k) is None else csv_cell(r.get(k))) for k in cols})
        write_csv_out(buf.getvalue(), csv)
    notes = list(dict.fromkeys(n for p in plans for n in p.notes))  # unpriced GPUs, a replica of few slots, ...
    if json_out:
        emit_json({"model": m.id, "tail": tail, "ttft_slo_s": ttft_slo_ms * MS, "tpot_slo_s": tpot_slo_ms * MS,
                   "target_rate_per_s": rate, "fleet": best.as_dict() if best else None,
                   "sentence": plans[0].sentence() if plans else "", "candidates": out_rows, "notes": notes})
    elif not writes_stdout(csv):
        _print_search(m.id, rows, ttft_slo_ms, tpot_slo_ms, seed, tail, headroom_pct)
        for n in notes:
            typer.echo(f"note: {n}")
    if best is None:
        raise infeasible_exit([f"no candidate meets {tail} TTFT and {tail} TPOT at any request rate"])


def _print_search(model_id: str, rows, ttft_slo_ms: float, tpot_slo_ms: float, seed: int, tail: str,
                  headroom_pct: float) -> None:
    typer.echo(f"{model_id}: the highest request rate per replica (the knee) holding {tail} TTFT ≤ {ttft_slo_ms:g} ms "
               f"and {tail} TPOT ≤ {tpot_slo_ms:g} ms (trials of max(rate × 120 s, 2,000) requests after warm-up, "
               f"seed {seed}); each replica run {headroom_pct:g} % below it; ranked by the whole fleet's $/month")
    table(["gpu", "weights", "TP", "PP", "knee req/s", "per GPU", "saturation", "confidence", f"{tail} TTFT ms",
           f"{tail} TPOT ms", "$/Mtok out", "replicas", "GPUs", "$/month", "basis", "note"],
          [[c.gpu_id, c.weight_dtype, c.tensor_parallel, c.pipeline_parallel,
            "—" if not c.knee else f"{c.knee.knee_rate_per_s:,.2f}",
            "—" if not c.knee else f"{c.knee.knee_rate_per_s / c.gpus_per_replica:,.2f}",
            "—" if not c.saturation_rate_per_s else f"{c.saturation_rate_per_s:,.2f}",
            "—" if not c.knee else c.knee.confidence,
            "—" if not c.feasible else f"{c.knee.ttft_tail_s / MS:,.0f}",
            "—" if not c.feasible else f"{c.knee.tpot_tail_s / MS:,.1f}",
            fmt_usd(c.usd_per_million_output_tokens) if c.usd_per_million_output_tokens else "—",
            c.replicas if c.feasible else "—", c.num_gpus if c.feasible else "—",
            fmt_usd(c.usd_per_month, 0) if c.feasible else "—", c.confidence, c.note or c.status]
           for c in rows])
    typer.echo(f"the knee stays below the replica's steady-state saturation by construction; the {tail} latencies are "
               "at the operating rate; confidence: the knee trial's p99 TTFT was stable (high) or still rising (low)")
