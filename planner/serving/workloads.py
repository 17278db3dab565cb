"""Workloads for the serving simulator: arrival processes, request lengths and presets.

A workload is a :class:`Requests` table (numpy arrays, one row per request).  Arrival times are in
seconds from the start of the run; ``NaN`` means "released by the simulator": by the finish of the
request's ``parent`` plus ``think_s`` (the next turn of a conversation), or by any finish in a
closed loop of fixed concurrency.

Arrival processes (``unit`` draws are made once per seed and divided by the rate, so a fixed seed at
a higher rate gives the *same* pattern compressed in time — what a rate bisection needs):

* Poisson at rate λ: exponential gaps of mean 1/λ (coefficient of variation 1).
* bursty: gamma gaps of mean 1/λ and coefficient of variation ``cv`` (shape 1/cv²); cv > 1 bursts.
* closed loop: ``concurrency`` requests in flight; each finish releases the next request at once.
* a trace: CSV or JSONL rows of arrival_s, prompt_tokens, output_tokens (:mod:`planner.io.traces`).

Length distributions of the presets are lognormal, parametrised by their mean and the σ of the
underlying normal (μ = ln(mean) − σ²/2), clipped to a range.  The means come from published
workload statistics (cited per preset); the σ values are this module's assumptions (stated so).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from planner.units import positive_number

#: Most requests one workload may hold: a simulation of 1,000,000 takes about 15 s and 1 GB (10,000,000 took
#: 3 minutes and 8.8 GB with nothing on screen), so more is refused by name rather than run.
MAX_REQUESTS = 1_000_000
#: Largest coefficient of variation of inter-arrival gaps (gamma shape 1/cv² = 1e-4; beyond it the shape
#: underflows and the gaps are no longer a distribution).
MAX_BURSTINESS_CV = 100.0


def check_num_requests(n, name: str = "num_requests") -> int:
    """``n`` as an int in [1, :data:`MAX_REQUESTS`] (ValueError naming ``name`` otherwise)."""
    if not (isinstance(n, (int, np.integer)) and 1 <= n <= MAX_REQUESTS):
        raise ValueError(f"{name}: must be a whole number between 1 and {MAX_REQUESTS:,} (a simulation of a million "
                         f"requests takes about 15 s), got {n!r}")
    return int(n)

# ------------------------------------------------------------------------------------------ table


@dataclass(frozen=True)
class Requests:
    """Requests to simulate; every array has one entry per request.

    ``prefix_group``/``prefix_tokens``: requests of one group (≥ 0) share their first
    ``prefix_tokens`` prompt tokens (a system prompt, a document); -1 = no shared prefix.
    ``parent``: index of the previous turn of the same conversation (-1 = none).  The request's
    prompt then *starts with* the parent's prompt and output (so ``prompt_tokens`` counts the whole
    history) and it arrives ``think_s`` after the parent finishes.
    ``closed_loop``: if > 0, arrival times are ignored and that many requests are kept in flight.
    """

    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    arrival_s: np.ndarray
    prefix_group: np.ndarray
    prefix_tokens: np.ndarray
    parent: np.ndarray
    think_s: np.ndarray
    closed_loop: int = 0
    name: str = ""
    description: dict = field(default_factory=dict, compare=False)

    def __len__(self) -> int:
        return int(self.prompt_tokens.shape[0])

    @property
    def total_prompt_tokens(self) -> int:
        return int(self.prompt_tokens.sum())

    @property
    def total_output_tokens(self) -> int:
        return int(self.output_tokens.sum())

    def validate(self) -> Requests:
        """Raise ValueError naming the field on inconsistent input; returns self."""
        n = len(self)
        if n == 0:
            raise ValueError("num_requests: the workload has no requests")
        for name in ("output_tokens", "arrival_s", "prefix_group", "prefix_tokens", "parent", "think_s"):
            if getattr(self, name).shape != (n,):
                raise ValueError(f"{name}: expected {n} entries, got shape {getattr(self, name).shape}")
        if np.any(self.prompt_tokens < 1):
            raise ValueError("prompt_tokens: every request needs at least 1 prompt token")
        if np.any(self.output_tokens < 1):
            raise ValueError("output_tokens: every request needs at least 1 output token")
        a = self.arrival_s
        if np.any(np.isinf(a)) or np.any(a[~np.isnan(a)] < 0):
            raise ValueError("arrival_s: arrival times must be finite and >= 0 (NaN = released by the simulator)")
        if np.any(self.prefix_tokens < 0) or np.any(self.prefix_tokens > self.prompt_tokens):
            raise ValueError("prefix_tokens: must be between 0 and the request's prompt_tokens")
        if np.any(self.think_s < 0) or not np.all(np.isfinite(self.think_s)):
            raise ValueError("think_s: must be finite and >= 0")
        par = self.parent
        has = par >= 0
        idx = np.arange(n)
        if np.any(par[has] >= idx[has]):
            raise ValueError("parent: a request's parent must come before it")
        if np.any(has):
            p = par[has]
            hist = self.prompt_tokens[p] + self.output_tokens[p]
            if np.any(self.prompt_tokens[has] < hist):
                raise ValueError("prompt_tokens: a follow-up turn's prompt must include its parent's prompt and output")
            if np.any(~np.isnan(a[has])):
                raise ValueError("arrival_s: a follow-up turn (parent >= 0) arrives after its parent: set NaN")
        if self.closed_loop < 0:
            raise ValueError("concurrency: must be > 0")
        if self.closed_loop == 0 and np.all(np.isnan(a[~has])) and np.any(~has):
            raise ValueError("arrival_s: requests without a parent need an arrival time (or a closed loop)")
        return self


def _ints(x) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if np.any(a != np.rint(a)):
        raise ValueError("prompt_tokens/output_tokens: token counts must be whole numbers")
    return a.astype(np.int64)


def make_requests(
    prompt_tokens,
    output_tokens,
    arrival_s=None,
    *,
    prefix_group=-1,
    prefix_tokens=0,
    parent=-1,
    think_s=0.0,
    closed_loop: int = 0,
    name: str = "",
    description: dict | None = None,
) -> Requests:
    """Build a validated :class:`Requests`; scalars broadcast, ``arrival_s=None`` means all at t = 0."""
    sizes = {np.shape(x)[0] for x in (prompt_tokens, output_tokens, arrival_s) if x is not None and np.ndim(x)}
    if len(sizes) > 1:
        raise ValueError(f"num_requests: prompt_tokens, output_tokens and arrival_s disagree ({sorted(sizes)})")
    n = sizes.pop() if sizes else 1
    if n > MAX_REQUESTS:
        check_num_requests(n)
    p = np.broadcast_to(_ints(prompt_tokens), (n,)).copy()
    o = np.broadcast_to(_ints(output_tokens), (n,)).copy()
    a = np.zeros(n) if arrival_s is None else np.broadcast_to(np.asarray(arrival_s, dtype=float), (n,)).copy()

    def bc(v, dtype):
        return np.broadcast_to(np.asarray(v, dtype=dtype), (n,)).copy()

    return Requests(p, o, a, bc(prefix_group, np.int64), bc(prefix_tokens, np.int64), bc(parent, np.int64),
                    bc(think_s, float), int(closed_loop), name, dict(description or {})).validate()


# ----------------------------------------------------------------------------------- arrivals


def _rng(seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def poisson_arrivals(n: int, rate_per_s: float, seed=0) -> np.ndarray:
    """Arrival times of a Poisson process at ``rate_per_s``: cumulative exponential gaps of mean 1/λ.
    The first request arrives after one gap (not at 0), as vLLM's benchmark_serving does."""
    positive_number("rate", rate_per_s)
    return _rng(seed).exponential(1.0, int(n)).cumsum() / rate_per_s


def gamma_arrivals(n: int, rate_per_s: float, cv: float = 1.0, seed=0) -> np.ndarray:
    """Bursty arrivals: gamma-distributed gaps of mean 1/λ and coefficient of variation ``cv``
    (shape k = 1/cv², scale 1/k; cv = 1 is Poisson, cv > 1 clusters requests in bursts).
    vLLM's benchmark_serving uses the same family (``--burstiness`` = k)."""
    positive_number("rate", rate_per_s)
    if not (math.isfinite(cv) and 0 < cv <= MAX_BURSTINESS_CV):
        raise ValueError(f"burstiness_cv: must be a number in (0, {MAX_BURSTINESS_CV:g}], got {cv}")
    k = 1.0 / (cv * cv)
    return _rng(seed).gamma(k, 1.0 / k, int(n)).cumsum() / rate_per_s


def arrivals(n: int, *, rate_per_s: float | None = None, cv: float = 1.0, seed=0) -> np.ndarray:
    """Poisson (cv = 1) or gamma arrivals at ``rate_per_s``; all at t = 0 when the rate is None."""
    if rate_per_s is None:
        return np.zeros(int(n))
    if cv == 1.0:
        return poisson_arrivals(n, rate_per_s, seed)
    return gamma_arrivals(n, rate_per_s, cv, seed)


# ------------------------------------------------------------------------------------- lengths


@dataclass(frozen=True)
class LogNormal:
    """A lognormal length distribution by its mean and the σ of ln(x), clipped to [lo, hi] tokens."""

    mean: float
    sigma: float
    lo: int
    hi: int
    source: str = ""

    @property
    def mu(self) -> float:
        return math.log(self.mean) - self.sigma**2 / 2.0

    @property
    def median(self) -> float:
        return math.exp(self.mu)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        x = rng.lognormal(self.mu, self.sigma, int(n))
        return np.clip(np.rint(x), self.lo, self.hi).astype(np.int64)

    def as_dict(self) -> dict:
        return {"distribution": "lognormal", "mean": self.mean, "sigma": self.sigma, "median": round(self.median, 1),
                "clip": [self.lo, self.hi], "source": self.source}


# ShareGPT as the vLLM paper used it (Kwon et al., SOSP 2023, arXiv 2309.06180, §6.1 / Fig. 11):
# mean input 161.31 tokens, mean output 337.99 tokens.  σ = 1.0 (inputs) and 0.8 (outputs) are our
# assumption for the spread (the paper shows a long right tail, not a fit); clip as benchmark_serving
# filters ShareGPT (prompt ≥ 4, prompt ≤ 1024, prompt + output ≤ 2048).
CHAT_PROMPT = LogNormal(161.31, 1.0, 4, 1024, "mean: vLLM paper (arXiv 2309.06180) ShareGPT; sigma: assumed")
CHAT_OUTPUT = LogNormal(337.99, 0.8, 4, 1024, "mean: vLLM paper (arXiv 2309.06180) ShareGPT; sigma: assumed")
# Retrieval-augmented generation: a question plus retrieved passages.  Assumed (no public trace with
# token counts): ~8 passages × ~500 tokens + instructions ≈ 4,000 tokens in, short answers ≈ 200 out;
# the Splitwise paper's Azure traces (arXiv 2311.18677) show the same shape for its "coding" service
# (prompts in the thousands, outputs in the tens to hundreds).
RAG_PROMPT = LogNormal(4000.0, 0.4, 1024, 16384, "assumed: ~8 retrieved passages x ~500 tokens")
RAG_OUTPUT = LogNormal(200.0, 0.6, 16, 1024, "assumed: short grounded answers")
# Agentic multi-turn: a shared tool/system prompt, then turns that each append new text (a user
# message or a tool result) and a model reply to the history.  SGLang's RadixAttention paper
# (Zheng et al., arXiv 2312.07104) measures exactly this reuse pattern; the sizes are assumptions.
AGENT_SYSTEM_TOKENS = 2000
AGENT_NEW_TEXT = LogNormal(400.0, 0.8, 16, 4096, "assumed: tool results / user turns")
AGENT_OUTPUT = LogNormal(150.0, 0.7, 8, 1024, "assumed: tool calls and short replies")
# Batch / offline: everything submitted at once (summarisation, extraction).  Assumed sizes.
BATCH_PROMPT = LogNormal(1000.0, 0.6, 32, 8192, "assumed: documents to summarise")
BATCH_OUTPUT = LogNormal(250.0, 0.6, 16, 2048, "assumed: summaries")


def chat(n: int = 1000, *, rate_per_s: float | None = 4.0, concurrency: int | None = None, cv: float = 1.0,
         seed: int = 0) -> Requests:
    """ShareGPT-like chat: lognormal prompts (mean 161) and outputs (mean 338), Poisson arrivals."""
    n = check_num_requests(n)
    rng = _rng(seed)
    p, o = CHAT_PROMPT.sample(n, rng), CHAT_OUTPUT.sample(n, rng)
    o = np.minimum(o, np.maximum(2048 - p, 1))  # benchmark_serving: prompt + output <= 2048
    return _finish("chat", p, o, n, rate_per_s, concurrency, cv, rng,
                   {"prompt_tokens": CHAT_PROMPT.as_dict(), "output_tokens": CHAT_OUTPUT.as_dict()})


def rag(n: int = 500, *, rate_per_s: float | None = 1.0, concurrency: int | None = None, cv: float = 1.0,
        seed: int = 0, shared_instructions_tokens: int = 256) -> Requests:
    """Long-context RAG: ~4,000-token prompts (a shared instruction header, then unique passages),
    ~200-token answers."""
    n = check_num_requests(n)
    rng = _rng(seed)
    p, o = RAG_PROMPT.sample(n, rng), RAG_OUTPUT.sample(n, rng)
    r = _finish("rag", p, o, n, rate_per_s, concurrency, cv, rng,
                {"prompt_tokens": RAG_PROMPT.as_dict(), "output_tokens": RAG_OUTPUT.as_dict(),
                 "shared_instructions_tokens": shared_instructions_tokens})
    return replace(r, prefix_group=np.zeros(n, dtype=np.int64),
                   prefix_tokens=np.minimum(p, shared_instructions_tokens).astype(np.int64)).validate()


def agentic(sessions: int = 200, *, turns: int = 6, rate_per_s: float | None = 1.0, think_s: float = 2.0,
            seed: int = 0, system_tokens: int = AGENT_SYSTEM_TOKENS) -> Requests:
    """Agentic multi-turn sessions arriving as a Poisson process of ``rate_per_s`` sessions/s.

    Turn 1's prompt = the shared system/tool prompt + new text; turn i's prompt = turn i−1's prompt
    + its output + new text, so the history grows every turn and is the prefix-caching case.  Turn
    i+1 is sent ``think`` seconds (exponential, mean ``think_s``: tool latency / user reading) after
    turn i finishes.  Rows are ordered session by session (``parent`` = the previous row).
    """
    rng = _rng(seed)
    if sessions < 1 or turns < 1:
        raise ValueError("sessions/turns: must be >= 1")
    n = check_num_requests(sessions * turns)
    new = AGENT_NEW_TEXT.sample(n, rng).reshape(sessions, turns)
    out = AGENT_OUTPUT.sample(n, rng).reshape(sessions, turns)
    prompt = np.empty((sessions, turns), dtype=np.int64)
    prompt[:, 0] = system_tokens + new[:, 0]
    for t in range(1, turns):
        prompt[:, t] = prompt[:, t - 1] + out[:, t - 1] + new[:, t]
    starts = arrivals(sessions, rate_per_s=rate_per_s, seed=rng)
    arr = np.full((sessions, turns), np.nan)
    arr[:, 0] = starts
    parent = np.full((sessions, turns), -1, dtype=np.int64)
    parent[:, 1:] = (np.arange(sessions)[:, None] * turns + np.arange(turns - 1)[None, :])
    think = np.zeros((sessions, turns))
    think[:, 1:] = rng.exponential(think_s, (sessions, turns - 1)) if think_s > 0 else 0.0
    group = np.zeros((sessions, turns), dtype=np.int64)
    pre = np.full((sessions, turns), 0, dtype=np.int64)
    pre[:, 0] = system_tokens  # later turns inherit it through their parent
    desc = {"sessions": sessions, "turns": turns, "session_rate_per_s": rate_per_s, "think_s_mean": think_s,
            "system_tokens": system_tokens, "new_text_tokens": AGENT_NEW_TEXT.as_dict(),
            "output_tokens": AGENT_OUTPUT.as_dict(), "source": "prefix-reuse pattern: SGLang arXiv 2312.07104"}
    return Requests(prompt.ravel(), out.ravel(), arr.ravel(), group.ravel(), pre.ravel(), parent.ravel(),
                    think.ravel(), 0, "agentic", desc).validate()


def batch(n: int = 1000, *, seed: int = 0) -> Requests:
    """Batch/offline: every request submitted at t = 0 (throughput is what matters)."""
    n = check_num_requests(n)
    rng = _rng(seed)
    p, o = BATCH_PROMPT.sample(n, rng), BATCH_OUTPUT.sample(n, rng)
    return _finish("batch", p, o, n, None, None, 1.0, rng,
                   {"prompt_tokens": BATCH_PROMPT.as_dict(), "output_tokens": BATCH_OUTPUT.as_dict()})


def _finish(name, p, o, n, rate, concurrency, cv, rng, desc) -> Requests:
    if concurrency is not None:
        arr = np.full(n, np.nan)
        desc = {**desc, "arrivals": f"closed loop, concurrency {concurrency}"}
        return make_requests(p, o, arr, closed_loop=int(concurrency), name=name, description=desc)
    arr = arrivals(n, rate_per_s=rate, cv=cv, seed=rng)
    desc = {**desc, "arrivals": "all at t=0" if rate is None else
            (f"Poisson {rate}/s" if cv == 1.0 else f"gamma {rate}/s, cv {cv}")}
    return make_requests(p, o, arr, name=name, description=desc)


PRESETS = {
    "chat": chat,
    "rag": rag,
    "agentic": agentic,
    "batch": batch,
}


def synthetic(
    n: int,
    prompt_tokens: int,
    output_tokens: int,
    *,
    rate_per_s: float | None = None,
    concurrency: int | None = None,
    shared_prefix_tokens: int = 0,
    cv: float = 1.0,
    seed: int = 0,
) -> Requests:
    """Fixed lengths: every prompt is ``shared_prefix_tokens`` shared tokens followed by
    ``prompt_tokens`` unique ones; Poisson/gamma arrivals at ``rate_per_s``, a closed loop of
    ``concurrency``, or all at t = 0."""
    n = check_num_requests(n)
    if prompt_tokens < 1:
        raise ValueError(f"prompt_tokens: must be >= 1, got {prompt_tokens}")
    if output_tokens < 1:
        raise ValueError(f"output_tokens: must be >= 1, got {output_tokens}")
    if shared_prefix_tokens < 0:
        raise ValueError(f"shared_prefix_tokens: must be >= 0, got {shared_prefix_tokens}")
    if rate_per_s is not None and concurrency is not None:
        raise ValueError("rate: give either a rate or a concurrency, not both")
    if concurrency is not None and concurrency < 1:
        raise ValueError(f"concurrency: must be >= 1, got {concurrency}")
    total = prompt_tokens + shared_prefix_tokens
    group = 0 if shared_prefix_tokens else -1
    if concurrency is not None:
        arr = np.full(n, np.nan)
    else:
        arr = arrivals(n, rate_per_s=rate_per_s, cv=cv, seed=seed)
    return make_requests(total, np.full(n, output_tokens), arr, prefix_group=group,
                         prefix_tokens=shared_prefix_tokens, closed_loop=concurrency or 0, name="synthetic",
                         description={"prompt_tokens": prompt_tokens, "output_tokens": output_tokens,
                                      "shared_prefix_tokens": shared_prefix_tokens, "rate_per_s": rate_per_s,
                                      "concurrency": concurrency, "cv": cv, "seed": seed})
