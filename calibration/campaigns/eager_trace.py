"""Where an eager prompt step's time goes (issue #21, 2026-12-04): one in-process vLLM engine, prompt steps of
several lengths timed, then each traced once with torch.profiler (CPU ops and CUDA kernels), summarised into JSON.

Why: above the largest CUDA-graph size (512 tokens; 1,024 for gpt-oss) a fused-MoE engine's prompt step costs
45-100 ms even where its GPU work is a fraction of that, and the probes say the excess barely depends on the layer
count (Qwen3-30B-A3B: 48 layers 54-58 ms at 1,023-2,048 tokens, its 24-layer variant 56-58 ms).  A CPU launch floor
per layer (the profile's model) or a per-step cost cannot be told apart from wall times; a trace can: the GPU's busy
time against the step's span, and the CPU ops that fill the gaps.  (Found: CPU-bound, and growing with the MoE
layers in the server's process layout; calibration/data/README.md.)

    python3 calibration/campaigns/eager_trace.py MODEL WEIGHTS OUTDIR [LEN,...] [TRACED_LEN,...]

``EAGER_TRACE_ENGINE`` (JSON) sets engine arguments over the probes' (``calibration.probes.engine_kwargs_for``).
Writes OUTDIR/<model>.trace.json: per length the wall times (3 repeats after 2 warm-ups) with the main thread's and
the process's CPU time, again with the garbage collector frozen and off, and per traced length the step's wall time,
the union of CUDA kernel intervals (busy), their span, the largest GPU idle gaps with the CPU ops running in them, the
top CPU ops by self time and the top kernels by time (``EAGER_TRACE_PROFILE=0``: no traces)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def union_s(intervals: list[tuple[float, float]]) -> float:
    """Total length of the union of (start, end) intervals, microseconds in, seconds out."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total * 1e-6


def summarize_trace(path: Path, wall_s: float) -> dict:
    """Kernel busy time, span and idle gaps of a chrome trace; the CPU ops overlapping the largest gaps."""
    ev = json.loads(path.read_text())["traceEvents"]
    kern = [(e["ts"], e["ts"] + e["dur"], e["name"]) for e in ev if e.get("cat") == "kernel" and "dur" in e]
    cpu = [(e["ts"], e["ts"] + e["dur"], e["name"]) for e in ev
           if e.get("cat") in ("cpu_op", "python_function", "user_annotation") and "dur" in e]
    kern.sort()
    out = {"wall_s": wall_s, "kernels": len(kern)}
    if not kern:
        return out
    t0, t1 = kern[0][0], max(k[1] for k in kern)
    out.update(kernel_span_s=(t1 - t0) * 1e-6, kernel_busy_s=union_s([(a, b) for a, b, _ in kern]))
    gaps, end = [], kern[0][1]
    for a, b, name in kern[1:]:
        if a > end:
            gaps.append((a - end, end, a, name))
        end = max(end, b)
    gaps.sort(reverse=True)
    out["gaps_over_100us"] = sum(1 for g in gaps if g[0] > 100)
    out["gap_total_s"] = sum(g[0] for g in gaps) * 1e-6
    top = []
    for g, a, b, nxt in gaps[:12]:
        inside = sorted(((min(e, b) - max(s, a), n) for s, e, n in cpu if s < b and e > a), reverse=True)[:6]
        top.append({"gap_us": round(g, 1), "next_kernel": nxt[:90],
                    "cpu_ops": [[n[:90], round(d, 1)] for d, n in inside]})
    out["largest_gaps"] = top
    by_k: dict[str, list[float]] = {}
    for a, b, name in kern:
        by_k.setdefault(name[:90], []).append(b - a)
    out["top_kernels_us"] = sorted(([n, len(v), round(sum(v), 1)] for n, v in by_k.items()),
                                   key=lambda r: -r[2])[:25]
    return out


def eager_excess_s(summary: dict, key: str = "walls_s", eager=(1536, 2048, 3000), piecewise: int = 256) -> float:
    """An engine's eager prompt step beyond its piecewise one, from a written summary (``main``'s JSON): the median
    over the ``eager`` lengths (above the CUDA graphs, GPU work a fraction of the step) of each length's median wall,
    less the median wall at ``piecewise`` tokens (inside the graphs)."""
    rows = summary[key]

    def med(n) -> float:
        w = sorted(rows[str(n)]["wall_s"] if isinstance(rows[str(n)], dict) else rows[str(n)])
        return w[len(w) // 2]

    e = sorted(med(n) for n in eager)
    return e[len(e) // 2] - med(piecewise)


def main() -> int:
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine core in this process: profiled
    os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
    import numpy as np
    import torch
    from vllm import LLM, SamplingParams

    from calibration.hfconfig import write_hf_config
    from calibration.probes import engine_kwargs_for, random_prompts
    from calibration.variants import probe_model

    model_id, weights, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    lens = [int(x) for x in (sys.argv[4] if len(sys.argv) > 4 else "256,1023,1536,2048,3000,4096").split(",")]
    traced = [int(x) for x in (sys.argv[5] if len(sys.argv) > 5 else "1023,2048,4096").split(",")]
    out.mkdir(parents=True, exist_ok=True)
    model = probe_model(model_id)
    mdir = write_hf_config(model, Path(os.environ.get("TMPDIR", "/tmp")) / "eager_trace" / model.id, weights)
    # EAGER_TRACE_ENGINE: engine settings over the probes' (JSON), e.g. vllm serve's {"max_num_batched_tokens": 8192}
    kw = {**engine_kwargs_for({"weight_dtype": weights}), **json.loads(os.environ.get("EAGER_TRACE_ENGINE") or "{}")}
    t0 = time.perf_counter()
    llm = LLM(model=str(mdir), **kw)
    res = {"model": model_id, "weights": weights, "startup_s": time.perf_counter() - t0, "engine_kwargs": kw,
           "torch": torch.__version__, "traces": {}}
    rng = np.random.default_rng(1)
    sp = SamplingParams(max_tokens=1, ignore_eos=True, detokenize=False, temperature=0.0)

    cpu: dict = {}

    def gen(n):
        p = random_prompts(rng, 1, n, model.vocab_size)
        t, th, pr = time.perf_counter(), time.thread_time(), time.process_time()
        llm.generate([{"prompt_token_ids": x} for x in p], sp, use_tqdm=False)
        cpu[n] = (time.thread_time() - th, time.process_time() - pr)  # this thread's CPU, all threads' CPU
        return time.perf_counter() - t

    def walls(key):
        res[key] = {}
        for n in lens:
            gen(n), gen(n)  # warm-up: the length's kernels compiled
            w, c = [], []
            for _ in range(3):
                w.append(gen(n))
                c.append(cpu[n])
            res[key][n] = {"wall_s": sorted(w), "thread_cpu_s": [x[0] for x in c], "process_cpu_s": [x[1] for x in c]}
            print(f"{model_id} {key} P={n}: {[round(x * 1e3, 2) for x in sorted(w)]} ms; main thread CPU "
                  f"{[round(x[0] * 1e3, 2) for x in c]} ms, process CPU {[round(x[1] * 1e3, 2) for x in c]} ms",
                  flush=True)

    walls("walls_s")
    import gc
    gc.collect()
    gc.freeze()
    gc.disable()  # a garbage collection inside a step would be a per-step cost of the process's object count
    walls("walls_gc_off_s")
    gc.enable()
    from torch.profiler import ProfilerActivity, profile
    for n in [] if os.environ.get("EAGER_TRACE_PROFILE") == "0" else traced:
        gen(n)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            wall = gen(n)
        path = out / f"{model_id}.{n}.trace.json"
        prof.export_chrome_trace(str(path))
        res["traces"][n] = summarize_trace(path, wall)
        s = res["traces"][n]
        print(f"{model_id} P={n} traced: wall {wall * 1e3:.2f} ms, kernel busy "
              f"{s.get('kernel_busy_s', 0) * 1e3:.2f} ms over a span of {s.get('kernel_span_s', 0) * 1e3:.2f} ms, "
              f"{s.get('gaps_over_100us')} gaps > 100 us", flush=True)
        path.unlink()
    (out / f"{model_id}.trace.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
