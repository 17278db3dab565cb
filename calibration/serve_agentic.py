"""The multi-turn client of ``calibration/serve_bench.py --agentic``: sessions of turns that continue the
previous turn's prompt and output after a think time, all behind one shared system prompt; per-request records
with their parent turn, and the server's prefix-cache hit counters.  Needs a running server (GPU, vLLM)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from calibration.records import append_record, scrape


async def agentic(server, served: str, vocab_size: int, spec: dict, out: Path, seed: int) -> dict:
    """Multi-turn sessions: turn t's prompt = system prompt + every earlier user message and reply + a new
    user message; it is sent ``think`` seconds after turn t−1 finished.  Sessions start as a Poisson
    process.  Prompts are the synthetic tokenizer's words, so the server's token ids are exact and its
    prefix cache can reuse the whole previous turn."""
    import aiohttp
    import numpy as np

    from calibration.tokenizer import word

    rng = np.random.default_rng(seed)
    sessions, turns = int(spec.get("sessions", 40)), int(spec.get("turns", 6))
    system_tokens, user_tokens = int(spec.get("system", 1024)), int(spec.get("user", 128))
    out_tokens, think_mean = int(spec.get("output", 128)), float(spec.get("think", 2.0))
    rate = float(spec.get("session_rate", 2.0))
    lo = 3

    def words(n: int) -> list[str]:
        return [word(int(i)) for i in rng.integers(lo, vocab_size, n)]

    system = words(system_tokens)
    starts = np.cumsum(rng.exponential(1.0 / rate, sessions))
    users = [[words(user_tokens) for _ in range(turns)] for _ in range(sessions)]
    thinks = rng.exponential(think_mean, (sessions, turns))
    before = scrape(server.get("/metrics"))
    t0 = time.perf_counter()
    index = 0
    lock = asyncio.Lock()

    async def session(s: int, http) -> None:
        nonlocal index
        await asyncio.sleep(float(starts[s]))
        history = list(system)
        parent = -1
        for t in range(turns):
            if t:
                await asyncio.sleep(float(thinks[s, t]))
            history += users[s][t]
            async with lock:
                i = index
                index += 1
            body = {"model": served, "prompt": " ".join(history), "max_tokens": out_tokens, "stream": True,
                    "ignore_eos": True, "skip_special_tokens": False, "temperature": 0.0,
                    "stream_options": {"include_usage": True}}
            send = time.perf_counter() - t0
            first = last = None
            text, ntok, err = [], 0, None
            try:
                async with http.post(server.url("/v1/completions"), json=body) as r:
                    async for raw in r.content:
                        line = raw.decode().strip()
                        if not line.startswith("data:") or line == "data: [DONE]":
                            continue
                        d = json.loads(line[5:])
                        now = time.perf_counter() - t0
                        if d.get("choices") and d["choices"][0].get("text"):
                            first = now if first is None else first
                            last = now
                            text.append(d["choices"][0]["text"])
                        if d.get("usage"):
                            ntok = d["usage"].get("completion_tokens", ntok)
            except Exception as e:  # noqa: BLE001 - one request must not end the session
                err = f"{type(e).__name__}: {e}"[:300]
            reply = "".join(text).split()
            rec = {"type": "request", "run": spec.get("name", "agentic"), "index": i, "session": s, "turn": t,
                   "parent": parent, "think_s": float(thinks[s, t]) if t else 0.0, "arrival_offset_s": send,
                   "prompt_tokens": len(history), "shared_prefix_tokens": system_tokens, "prefix_group": 0,
                   "output_tokens": out_tokens, "num_output_tokens": ntok,
                   "ttft_s": None if first is None else first - send,
                   "tpot_s": None if (first is None or ntok < 2) else (last - first) / (ntok - 1),
                   "e2e_s": None if last is None else last - send}
            if err:
                rec["error"] = err
            append_record(out, rec)
            history += reply
            parent = i

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3600)) as http:
        await asyncio.gather(*(session(s, http) for s in range(sessions)))
    after = scrape(server.get("/metrics"))
    hits = after.get("vllm:prefix_cache_hits_total", after.get("vllm:prefix_cache_hits", 0.0)) - before.get(
        "vllm:prefix_cache_hits_total", before.get("vllm:prefix_cache_hits", 0.0))
    queries = after.get("vllm:prefix_cache_queries_total", after.get("vllm:prefix_cache_queries", 0.0)) - before.get(
        "vllm:prefix_cache_queries_total", before.get("vllm:prefix_cache_queries", 0.0))
    return {"duration_s": time.perf_counter() - t0, "requests": index, "prefix_cache_hits_tokens": hits,
            "prefix_cache_queries_tokens": queries, "prefix_cache_hit_rate": hits / queries if queries else None}
