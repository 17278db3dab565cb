"""Sizing: ``plan`` one deployment into a :class:`SizingReport`; ``sweep`` every configuration into a table.

Public API (the dashboard and the CLI code against these):

* :func:`plan` ``(model, gpu, deployment, workload, profile=IDEAL_PROFILE) -> SizingReport``
* :func:`largest_batch_under_slo` ``(model, gpu, deployment, workload, profile=IDEAL_PROFILE) -> SloSearch``
* :func:`sweep` ``(model, workload, gpus=None, ...) -> pandas.DataFrame`` (vectorised, ranked)

Conventions
-----------
* ``prompt_tokens`` P and ``output_tokens`` N come from the :class:`Workload`; a request holds
  ``context_tokens`` = P + N of KV at its end, so memory (max concurrency) is sized at P + N.
* TTFT at batch B = steady-state continuous batching with chunked prefill (vLLM's default): a new
  request's prompt is prefilled in chunks of the step budget left after the B − 1 running
  sequences' decode tokens, each step also carrying those decodes (:func:`ttft_under_load_costs`).
  At B = 1 this is the idle-engine prefill, :attr:`SizingReport.ttft`.  Queueing behind other
  arrivals is not modelled here (that is the simulator's job).
* TPOT at batch B = one decode step of B sequences at the mean context P + N/2.
* The SLO search picks the largest B ≤ min(max concurrency, max_num_seqs) whose TPOT and TTFT meet
  the workload's targets (both are non-decreasing in B, so the feasible batches are 1 … B*).
* Throughput and $/Mtok are taken at that batch (see :mod:`planner.cost`).
* All numbers are SI (bytes, seconds, USD); ``mode`` says whether the ideal roofline or a calibrated
  profile produced them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from planner.cost import (
    Fleet,
    Throughput,
    TokenCost,
    effective_tpot_s,
    fleet_for,
    prefill_busy_costs,
    throughput,
    token_cost,
)
from planner.dtypes import KV_BYTES, WEIGHT_BITS
from planner.memory import (
    KvPerRequest,
    MemoryBudget,
    kv_bytes_per_request,
    kv_bytes_per_token,
    kv_shard_fraction,
    memory_budget,
    weight_bytes,
)
from planner.phases import PhaseTime, as_scalar, decode_step_costs, phase_time, prefill_time_costs, sum_steps
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.quality import QualityEstimate, quality_estimate
from planner.roofline import HwCoeffs, ModelCosts, attended_decode, attended_prefill, hw_coeffs, model_costs, step_time
from planner.specs import Deployment, GpuSpec, ModelSpec, Workload
from planner.units import fmt_gib, fmt_ms

__all__ = [
    "DEFAULT_BATCH_SIZES",
    "SWEEP_COLUMNS",
    "SizingReport",
    "SloSearch",
    "decode_context_tokens",
    "largest_batch_under_slo",
    "pick_largest_batch",
    "plan",
    "sweep",
    "ttft_under_load_costs",
]

#: Limits up to this many batches are searched exhaustively; above, a grid plus refinement.
EXACT_BATCH_SEARCH = 65_536

#: Batch sizes ``sweep`` tries when none are given.
DEFAULT_BATCH_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


#: Largest prompt/output token count the planner accepts (far beyond any served context; keeps the
#: quadratic attention terms finite in float64).
MAX_TOKENS = 10**9


def _check_tokens(workload: Workload) -> None:
    from planner.catalog import SpecError

    for name in ("prompt_tokens", "output_tokens"):
        v = getattr(workload, name)
        if v > MAX_TOKENS:
            raise SpecError(f"workload.{name}: {v:,} tokens is beyond any served context (limit {MAX_TOKENS:,})")
    if workload.concurrency is not None and workload.concurrency > MAX_TOKENS:
        raise SpecError(f"workload.concurrency: {workload.concurrency:,} exceeds the limit {MAX_TOKENS:,}")


def decode_context_tokens(workload: Workload) -> float:
    """Mean context a decoding sequence holds over its life: P + N/2 (what TPOT is evaluated at)."""
    return workload.prompt_tokens + workload.output_tokens / 2.0


# ----------------------------------------------------------------------------------- SLO search


def ttft_under_load_costs(mc: ModelCosts, hw: HwCoeffs, prompt_tokens, batch_size, decode_context_tokens,
                          max_num_batched_tokens=8192) -> PhaseTime:
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
class SloSearch:
    """The largest batch (requests in flight per replica) that meets the TPOT and TTFT targets.

    ``batch_size`` is 0 when not even one request meets the targets (or nothing fits).  ``binding``
    names what stopped the search: 'tpot', 'ttft', 'tpot+ttft' (an SLO), 'memory' (max concurrency
    from the KV pool), 'max_num_seqs' (the engine's scheduler limit), 'concurrency' (the workload's
    own concurrency, when it asks for fewer) or 'none' when nothing fits.
    ``batch_sizes`` / ``tpot_s`` / ``ttft_s`` are the candidates evaluated (arrays, for charts).
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
) -> SloSearch:
    """Largest batch meeting ``workload.tpot_slo_s`` and ``workload.ttft_slo_s``, capped by the
    max concurrency at P + N tokens (computed unless given), ``deployment.max_num_seqs`` and, if set,
    ``workload.concurrency``.  Evaluates every batch 1 … limit at once with numpy, then picks.
    Without targets the answer is the limit itself.
    """
    if max_concurrency is None:
        max_concurrency = _max_concurrency(model, gpu, deployment, workload, profile)[0]
    limit = min(max_concurrency, deployment.max_num_seqs)
    limit_name = "memory" if max_concurrency <= deployment.max_num_seqs else "max_num_seqs"
    if workload.concurrency is not None and workload.concurrency < limit:
        limit, limit_name = workload.concurrency, "concurrency"
    mc, hw = model_costs(model, deployment), hw_coeffs(gpu, deployment.weight_dtype, profile)

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
    at = int(np.searchsorted(cand, best))
    tpot_best = float(c_tpot[at]) if best else float("nan")
    ttft_best = float(c_ttft[at]) if best else float("nan")
    if limit <= 0:
        best, binding = 0, "none"
    elif why == "limit":
        binding = limit_name
    else:
        binding = why
    return SloSearch(
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


def _max_concurrency(model, gpu, deployment, workload, profile) -> tuple[int, MemoryBudget, float]:
    budget = memory_budget(model, gpu, deployment, profile)
    per_req = kv_bytes_per_request(model, deployment.kv_cache_dtype, workload.context_tokens,
                                   deployment.block_size_tokens).total_bytes
    per_req_gpu = per_req * kv_shard_fraction(model, deployment.tensor_parallel, deployment.pipeline_parallel)
    conc = int(budget.kv_pool_bytes // per_req_gpu) if budget.fits and per_req_gpu > 0 else 0
    return conc, budget, per_req_gpu


# -------------------------------------------------------------------------------------- the report


@dataclass(frozen=True)
class SizingReport:
    """Everything :func:`plan` found, with its parts.  Raw SI numbers; ``to_dict`` / ``to_frame`` for export.

    ``feasible`` is False when the model does not fit, no batch meets the SLOs, the workload's
    context exceeds the model's limit or tensor parallel does not divide the attention heads;
    ``reasons`` says why in plain sentences with numbers.  ``notes`` are observations that do not
    make the plan infeasible (e.g. the deployment has fewer GPUs than the request rate needs).
    """

    model_id: str
    model_name: str
    gpu_id: str
    gpu_name: str
    deployment: Deployment
    workload: Workload
    profile_mode: str  # 'ideal', 'calibrated' or 'transferred'
    profile_gpu_id: str | None
    profile_engine_version: str
    profile_created: str
    memory: MemoryBudget
    kv_per_request: KvPerRequest  # one whole request at P + N tokens (all GPUs together)
    kv_per_request_bytes_per_gpu: float
    max_concurrency: int  # per replica at P + N tokens
    ttft: PhaseTime  # one prompt on an idle replica
    slo: SloSearch
    tpot: PhaseTime  # the decode step at slo.batch_size (batch 1 when it is 0), context P + N/2
    tpot_effective_s: float  # what users see: the decode step + other requests' interleaved prefills
    throughput: Throughput
    cost: TokenCost
    fleet: Fleet
    quality: QualityEstimate
    price_usd_per_hour: float  # per GPU
    price_source: str
    price_date: str
    feasible: bool
    reasons: list[str]
    notes: list[str]

    @property
    def batch_size(self) -> int:
        return self.slo.batch_size

    @property
    def mode(self) -> str:
        return self.profile_mode

    def to_dict(self) -> dict:
        """Flat JSON-safe dict of raw SI numbers; keys carry their unit (nan/inf become None)."""
        d, w, m, tp, c = self.deployment, self.workload, self.memory, self.throughput, self.cost
        out = {
            "model_id": self.model_id,
            "gpu_id": self.gpu_id,
            "num_gpus": d.num_gpus,
            "tensor_parallel": d.tensor_parallel,
            "pipeline_parallel": d.pipeline_parallel,
            "gpus_per_replica": d.gpus_per_replica,
            "weight_dtype": d.weight_dtype,
            "kv_cache_dtype": d.kv_cache_dtype,
            "gpu_memory_utilization": d.gpu_memory_utilization,
            "max_num_batched_tokens": d.max_num_batched_tokens,
            "max_num_seqs": d.max_num_seqs,
            "block_size_tokens": d.block_size_tokens,
            "prompt_tokens": w.prompt_tokens,
            "output_tokens": w.output_tokens,
            "context_tokens": w.context_tokens,
            "decode_context_tokens": decode_context_tokens(w),
            "concurrency": w.concurrency,
            "request_rate_per_s": w.request_rate_per_s,
            "ttft_slo_s": w.ttft_slo_s,
            "tpot_slo_s": w.tpot_slo_s,
            "calibration_mode": self.profile_mode,
            "profile_gpu_id": self.profile_gpu_id,
            "profile_engine_version": self.profile_engine_version,
            "profile_created": self.profile_created,
            "gpu_memory_bytes": m.gpu_memory_bytes,
            "usable_memory_bytes_per_gpu": m.usable_bytes,
            "weight_bytes_per_gpu": m.weight_bytes,
            "activation_bytes_per_gpu": m.activation_bytes,
            "non_torch_bytes_per_gpu": m.non_torch_bytes,
            "cudagraph_bytes_per_gpu": m.cudagraph_bytes,
            "kv_pool_bytes_per_gpu": m.kv_pool_bytes,
            "kv_bytes_per_token_per_gpu": m.kv_bytes_per_token,
            "kv_capacity_tokens": m.kv_capacity_tokens,
            "fits": m.fits,
            "kv_bytes_per_request": self.kv_per_request.total_bytes,
            "kv_bytes_per_request_per_gpu": self.kv_per_request_bytes_per_gpu,
            "max_concurrency": self.max_concurrency,
            "ttft_s": self.ttft.time_s,
            "ttft_compute_s": self.ttft.compute_s,
            "ttft_memory_s": self.ttft.memory_s,
            "ttft_comm_s": self.ttft.comm_s,
            "ttft_overhead_s": self.ttft.overhead_s,
            "bound_prefill": self.ttft.bound,
            "batch_size": self.slo.batch_size,
            "batch_limit": self.slo.batch_limit,
            "slo_binding": self.slo.binding,
            "meets_slo": self.slo.meets_slo,
            "ttft_at_batch_s": self.slo.ttft_s,
            "tpot_s": self.tpot_effective_s,
            "decode_step_s": self.tpot.time_s,
            "tpot_compute_s": self.tpot.compute_s,
            "tpot_memory_s": self.tpot.memory_s,
            "tpot_comm_s": self.tpot.comm_s,
            "tpot_overhead_s": self.tpot.overhead_s,
            "tpot_batch1_s": self.slo.tpot_batch1_s,
            "bound_decode": self.tpot.bound,
            "decode_arithmetic_intensity_flops_per_byte": float(self.tpot.arithmetic_intensity),
            "prefill_busy_s": tp.prefill_busy_s,
            "decode_busy_s": tp.decode_busy_s,
            "prefill_time_share": tp.prefill_time_share,
            "output_tokens_per_s": tp.output_tokens_per_s,
            "output_tokens_per_s_per_gpu": tp.output_tokens_per_s_per_gpu,
            "output_tokens_per_s_per_user": tp.output_tokens_per_s_per_user,
            "input_tokens_per_s": tp.input_tokens_per_s,
            "requests_per_s": tp.requests_per_s,
            "requests_per_s_per_gpu": tp.requests_per_s_per_gpu,
            "price_usd_per_hour": self.price_usd_per_hour,
            "price_usd_per_replica_hour": c.price_usd_per_replica_hour,
            "price_source": self.price_source,
            "price_date": self.price_date,
            "cost_usd_per_million_output_tokens": c.usd_per_million_output_tokens,
            "cost_usd_per_million_input_tokens": c.usd_per_million_input_tokens,
            "cost_usd_per_million_tokens_blended": c.usd_per_million_tokens_blended,
            "cost_usd_per_million_output_tokens_all_in": c.usd_per_million_output_tokens_all_in,
            "cost_usd_per_request": c.usd_per_request,
            "replicas_needed": self.fleet.replicas,
            "gpus_needed": self.fleet.num_gpus,
            "fleet_utilization": self.fleet.utilization,
            "quality_benchmark": self.quality.benchmark,
            "quality_published_score": self.quality.published_score,
            "quality_retention": self.quality.retention,
            "quality_score": self.quality.score,
            "context_exceeds_model_limit": self.quality.context_exceeds_limit,
            "model_max_context_tokens": self.quality.max_context_tokens,
            "feasible": self.feasible,
            "reasons": list(self.reasons),
            "notes": list(self.notes),
        }
        return {k: _json_safe(v) for k, v in out.items()}

    def to_frame(self) -> pd.DataFrame:
        """One-row DataFrame of :meth:`to_dict` (reasons/notes joined with '; ')."""
        d = self.to_dict()
        d["reasons"] = "; ".join(d["reasons"])
        d["notes"] = "; ".join(d["notes"])
        return pd.DataFrame([d])


def _json_safe(v):
    if isinstance(v, np.ndarray):
        v = v.item() if v.ndim == 0 else v.tolist()
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _f(x) -> float:
    return float(np.asarray(x))


# -------------------------------------------------------------------------------------------- plan


def plan(
    model: ModelSpec,
    gpu: GpuSpec,
    deployment: Deployment,
    workload: Workload,
    profile: CalibrationProfile = IDEAL_PROFILE,
) -> SizingReport:
    """Size one deployment of ``model`` on ``gpu`` for ``workload``.

    ``profile`` defaults to the ideal roofline ("speed of light"); the report's ``profile_mode`` says
    which was used.  Raises :class:`planner.catalog.SpecError` (a ValueError) when the inputs
    contradict each other (e.g. ``deployment.gpu_id`` is not ``gpu.id``); an infeasible but valid
    plan is returned with ``feasible=False`` and its ``reasons``.
    """
    from planner.catalog import SpecError

    if deployment.gpu_id != gpu.id:
        raise SpecError(f"deployment.gpu_id: '{deployment.gpu_id}' does not match the GPU '{gpu.id}'")
    _check_tokens(workload)
    reasons: list[str] = []
    notes: list[str] = []

    conc, budget, per_req_gpu = _max_concurrency(model, gpu, deployment, workload, profile)
    kv_req = kv_bytes_per_request(model, deployment.kv_cache_dtype, workload.context_tokens,
                                  deployment.block_size_tokens)
    mc, hw = model_costs(model, deployment), hw_coeffs(gpu, deployment.weight_dtype, profile)
    ttft = prefill_time_costs(mc, hw, workload.prompt_tokens, 1, deployment.max_num_batched_tokens)
    slo = largest_batch_under_slo(model, gpu, deployment, workload, profile, max_concurrency=conc)
    b = max(slo.batch_size, 1)
    tpot = decode_step_costs(mc, hw, b, decode_context_tokens(workload))
    busy = _f(prefill_busy_costs(mc, hw, workload.prompt_tokens, b, deployment.max_num_batched_tokens))
    tpot_eff = float(effective_tpot_s(tpot.time_s, b, busy, workload.output_tokens))
    thr = throughput(b, _f(tpot.time_s), busy, workload.prompt_tokens, workload.output_tokens,
                     deployment.gpus_per_replica)
    cost = token_cost(thr, gpu.price_usd_per_hour)
    served = slo.batch_size > 0
    fleet = fleet_for(workload.request_rate_per_s, _f(thr.requests_per_s) if served else 0.0,
                      deployment.gpus_per_replica, slo.batch_size, workload.concurrency)
    quality = quality_estimate(model, deployment.weight_dtype, deployment.kv_cache_dtype, workload.context_tokens)

    # ---- feasibility, in plain sentences
    if not budget.fits:
        reasons.append(budget.explain())
    elif conc == 0:
        reasons.append(
            f"one request of {workload.context_tokens:,} tokens needs {fmt_gib(per_req_gpu)} of KV per GPU, "
            f"the pool has {fmt_gib(budget.kv_pool_bytes)}"
        )
    if quality.context_exceeds_limit:
        reasons.append(
            f"context {workload.context_tokens:,} tokens (prompt + output) exceeds the model's "
            f"{model.max_context_tokens:,}-token limit"
        )
    if model.attention.num_heads % deployment.tensor_parallel:
        reasons.append(
            f"tensor_parallel {deployment.tensor_parallel} does not divide the model's "
            f"{model.attention.num_heads} attention heads (vLLM refuses it)"
        )
    if conc > 0 and slo.batch_size == 0:
        if workload.tpot_slo_s is not None and slo.tpot_batch1_s > workload.tpot_slo_s:
            reasons.append(
                f"TPOT target {fmt_ms(workload.tpot_slo_s)} is below the {fmt_ms(slo.tpot_batch1_s)} "
                f"of a single sequence"
            )
        if workload.ttft_slo_s is not None and slo.ttft_batch1_s > workload.ttft_slo_s:
            reasons.append(
                f"TTFT target {fmt_ms(workload.ttft_slo_s)} is below the {fmt_ms(slo.ttft_batch1_s)} "
                f"prefill of one {workload.prompt_tokens:,}-token prompt"
            )
    feasible = not reasons

    # ---- notes
    if profile.mode == "calibrated" and profile.gpu_id not in (None, gpu.id):
        notes.append(f"calibration profile is for '{profile.gpu_id}', applied to '{gpu.id}'")
    if profile.mode == "transferred":
        notes.append(f"latency uses {profile.transferred_from}'s measured efficiencies on {gpu.id}'s datasheet "
                     f"roofs (transferred, not measured on this GPU)")
    if served and slo.binding in ("tpot", "ttft", "tpot+ttft") and slo.batch_limit > slo.batch_size:
        notes.append(
            f"the {slo.binding.upper()} target holds the batch to {slo.batch_size:,} of the "
            f"{slo.batch_limit:,} that fit in memory"
        )
    if served and fleet.num_gpus > deployment.num_gpus and (workload.request_rate_per_s or workload.concurrency):
        notes.append(
            f"the workload needs {fleet.replicas:,} replica(s) = {fleet.num_gpus:,} GPUs; the deployment "
            f"has {deployment.num_gpus:,}"
        )
    if workload.concurrency is not None and served and workload.concurrency > slo.batch_size:
        notes.append(
            f"concurrency {workload.concurrency:,} exceeds the {slo.batch_size:,} one replica serves "
            f"within its limits"
        )

    return SizingReport(
        model_id=model.id,
        model_name=model.name,
        gpu_id=gpu.id,
        gpu_name=gpu.name,
        deployment=deployment,
        workload=workload,
        profile_mode=profile.mode,
        profile_gpu_id=profile.gpu_id,
        profile_engine_version=profile.engine_version,
        profile_created=profile.created,
        memory=budget,
        kv_per_request=kv_req,
        kv_per_request_bytes_per_gpu=per_req_gpu,
        max_concurrency=conc,
        ttft=ttft,
        slo=slo,
        tpot=tpot,
        tpot_effective_s=tpot_eff,
        throughput=thr,
        cost=cost,
        fleet=fleet,
        quality=quality,
        price_usd_per_hour=gpu.price_usd_per_hour,
        price_source=gpu.price_source.url,
        price_date=gpu.price_source.date,
        feasible=feasible,
        reasons=reasons,
        notes=notes,
    )


# ------------------------------------------------------------------------------------------- sweep

#: Columns of the :func:`sweep` DataFrame, in order.  Units are in the names (s, bytes, usd).
SWEEP_COLUMNS: tuple[str, ...] = (
    "rank",
    "model_id",
    "gpu_id",
    "weight_dtype",
    "kv_cache_dtype",
    "tensor_parallel",
    "num_gpus",
    "prompt_tokens",
    "output_tokens",
    "context_tokens",
    "batch_size",
    "fits",
    "max_concurrency",
    "ttft_s",
    "tpot_s",
    "decode_step_s",
    "output_tokens_per_s",
    "output_tokens_per_s_per_gpu",
    "requests_per_s",
    "cost_usd_per_million_output_tokens",
    "cost_usd_per_million_input_tokens",
    "cost_usd_per_million_tokens_blended",
    "cost_usd_per_million_output_tokens_all_in",
    "meets_slo",
    "bound_prefill",
    "bound_decode",
    "weight_bytes_per_gpu",
    "kv_pool_bytes_per_gpu",
    "kv_bytes_per_request_per_gpu",
    "price_usd_per_hour",
    "price_source",
    "price_date",
    "calibration_mode",
    "quality_score",
    "context_exceeds_model_limit",
)


def _tensor_parallels(model: ModelSpec, gpu: GpuSpec, wanted: Iterable[int] | None) -> list[int]:
    cands = wanted if wanted is not None else (1, 2, 4, 8)
    return [t for t in cands if t <= gpu.max_gpus_per_node and model.attention.num_heads % t == 0]


@dataclass(frozen=True)
class _Block:
    gpu: GpuSpec
    weight_dtype: str
    kv_cache_dtype: str
    profile: CalibrationProfile
    mc: ModelCosts
    hw: HwCoeffs
    budget: MemoryBudget
    max_num_batched_tokens: int  # the block's own scheduler limits (vLLM's defaults differ per GPU)
    max_num_seqs: int


def _stack(objs: Sequence, names: Iterable[str]) -> dict[str, np.ndarray]:
    """Field arrays of shape (n_blocks, 1, 1) so they broadcast against (batch, prompt) axes."""
    return {n: np.array([getattr(o, n) for o in objs], dtype=float)[:, None, None] for n in names}


_MC_BLOCK_FIELDS = ("dense_weight_bytes", "expert_weight_bytes", "kv_bytes_per_ctx_layer", "cudagraph_max_tokens")
_HW_BLOCK_FIELDS = (
    "linear_peak_flops_per_s", "attn_peak_flops_per_s", "hbm_bandwidth_bytes_per_s", "matmul_efficiency_max",
    "matmul_half_tokens", "attention_compute_efficiency", "weight_bandwidth_efficiency",
    "kv_bandwidth_efficiency", "step_overhead_s", "per_seq_overhead_s", "per_token_overhead_s",
    "request_overhead_s", "link_bandwidth_bytes_per_s", "allreduce_latency_s", "kv_bandwidth_efficiency_fp8",
    "prefill_layer_overhead_s", "eager_layer_overhead_s",
)


def sweep(
    model: ModelSpec,
    workload: Workload,
    gpus: Sequence[GpuSpec] | None = None,
    weight_dtypes: Sequence[str] | None = None,
    kv_dtypes: Sequence[str] | None = None,
    tensor_parallels: Sequence[int] | None = None,
    contexts: Sequence[int] | None = None,
    batch_sizes: Sequence[int] | None = None,
    profile_for: Callable[[str], CalibrationProfile] | None = None,
    deployment_defaults: dict | None = None,
) -> pd.DataFrame:
    """Rank every (GPU × weight dtype × KV dtype × TP × prompt length × batch) configuration.

    * ``gpus``: GpuSpecs (default: every GPU in the catalog).
    * ``weight_dtypes`` (default: every known), ``kv_dtypes`` (default bf16, fp8).
    * ``tensor_parallels`` (default 1, 2, 4, 8), kept where ≤ ``gpu.max_gpus_per_node`` and dividing
      the attention heads.  One replica = TP GPUs (pipeline parallel 1); ``num_gpus`` = TP.
    * ``contexts``: **prompt** lengths to try (default: ``workload.prompt_tokens``); each row's
      ``context_tokens`` = prompt + ``workload.output_tokens`` (what a request holds at its end).
    * ``batch_sizes``: requests in flight per replica (default :data:`DEFAULT_BATCH_SIZES`).
    * ``profile_for(gpu_id)``: the calibration profile per GPU (e.g. ``catalog.resolve_profile('auto', gpu_id)[0]``);
      None: the ideal roofline on every GPU.
    * ``deployment_defaults``: other :class:`Deployment` fields (gpu_memory_utilization,
      max_num_batched_tokens, max_num_seqs, block_size_tokens) applied to every row.

    Each row: ``fits`` (the batch fits in the KV pool and within max_num_seqs), ``meets_slo``
    (fits and TTFT/TPOT meet the workload's targets), TTFT at that batch (a new request joining
    batch − 1 decoding sequences, :func:`ttft_under_load_costs`), TPOT at P + N/2, throughput and $/Mtok as :func:`plan` computes them.  Rows are
    sorted: meets_slo first, then fits, then by the all-in cost per million output tokens (all GPU
    time, prefill included, over the generated tokens), cheapest first;
    ``rank`` numbers them from 1.  Evaluation is vectorised with numpy per tensor-parallel group.
    """
    from planner import catalog

    _check_tokens(workload)
    gpu_list = list(gpus) if gpus is not None else list(catalog.gpus().values())
    wds = list(weight_dtypes) if weight_dtypes is not None else list(WEIGHT_BITS)
    kvs = list(kv_dtypes) if kv_dtypes is not None else ["bf16", "fp8"]
    for d in wds:
        if d not in WEIGHT_BITS:
            raise ValueError(f"weight_dtype: unknown dtype '{d}'; known: {', '.join(WEIGHT_BITS)}")
    for d in kvs:
        if d not in KV_BYTES:
            raise ValueError(f"kv_cache_dtype: unknown dtype '{d}'; known: {', '.join(KV_BYTES)}")
    prompts = np.array(list(contexts) if contexts is not None else [workload.prompt_tokens], dtype=float)
    batches = np.array(list(batch_sizes) if batch_sizes is not None else DEFAULT_BATCH_SIZES, dtype=float)
    for name, arr in (("contexts", prompts), ("batch_sizes", batches)):
        if (arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < 1) or np.any(arr != np.round(arr))
                or np.any(arr > MAX_TOKENS)):
            raise ValueError(f"{name}: need whole numbers ≥ 1, got {arr.tolist()!r}")
    defaults = dict(deployment_defaults or {})
    n_out = float(workload.output_tokens)

    frames = []
    tps = sorted({t for g in gpu_list for t in _tensor_parallels(model, g, tensor_parallels)})
    wb_cache = {d: weight_bytes(model, d).total_bytes for d in wds}
    kvtok_cache = {d: kv_bytes_per_token(model, d) for d in kvs}
    prof_cache = {g.id: profile_for(g.id) if profile_for else IDEAL_PROFILE for g in gpu_list}
    hw_cache = {(g.id, wd): hw_coeffs(g, wd, prof_cache[g.id]) for g in gpu_list for wd in wds}
    ctx_tokens = prompts + n_out
    # fixed categories so the per-group frames concatenate as categoricals
    cats = {
        "gpu_id": sorted({g.id for g in gpu_list}),
        "weight_dtype": wds,
        "kv_cache_dtype": kvs,
        "price_source": sorted({g.price_source.url for g in gpu_list}),
        "price_date": sorted({g.price_source.date for g in gpu_list}),
        "calibration_mode": ["ideal", "calibrated", "transferred"],
    }
    for tp in tps:
        blocks: list[_Block] = []
        mc_cache: dict[tuple[str, str], ModelCosts] = {}
        for g in gpu_list:
            if tp not in _tensor_parallels(model, g, tensor_parallels):
                continue
            prof = prof_cache[g.id]
            for wd in wds:
                for kv in kvs:
                    dep = Deployment.for_gpu(g, num_gpus=tp, tensor_parallel=tp, weight_dtype=wd,
                                     kv_cache_dtype=kv, **defaults)
                    key = (wd, kv, dep.max_num_batched_tokens, dep.max_num_seqs)
                    if key not in mc_cache:
                        mc_cache[key] = model_costs(model, dep)
                    budget = memory_budget(model, g, dep, prof, model_weight_bytes=wb_cache[wd],
                                           model_kv_bytes_per_token=kvtok_cache[kv])
                    blocks.append(_Block(g, wd, kv, prof, mc_cache[key], hw_cache[g.id, wd], budget,
                                         dep.max_num_batched_tokens, dep.max_num_seqs))
        if not blocks:
            continue
        frames.append(_sweep_group(model, workload, blocks, prompts, batches, ctx_tokens, tp, dep, cats))
    if not frames:
        return pd.DataFrame(columns=list(SWEEP_COLUMNS))
    df = pd.concat(frames, ignore_index=True)
    order = np.lexsort((df["cost_usd_per_million_output_tokens_all_in"].to_numpy(), ~df["fits"].to_numpy(),
                        ~df["meets_slo"].to_numpy()))
    df = df.iloc[order].reset_index(drop=True)
    df.insert(0, "rank", np.arange(1, len(df) + 1))
    return df


def _kv_per_request_bytes(model: ModelSpec, kv_dtype: str, context_tokens: np.ndarray, block: int) -> np.ndarray:
    """Vectorised :func:`planner.memory.kv_bytes_per_request` total over an array of contexts."""
    return np.array([kv_bytes_per_request(model, kv_dtype, int(c), block).total_bytes for c in context_tokens])


#: Values of the bound columns (categorical).
BOUNDS: tuple[str, ...] = ("compute", "memory", "communication", "overhead")


def _sweep_group(model, workload, blocks: list[_Block], prompts, batches, ctx_tokens, tp, dep,
                 cats: dict[str, list[str]]) -> pd.DataFrame:
    """Evaluate one tensor-parallel group: arrays of shape (blocks, batches, prompts)."""
    n_blk, n_b, n_p = len(blocks), batches.size, prompts.size
    mc = replace(blocks[0].mc, **_stack([b.mc for b in blocks], _MC_BLOCK_FIELDS))
    hw = replace(blocks[0].hw, **_stack([b.hw for b in blocks], _HW_BLOCK_FIELDS))
    m_tok = np.array([b.max_num_batched_tokens for b in blocks], dtype=float)[:, None, None]
    mns = np.array([b.max_num_seqs for b in blocks], dtype=float)[:, None, None]
    B = batches[None, :, None]
    P = prompts[None, None, :]
    n_out = float(workload.output_tokens)

    # memory: per block (pool, fits) and per (block, prompt) (per-request KV, concurrency)
    pool = np.array([b.budget.kv_pool_bytes for b in blocks])[:, None, None]
    fits_mem = np.array([b.budget.fits for b in blocks])[:, None, None]
    kv_req_cache = {kv: _kv_per_request_bytes(model, kv, ctx_tokens, dep.block_size_tokens)
                    for kv in {b.kv_cache_dtype for b in blocks}}
    shard = kv_shard_fraction(model, tp, 1)
    per_req = np.stack([kv_req_cache[b.kv_cache_dtype] for b in blocks])[:, None, :] * shard
    with np.errstate(divide="ignore", invalid="ignore"):
        conc = np.where(fits_mem & (per_req > 0), np.floor(pool / np.where(per_req > 0, per_req, 1.0)), 0.0)
    fits = (B <= conc) & (B <= mns)

    # latency
    ttft = ttft_under_load_costs(mc, hw, P, B, P + n_out / 2.0, m_tok)
    tpot = decode_step_costs(mc, hw, B, P + n_out / 2.0)
    busy = prefill_busy_costs(mc, hw, P, B, m_tok)
    shape = (n_blk, n_b, n_p)
    ttft_s = np.broadcast_to(ttft.time_s, shape)
    step_s = np.broadcast_to(tpot.time_s, shape)
    tpot_s = np.broadcast_to(effective_tpot_s(tpot.time_s, B, busy, n_out), shape)
    thr = throughput(B, step_s, np.broadcast_to(busy, shape), P, n_out, tp)
    price = np.array([b.gpu.price_usd_per_hour for b in blocks])[:, None, None]
    cost = token_cost(thr, price)
    meets = fits.copy()
    if workload.tpot_slo_s is not None:
        meets = meets & (tpot_s <= workload.tpot_slo_s)
    if workload.ttft_slo_s is not None:
        meets = meets & (ttft_s <= workload.ttft_slo_s)

    codes = np.broadcast_to(np.arange(n_blk)[:, None, None], shape).ravel()

    def per_block(values, categories) -> pd.Categorical:
        index = {c: i for i, c in enumerate(categories)}
        block_codes = np.array([index[v] for v in values], dtype=np.int32)
        return pd.Categorical.from_codes(block_codes[codes], categories=categories)

    def bounds(labels) -> pd.Categorical:
        lab = full(labels)
        out = np.zeros(lab.shape, dtype=np.int8)
        for i, name in enumerate(BOUNDS[1:], start=1):
            out[lab == name] = i
        return pd.Categorical.from_codes(out, categories=list(BOUNDS))

    def per_block_num(values) -> np.ndarray:
        return np.asarray(values, dtype=float)[codes]

    def full(x) -> np.ndarray:
        return np.broadcast_to(x, shape).ravel()

    qual = np.array([quality_estimate(model, b.weight_dtype, b.kv_cache_dtype, 1).score
                     for b in blocks])[:, None, None]
    cols = {
        "model_id": pd.Categorical.from_codes(np.zeros(codes.size, dtype=np.int8), categories=[model.id]),
        "gpu_id": per_block([b.gpu.id for b in blocks], cats["gpu_id"]),
        "weight_dtype": per_block([b.weight_dtype for b in blocks], cats["weight_dtype"]),
        "kv_cache_dtype": per_block([b.kv_cache_dtype for b in blocks], cats["kv_cache_dtype"]),
        "tensor_parallel": np.full(n_blk * n_b * n_p, tp),
        "num_gpus": np.full(n_blk * n_b * n_p, tp),
        "prompt_tokens": full(P).astype(np.int64),
        "output_tokens": np.full(n_blk * n_b * n_p, int(n_out)),
        "context_tokens": full(P + n_out).astype(np.int64),
        "batch_size": full(B).astype(np.int64),
        "fits": full(fits),
        "max_concurrency": full(np.broadcast_to(conc, (n_blk, 1, n_p))).astype(np.int64),
        "ttft_s": ttft_s.ravel(),
        "tpot_s": tpot_s.ravel(),
        "decode_step_s": step_s.ravel(),
        "output_tokens_per_s": full(thr.output_tokens_per_s),
        "output_tokens_per_s_per_gpu": full(thr.output_tokens_per_s_per_gpu),
        "requests_per_s": full(thr.requests_per_s),
        "cost_usd_per_million_output_tokens": full(cost.usd_per_million_output_tokens),
        "cost_usd_per_million_input_tokens": full(cost.usd_per_million_input_tokens),
        "cost_usd_per_million_tokens_blended": full(cost.usd_per_million_tokens_blended),
        "cost_usd_per_million_output_tokens_all_in": full(cost.usd_per_million_output_tokens_all_in),
        "meets_slo": full(meets),
        "bound_prefill": bounds(ttft.bound),
        "bound_decode": bounds(tpot.bound),
        "weight_bytes_per_gpu": per_block_num([b.budget.weight_bytes for b in blocks]),
        "kv_pool_bytes_per_gpu": per_block_num([b.budget.kv_pool_bytes for b in blocks]),
        "kv_bytes_per_request_per_gpu": full(np.broadcast_to(per_req, (n_blk, 1, n_p))),
        "price_usd_per_hour": full(price),
        "price_source": per_block([b.gpu.price_source.url for b in blocks], cats["price_source"]),
        "price_date": per_block([b.gpu.price_source.date for b in blocks], cats["price_date"]),
        "calibration_mode": per_block([b.profile.mode for b in blocks], cats["calibration_mode"]),
        "quality_score": full(qual),
        "context_exceeds_model_limit": full(P + n_out > model.max_context_tokens),
    }
    return pd.DataFrame(cols)
