"""vLLM prefill/decode probes.

``plan_points`` (pure) decides what to measure; ``run_engine_probes`` (needs vllm + a GPU) starts one
engine with dummy weights built from a catalog model and measures every point, appending one record
per point to a JSONL file as it is taken.  It runs in a child process of ``planner calibrate`` so
that an OOM or a crash in the engine loses nothing and the parent can read vLLM's start-up log.

Measurements, as ``planner validate`` defines them:
- ``prefill_s``: wall time of ``batch_size`` requests of ``prompt_tokens`` unique tokens submitted
  together to an idle engine with max_tokens=1 (median of ``repeats``).
- ``decode_step_s``: the prompts are first prefilled once (max_tokens=1) so that prefix caching
  holds them; the same prompts are then resubmitted with max_tokens=output_tokens, so the measured
  run is (one-token recompute) + decode steps, and per request (last_token_ts − first_token_ts) /
  (generated − 1) is the mean decode step over contexts prompt … prompt+output (median over the
  batch).  The wall-clock equivalent is recorded beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

from calibration.records import append_record, done_keys, probe_key, read_records
from planner.specs import LLM_CLASS_LIMITS, Deployment, count_params
from planner.units import MS

# NVLink multicast stays off for tensor-parallel engines (NCCL NVLS, PyTorch symmetric memory,
# NVSHMEM): on shared hosts a program that uses it can take the GPUs out of service.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

FIRST_TOKEN_ID = 10  # dummy weights: avoid special ids 0-2 (and a margin)
#: The probe engines' settings when the plan gives none: the offline ``LLM`` class's step limits
#: (:data:`planner.specs.LLM_CLASS_LIMITS`) and a 32K context.
PROBE_MAX_NUM_BATCHED_TOKENS, PROBE_MAX_NUM_SEQS = LLM_CLASS_LIMITS
PROBE_MAX_MODEL_LEN = 32768


# ------------------------------------------------------------------------------------ the plan


def plan_points(
    *, quick: bool = False, kv_capacity_tokens: int | None = None, max_model_len: int = PROBE_MAX_MODEL_LEN,
    role: str = "fit", decode_output_tokens: int = 64, max_decode_batch_tokens: int = 320_000,
    max_prefill_tokens: int = 10**9, mixed: bool = False, max_num_batched_tokens: int = PROBE_MAX_NUM_BATCHED_TOKENS,
) -> list[dict]:
    """The probe points for one engine.  ``role='fit'`` is the calibration grid; ``role='validate'``
    a different grid (other lengths and batch sizes) for held-out checks.  ``mixed`` adds mixed
    steps: ``batch_size`` sequences decoding at ``prompt_tokens`` of context while one new prompt of
    ``chunk_tokens`` is prefilled in the same step (see :func:`measure_mixed_step`)."""
    if role == "fit":
        prefill_lens = [128, 256, 384, 512, 640, 768, 1024, 1536, 2048, 3072, 4096, 8192, 16384, 32000]
        batched = [(4, 512), (16, 512), (4, 2048), (16, 2048)]
        decode_batches = [1, 4, 16, 32, 64, 128, 256, 512]
        decode_ctx = [512, 2048, 8192]
        if quick:  # every family's default-plan engine: ~1 minute of probes on a 7-8B model
            prefill_lens = [128, 512, 1024, 2048, 4096, 8192, 16384]
            batched = [(16, 512), (8, 2048)]
            decode_batches = [1, 8, 32, 128, 256]
            decode_ctx = [512, 2048]
    else:
        prefill_lens = [200, 700, 1500, 3000, 6000, 12000, 24000]
        batched = [(8, 1000), (32, 300), (8, 3000)]
        decode_batches = [2, 8, 24, 48, 96, 192, 384]
        decode_ctx = [1024, 4096, 12000]
        if quick:
            prefill_lens = [300, 700, 1500, 3000, 6000, 12000]
            batched = [(8, 1000)]
            decode_batches = [2, 24, 96, 192]
            decode_ctx = [1024, 3000]
    cap = kv_capacity_tokens or 10**12
    points: list[dict] = []
    for p in prefill_lens:
        if p + 1 <= max_model_len and p <= max_prefill_tokens:
            points.append({"metric": "prefill_s", "batch_size": 1, "prompt_tokens": p, "output_tokens": 1,
                           "repeats": 3})
    for b, p in batched:
        if b * (p + 1) <= min(0.8 * cap, max_decode_batch_tokens):
            points.append({"metric": "prefill_s", "batch_size": b, "prompt_tokens": p, "output_tokens": 1,
                           "repeats": 2})
    for ctx in decode_ctx:
        for b in decode_batches:
            need = b * (ctx + decode_output_tokens + 16)
            if need <= min(0.8 * cap, max_decode_batch_tokens) and ctx + decode_output_tokens <= max_model_len:
                points.append({"metric": "decode_step_s", "batch_size": b, "prompt_tokens": ctx,
                               "output_tokens": decode_output_tokens, "repeats": 1})
    if mixed:
        grid = [(1, 512), (1, 4096), (32, 256), (32, 1024), (32, 4096), (128, 256), (128, 1024), (128, 4096),
                (256, 2048)] if not quick else [(32, 1024), (128, 256), (128, 4096)]
        ctx = 1024 if role == "fit" else 2000
        for b, c in grid:
            if b * (ctx + 400) + c <= min(0.8 * cap, max_decode_batch_tokens) and b + c <= max_num_batched_tokens:
                points.append({"metric": "mixed_step_s", "batch_size": b, "prompt_tokens": ctx, "chunk_tokens": c,
                               "output_tokens": 1, "repeats": 3})
    return points


def size_limits(model) -> dict:
    """Keep a big model's sweep inside the same GPU time as a 7B one: fewer prefilled tokens."""
    scale = min(1.0, 8e9 / count_params(model).active)
    out = {"max_decode_batch_tokens": int(320_000 * scale)}
    if scale < 0.5:
        out["max_prefill_tokens"] = 16384
    return out


def random_prompts(rng, n: int, length: int, vocab_size: int) -> list[list[int]]:
    hi = max(FIRST_TOKEN_ID + 1, vocab_size - 1)
    return [rng.integers(FIRST_TOKEN_ID, hi, size=length).tolist() for _ in range(n)]


def summarize_metrics(outputs) -> dict:
    """Per-request engine timestamps -> median decode step (s) and engine prefill spans."""
    itl, ttft_engine = [], []
    for o in outputs:
        m = getattr(o, "metrics", None)
        if m is None:
            continue
        n = getattr(m, "num_generation_tokens", 0) or len(o.outputs[0].token_ids)
        first, last = getattr(m, "first_token_ts", 0.0), getattr(m, "last_token_ts", 0.0)
        sched = getattr(m, "scheduled_ts", 0.0)
        if n > 1 and last > first > 0:
            itl.append((last - first) / (n - 1))
        if first > 0 and sched > 0:
            ttft_engine.append(first - sched)
    itl.sort()
    ttft_engine.sort()
    return {
        "itl_median_s": itl[len(itl) // 2] if itl else None,
        "itl_min_s": itl[0] if itl else None,
        "itl_max_s": itl[-1] if itl else None,
        "engine_first_token_span_s": ttft_engine[-1] if ttft_engine else None,
    }


# ----------------------------------------------------------------------------- the engine side


def engine_kwargs_for(args: dict) -> dict:
    kw = dict(
        load_format="auto" if args.get("model_dir") else "dummy", skip_tokenizer_init=True, dtype="bfloat16",
        gpu_memory_utilization=args.get("gpu_memory_utilization", Deployment.default("gpu_memory_utilization")),
        max_model_len=args.get("max_model_len", PROBE_MAX_MODEL_LEN),
        max_num_batched_tokens=args.get("max_num_batched_tokens", PROBE_MAX_NUM_BATCHED_TOKENS),
        max_num_seqs=args.get("max_num_seqs", PROBE_MAX_NUM_SEQS),
        enable_prefix_caching=True,
        disable_log_stats=False,  # without it RequestOutput.metrics is None
        generation_config="vllm",
        kv_cache_dtype=args.get("kv_cache_dtype", "auto"),
        seed=0,
    )
    if args.get("tensor_parallel", 1) > 1:
        kw["tensor_parallel_size"] = args["tensor_parallel"]
    if args.get("weight_dtype", "bf16") == "fp8":
        kw["quantization"] = "fp8"  # online W8A8: bf16 dummy weights quantised per layer at load
    if args.get("enforce_eager"):
        kw["enforce_eager"] = True
    return kw


def run_engine_probes(args: dict) -> int:
    """Child process: start one vLLM engine and measure ``args['points']``.  Returns an exit code."""
    os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
    import numpy as np
    from vllm import LLM, SamplingParams

    from calibration.hfconfig import write_hf_config
    from calibration.variants import probe_model

    out = Path(args["out"])
    model = probe_model(args["model"])
    weight_dtype = args.get("weight_dtype", "bf16")
    model_dir = Path(args.get("model_dir") or write_hf_config(model, Path(args["work_dir"]) / model.id, weight_dtype))
    kv_dtype = args.get("kv_cache_dtype", "auto")
    if args.get("tensor_parallel", 1) > 1:
        os.environ.update(MULTICAST_OFF)
    if model.moe is not None:
        check_moe_kernels()
    base = {"type": "probe", "model": model.id, "gpu": args["gpu"], "kv_cache_dtype": kv_dtype,
            "weight_dtype": weight_dtype, "tensor_parallel": args.get("tensor_parallel", 1),
            "role": args.get("role", "fit")}
    kw = engine_kwargs_for(args)
    t0 = time.perf_counter()
    llm = LLM(model=str(model_dir), **kw)
    startup_s = time.perf_counter() - t0
    import vllm

    cc = llm.llm_engine.vllm_config.cache_config
    sc = llm.llm_engine.vllm_config.scheduler_config
    num_blocks = getattr(cc, "num_gpu_blocks", None)
    engine_rec = {
        "type": "engine", "model": model.id, "gpu": args["gpu"], "kv_cache_dtype": kv_dtype,
        "weight_dtype": weight_dtype, "quantization": kw.get("quantization", ""),
        "role": args.get("role", "fit"), "startup_s": startup_s, "vllm_version": vllm.__version__,
        "num_gpu_blocks": num_blocks, "block_size": getattr(cc, "block_size", Deployment.default("block_size_tokens")),
        "max_num_batched_tokens": sc.max_num_batched_tokens, "max_num_seqs": sc.max_num_seqs,
        "async_scheduling": getattr(sc, "async_scheduling", None),
        "gpu_memory_utilization": cc.gpu_memory_utilization, "max_model_len": kw["max_model_len"],
        "engine_kwargs": {k: v for k, v in kw.items()},
        "tensor_parallel": args.get("tensor_parallel", 1),
        "engine_start_index": args.get("engine_start_index"),
        **compilation_terms(llm),
    }
    append_record(out, engine_rec)
    print(f"ENGINE_READY startup {startup_s:.1f}s blocks={num_blocks}", flush=True)
    cap = (num_blocks or 0) * engine_rec["block_size"] or None
    points = args.get("points") or plan_points(
        quick=args.get("quick", False), kv_capacity_tokens=cap, max_model_len=kw["max_model_len"],
        role=args.get("role", "fit"), mixed=bool(args.get("mixed")),
        max_num_batched_tokens=sc.max_num_batched_tokens, **size_limits(model))
    # --resume: a point measured in any raw file of the campaign (other days' files too) is not measured again
    skip = done_keys([r for f in args.get("done_files") or [out] for r in read_records(Path(f))]) \
        if args.get("resume") else set()
    rng = np.random.default_rng(args.get("seed", 1))
    deadline = time.perf_counter() + float(args.get("time_budget_s", 1e9))

    def gen(prompts, max_tokens):
        sp = SamplingParams(max_tokens=max_tokens, ignore_eos=True, detokenize=False, temperature=0.0)
        t = time.perf_counter()
        outs = llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
        return time.perf_counter() - t, outs

    if args.get("cold_prefill_lens"):  # a cold engine: first requests of each new length, then again
        measure_cold_start(gen, rng, model, args["cold_prefill_lens"], base, out)
    # warm-up: first requests after start-up pay one-off costs
    gen(random_prompts(rng, 4, 256, model.vocab_size), 8)
    for i, pt in enumerate(points, 1):
        rec = dict(base, metric=pt["metric"], batch_size=pt["batch_size"], prompt_tokens=pt["prompt_tokens"],
                   output_tokens=pt["output_tokens"])
        if "chunk_tokens" in pt:
            rec["chunk_tokens"] = pt["chunk_tokens"]
        if probe_key(rec) in skip:
            continue
        if time.perf_counter() > deadline:
            append_record(out, dict(rec, status="skipped", error="time budget reached"))
            continue
        label = f"[{i}/{len(points)}] {pt['metric']} B={pt['batch_size']} P={pt['prompt_tokens']}" + (
            f" C={pt['chunk_tokens']}" if "chunk_tokens" in pt else "")
        try:
            if pt["metric"] == "prefill_s":
                walls, spans = [], []
                for _ in range(pt.get("repeats", 3)):
                    prompts = random_prompts(rng, pt["batch_size"], pt["prompt_tokens"], model.vocab_size)
                    wall, outs = gen(prompts, 1)
                    walls.append(wall)
                    spans.append(summarize_metrics(outs)["engine_first_token_span_s"])
                walls.sort()
                rec.update(status="ok", measured=walls[len(walls) // 2], wall_samples_s=walls,
                           engine_spans_s=spans)
            elif pt["metric"] == "mixed_step_s":
                rec.update(status="ok", **measure_mixed_step(llm, rng, model.vocab_size, pt["batch_size"],
                                                             pt["prompt_tokens"], pt["chunk_tokens"],
                                                             pt.get("repeats", 3)))
            else:
                prompts = random_prompts(rng, pt["batch_size"], pt["prompt_tokens"], model.vocab_size)
                warm_s, _ = gen(prompts, 1)  # fills the prefix cache
                n = pt["output_tokens"]
                wall, outs = gen(prompts, n)
                s = summarize_metrics(outs)
                if s["itl_median_s"] is None:
                    raise RuntimeError("no per-request metrics (disable_log_stats must be False)")
                rec.update(status="ok", measured=s["itl_median_s"], wall_s=wall, prefill_warm_s=warm_s,
                           wall_step_s=wall / n, **s)
            print(f"{label}: {rec['measured'] / MS:.3f} ms", flush=True)
        except Exception as err:  # one failed point must not stop the sweep
            rec.update(status="failed", error=f"{type(err).__name__}: {err}"[:500])
            print(f"{label}: FAILED {rec['error']}", flush=True)
        append_record(out, rec)
    _shutdown(llm)
    return 0


def compilation_terms(llm) -> dict:
    """The CUDA-graph capture sizes and mode the engine chose (steps above the largest run piecewise/eager)."""
    try:
        cc = llm.llm_engine.vllm_config.compilation_config
        sizes = sorted(int(x) for x in (getattr(cc, "cudagraph_capture_sizes", None) or []))
        return {"cudagraph_capture_sizes": sizes, "cudagraph_mode": str(getattr(cc, "cudagraph_mode", "")),
                "max_cudagraph_capture_size": getattr(cc, "max_cudagraph_capture_size", None) or (
                    sizes[-1] if sizes else None)}
    except Exception as err:  # noqa: BLE001 - a missing attribute must not stop the probes
        return {"compilation_error": f"{type(err).__name__}: {err}"[:200]}


def measure_cold_start(gen, rng, model, lens: list[int], base: dict, out: Path) -> None:
    """Right after start-up: one request of each prompt length (the engine has never run a step of that many
    tokens: JIT/Triton compiles fall in here), then the same lengths again warm.  One 'cold_start' record each."""
    t_ready = time.perf_counter()
    for phase in ("cold", "warm"):
        for n in lens:
            wall, _ = gen(random_prompts(rng, 1, int(n), model.vocab_size), 1)
            append_record(out, dict(base, type="cold_start", phase=phase, prompt_tokens=int(n), measured=wall,
                                    since_ready_s=time.perf_counter() - t_ready))
            print(f"[cold] {phase} P={n}: {wall / MS:.1f} ms", flush=True)


def check_moe_kernels() -> None:
    """vLLM's Triton fused-MoE path needs ``torch.ops._moe_C`` (topk_softmax, moe_align_block_size), which
    the offline bundle ships as a separate add-on and vLLM skips silently when missing: say so in the log."""
    import torch

    import vllm._custom_ops  # noqa: F401 - loads the extensions that exist

    try:
        ok = hasattr(torch.ops._moe_C, "moe_align_block_size")
    except Exception:  # noqa: BLE001 - torch.ops raises for an unknown namespace on some versions
        ok = False
    print(f"MOE_KERNELS {'loaded' if ok else 'NOT LOADED (extract the MoE add-on if the engine fails)'}", flush=True)


def measure_mixed_step(llm, rng, vocab_size: int, batch: int, context_tokens: int, chunk_tokens: int,
                       repeats: int) -> dict:
    """The duration of an engine step that runs ``batch`` decodes (contexts ≈ ``context_tokens``) plus one
    new prompt of ``chunk_tokens`` (prefilled whole in that step), and of the decode-only steps around it.

    Driven step by step through ``llm.llm_engine`` (the multi-process engine with asynchronous scheduling,
    as served).  Every engine step stamps its outputs with one engine-core monotonic timestamp
    (``metrics.last_token_ts`` of a decoding request, ``first_token_ts`` of the new prompt), so the step
    periods are read on the engine's own clock, without the client's polling: the period ending with
    the new prompt's first token is the mixed step.  ``measured`` is the median over ``repeats``."""
    from vllm import SamplingParams

    eng = llm.llm_engine
    tag = f"mx{batch}-{chunk_tokens}-{int(rng.integers(1 << 30))}"
    dec_ids = [f"{tag}-d{i}" for i in range(batch)]
    sp_dec = SamplingParams(max_tokens=4000, ignore_eos=True, detokenize=False, temperature=0.0)
    sp_pre = SamplingParams(max_tokens=1, ignore_eos=True, detokenize=False, temperature=0.0)
    for rid, p in zip(dec_ids, random_prompts(rng, batch, context_tokens, vocab_size)):
        eng.add_request(rid, {"prompt_token_ids": p}, sp_dec)
    stamps: list[float] = []  # distinct engine-step timestamps seen on the tracked decode
    generated: dict[str, int] = {}
    first_token: dict[str, float] = {}

    def pump() -> None:
        for o in eng.step():
            m = getattr(o, "metrics", None)
            if m is None:
                continue
            if o.request_id == dec_ids[0] and m.last_token_ts and (not stamps or m.last_token_ts > stamps[-1]):
                stamps.append(m.last_token_ts)
            if o.request_id in generated or o.request_id.startswith(f"{tag}-d"):
                generated[o.request_id] = len(o.outputs[0].token_ids)
            if o.request_id.startswith(f"{tag}-p") and m.first_token_ts:
                first_token[o.request_id] = m.first_token_ts

    t_end = time.perf_counter() + 120
    while (len(generated) < batch or min(generated.values()) < 3) and time.perf_counter() < t_end:
        pump()
    mixed, decode = [], []
    try:
        for r in range(repeats):
            for _ in range(4):
                pump()
            n0 = len(stamps)
            rid = f"{tag}-p{r}"
            eng.add_request(rid, {"prompt_token_ids": random_prompts(rng, 1, chunk_tokens, vocab_size)[0]}, sp_pre)
            while rid not in first_token and time.perf_counter() < t_end:
                pump()
            pump()
            ts = first_token.get(rid)
            if ts is None:
                raise RuntimeError("the new prompt never produced its first token")
            before = [s for s in stamps[:n0 + 8] if s < ts]
            if len(before) >= 2:
                mixed.append(ts - before[-1])
                decode += list(np_diff(before[-4:]))
    finally:
        eng.abort_request(dec_ids)
        while eng.has_unfinished_requests():
            eng.step()
    if not mixed:
        raise RuntimeError("no mixed step was timed")
    mixed.sort()
    decode.sort()
    return {"measured": mixed[len(mixed) // 2], "mixed_samples_s": mixed, "chunk_tokens": chunk_tokens,
            "decode_period_median_s": decode[len(decode) // 2] if decode else None,
            "decode_contexts_tokens": context_tokens + max(generated.values(), default=0)}


def np_diff(xs: list[float]) -> list[float]:
    return [b - a for a, b in zip(xs, xs[1:])]


def _shutdown(llm) -> None:
    def stop():
        try:
            llm.llm_engine.engine_core.shutdown(timeout=10)
        except Exception:
            pass
    t = threading.Thread(target=stop, daemon=True)
    t.start()
    t.join(15)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="child process: one engine's probes (used by planner calibrate)")
    ap.add_argument("args_json", help="JSON file with the probe arguments")
    ns = ap.parse_args(argv)
    args = json.loads(Path(ns.args_json).read_text())
    rc = 1
    try:
        rc = run_engine_probes(args)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)  # the engine child can otherwise delay the interpreter's exit


if __name__ == "__main__":
    main()
