"""Engine steps of a recorded ``vllm bench serve`` run, read back from the client's token timestamps, and mixed
engine steps (decodes + a new prompt) measured by :mod:`calibration.mixed_probe`, both against the simulator's
:class:`~planner.serving.StepCost` (pure: no torch/vLLM).

Steps from the client (:func:`client_steps`): every streamed token's arrival (request start + TTFT + Σ ITL) is
sorted and cut where two arrivals are more than ``gap_s`` apart; one engine step sends one token to every running
request at once, so a cluster is one step and the time between clusters its period.  On the MoE chat runs of
2026-12-01 the cluster count matches vLLM's own step counter (``vllm:iteration_tokens_total_count``) within 2 %
at 8 and 20 req/s; at 34 req/s the API server spreads one step's 130+ tokens over more than 6 ms, so clusters
split.  Single periods are distorted by the API server (a long step is often followed by 10-13 ms periods,
shorter than any decode step of that batch), so only sums over many steps are meaningful.

    python -m calibration.serve_steps [MIXED_JSONL ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from planner.io.jsonl import read_jsonl

ROOT = Path(__file__).resolve().parent.parent
MOE_CHAT = ROOT / "calibration/data/h200-2026-12-01-moe-chat/serve-qwen3-30b-a3b-chat"


def client_steps(bench_json: Path, gap_s: float = 0.002) -> dict:
    """Steps of one ``vllm bench serve --save-detailed`` run from its token arrivals: per cluster its start
    (s from the first request), tokens, first tokens, decode tokens, and the summed context of the decodes."""
    d = json.loads(Path(bench_json).read_text())
    start = np.asarray(d["start_times"], dtype=float)
    start -= start.min()
    t, req, idx = [], [], []
    for i, (s, ttft, itl) in enumerate(zip(start, d["ttfts"], d["itls"])):
        times = s + ttft + np.concatenate([[0.0], np.cumsum(itl)])
        t.append(times)
        req.append(np.full(times.size, i))
        idx.append(np.arange(times.size))
    t, req, idx = np.concatenate(t), np.concatenate(req), np.concatenate(idx)
    order = np.argsort(t, kind="stable")
    t, req, idx = t[order], req[order], idx[order]
    cut = np.flatnonzero(np.diff(t) > gap_s) + 1
    bounds = np.concatenate([[0], cut, [t.size]])
    prompt = np.asarray(d["input_lens"], dtype=float)
    first = idx == 0
    n = np.diff(bounds)
    out = {"start_s": t[bounds[:-1]], "tokens": n,
           "first_tokens": np.add.reduceat(first.astype(int), bounds[:-1]),
           "prompt_tokens": np.add.reduceat(np.where(first, prompt[req], 0.0), bounds[:-1]),
           "decode_context_tokens": np.add.reduceat(np.where(first, 0.0, prompt[req] + idx), bounds[:-1])}
    out["decodes"] = out["tokens"] - out["first_tokens"]
    return out


def engine_step_count(folder: Path, run: str) -> float | None:
    """vLLM's own count of engine steps during ``run`` (the ``vllm:iteration_tokens_total`` histogram's count,
    after minus before), from the folder's serve_bench.jsonl; None if not recorded."""
    for r in read_jsonl(Path(folder) / "serve_bench.jsonl"):
        if r.get("type") == "bench" and r.get("run") == run:
            key = "vllm:iteration_tokens_total_count"
            a, b = r.get("metrics_after", {}).get(key), r.get("metrics_before", {}).get(key)
            return None if a is None or b is None else float(a) - float(b)
    return None


def decode_step_ratio(steps: dict, cost) -> float:
    """Median over decode-only clusters of (measured period / StepCost's decode step at that batch and
    context): how well the simulator times the serving engine's pure decode steps."""
    layers = cost.num_full_layers
    per = np.diff(steps["start_s"])
    dec, ctx, first = steps["decodes"][1:], steps["decode_context_tokens"][1:], steps["first_tokens"][1:]
    pred = np.array([cost.step_s(b, b, 0.0, layers * c, layers * c) if b else np.nan for b, c in zip(dec, ctx)])
    ok = (first == 0) & (dec > 0) & (per < 0.2)  # 0.2 s: leaves out first-use compile stalls (cold engine)
    return float(np.median(per[ok] / pred[ok]))


def eager_periods(steps: dict, cost, min_s: float = 0.04, max_s: float = 0.2) -> dict:
    """The long periods (``min_s`` < period < ``max_s``: the eager steps, above the CUDA graphs; compile stalls
    left out) against StepCost's step of the same shape: mean measured and mean predicted seconds, count.  The
    shape of a period is read from the cluster that ends it: its first tokens' prompts (the chunks) plus its
    decodes; one prompt's chunks split over two steps are counted in the step that finishes it (the API
    server's spread shifts single periods, so only the means are meaningful)."""
    layers = cost.num_full_layers
    per = np.diff(steps["start_s"])
    prompt, dec, ctx = steps["prompt_tokens"][1:], steps["decodes"][1:], steps["decode_context_tokens"][1:]
    nfirst = steps["first_tokens"][1:]
    ok = (per > min_s) & (per < max_s) & (nfirst > 0)
    pred = [cost.step_s(p + d, d + f, *chunked_sums(cost, [(0.0, p / f)] * int(f), layers * c))
            for p, d, c, f in zip(prompt[ok], dec[ok], ctx[ok], nfirst[ok])]
    return {"n": int(ok.sum()), "measured_s": float(per[ok].mean()) if ok.any() else float("nan"),
            "predicted_s": float(np.mean(pred)) if pred else float("nan"),
            "tokens": float(np.mean(prompt[ok] + dec[ok])) if ok.any() else float("nan")}


def mixed_rows(records: list[dict]) -> list[dict]:
    """Mixed-step measurements in one shape — the ``mixed_grid`` cells :func:`calibration.mixed_points.mixed_cells`
    keeps (one row per repeat) and the older ``mixed_step_s`` probes (those shorter than their own decode period are
    impossible and left out): model, batch, decode context, chunk, measured s."""
    from calibration.mixed_points import mixed_cells

    rows = [{"model": model, "batch": batch, "context": context, "chunk": chunk, "measured_s": v}
            for (model, batch, context, chunk), values in mixed_cells(records).items() for v in values]
    for r in records:
        if r.get("type") == "probe" and r.get("metric") == "mixed_step_s" and r.get("status") == "ok":
            if float(r["measured"]) > float(r.get("decode_period_median_s") or 0.0):
                rows.append({"model": r["model"], "batch": int(r["batch_size"]),
                             "context": float(r["decode_contexts_tokens"]), "chunk": int(r["chunk_tokens"]),
                             "measured_s": float(r["measured"])})
    return rows


def chunked_sums(cost, chunks, decode_attended: float) -> tuple[float, float, float, float]:
    """StepCost.step_s's (att_prefill, att_decode, kv_read, chunk) for prompt ``chunks`` beside decodes attending
    ``decode_attended`` (also their cached tokens read): :meth:`planner.serving.StepCost.chunk_sums`."""
    att, short, kv, longest = cost.chunk_sums(chunks, decode_attended)
    return att, decode_attended + short, kv, longest


def predict_mixed(cost, batch: int, context: float, chunk: int) -> tuple[float, float, float]:
    """(mixed step, lone prefill of the chunk, decode step of the batch) as StepCost times them, seconds."""
    layers = cost.num_full_layers
    kv = batch * layers * context
    mixed = cost.step_s(batch + chunk, batch + 1, *chunked_sums(cost, [(0.0, chunk)], kv))
    lone = cost.step_s(chunk, 1, *chunked_sums(cost, [(0.0, chunk)], 0.0))
    decode = cost.step_s(batch, batch, 0.0, kv, kv) if batch else 0.0
    return mixed, lone, decode


def report_mixed(rows: list[dict], cost) -> list[str]:
    """One line per (batch, chunk): measured median vs the model's mixed step and vs the additive reading
    (lone prefill + decode step: the decodes' expert reads not shared with the prefill's)."""
    cells: dict = {}
    for r in rows:
        cells.setdefault((r["batch"], r["chunk"], r["context"]), []).append(r["measured_s"])
    out = []
    for (b, c, ctx), v in sorted(cells.items()):
        m = float(np.median(v))
        mixed, lone, dec = predict_mixed(cost, b, ctx, c)
        out.append(f"B={b:4d} chunk={c:5d}: measured {1e3 * m:6.1f} ms  model {1e3 * mixed:6.1f} "
                   f"({100 * (mixed / m - 1):+5.1f} %)  additive {1e3 * (lone + dec):6.1f} "
                   f"({100 * ((lone + dec) / m - 1):+5.1f} %)")
    return out


def main(argv: list[str]) -> int:
    from calibration.serving_points import serving_setup
    from planner.io import catalog

    prof = catalog.profile_for("h200-sxm", "0.26.0")
    from planner.serving import simulate
    from planner.serving.loadtests import _requests, read_vllm_bench

    cost, cfg = serving_setup(MOE_CHAT, "qwen3-30b-a3b", prof)
    print("Qwen3-30B-A3B under vllm serve (client token clusters vs vLLM's step counter vs the simulator):")
    for run in ("chat8", "chat20", "chat34"):
        s = client_steps(MOE_CHAT / f"bench-{run}.json")
        per = np.diff(s["start_s"])
        long = per > 0.04
        sim = simulate(_requests(read_vllm_bench(MOE_CHAT / f"bench-{run}.json")), cost, cfg).num_steps
        print(f"  {run}: {s['tokens'].size} clusters, vLLM counted {engine_step_count(MOE_CHAT, run):.0f} steps, "
              f"simulated {sim}; "
              f"decode-only periods / StepCost median {decode_step_ratio(s, cost):.3f}; periods > 40 ms: "
              f"{long.sum()} summing {per[long].sum():.2f} s, mean {1e3 * per[long].mean():.1f} ms")
        e = eager_periods(s, cost)
        print(f"    periods 40-200 ms ending with first tokens: {e['n']}, mean {1e3 * e['measured_s']:.1f} ms at "
              f"{e['tokens']:.0f} tokens; StepCost of the same steps {1e3 * e['predicted_s']:.1f} ms")
    for path in argv:
        rows = mixed_rows(read_jsonl(Path(path)))
        for model in sorted({r["model"] for r in rows}):
            m = catalog.model(model)
            c, _ = serving_setup(MOE_CHAT, "qwen3-30b-a3b", prof) if model == "qwen3-30b-a3b" else (None, None)
            if c is None:
                from planner.serving import StepCost
                from planner.specs import Deployment
                g = catalog.gpu("h200-sxm")
                c = StepCost.from_specs(m, g, Deployment.for_gpu(g), prof)
            print(f"{path} {model}:")
            print("  " + "\n  ".join(report_mixed([r for r in rows if r["model"] == model], c)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
