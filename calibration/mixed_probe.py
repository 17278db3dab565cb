"""Device side (imports vLLM): what a mixed engine step costs — ``batch`` decodes plus one new prompt of
``chunk`` tokens — timed on the engine loop itself (issue #21: the MoE serving replay is too optimistic and the
client's token timestamps cannot time single steps; calibration/serve_steps.py says why).

The engine core runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) with vLLM's serving defaults
(asynchronous scheduling, CUDA graphs up to 512 tokens, prefix caching on), so one ``LLMEngine.step()`` call is
one pass of the engine core's busy loop; its wall time (``time.perf_counter`` around the call) is the step
period the engine runs at.  Per (batch, chunk) cell:

1. ``batch`` decoders with ``--context`` random tokens each are added and stepped until all decode;
2. ``--steps`` decode-only calls are timed: ``decode_walls_s``;
3. one prompt of ``chunk`` random tokens (max_tokens 1) is added and the calls are timed until it finishes plus
   two more: ``window_walls_s``.  ``mixed_step_s`` = Σ window − (len(window) − 1) × median decode call: the
   mixed step's period with the other calls of the window taken as decode steps (robust to which call of the
   asynchronous pipeline the mixed step lands on); batch 0 times the lone prompt the same way (the window's sum).

Each cell is repeated ``--repeats`` times (fresh random prompts: no prefix-cache hits).  One JSON line per cell
(``type: mixed_grid``), read by :mod:`calibration.serve_steps` (pure).

    python3 -m calibration.mixed_probe --model qwen3-30b-a3b --out DIR/mixed.jsonl --budget-s 300
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def time_cell(eng, rng, vocab: int, batch: int, context: int, chunk: int, steps: int, tag: str,
              prompts: int = 1) -> dict:
    from vllm import SamplingParams

    from calibration.probes import random_prompts

    sp_dec = SamplingParams(max_tokens=4000, ignore_eos=True, detokenize=False, temperature=0.0)
    sp_pre = SamplingParams(max_tokens=1, ignore_eos=True, detokenize=False, temperature=0.0)
    dec_ids = [f"{tag}-d{i}" for i in range(batch)]
    for rid, p in zip(dec_ids, random_prompts(rng, batch, context, vocab)):
        eng.add_request(rid, {"prompt_token_ids": p}, sp_dec)
    seen: dict[str, int] = {}
    t_end = time.perf_counter() + 60
    while batch and (len(seen) < batch or min(seen.values()) < 3) and time.perf_counter() < t_end:
        for o in eng.step():
            seen[o.request_id] = len(o.outputs[0].token_ids)
    for _ in range(2):  # settle the asynchronous pipeline on pure decode steps
        eng.step()

    def timed() -> tuple[float, list]:
        t = time.perf_counter()
        outs = eng.step()
        return time.perf_counter() - t, outs

    decode = [timed()[0] for _ in range(steps)] if batch else []
    rids = [f"{tag}-p{i}" for i in range(prompts)]
    for rid, p in zip(rids, random_prompts(rng, prompts, chunk // prompts, vocab)):
        eng.add_request(rid, {"prompt_token_ids": p}, sp_pre)
    window, left, extra = [], set(rids), 0
    while extra < 2 and time.perf_counter() < t_end + 30:
        dt, outs = timed()
        window.append(dt)
        left -= {o.request_id for o in outs if o.finished}
        extra += not left
    done = not left
    if dec_ids:
        eng.abort_request(dec_ids)
    while eng.has_unfinished_requests():
        eng.step()
    d = statistics.median(decode) if decode else 0.0
    return {"decode_walls_s": decode, "window_walls_s": window, "decode_period_s": d,
            "mixed_step_s": sum(window) - (len(window) - 1) * d if batch else sum(window),
            "finished": done}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--batches", default="0,8,32,64,128")
    ap.add_argument("--chunks", default="256,768,1024,2048")
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompts", default="1", help="new prompts per step: the chunk split evenly among them")
    ap.add_argument("--max-num-batched-tokens", type=int, default=8192)  # vllm serve's default (planner deploy)
    ap.add_argument("--budget-s", type=float, default=300.0)
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/mixed-probe"))
    ns = ap.parse_args(argv)
    t0 = time.perf_counter()
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
    import numpy as np
    from vllm import LLM

    import vllm
    from calibration.hfconfig import write_hf_config
    from calibration.probes import check_moe_kernels, engine_kwargs_for
    from calibration.records import append_record
    from planner.io import catalog

    model = catalog.model(ns.model)
    if model.moe is not None:
        check_moe_kernels()
    model_dir = write_hf_config(model, ns.work_dir / model.id, "bf16")
    kw = engine_kwargs_for({"max_model_len": 4096, "max_num_batched_tokens": ns.max_num_batched_tokens})
    llm = LLM(model=str(model_dir), **kw)
    eng = llm.llm_engine
    sc = eng.vllm_config.scheduler_config
    cc = eng.vllm_config.compilation_config
    base = {"model": model.id, "gpu": "h200-sxm", "weight_dtype": "bf16", "vllm_version": vllm.__version__}
    append_record(ns.out, {"type": "mixed_engine", **base, "startup_s": time.perf_counter() - t0,
                           "async_scheduling": getattr(sc, "async_scheduling", None),
                           "max_num_batched_tokens": sc.max_num_batched_tokens,
                           "cudagraph_capture_sizes_max": max(cc.cudagraph_capture_sizes or [0]),
                           "cudagraph_mode": str(getattr(cc, "cudagraph_mode", ""))})
    print(f"ENGINE_READY {time.perf_counter() - t0:.0f} s", flush=True)
    rng = np.random.default_rng(7)
    time_cell(eng, rng, model.vocab_size, 8, ns.context, 1024, 2, "warm")  # first-use compiles out of the grid
    time_cell(eng, rng, model.vocab_size, 64, ns.context, 2048, 2, "warm2")
    cells = [(b, c, k) for k in _ints(ns.prompts) for c in _ints(ns.chunks) for b in _ints(ns.batches)]
    for r in range(ns.repeats):
        for b, c, k in cells:
            if time.perf_counter() - t0 > ns.budget_s:
                print("BUDGET reached", flush=True)
                return 0
            rec = time_cell(eng, rng, model.vocab_size, b, ns.context, c, ns.steps, f"r{r}b{b}c{c}k{k}", k)
            append_record(ns.out, {"type": "mixed_grid", **base, "batch_size": b, "context_tokens": ns.context,
                                   "chunk_tokens": c - c % k, "prompts": k, "repeat": r, **rec})
            print(f"CELL B={b} chunk={c} prompts={k} r={r}: mixed {1e3 * rec['mixed_step_s']:.1f} ms, decode "
                  f"{1e3 * rec['decode_period_s']:.1f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
