"""The largest batch under the TTFT/TPOT targets: requests in flight per replica.

* ``prompt_tokens`` P and ``output_tokens`` N come from the :class:`Workload`; a request holds
  ``context_tokens`` = P + N of KV at its end, so memory (max concurrency) is sized at P + N.
* TTFT at batch B = steady-state continuous batching with chunked prefill (vLLM's default): a new
  request's prompt is prefilled in chunks of the step budget left after the B − 1 running
  sequences' decode tokens, each step also carrying those decodes (:func:`ttft_under_load_costs`).
  At B = 1 this is the idle-engine prefill.  Queueing behind other arrivals is not modelled here
  (that is the simulator's job).
* TPOT at batch B = what users see under continuous batching: one decode step of B sequences at the
  mean context P + N/2 (:func:`decode_context_tokens`) plus the other requests' interleaved prefills
  (:func:`planner.cost.effective_tpot_s`).
* :func:`largest_batch_under_slo` finds the largest B* ≤ min(max concurrency, max_num_seqs) whose TPOT
  and TTFT meet the workload's targets (both are non-decreasing in B, so the feasible batches are
  1 … B*), then takes the *best* of them: the batch that serves the most output tokens per second
  (B ÷ TPOT; the larger of batches within 0.1 % of it).  They are the same unless a step-cost cliff (e.g. an MoE GEMM tile
  boundary at batch 513) makes a bigger batch serve less; then ``binding`` is ``throughput``.  The
  highest request *rate* under p99 targets is a different search: the simulator's.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from planner import memory
from planner.attention_sums import attended_decode, attended_prefill
from planner.cost import effective_tpot_s, prefill_busy_costs
from planner.phases import PhaseTime, as_scalar, decode_step_costs, phase_time, sum_steps
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.roofline import HwCoeffs, ModelCosts, hw_coeffs, model_costs, step_time
from planner.specs import Deployment, GpuSpec, ModelSpec, Workload

#: Limits up to this many batches are searched exhaustively; above, a grid plus refinement.
EXACT_BATCH_SEARCH = 65_536

#: A smaller batch than the largest under the targets is taken only if it serves this much more (a real cliff,
#: not rounding in a flat, compute-bound stretch).
BEST_BATCH_TOLERANCE = 1e-3

#: Largest prompt/output token count the planner accepts (far beyond any served context; keeps the
#: quadratic attention terms finite in float64).
MAX_TOKENS = 10**9


def check_workload_tokens(workload: Workload) -> None:
    """Refuse token counts beyond :data:`MAX_TOKENS` (a SpecError naming the workload field)."""
    from planner.io.catalog import SpecError

    for name in ("prompt_tokens", "output_tokens"):
        v = getattr(workload, name)
        if v > MAX_TOKENS:
            raise SpecError(f"workload.{name}: {v:,} tokens is beyond any served context (limit {MAX_TOKENS:,})")
    if workload.concurrency is not None and workload.concurrency > MAX_TOKENS:
        raise SpecError(f"workload.concurrency: {workload.concurrency:,} exceeds the limit {MAX_TOKENS:,}")


def decode_context_tokens(workload: Workload) -> float:
    """Mean context a decoding sequence holds over its life: P + N/2 (what TPOT is evaluated at)."""
    return workload.prompt_tokens + workload.output_tokens / 2.0


def ttft_under_load_costs(mc: ModelCosts, hw: HwCoeffs, prompt_tokens, batch_size, decode_context_tokens,
                          max_num_batched_tokens=Deployment.default("max_num_batched_tokens")) -> PhaseTime:
    """TTFT of a request that joins ``batch_size − 1`` sequences already decoding (arrays broadcast).

    vLLM schedules the running decodes first (one token each) and fills the rest of the
    ``max_num_batched_tokens`` budget with prefill chunks: R = B − 1 running, budget = M − R,
    n = ceil(P / budget) steps of P / n prompt tokens plus R decode tokens at ``decode_context_tokens``.
    TTFT = n × that step + ``request_overhead_s``.  Non-decreasing in B and P.  When R ≥ M no prefill
    token fits (TTFT = inf).  At B = 1 and P ≤ M it equals the idle-engine prefill of one prompt.
    """
    p = np.asarray(prompt_tokens, dtype=float)
    running = np.maximum(np.asarray(batch_size, dtype=float) - 1.0, 0.0)
    budget = np.asarray(max_num_batched_tokens, dtype=float) - running
    ok = budget >= 1.0
    n = np.where(ok, np.ceil(p / np.where(ok, budget, 1.0)), 1.0)
    chunk = p / n
    att = attended_prefill(mc, 0.0, p) / n  # the prompt's causal attention, spread over its chunks
    reread = mc.full_layers * chunk * (n - 1.0) / 2.0  # mean prior-chunk KV a chunk reads
    st = step_time(mc, hw, prefill_tokens=chunk, prefill_attended=att, prefill_kv_read_tokens=reread,
                   decode_seqs=running, decode_attended=running * attended_decode(mc, decode_context_tokens),
                   sampled_seqs=running + 1.0 / n)
    out = phase_time("prefill", sum_steps(st, n, st, 0.0), n, extra_s=hw.request_overhead_s)
    if not np.all(ok):
        inf = np.where(ok, 0.0, np.inf)
        out = replace(out, time_s=as_scalar(np.asarray(out.time_s) + inf))
    return out


@dataclass(frozen=True)
class LargestBatch:
    """The largest batch (requests in flight per replica) that meets the TPOT and TTFT targets.

    ``batch_size`` is 0 when not even one request meets the targets (or nothing fits).  ``binding``
    names what stopped the search: 'tpot', 'ttft', 'tpot+ttft' (an SLO), 'memory' (max concurrency
    from the KV pool), 'max_num_seqs' (the engine's scheduler limit), 'concurrency' (the workload's
    own concurrency, when it asks for fewer) or 'none' when nothing fits.
    ``batch_sizes`` / ``tpot_candidates_s`` / ``ttft_candidates_s`` are the candidates evaluated (arrays, for charts).
    """

    batch_size: int
    binding: str
    batch_limit: int  # min(max concurrency, max_num_seqs[, workload concurrency])
    max_concurrency: int
    max_num_seqs: int
    tpot_slo_s: float | None
    ttft_slo_s: float | None
    tpot_s: float  # at batch_size (nan when batch_size == 0)
    ttft_s: float  # at batch_size: a new request joining batch_size − 1 decoding sequences
    tpot_batch1_s: float
    ttft_batch1_s: float
    batch_sizes: np.ndarray = field(repr=False, compare=False)
    tpot_candidates_s: np.ndarray = field(repr=False, compare=False)
    ttft_candidates_s: np.ndarray = field(repr=False, compare=False)

    @property
    def meets_slo(self) -> bool:
        return self.batch_size > 0


def pick_largest_batch(batch_sizes, tpot_s, ttft_s, tpot_slo_s: float | None, ttft_slo_s: float | None,
                       limit: int) -> tuple[int, str]:
    """Vectorised pick: the largest candidate ≤ ``limit`` with tpot ≤ target and ttft ≤ target.

    Returns ``(batch, binding)`` where ``binding`` says which constraint the next batch up breaks
    ('tpot', 'ttft', 'tpot+ttft') or 'limit' when the limit stopped it first; ``(0, what fails at
    the smallest batch)`` when none qualifies.
    """
    b = np.asarray(batch_sizes)
    tp_ok = np.ones(b.shape, bool) if tpot_slo_s is None else np.asarray(tpot_s) <= tpot_slo_s
    tt_ok = np.ones(b.shape, bool) if ttft_slo_s is None else np.asarray(ttft_s) <= ttft_slo_s
    in_limit = b <= limit
    ok = tp_ok & tt_ok & in_limit
    # both latencies are non-decreasing in b: the first failure ends the feasible prefix
    bad = np.flatnonzero(~ok)
    first_bad = bad[0] if bad.size else b.size
    if first_bad == 0:
        if b.size == 0 or not in_limit[0]:
            return 0, "limit"
        i = 0
    else:
        if first_bad == b.size:
            return int(b[-1]), "limit"
        i = first_bad
    if not in_limit[i]:
        return (int(b[i - 1]) if i else 0), "limit"
    why = "+".join(n for n, f in (("tpot", not tp_ok[i]), ("ttft", not tt_ok[i])) if f)
    return (int(b[i - 1]) if i else 0), why


def _latencies(mc: ModelCosts, hw: HwCoeffs, deployment: Deployment, workload: Workload, batch):
    ctx = decode_context_tokens(workload)
    tpot = decode_step_costs(mc, hw, batch, ctx)
    ttft = ttft_under_load_costs(mc, hw, workload.prompt_tokens, batch, ctx, deployment.max_num_batched_tokens)
    return tpot, ttft


def largest_batch_under_slo(
    model: ModelSpec,
    gpu: GpuSpec,
    deployment: Deployment,
    workload: Workload,
    profile: CalibrationProfile = IDEAL_PROFILE,
    max_concurrency: int | None = None,
) -> LargestBatch:
    """Largest batch meeting ``workload.tpot_slo_s`` and ``workload.ttft_slo_s``, capped by the
    max concurrency at P + N tokens (computed unless given), ``deployment.max_num_seqs`` and, if set,
    ``workload.concurrency``.  Evaluates every batch 1 … limit at once with numpy, then picks.
    Without targets the answer is the limit itself.
    """
    if max_concurrency is None:
        max_concurrency = memory.max_concurrency(model, gpu, deployment, workload.context_tokens, profile)
    limit = min(max_concurrency, deployment.max_num_seqs)
    limit_name = "memory" if max_concurrency <= deployment.max_num_seqs else "max_num_seqs"
    if workload.concurrency is not None and workload.concurrency < limit:
        limit, limit_name = workload.concurrency, "concurrency"
    mc, hw = model_costs(model, deployment), hw_coeffs(gpu, deployment.weight_dtype, profile, model)

    def evaluate(b):
        tpot, ttft = _latencies(mc, hw, deployment, workload, b)
        busy = prefill_busy_costs(mc, hw, workload.prompt_tokens, b, deployment.max_num_batched_tokens)
        eff = effective_tpot_s(tpot.time_s, b, busy, workload.output_tokens)
        return np.atleast_1d(eff).astype(float), np.atleast_1d(ttft.time_s).astype(float)

    def pick(b, tp, tt):
        return pick_largest_batch(b, tp, tt, workload.tpot_slo_s, workload.ttft_slo_s, limit)

    top = max(1, limit + 1)  # one past the limit tells whether an SLO would have stopped it there
    if top <= EXACT_BATCH_SEARCH:
        batches = np.arange(1, top + 1)
    else:  # huge limits (--max-num-seqs raised): every batch to 1,024, then a geometric grid, then refine
        batches = np.unique(np.concatenate([np.arange(1, 1025),
                                            np.geomspace(1025, top, 4096).round().astype(np.int64), [limit, top]]))
    tpot_s, ttft_s = evaluate(batches)
    cand, c_tpot, c_ttft = batches, tpot_s, ttft_s
    best, why = pick(cand, c_tpot, c_ttft)
    while best and why != "limit":  # a grid skipped batches: refine between the last pass and first fail
        nxt = int(cand[np.searchsorted(cand, best) + 1])
        if nxt - best <= 1:
            break
        cand = np.unique(np.linspace(best, nxt, min(4097, nxt - best + 1)).round().astype(np.int64))
        c_tpot, c_ttft = evaluate(cand)
        best, why = pick(cand, c_tpot, c_ttft)
    if best > 1:  # the best batch, not the largest: a step-cost cliff can make a bigger batch serve less
        feasible = cand <= best
        thr = np.where(feasible, cand / np.maximum(c_tpot, 1e-300), -np.inf)
        top_thr = float(thr.max())
        i = int(np.flatnonzero(thr >= top_thr * (1 - BEST_BATCH_TOLERANCE))[-1])  # near-ties: the larger batch
        if int(cand[i]) < best:
            best, why = int(cand[i]), "throughput"
    at = int(np.searchsorted(cand, best))
    tpot_best = float(c_tpot[at]) if best else float("nan")
    ttft_best = float(c_ttft[at]) if best else float("nan")
    if limit <= 0:
        best, binding = 0, "none"
    elif why == "limit":
        binding = limit_name
    else:
        binding = why
    return LargestBatch(
        batch_size=best,
        binding=binding,
        batch_limit=int(limit),
        max_concurrency=int(max_concurrency),
        max_num_seqs=deployment.max_num_seqs,
        tpot_slo_s=workload.tpot_slo_s,
        ttft_slo_s=workload.ttft_slo_s,
        tpot_s=tpot_best if best else float("nan"),
        ttft_s=ttft_best if best else float("nan"),
        tpot_batch1_s=float(tpot_s[0]),
        ttft_batch1_s=float(ttft_s[0]),
        batch_sizes=batches,
        tpot_candidates_s=tpot_s,
        ttft_candidates_s=ttft_s,
    )
