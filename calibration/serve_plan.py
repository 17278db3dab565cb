"""What :mod:`calibration.serve_probe` runs and what it writes, without an engine: the plan (engines,
runs, their rates and lengths, the time estimate), the requests (Poisson arrival offsets, token-id
prompts) and the JSON-lines records (per-request TTFT/TPOT/E2E from streamed token times, plus the
engine's own per-request metrics).

Pure numpy and planner.serving.workloads (the simulator's own arrival generator, so a replay can regenerate
the arrivals): importable and testable without vLLM, torch or a GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

FIRST_TOKEN_ID = 3  # ids 0-2 are unk, <s>, </s> in the synthetic vocabulary (calibration.tokenizer)
SCHEMA_VERSION = 1


# ------------------------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class RunSpec:
    """One measured run: ``num_requests`` Poisson arrivals at ``rate_per_s`` (None: all at once)."""

    name: str
    rate_per_s: float | None
    num_requests: int
    prompt_tokens: int  # unique tokens per prompt (after the shared prefix)
    output_tokens: int
    shared_prefix_tokens: int = 0
    seed: int = 0
    warmup: bool = False

    @property
    def total_prompt_tokens(self) -> int:
        return self.prompt_tokens + self.shared_prefix_tokens

    def estimate_s(self) -> float:
        """Rough wall time: the arrival span plus a drain allowance (the last request's decode at
        ~10 ms per token under load, and a couple of seconds of queue)."""
        span = self.num_requests / self.rate_per_s if self.rate_per_s else 0.0
        return span + 2.0 + 0.01 * self.output_tokens


@dataclass(frozen=True)
class EnginePhase:
    engine_id: str
    enable_prefix_caching: bool
    runs: tuple[RunSpec, ...]
    optional: bool = False  # skipped (with a record) when the budget cannot hold it


def _floats(text: str, flag: str) -> list[float]:
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"error: {flag}: expected comma-separated numbers, got '{text}'") from None
    if not vals or any(not math.isfinite(v) or v <= 0 for v in vals):
        raise SystemExit(f"error: {flag}: every value must be a finite number > 0")
    return vals


def build_plan(args) -> list[EnginePhase]:
    """The engines and runs the arguments ask for, in execution order."""
    rates = _floats(args.rates, "--rates")
    shared_rates = _floats(args.shared_rates, "--shared-rates") if args.shared_prefix_tokens > 0 else []

    def capped(n: int, rate: float) -> int:
        return max(args.min_requests, min(n, math.ceil(rate * args.max_run_s)))

    def warm(tag: str) -> RunSpec:  # first requests after start-up pay one-off costs; replay skips it
        return RunSpec(f"warmup-{tag}", None, 8, args.prompt_tokens, 16, 0, args.seed + 999, warmup=True)

    sweep = tuple(RunSpec(f"fixed-p{args.prompt_tokens}-o{args.output_tokens}-r{r:g}", r,
                          capped(args.num_requests, r), args.prompt_tokens, args.output_tokens, 0, args.seed + i)
                  for i, r in enumerate(rates))

    def shared(tag: str) -> tuple[RunSpec, ...]:
        # the same seeds (prompts and arrivals) with caching on and off: only the engine differs
        return tuple(RunSpec(f"shared-{tag}-s{args.shared_prefix_tokens}-u{args.shared_unique_tokens}-r{r:g}", r,
                             capped(args.shared_num_requests, r), args.shared_unique_tokens,
                             args.shared_output_tokens, args.shared_prefix_tokens, args.seed + 100 + i)
                     for i, r in enumerate(shared_rates))

    off = EnginePhase("B-prefix-caching-off", False, (warm("pc-off"),) + shared("pc-off"), optional=True)
    if args.only_prefix_off:
        return [replace(off, optional=False)]
    phases = [EnginePhase("A-prefix-caching-on", True, (warm("pc-on"),) + sweep + shared("pc-on"))]
    if shared_rates and not args.skip_prefix_off:
        phases.append(off)
    return phases


def plan_estimate_s(phases: list[EnginePhase], engine_start_s: float) -> float:
    return sum(engine_start_s + sum(r.estimate_s() for r in p.runs) for p in phases)


# ------------------------------------------------------------------------------ requests, records


def arrival_offsets(run: RunSpec) -> np.ndarray:
    """Scheduled arrival times (s from the run's start): the simulator's own Poisson generator, so
    a replay can regenerate them; all zero for a burst."""
    from planner.serving.workloads import poisson_arrivals

    if run.rate_per_s is None:
        return np.zeros(run.num_requests)
    return poisson_arrivals(run.num_requests, run.rate_per_s, seed=run.seed)


def make_prompts(run: RunSpec, vocab_size: int) -> list[list[int]]:
    """Token-id prompts: random ids (never 0-2), unique per request; with a shared prefix every
    prompt starts with the same ``shared_prefix_tokens`` ids (distinct per run, so runs never hit
    each other's cache)."""
    rng = np.random.default_rng(run.seed)
    prefix = rng.integers(FIRST_TOKEN_ID, vocab_size, run.shared_prefix_tokens).tolist()
    body = rng.integers(FIRST_TOKEN_ID, vocab_size, (run.num_requests, run.prompt_tokens))
    return [prefix + row for row in body.tolist()]


def token_stats(send_s: float, token_times_s: list[float]) -> dict:
    """TTFT, TPOT (mean inter-token time after the first token) and E2E from the send time and the
    arrival time of every output token (one entry per token; tokens arriving together repeat it)."""
    if not token_times_s:
        return {"ttft_s": None, "tpot_s": None, "e2e_s": None, "num_output_tokens": 0}
    first, last, n = token_times_s[0], token_times_s[-1], len(token_times_s)
    return {"ttft_s": first - send_s, "tpot_s": (last - first) / (n - 1) if n > 1 else None,
            "e2e_s": last - send_s, "num_output_tokens": n}


def engine_metrics(metrics) -> dict:
    """RequestOutput.metrics (vLLM RequestStateStats) as plain numbers, plus the engine-side
    intervals that do not mix clocks (the *_ts are engine-core monotonic times)."""
    if metrics is None:
        return {}
    out = {}
    for k in ("arrival_time", "queued_ts", "scheduled_ts", "first_token_ts", "last_token_ts", "first_token_latency",
              "num_generation_tokens"):
        v = getattr(metrics, k, None)
        if isinstance(v, (int, float)) and math.isfinite(v):
            out[k] = v
    if "first_token_ts" in out and "scheduled_ts" in out:
        out["engine_prefill_s"] = out["first_token_ts"] - out["scheduled_ts"]
    if "scheduled_ts" in out and "queued_ts" in out:
        out["engine_queue_s"] = out["scheduled_ts"] - out["queued_ts"]
    if out.get("num_generation_tokens", 0) > 1 and "last_token_ts" in out and "first_token_ts" in out:
        out["engine_tpot_s"] = (out["last_token_ts"] - out["first_token_ts"]) / (out["num_generation_tokens"] - 1)
    return out


def request_record(run: RunSpec, index: int, scheduled_s: float, send_s: float, token_times_s: list[float],
                   metrics, error: str | None = None) -> dict:
    """One request's record (times relative to the run's start, seconds)."""
    rec = {"type": "request", "run": run.name, "index": index, "arrival_offset_s": send_s,
           "scheduled_arrival_s": scheduled_s, "prompt_tokens": run.total_prompt_tokens,
           "unique_prompt_tokens": run.prompt_tokens, "shared_prefix_tokens": run.shared_prefix_tokens,
           "prefix_group": 0 if run.shared_prefix_tokens else -1, "output_tokens": run.output_tokens,
           **token_stats(send_s, token_times_s),
           "token_times_s": [round(t - send_s, 6) for t in token_times_s],
           "engine": engine_metrics(metrics)}
    if error:
        rec["error"] = error
    return rec
