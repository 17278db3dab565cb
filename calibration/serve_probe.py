"""Measure real vLLM serving under load, to check :mod:`planner.serving` against reality.

vLLM's ``AsyncLLM`` engine runs in-process with dummy weights (no download, no tokenizer) built from
a catalog ModelSpec; requests arrive as a Poisson process (asyncio tasks sleeping until their
scheduled arrival) and stream their tokens back.  For every request the client records, with
``time.perf_counter``, the send time and the wall-clock time of every streamed token -> TTFT, TPOT
(mean inter-token time after the first token) and E2E, plus the engine's own per-request metrics
(``RequestOutput.metrics``: queued/scheduled/first-token/last-token timestamps).  Each record is
appended to a JSON-lines file as soon as it completes (fsync'd: a crash loses nothing), after an
``engine`` record holding the engine configuration (max_num_seqs, max_num_batched_tokens, the KV
pool = num_gpu_blocks × block_size, vLLM version, GPU name).

The default plan (Mistral 7B shape on one H200; ~5-5.5 minutes of device time, two engine starts):

  engine A, prefix caching ON (vLLM's default), start-up ~80 s, then
    * a warm-up of 8 requests (recorded, marked ``warmup``; replay skips it);
    * fixed 512-token prompts / 128 output tokens at 4, 16, 40 and 80 requests/s (the simulator
      with the committed H200 profile puts saturation near 55-60 req/s, ~7,000 output tokens/s),
      200 requests per rate (fewer at light load: a run is capped at ``--max-run-s`` of arrivals);
    * a shared-prefix workload: 2,048 shared + 256 unique prompt tokens, 64 output tokens, at 8 req/s
      (both engines below their knee: the TTFT gain) and 32 req/s (the cache-off engine saturates
      on prefill: the throughput gain), 150 requests each;
  engine B, prefix caching OFF: the same two shared-prefix runs (same prompts, same arrivals),
    only if the time budget still holds an engine start plus the runs; otherwise a ``skipped``
    record says so.

Every phase is wrapped: a failure writes an ``error`` record and the script goes on with the next
phase.  ``--budget-s`` stops starting new runs (and engines) that would not finish in time.

Run on the device (vLLM 0.26.0 installed, one H200)::

    python -m calibration.serve_probe --out "$OUT/h200-serve.jsonl" 2>&1 | tee "$OUT/h200-serve.log"

and check the plumbing anywhere, without vLLM or a GPU (a fake engine, time compressed 50×)::

    python -m calibration.serve_probe --dry-run --out /tmp/serve-dry.jsonl

Then ``planner.serving.replay(path, model, gpu, profile)`` compares the simulator with the records.
The plan, the prompts and the record layout are in :mod:`calibration.serve_plan`; this module starts the
engines and drives them (asyncio).
All vllm/torch imports are inside functions: the module imports without them.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import sys
import tempfile
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `python calibration/serve_probe.py` as well as `-m`
    sys.path.insert(0, str(REPO))

from calibration.records import append_record
from calibration.serve_plan import (
    FIRST_TOKEN_ID,
    SCHEMA_VERSION,
    EnginePhase,
    RunSpec,
    arrival_offsets,
    build_plan,
    make_prompts,
    plan_estimate_s,
    request_record,
)
from planner.specs import Deployment

# ------------------------------------------------------------------------------------ the engines


def _nvidia_smi(query: str) -> list[str]:
    import subprocess

    out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=20, check=True)
    return [x.strip() for x in out.stdout.strip().splitlines()[0].split(",")]


def gpu_name() -> str:
    """The device name from nvidia-smi (torch would open a CUDA context in this client process)."""
    try:
        return _nvidia_smi("name")[0]
    except Exception as err:  # noqa: BLE001 - informational only
        return f"unknown ({type(err).__name__})"


def wait_for_gpu_release(timeout_s: float = 90.0) -> float:
    """After an engine shutdown, wait until its memory is back (the next engine checks free memory
    against gpu_memory_utilization × total); returns the seconds waited."""
    t = time.perf_counter()
    while time.perf_counter() - t < timeout_s:
        try:
            used, total = (float(x) for x in _nvidia_smi("memory.used,memory.total"))
        except Exception:  # noqa: BLE001 - no nvidia-smi: give the engine process a moment
            time.sleep(10)
            break
        if used < 0.05 * total:
            break
        time.sleep(2)
    return time.perf_counter() - t


def engine_args_for(args, model_dir: Path, enable_prefix_caching: bool) -> dict:
    return {
        "model": str(model_dir), "load_format": "dummy", "skip_tokenizer_init": True, "dtype": "bfloat16",
        "gpu_memory_utilization": args.gpu_memory_utilization, "max_model_len": args.max_model_len,
        "enable_prefix_caching": enable_prefix_caching, "max_num_seqs": args.max_num_seqs,
        "max_num_batched_tokens": args.max_num_batched_tokens, "generation_config": "vllm",
        "disable_log_stats": False,  # else RequestOutput.metrics is None
        "seed": 0,
    }


def start_vllm_engine(args, model_dir: Path, enable_prefix_caching: bool):
    """A real AsyncLLM (call inside the running event loop so its output handler starts)."""
    os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.usage.usage_lib import UsageContext
    from vllm.v1.engine.async_llm import AsyncLLM

    eargs = AsyncEngineArgs(**engine_args_for(args, model_dir, enable_prefix_caching))
    # explicit context: ENGINE_CONTEXT (the default) would fall back to 2048 tokens / 128 seqs; the
    # knobs are passed explicitly anyway, OPENAI_API_SERVER is what `vllm serve` uses
    return AsyncLLM.from_engine_args(eargs, usage_context=UsageContext.OPENAI_API_SERVER)


def sampling_params(max_tokens: int, dry_run: bool):
    if dry_run:
        return SimpleNamespace(max_tokens=max_tokens)
    from vllm import SamplingParams

    return SamplingParams(max_tokens=max_tokens, ignore_eos=True, detokenize=False, temperature=0.0)


def vllm_version(dry_run: bool) -> str:
    if dry_run:
        return "dry-run"
    import vllm

    return vllm.__version__


class FakeEngine:
    """``--dry-run`` stand-in for AsyncLLM: streams tokens after made-up delays (a 2 ms + 1 µs/token
    prefill, 1 ms per token, ÷ ``speedup``).  Nothing it produces is a measurement: its records say
    ``dry_run: true``."""

    def __init__(self, args, enable_prefix_caching: bool, speedup: float):
        self.speedup = speedup
        cache = SimpleNamespace(num_gpu_blocks=50_000, block_size=16, enable_prefix_caching=enable_prefix_caching,
                                gpu_memory_utilization=args.gpu_memory_utilization)
        sched = SimpleNamespace(max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_num_batched_tokens,
                                async_scheduling=True)
        self.vllm_config = SimpleNamespace(cache_config=cache, scheduler_config=sched,
                                           model_config=SimpleNamespace(max_model_len=args.max_model_len))

    async def generate(self, prompt, params, request_id):
        n = params.max_tokens
        t0 = time.monotonic()
        await asyncio.sleep((0.002 + 1e-6 * len(prompt["prompt_token_ids"])) / self.speedup)
        ids: list[int] = []
        for i in range(n):
            if i:
                await asyncio.sleep(0.001 / self.speedup)
            ids.append(FIRST_TOKEN_ID + i)
            done = i == n - 1
            m = SimpleNamespace(num_generation_tokens=len(ids), queued_ts=t0, scheduled_ts=t0,
                                first_token_ts=t0 + 0.002 / self.speedup, last_token_ts=time.monotonic())
            yield SimpleNamespace(request_id=request_id, outputs=[SimpleNamespace(token_ids=list(ids))],
                                  finished=done, metrics=m)

    def shutdown(self):
        pass


def engine_record(engine, phase: EnginePhase, args, startup_s: float, model_id: str) -> dict:
    vc = engine.vllm_config
    cc, sc = vc.cache_config, vc.scheduler_config
    blocks = getattr(cc, "num_gpu_blocks", None)
    bs = getattr(cc, "block_size", Deployment.default("block_size_tokens"))
    return {
        "type": "engine", "schema_version": SCHEMA_VERSION, "engine_id": phase.engine_id, "model": model_id,
        "gpu": args.gpu, "gpu_name": "fake" if args.dry_run else gpu_name(), "vllm_version": vllm_version(args.dry_run),
        "dry_run": bool(args.dry_run), "startup_s": startup_s,
        "max_num_seqs": sc.max_num_seqs, "max_num_batched_tokens": sc.max_num_batched_tokens,
        "async_scheduling": getattr(sc, "async_scheduling", None),
        "block_size": bs, "num_gpu_blocks": blocks, "kv_cache_tokens": blocks * bs if blocks else None,
        "enable_prefix_caching": bool(getattr(cc, "enable_prefix_caching", phase.enable_prefix_caching)),
        "gpu_memory_utilization": getattr(cc, "gpu_memory_utilization", args.gpu_memory_utilization),
        "max_model_len": getattr(getattr(vc, "model_config", None), "max_model_len", args.max_model_len),
        "engine_args": {k: v for k, v in engine_args_for(args, Path("MODEL_DIR"), phase.enable_prefix_caching).items()},
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
    }


# --------------------------------------------------------------------------------------- one run


async def run_one(engine, run: RunSpec, out: Path, vocab_size: int, *, engine_id: str, dry_run: bool,
                  speedup: float, timeout_s: float) -> dict:
    """Send the run's requests at their arrival times; append one record per request as it ends."""
    offsets = arrival_offsets(run) / (speedup if dry_run else 1.0)
    prompts = make_prompts(run, vocab_size)
    params = sampling_params(run.output_tokens, dry_run)
    append_record(out, {"type": "run", "run": run.name, "engine_id": engine_id, **asdict(run),
                        "time_scale": 1.0 / speedup if dry_run else 1.0, "t0_unix_s": time.time()})
    t0 = time.perf_counter()
    done = {"ok": 0, "failed": 0}

    async def one(i: int) -> None:
        delay = t0 + offsets[i] - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        send = time.perf_counter() - t0
        times: list[float] = []
        metrics = None
        err = None
        seen = 0
        try:
            prompt = {"type": "token", "prompt_token_ids": prompts[i]}
            async for o in engine.generate(prompt, params, request_id=f"{run.name}-{i}"):
                t = time.perf_counter() - t0
                ids = o.outputs[0].token_ids
                new = len(ids) - seen
                if new > 0:
                    times.extend([t] * new)
                    seen = len(ids)
                if getattr(o, "metrics", None) is not None:
                    metrics = o.metrics
        except Exception as e:  # noqa: BLE001 - one request must not sink the run
            err = f"{type(e).__name__}: {e}"[:300]
        rec = request_record(run, i, float(offsets[i]), send, times, metrics, err)
        if err or len(times) != run.output_tokens:
            done["failed"] += 1
        else:
            done["ok"] += 1
        append_record(out, rec)

    tasks = [asyncio.create_task(one(i)) for i in range(run.num_requests)]
    timed_out = False
    try:
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=timeout_s)
    except asyncio.TimeoutError:
        timed_out = True
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    wall = time.perf_counter() - t0
    end = {"type": "run_end", "run": run.name, "duration_s": wall, "completed": done["ok"], "failed": done["failed"],
           "timed_out": timed_out, "ok": not timed_out and done["failed"] == 0}
    append_record(out, end)
    return end


# ------------------------------------------------------------------------------------------ main


async def run_phase(phase: EnginePhase, args, model, model_dir: Path, out: Path, deadline: float) -> None:
    t = time.perf_counter()
    if args.dry_run:
        engine = FakeEngine(args, phase.enable_prefix_caching, args.dry_run_speedup)
    else:
        engine = start_vllm_engine(args, model_dir, phase.enable_prefix_caching)
    startup = time.perf_counter() - t
    rec = engine_record(engine, phase, args, startup, model.id)
    append_record(out, rec)
    print(f"[{phase.engine_id}] engine ready in {startup:.1f} s: KV {rec['kv_cache_tokens']} tokens, "
          f"max_num_seqs {rec['max_num_seqs']}, max_num_batched_tokens {rec['max_num_batched_tokens']}", flush=True)
    try:
        for run in phase.runs:
            est = run.estimate_s() / (args.dry_run_speedup if args.dry_run else 1.0)
            left = deadline - time.perf_counter()
            if est > left:
                append_record(out, {"type": "skipped", "run": run.name, "engine_id": phase.engine_id,
                                    "reason": f"time budget: needs ~{est:.0f} s, {left:.0f} s left"})
                print(f"[{phase.engine_id}] skip {run.name}: budget ({left:.0f} s left, needs ~{est:.0f} s)", flush=True)
                continue
            try:
                end = await run_one(engine, run, out, model.vocab_size, engine_id=phase.engine_id, dry_run=args.dry_run,
                                    speedup=args.dry_run_speedup, timeout_s=max(left, 1.0))
                print(f"[{phase.engine_id}] {run.name}: {end['completed']}/{run.num_requests} ok in "
                      f"{end['duration_s']:.1f} s{' (TIMED OUT)' if end['timed_out'] else ''}", flush=True)
            except Exception as err:  # noqa: BLE001
                append_record(out, {"type": "error", "run": run.name, "engine_id": phase.engine_id,
                                    "error": f"{type(err).__name__}: {err}"[:500],
                                    "traceback": traceback.format_exc()[-2000:]})
                print(f"[{phase.engine_id}] {run.name}: FAILED {type(err).__name__}: {err}", flush=True)
    finally:
        try:
            engine.shutdown()
        except Exception as err:  # noqa: BLE001 - the records are written; a failed shutdown is only noted
            print(f"[{phase.engine_id}] shutdown: {type(err).__name__}: {err}", flush=True)
        import gc

        gc.collect()
        if not args.dry_run:
            waited = wait_for_gpu_release()
            print(f"[{phase.engine_id}] shut down; GPU memory released after {waited:.0f} s", flush=True)


async def amain(args) -> int:
    from calibration.hfconfig import write_hf_config
    from planner.io import catalog

    model = catalog.model(args.model)
    out = Path(args.out)
    phases = build_plan(args)
    start = time.perf_counter()
    scale = args.dry_run_speedup if args.dry_run else 1.0
    deadline = start + args.budget_s / scale
    est = plan_estimate_s(phases, args.engine_start_s)
    print(f"serve_probe: {model.id}, {len(phases)} engine(s), "
          f"{sum(len(p.runs) for p in phases)} runs, estimated {est:.0f} s (budget {args.budget_s:.0f} s)"
          f"{f' [DRY RUN: fake engine, time / {scale:g}]' if args.dry_run else ''} -> {out}", flush=True)
    for p in phases:
        for r in p.runs:
            print(f"  {p.engine_id}: {r.name}: {r.num_requests} requests at "
                  f"{'burst' if r.rate_per_s is None else f'{r.rate_per_s:g}/s'}, prompt {r.total_prompt_tokens} "
                  f"(shared {r.shared_prefix_tokens}), output {r.output_tokens}, ~{r.estimate_s():.0f} s", flush=True)
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="serve-probe-"))
    model_dir = write_hf_config(model, work / model.id)
    for p in phases:
        left = deadline - time.perf_counter()
        need = (args.engine_start_s + sum(r.estimate_s() for r in p.runs if not r.warmup)) / scale
        if p.optional and need > left:
            append_record(out, {"type": "skipped", "engine_id": p.engine_id,
                                "reason": f"time budget: engine start + runs need ~{need:.0f} s, {left:.0f} s left; "
                                          f"re-run with --only-prefix-off to measure it separately"})
            print(f"[{p.engine_id}] skipped: budget ({left:.0f} s left, needs ~{need:.0f} s)", flush=True)
            continue
        try:
            await run_phase(p, args, model, model_dir, out, deadline)
        except Exception as err:  # noqa: BLE001 - an engine that fails to start must not lose the rest
            append_record(out, {"type": "error", "engine_id": p.engine_id, "error": f"{type(err).__name__}: {err}"[:500],
                                "traceback": traceback.format_exc()[-2000:]})
            print(f"[{p.engine_id}] FAILED: {type(err).__name__}: {err}", flush=True)
    print(f"serve_probe: done in {time.perf_counter() - start:.0f} s -> {out}", flush=True)
    return 0


def parse_args(argv: list[str] | None = None):
    ap = argparse.ArgumentParser(description="Measure vLLM serving under Poisson load (AsyncLLM, dummy weights).")
    ap.add_argument("--model", default="mistral-7b-v0.3", help="catalog model id (dense llama/mistral/qwen layout)")
    ap.add_argument("--gpu", default="h200-sxm", help="catalog GPU id (recorded; not checked)")
    ap.add_argument("--out", default=str(REPO / "calibration" / "data" / "serve-probe.jsonl"),
                    help="JSON-lines output, appended to")
    ap.add_argument("--rates", default="4,16,40,80", help="request rates of the fixed-length sweep, requests/s")
    ap.add_argument("--num-requests", type=int, default=200, help="requests per sweep rate")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--output-tokens", type=int, default=128)
    ap.add_argument("--max-run-s", type=float, default=45.0,
                    help="cap a run's arrival span: requests = min(N, rate × this)")
    ap.add_argument("--min-requests", type=int, default=50, help="never fewer requests per run than this")
    ap.add_argument("--shared-prefix-tokens", type=int, default=2048, help="0 skips the shared-prefix runs")
    ap.add_argument("--shared-unique-tokens", type=int, default=256)
    ap.add_argument("--shared-output-tokens", type=int, default=64)
    ap.add_argument("--shared-rates", default="8,32", help="rates of the shared-prefix runs, requests/s")
    ap.add_argument("--shared-num-requests", type=int, default=150)
    ap.add_argument("--skip-prefix-off", action="store_true", help="no second engine with prefix caching off")
    ap.add_argument("--only-prefix-off", action="store_true",
                    help="only the prefix-caching-off engine's shared-prefix runs (a separate session)")
    ap.add_argument("--max-num-seqs", type=int, default=Deployment.default("max_num_seqs"),
                    help="vLLM serve default on H100/H200")
    ap.add_argument("--max-num-batched-tokens", type=int, default=Deployment.default("max_num_batched_tokens"),
                    help="vLLM serve default on H100/H200")
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    ap.add_argument("--budget-s", type=float, default=350.0,
                    help="stop starting runs/engines that would end after this many seconds")
    ap.add_argument("--engine-start-s", type=float, default=80.0,
                    help="estimated engine start-up, s (77 s measured on the H200 by calibration/run.py)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work-dir", default="", help="where to write the model's config.json (default: a temp dir)")
    ap.add_argument("--dry-run", action="store_true", help="fake engine, no vllm/GPU: exercises the plumbing")
    ap.add_argument("--dry-run-speedup", type=float, default=50.0, help="time compression of --dry-run")
    args = ap.parse_args(argv)
    for name in ("num_requests", "prompt_tokens", "output_tokens", "min_requests", "shared_num_requests",
                 "shared_unique_tokens", "shared_output_tokens", "max_num_seqs", "max_num_batched_tokens",
                 "max_model_len"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')}: must be >= 1")
    if args.shared_prefix_tokens < 0:
        ap.error("--shared-prefix-tokens: must be >= 0")
    if args.only_prefix_off and args.shared_prefix_tokens == 0:
        ap.error("--only-prefix-off: needs --shared-prefix-tokens > 0")
    if not (0 < args.gpu_memory_utilization <= 1):
        ap.error("--gpu-memory-utilization: must be in (0, 1]")
    need = max(args.prompt_tokens + args.output_tokens,
               args.shared_prefix_tokens + args.shared_unique_tokens + args.shared_output_tokens)
    if need > args.max_model_len:
        ap.error(f"--max-model-len: {args.max_model_len} is shorter than a request ({need} tokens)")
    if args.only_prefix_off and args.skip_prefix_off:
        ap.error("--only-prefix-off: conflicts with --skip-prefix-off")
    return args


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(amain(parse_args(argv)))


if __name__ == "__main__":
    _rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_rc)  # an engine child process can otherwise hold the interpreter's exit
