"""Serving under load: a discrete-event simulator of a vLLM-style engine (pure Python + numpy).

What it models, step by step, the way vLLM V1's scheduler does (``vllm/v1/core/sched/scheduler.py``):

* **Continuous batching.**  Every engine step schedules the running requests first (a decode token
  each, or the next chunk of a prompt still being prefilled), then admits waiting requests FCFS while
  the step's token budget (``max_num_batched_tokens``) and ``max_num_seqs`` allow; a prompt larger
  than the remaining budget is split (chunked prefill).  A request that finishes its prompt in a step
  samples its first token at the end of that step (TTFT); every later step gives it one more token.
* **Paged KV pool** of ``kv_capacity_tokens`` in blocks of ``block_size`` (16).  A step first
  allocates the blocks its tokens need; if the pool is full the *last* admitted running request is
  preempted (its blocks freed, its progress recomputed later, like vLLM's RECOMPUTE mode), and no new
  request is admitted in that step.
* **Prefix caching** (vLLM's automatic prefix caching): full blocks are identified by the hash of
  all tokens up to their end; a newly admitted request reuses the cached blocks of its longest
  cached prefix (at most all but its last token) and prefills only the rest.  Blocks are registered
  in the cache as soon as they are allocated (so requests admitted later in the same step hit them);
  unreferenced cached blocks stay in the pool and are evicted least-recently-freed first when
  blocks are needed.  Approximation: blocks that were never cached are reused before cached ones.
* **Step time** for each mixed batch from :func:`planner.roofline.step_time` (prefill chunks'
  causal attention via ``attended_prefill``, decode contexts via ``attended_decode``), reduced to
  float arithmetic by :class:`StepCost` (checked against ``step_time`` in the tests).  A calibrated
  :class:`~planner.specs.CalibrationProfile` enters through :func:`planner.roofline.hw_coeffs`;
  ``request_overhead_s`` is added to each request's TTFT and E2E as client-visible latency.
* **Speculative decoding** (optional): a decode step verifies k draft tokens per sequence (k + 1
  tokens through the target) after the draft model spent ``c × k`` target decode steps proposing
  them, and accepts on average (1 − α^(k+1)) / (1 − α) tokens (Leviathan et al., arXiv 2211.17192).

Speed: the steps between events (an arrival that can be admitted, a finish, a KV block shortage)
are pure decode steps whose contexts all grow by one token per step, so the simulator advances them
in one go with a closed-form sum of their step times; running decodes are kept as aggregates
(count, Σ context, counts per block phase), never iterated per step.  10,000 chat requests take
well under a second (``benchmarks/simulate_speed.py``).

Also here: a sequential baseline (one request at a time, no batching: HF ``generate``-style), an
SLO search (the highest request rate meeting p99 TTFT and TPOT targets), and :func:`replay`, which
re-runs recorded vLLM serving measurements (``calibration/serve_probe.py``) through the simulator.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from planner.jsonl import read_jsonl
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.roofline import HwCoeffs, ModelCosts, hw_coeffs, model_costs
from planner.specs import Deployment, GpuSpec, ModelSpec
from planner.units import MILLION, SECONDS_PER_HOUR
from planner.workloads import Requests

INF = float("inf")
NAN = float("nan")

# ------------------------------------------------------------------------------ speculative decoding


def spec_expected_tokens(k: int, acceptance_rate: float) -> float:
    """Expected tokens one verify step yields per sequence with ``k`` draft tokens, each accepted
    independently with probability α: 1 + α + … + α^k = (1 − α^(k+1)) / (1 − α)
    (Leviathan et al. 2023, arXiv 2211.17192, eq. 1).  k = 4, α = 0.8: (1 − 0.8⁵)/0.2 = 3.3616."""
    if k < 0:
        raise ValueError(f"spec_k: must be >= 0, got {k}")
    if not (0.0 <= acceptance_rate <= 1.0):
        raise ValueError(f"spec_acceptance: must be in [0, 1], got {acceptance_rate}")
    a = float(acceptance_rate)
    if a >= 1.0:
        return float(k + 1)
    return (1.0 - a ** (k + 1)) / (1.0 - a)


def spec_speedup(k: int, acceptance_rate: float, draft_cost_ratio: float, verify_cost_ratio: float = 1.0) -> float:
    """Decode speed-up of speculative decoding over plain decoding (Leviathan et al. Theorem 3.8):
    expected tokens per step ÷ (c·k + v), where c = one draft step ÷ one target decode step and
    v = one verify step (k + 1 tokens per sequence) ÷ one target decode step (≈ 1 while decoding is
    memory-bound, larger at big batches).  k = 4, α = 0.8, c = 0.05, v = 1: 3.3616 / 1.2 = 2.80."""
    return spec_expected_tokens(k, acceptance_rate) / (draft_cost_ratio * k + verify_cost_ratio)


@dataclass(frozen=True)
class SpecDecode:
    """Speculative decoding as a knob on decode (chain drafts; tree verification not modelled)."""

    num_speculative_tokens: int  # k: draft tokens verified per step
    acceptance_rate: float  # α: probability each draft token is accepted (given the previous ones were)
    draft_cost_ratio: float = 0.0  # c: one draft-model step ÷ one target decode step at the same batch
    name: str = ""
    source: str = ""

    def __post_init__(self):
        spec_expected_tokens(self.num_speculative_tokens, self.acceptance_rate)  # validates k, α
        if not (math.isfinite(self.draft_cost_ratio) and self.draft_cost_ratio >= 0):
            raise ValueError(f"spec_draft_cost: must be a finite number >= 0, got {self.draft_cost_ratio}")
        if self.num_speculative_tokens > 15:
            raise ValueError(f"spec_k: at most 15 draft tokens are modelled, got {self.num_speculative_tokens}")

    @property
    def expected_tokens_per_step(self) -> float:
        return spec_expected_tokens(self.num_speculative_tokens, self.acceptance_rate)


#: Presets with the acceptance rates their papers report (α per token; the ranges are in ``source``).
SPEC_PRESETS: dict[str, SpecDecode] = {
    "draft-model": SpecDecode(
        4, 0.7, 0.1, "small draft model",
        "Leviathan et al. 2023 (arXiv 2211.17192) Table 2: T5-small drafting for T5-XXL, alpha 0.62-0.75 "
        "(T5-large 0.71-0.82). c = 0.1 is our assumption for a ~100M-1B draft on a GPU, where a small "
        "model's step is launch-bound and costs far more than its parameter ratio",
    ),
    "eagle": SpecDecode(
        5, 0.8, 0.05, "EAGLE",
        "Li et al. 2024 (arXiv 2401.15077): draft head predicts features with ~0.8 top-1 accuracy vs ~0.6 "
        "for Medusa (their Fig. 3 comparison); average acceptance length 3.5-4 tokens on MT-bench with a "
        "tree. c = 0.05: one decoder layer + LM head (0.24B params for a 7B target, ~3.6%)",
    ),
    "medusa": SpecDecode(
        4, 0.6, 0.02, "Medusa",
        "Cai et al. 2024 (arXiv 2401.10774): 2.2x (Medusa-1) to 2.3-3.6x (Medusa-2) speed-up; head-1 "
        "top-1 accuracy ~0.6 (EAGLE paper's measurement). c = 0.02 per draft token: all heads run once "
        "per step, each a small block + LM head",
    ),
}


# ------------------------------------------------------------------------------------ step cost


class StepCost:
    """:func:`planner.roofline.step_time` for one step, reduced to float arithmetic.

    The simulator evaluates ~10⁵ steps; numpy on scalars would cost ~50× more than these few
    multiplications.  ``parts`` returns (constant, attention-compute, attention-memory) seconds so a
    run of decode steps — where only the attention terms change, linearly with the context — can be
    summed in closed form.  The result equals ``step_time(...).total_s`` (tests check it).
    """

    __slots__ = (
        "ac_per_att",
        "adf",
        "am_per_kv",
        "apeak",
        "apf",
        "ar",
        "ar_lat",
        "ar_per_tok",
        "cg_max",
        "corrections",
        "dense",
        "eager_oh",
        "emax",
        "expert_bytes",
        "full_layers",
        "half",
        "hw",
        "kvb",
        "kvbw",
        "layers",
        "lf",
        "lm",
        "mc",
        "moe_layers",
        "num_experts",
        "peak",
        "pp",
        "prefill_oh",
        "request_overhead_s",
        "seq_oh",
        "sliding_layers",
        "step_oh",
        "tok_oh",
        "top_k",
        "wbw",
        "window",
    )

    def __init__(self, mc: ModelCosts, hw: HwCoeffs):
        self.mc, self.hw = mc, hw
        self.pp = float(mc.pipeline_parallel)
        self.lf = mc.linear_flops_per_token
        self.lm = mc.lm_head_flops_per_seq / mc.pipeline_parallel
        self.dense = mc.dense_weight_bytes
        self.moe_layers = mc.num_moe_layers
        self.num_experts = mc.num_experts
        self.top_k = mc.experts_per_token
        self.expert_bytes = mc.expert_weight_bytes
        self.emax, self.half = hw.matmul_efficiency_max, hw.matmul_half_tokens
        self.peak = hw.linear_peak_flops_per_s
        self.wbw = hw.hbm_bandwidth_bytes_per_s * hw.weight_bandwidth_efficiency
        self.apf, self.adf = mc.attn_flops_per_ctx_prefill, mc.attn_flops_per_ctx_decode
        self.apeak = hw.attn_peak_flops_per_s * hw.attention_compute_efficiency
        self.kvb = mc.kv_bytes_per_ctx_layer
        kv_eff = hw.kv_bandwidth_efficiency_fp8 if mc.kv_cache_dtype == "fp8" else hw.kv_bandwidth_efficiency
        self.kvbw = hw.hbm_bandwidth_bytes_per_s * kv_eff
        self.full_layers, self.sliding_layers = mc.full_layers, mc.sliding_layers
        self.layers = mc.full_layers + mc.sliding_layers
        self.window = mc.window_tokens
        self.ar = mc.allreduces_per_step
        self.ar_lat = hw.allreduce_latency_s
        n = mc.tensor_parallel
        self.ar_per_tok = 2.0 * (n - 1) / n * mc.allreduce_bytes_per_token / hw.link_bandwidth_bytes_per_s if n > 1 else 0.0
        self.step_oh, self.seq_oh, self.tok_oh = hw.step_overhead_s, hw.per_seq_overhead_s, hw.per_token_overhead_s
        self.request_overhead_s = hw.request_overhead_s
        # per-layer launch costs: above the largest CUDA graph (eager), or a prefill step (PIECEWISE)
        self.cg_max = mc.cudagraph_max_tokens
        self.eager_oh = mc.num_layers * hw.eager_layer_overhead_s
        self.prefill_oh = mc.num_layers * hw.prefill_layer_overhead_s
        self.corrections = tuple((lo, hi, x) for m, lo, hi, x in hw.step_corrections if m == mc.model_id)
        # d(attention seconds)/d(decode-attended context): for closed-form runs of decode steps
        self.ac_per_att = self.pp * self.adf / self.apeak
        self.am_per_kv = self.pp * self.kvb / self.kvbw

    @classmethod
    def from_specs(cls, model: ModelSpec, gpu: GpuSpec, deployment: Deployment,
                   profile: CalibrationProfile = IDEAL_PROFILE) -> StepCost:
        return cls(model_costs(model, deployment), hw_coeffs(gpu, deployment.weight_dtype, profile))

    @property
    def mode(self) -> str:
        return self.hw.mode

    def parts(self, tokens: float, sampled: float, att_prefill: float, att_decode: float, kv_read: float):
        """(constant_s, attention_compute_s, attention_memory_s); the step takes
        constant + max(attention_compute, attention_memory).  ``kv_read`` = layer-weighted context
        tokens read from the cache (decode contexts + prefill chunks' prior context)."""
        if tokens <= 0:
            return 0.0, 0.0, 0.0
        lin_flops = self.lf * tokens + self.lm * sampled
        w = self.dense
        if self.num_experts:
            e = self.num_experts
            w += self.moe_layers * e * (1.0 - (1.0 - self.top_k / e) ** tokens) * self.expert_bytes
        eff = self.emax * tokens / (tokens + self.half + 1e-30)
        lin_c = lin_flops / (self.peak * max(eff, 1e-9))
        lin_m = w / self.wbw
        att_c = (self.apf * att_prefill + self.adf * att_decode) / self.apeak
        att_m = self.kvb * (kv_read + tokens * self.layers) / self.kvbw
        comm = self.ar * (self.ar_lat + self.ar_per_tok * tokens) if self.ar else 0.0
        pp = self.pp
        const = ((max(lin_m, lin_c)) + comm) * pp + self.step_oh + self.seq_oh * sampled \
            + self.tok_oh * tokens
        if tokens > self.cg_max:
            const += self.eager_oh
        elif att_prefill > 0:
            const += self.prefill_oh
        for lo, hi, x in self.corrections:
            if lo < tokens < hi:
                const += x
        return const, att_c * pp, att_m * pp

    def step_s(self, tokens: float, sampled: float, att_prefill: float = 0.0, att_decode: float = 0.0,
               kv_read: float = 0.0) -> float:
        c, ac, am = self.parts(tokens, sampled, att_prefill, att_decode, kv_read)
        return c + (max(am, ac))

    def attended_prefill(self, start: float, chunk: float) -> float:
        """Scalar :func:`planner.roofline.attended_prefill`."""
        a = self.full_layers * (chunk * start + chunk * (chunk + 1) / 2.0)
        if self.sliding_layers:
            w = self.window
            lo, hi = min(start, w), min(start + chunk, w)
            below = (hi * (hi + 1) - lo * (lo + 1)) / 2.0
            above = max(start + chunk - max(start, w), 0.0) * w
            a += self.sliding_layers * (below + above)
        return a

    def prefill_kv_read(self, start: float) -> float:
        """Layer-weighted cached tokens a prefill chunk starting at ``start`` reads."""
        if self.sliding_layers:
            return self.full_layers * start + self.sliding_layers * min(start, self.window)
        return self.full_layers * start


def _line_sum(a: float, b: float, j0: int, j1: int) -> float:
    """Σ_{j=j0}^{j1−1} (a + b·j)."""
    m = j1 - j0
    return a * m + b * (j0 + j1 - 1) * m * 0.5 if m > 0 else 0.0


def sum_max_linear(a1: float, b1: float, a2: float, b2: float, n: int) -> float:
    """Σ_{j=0}^{n−1} max(a1 + b1·j, a2 + b2·j) in closed form (the lines cross at most once)."""
    if n <= 0:
        return 0.0
    d0, db = a1 - a2, b1 - b2
    if db == 0.0 or (d0 >= 0.0 and db > 0.0) or (d0 <= 0.0 and db < 0.0):
        if d0 > 0.0 or (d0 == 0.0 and db >= 0.0):
            return _line_sum(a1, b1, 0, n)
        return _line_sum(a2, b2, 0, n)
    m = min(n, int(-d0 / db) + 1)  # j < m keep the sign of d0
    if d0 > 0.0:
        return _line_sum(a1, b1, 0, m) + _line_sum(a2, b2, m, n)
    return _line_sum(a2, b2, 0, m) + _line_sum(a1, b1, m, n)


# --------------------------------------------------------------------------------- engine config


@dataclass(frozen=True)
class EngineConfig:
    """The serving engine's knobs (vLLM names)."""

    kv_capacity_tokens: int  # KV pool size in tokens (whole blocks)
    max_num_seqs: int = 1024
    max_num_batched_tokens: int = 8192
    block_size: int = 16
    enable_prefix_caching: bool = True
    spec: SpecDecode | None = None
    # vLLM 0.26 schedules step N+1 while step N runs: a request that arrives while the engine is busy
    # joins the step after the one already scheduled (one step later than a synchronous scheduler)
    async_scheduling: bool = True

    def __post_init__(self):
        for name in ("kv_capacity_tokens", "max_num_seqs", "max_num_batched_tokens", "block_size"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name}: must be an integer >= 1, got {v!r}")
        if self.kv_capacity_tokens < self.block_size:
            raise ValueError(f"kv_capacity_tokens: {self.kv_capacity_tokens} holds no {self.block_size}-token block "
                             "(the model does not fit)")

    @property
    def num_blocks(self) -> int:
        return int(self.kv_capacity_tokens // self.block_size)


def engine_setup(
    model: ModelSpec,
    gpu: GpuSpec,
    deployment: Deployment,
    profile: CalibrationProfile = IDEAL_PROFILE,
    *,
    enable_prefix_caching: bool = True,
    spec: SpecDecode | None = None,
    kv_capacity_tokens: int | None = None,
) -> tuple[StepCost, EngineConfig]:
    """Step costs and engine config of one replica; the KV pool from
    :func:`planner.memory.memory_budget` unless ``kv_capacity_tokens`` is given."""
    from planner.memory import memory_budget

    if kv_capacity_tokens is None:
        mb = memory_budget(model, gpu, deployment, profile)
        if not mb.fits:
            raise ValueError(f"gpu: {model.id} on {gpu.id}: {mb.explain()}")
        kv_capacity_tokens = mb.kv_capacity_tokens
    cfg = EngineConfig(int(kv_capacity_tokens), deployment.max_num_seqs, deployment.max_num_batched_tokens,
                       deployment.block_size_tokens, enable_prefix_caching, spec)
    return StepCost.from_specs(model, gpu, deployment, profile), cfg


# ---------------------------------------------------------------------------------------- results


def _pct(x: np.ndarray) -> dict:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {"mean": None, "p50": None, "p90": None, "p99": None}
    p50, p90, p99 = np.percentile(x, [50, 90, 99])
    return {"mean": float(x.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99)}


@dataclass(frozen=True)
class SimResult:
    """Per-request timings (seconds from the run's start) and the run's time series.

    Percentiles are numpy's linear-interpolation percentiles over completed requests; TPOT is a
    request's mean inter-token time after the first token, (finish − first token) / (outputs − 1)
    (requests with one output token have none).  Throughputs divide by the makespan from the first
    arrival to the last finish.
    """

    arrival_s: np.ndarray
    first_token_s: np.ndarray  # NaN: rejected (does not fit the KV pool)
    finish_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    cached_prompt_tokens: np.ndarray  # prompt tokens served from the prefix cache at first admission
    preemptions_per_request: np.ndarray
    request_overhead_s: float
    # time series, sampled at every simulated event (step or run of decode steps)
    series_t_s: np.ndarray
    series_kv_usage: np.ndarray  # fraction of KV blocks in use (cached-but-free blocks count as free)
    series_waiting: np.ndarray
    series_running: np.ndarray
    # totals
    num_steps: int
    num_events: int
    num_preemptions: int
    prefill_tokens_computed: int  # prompt tokens actually run through the model (recomputes included)
    prefix_cache_queries_tokens: int
    prefix_cache_hits_tokens: int
    kv_capacity_tokens: int
    config: EngineConfig
    mode: str = "ideal"
    sequential: bool = False
    wall_s: float = 0.0

    @property
    def completed(self) -> np.ndarray:
        return np.isfinite(self.finish_s)

    @property
    def num_rejected(self) -> int:
        return int((~self.completed).sum())

    @property
    def ttft_s(self) -> np.ndarray:
        return self.first_token_s - self.arrival_s + self.request_overhead_s

    @property
    def e2e_s(self) -> np.ndarray:
        return self.finish_s - self.arrival_s + self.request_overhead_s

    @property
    def tpot_s(self) -> np.ndarray:
        n = self.output_tokens - 1
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, (self.finish_s - self.first_token_s) / np.maximum(n, 1), np.nan)

    @property
    def duration_s(self) -> float:
        done = self.completed
        if not done.any():
            return 0.0
        return float(self.finish_s[done].max() + self.request_overhead_s - self.arrival_s.min())

    @property
    def output_tokens_per_s(self) -> float:
        d = self.duration_s
        return float(self.output_tokens[self.completed].sum() / d) if d > 0 else 0.0

    @property
    def requests_per_s(self) -> float:
        d = self.duration_s
        return float(self.completed.sum() / d) if d > 0 else 0.0

    @property
    def prefix_cache_hit_rate(self) -> float:
        q = self.prefix_cache_queries_tokens
        return self.prefix_cache_hits_tokens / q if q else 0.0

    def _time_avg(self, y: np.ndarray) -> float:
        t = self.series_t_s
        if t.size < 2:
            return float(y.mean()) if y.size else 0.0
        dt = np.diff(t)
        tot = dt.sum()
        return float((y[:-1] * dt).sum() / tot) if tot > 0 else float(y.mean())

    @property
    def mean_in_system(self) -> float:
        """Time-averaged requests waiting or running (Little's law: ≈ requests/s × mean E2E)."""
        return self._time_avg(self.series_waiting + self.series_running)

    @property
    def mean_running(self) -> float:
        """Time-averaged running requests (the effective batch size)."""
        return self._time_avg(self.series_running.astype(float))

    def summary(self) -> dict:
        done = self.completed
        return {
            "ttft_s": _pct(self.ttft_s[done]),
            "tpot_s": _pct(self.tpot_s[done]),
            "e2e_s": _pct(self.e2e_s[done]),
            "output_tokens_per_s": self.output_tokens_per_s,
            "requests_per_s": self.requests_per_s,
            "num_requests": len(self.arrival_s),
            "completed": int(done.sum()),
            "rejected": self.num_rejected,
            "duration_s": self.duration_s,
            "preemptions": self.num_preemptions,
            "prefix_cache_hit_rate": self.prefix_cache_hit_rate,
            "prefill_tokens_computed": self.prefill_tokens_computed,
            "kv_usage_max": float(self.series_kv_usage.max()) if self.series_kv_usage.size else 0.0,
            "kv_usage_mean": self._time_avg(self.series_kv_usage),
            "queue_max": int(self.series_waiting.max()) if self.series_waiting.size else 0,
            "queue_mean": self._time_avg(self.series_waiting.astype(float)),
            "running_mean": self.mean_running,
            "running_max": int(self.series_running.max()) if self.series_running.size else 0,
            "kv_capacity_tokens": self.kv_capacity_tokens,
            "max_num_seqs": self.config.max_num_seqs,
            "max_num_batched_tokens": self.config.max_num_batched_tokens,
            "prefix_caching": self.config.enable_prefix_caching,
            "spec_decode": None if self.config.spec is None else {
                "k": self.config.spec.num_speculative_tokens, "acceptance_rate": self.config.spec.acceptance_rate,
                "draft_cost_ratio": self.config.spec.draft_cost_ratio,
                "expected_tokens_per_step": self.config.spec.expected_tokens_per_step},
            "sequential": self.sequential,
            "mode": self.mode,
            "num_steps": self.num_steps,
            "simulator_wall_s": self.wall_s,
        }


# ------------------------------------------------------------------------------------- the engine

_PENDING, _WAITING, _PREFILL, _DECODE, _DONE, _REJECTED = range(6)


_BIG = 1 << 40


class _Owner:
    """Cached blocks of one token owner (a shared prefix group or one request's own tokens).

    Blocks are numbered by their position in the sequence; the owner's blocks start at ``base``.
    Every request that uses them uses a prefix [base, end) (its tokens up to some point), and vLLM
    frees a request's blocks tail first, so the cached blocks stay a contiguous range [base, L):
    a run-length representation replaces per-block hash tables.  ``ends`` counts the requests
    referencing [base, end); blocks [R, L) with R = max(end) are cached but unreferenced
    (evictable)."""

    __slots__ = ("L", "R", "base", "ends")

    def __init__(self, base: int):
        self.base = self.L = self.R = base
        self.ends: dict[int, int] = {}


class _Req:
    __slots__ = (
        "allsegs",
        "arrival",
        "below",
        "cached",
        "computed",
        "finish_s",
        "first_s",
        "generated",
        "i",
        "nref",
        "nreg",
        "off",
        "output",
        "own",
        "plain",
        "preempts",
        "prompt",
        "queried",
        "refs",
        "reuse",
        "segs",
        "seq",
        "shared_upto",
        "state",
        "total",
    )

    def __init__(self, i, prompt, output, own, segs):
        self.i, self.prompt, self.output, self.own, self.segs = i, prompt, output, own, segs
        self.allsegs = segs + ((own, _BIG),)  # (owner, end block): owners of consecutive block ranges
        self.arrival = NAN
        self.generated = 0
        self.computed = 0
        self.total = prompt
        self.first_s = NAN
        self.finish_s = NAN
        self.refs: list = []  # [owner, end] per owner whose cached blocks this request references
        self.nref = 0  # blocks held through refs
        self.plain = 0  # blocks held outside the cache
        self.nreg = 0  # blocks [0, nreg) are referenced or were considered for caching
        self.seq = -1
        self.off = 0
        self.state = _PENDING
        self.cached = -1
        self.preempts = 0
        self.below = False
        self.queried = False
        self.shared_upto = segs[-1][1] if segs else 0  # blocks below hold tokens other requests share
        self.reuse = False  # a later request (its next turn) starts with this request's tokens


class _Engine:
    """One simulation run (private; :func:`simulate` is the API)."""

    def __init__(self, reqs: Requests, cost: StepCost, cfg: EngineConfig, fast_forward: bool = True):
        self.cost, self.cfg = cost, cfg
        self.fast_forward = fast_forward
        bs = self.bs = cfg.block_size
        self.nblocks = cfg.num_blocks
        self.pc = cfg.enable_prefix_caching
        self.mnbt, self.mns = cfg.max_num_batched_tokens, cfg.max_num_seqs
        self.ro = cost.request_overhead_s
        self.async_sched = cfg.async_scheduling
        self.prev_start = -INF  # start of the step that just ended (async scheduling: its successor was planned then)
        sp = cfg.spec
        self.k = sp.num_speculative_tokens if sp else 0
        self.g = sp.expected_tokens_per_step if sp else 1.0
        self.draft = sp.draft_cost_ratio * sp.num_speculative_tokens if sp else 0.0
        self.Lf, self.Ls, self.W = cost.full_layers, cost.sliding_layers, cost.window
        # requests
        n = len(reqs)
        self.n = n
        self.reqs: list[_Req] = []
        prompt = reqs.prompt_tokens.tolist()
        output = reqs.output_tokens.tolist()
        group = reqs.prefix_group.tolist()
        pre = reqs.prefix_tokens.tolist()
        parent = reqs.parent.tolist()
        self.think = reqs.think_s.tolist()
        self.children: dict[int, list[int]] = {}
        for i in range(n):
            p = parent[i]
            if p >= 0:
                pr = self.reqs[p]
                segs = pr.segs + ((pr.own, (pr.prompt + pr.output) // bs),)
                self.children.setdefault(p, []).append(i)
                pr.reuse = True
            elif group[i] >= 0 and pre[i] >= bs:
                segs = ((n + 1 + group[i], pre[i] // bs),)
            else:
                segs = ()
            self.reqs.append(_Req(i, prompt[i], output[i], i, segs))
        # arrivals: a static sorted list and a heap for released requests
        self.closed = reqs.closed_loop
        arr = reqs.arrival_s
        if self.closed:
            self.static = []
            self.dyn = [(0.0, i) for i in range(min(self.closed, n))]
            self.next_closed = min(self.closed, n)
        else:
            idx = np.flatnonzero(~np.isnan(arr))
            idx = idx[np.argsort(arr[idx], kind="stable")]
            self.static = [(float(arr[i]), int(i)) for i in idx]
            self.dyn = []
            self.next_closed = n
        self.sptr = 0
        # pool
        self.free_plain = self.nblocks
        self.owners: dict[int, _Owner] = {}
        self.lru: deque = deque()  # [owner, lo, hi]: blocks that became unreferenced, oldest first
        self.ev_total = 0  # cached, unreferenced blocks (free for allocation)
        # queues
        self.waiting: deque = deque()
        self.prefilling: list[_Req] = []
        self.seq = 0
        # decode aggregates: c_i = off_i + T for every decoding request
        self.dec: dict[int, _Req] = {}
        self.B = 0
        self.K = 0
        self.cnt = [0] * bs
        self.fin: list = []
        self.nb = 0  # sliding: decoders whose context is still inside the window
        self.Kb = 0
        self.win: list = []
        self.G = 0  # decode steps so far
        self.T = 0  # tokens each decoder advanced so far (= G without speculative decoding)
        # clock and counters
        self.now = 0.0
        self.steps = 0
        self.events = 0
        self.preemptions = 0
        self.prefill_tokens = 0
        self.q_tokens = 0
        self.h_tokens = 0
        self.s_t: list = []
        self.s_kv: list = []
        self.s_wait: list = []
        self.s_run: list = []

    # ---------------------------------------------------------------------------------- pool

    def free_blocks(self) -> int:
        return self.free_plain + self.ev_total

    def take(self, m: int) -> None:
        """Allocate m blocks: uncached free blocks first, then evict cached unreferenced blocks,
        least recently freed first (each owner's blocks from its last block down)."""
        t = min(self.free_plain, m)
        self.free_plain -= t
        m -= t
        lru = self.lru
        while m > 0:
            run = lru[0]
            ow = run[0]
            top = min(ow.L, run[2])
            bot = max(ow.R, run[1])
            k = top - bot
            if k <= 0:
                lru.popleft()
                continue
            k = min(k, m)
            ow.L -= k
            self.ev_total -= k
            m -= k

    def _set_ref(self, r: _Req, ow: _Owner, seg_lo: int, end: int) -> None:
        """Make r reference ow's blocks [base, end) (replacing a shorter reference it may hold)."""
        before = ow.L - ow.R if ow.L > ow.R else 0
        ends = ow.ends
        refs = r.refs
        for e in (refs[-1:] if refs and refs[-1][0] is ow else refs):
            if e[0] is ow:
                old = e[1]
                n = ends[old] - 1
                if n:
                    ends[old] = n
                else:
                    del ends[old]
                e[1] = end
                r.nref += end - old
                break
        else:
            r.refs.append([ow, end])
            r.nref += end - seg_lo
        ends[end] = ends.get(end, 0) + 1
        ow.R = max(ow.R, end)
        after = ow.L - ow.R if ow.L > ow.R else 0
        self.ev_total += after - before

    def register(self, r: _Req, a: int, b: int) -> None:
        """Blocks [a, b) of r are full and computed: cache them (r held them as plain blocks).
        Blocks already cached by an earlier request are shared instead (r's copies are freed)."""
        owners = self.owners
        lo = 0
        for o, upto in r.allsegs:
            if lo >= b:
                break
            x = max(lo, a)
            y = min(upto, b)
            if y > x:
                ow = owners.get(o)
                if ow is None:
                    ow = owners[o] = _Owner(lo)
                L = ow.L
                if L >= x:  # contiguous with what is cached
                    if L < y:  # extend; the new blocks count as evictable until r references them
                        before = L - ow.R if L > ow.R else 0
                        ow.L = y
                        self.ev_total += (y - ow.R if y > ow.R else 0) - before
                    dup = (min(y, L)) - x
                    self.free_plain += dup
                    r.plain -= y - x
                    self._set_ref(r, ow, lo, y)
            lo = upto

    def release(self, r: _Req, c: int, recompute: bool = False) -> None:
        """Free request r's blocks holding c computed tokens; full blocks stay cached (evictable).

        Blocks of r's own tokens are cached only if some request can still hit them (r's recompute
        after a preemption, or r's next turn); otherwise they are returned uncached — vLLM would
        cache them too, but nothing can hit them, and skipping them keeps the simulator fast."""
        bs = self.bs
        r.plain = -(-c // bs) - r.nref
        if self.pc:
            full = c // bs
            if not (recompute or r.reuse) and full > r.shared_upto:
                full = r.shared_upto
            if full > r.nreg:
                self.register(r, r.nreg, full)
            lru = self.lru
            for ow, e in reversed(r.refs):  # the tail first, as vLLM frees
                before = ow.L - ow.R if ow.L > ow.R else 0
                ends = ow.ends
                n = ends[e] - 1
                old_r = ow.R
                if n:
                    ends[e] = n
                else:
                    del ends[e]
                    if e == old_r:
                        ow.R = max(ends) if ends else ow.base
                after = ow.L - ow.R if ow.L > ow.R else 0
                self.ev_total += after - before
                if ow.R < old_r:
                    hi = min(ow.L, old_r)
                    if hi > ow.R:
                        lru.append([ow, ow.R, hi])
        self.free_plain += r.plain
        r.refs = []
        r.nref = 0
        r.plain = 0
        r.nreg = 0

    def lookup(self, r: _Req) -> tuple[int, int]:
        """(cached blocks of r's longest cached prefix, how many of them are unreferenced).
        At most all but the last token can hit (vLLM recomputes the last one for its logits)."""
        maxb = (r.total - 1) // self.bs
        owners = self.owners
        if maxb <= 0 or not owners:
            return 0, 0
        lo = ev = 0
        for o, upto in r.allsegs:
            if upto <= lo:
                continue  # an owner with no full block of its own (a turn shorter than a block)
            if maxb <= lo:
                break
            end = min(maxb, upto)
            ow = owners.get(o)
            if ow is None or ow.L <= lo:
                break
            hit = min(end, ow.L)
            if hit > ow.R:
                ev += hit - ow.R
            lo = hit
            if hit < end:
                break
        return lo, ev

    def reference_hits(self, r: _Req, h: int) -> None:
        owners = self.owners
        lo = 0
        for o, upto in r.allsegs:
            if lo >= h:
                break
            if upto <= lo:
                continue
            end = min(h, upto)
            self._set_ref(r, owners[o], lo, end)
            lo = end

    def alloc_chunk(self, r: _Req, new: int) -> None:
        """Allocate blocks for r's next ``new`` prompt tokens and cache its full blocks."""
        bs = self.bs
        end = r.computed + new
        need = -(-end // bs) - r.nref - r.plain
        if need > 0:
            self.take(need)
            r.plain += need
        if self.pc:
            full = end // bs
            if full > r.shared_upto and not r.reuse:
                full = r.shared_upto  # r's own blocks are cached when freed (see release)
            if full > r.nreg:
                self.register(r, r.nreg, full)
                r.nreg = full

    # ------------------------------------------------------------------------------ decoders

    def t_of(self, G: int) -> int:
        if self.k == 0:
            return G
        return math.floor(G * self.g + 1e-9)

    def steps_until_t(self, target: int) -> int:
        """Smallest n >= 1 with T(G + n) >= target."""
        if self.k == 0:
            return max(1, target - self.G)
        G = max(self.G + 1, math.ceil((target - 1e-9) / self.g) - 1)
        while self.t_of(G) < target:
            G += 1
        return max(1, G - self.G)

    def dec_need(self, a: int) -> int:
        """New blocks the decoders need to advance a tokens from the current T.

        A decoder at c = 16m + r tokens holds ceil(c/16) blocks and needs
        ceil((c + a)/16) − ceil(c/16) = q + [r = 0 and rem > 0] + [r > 16 − rem] more (a = 16q + rem);
        decoders are counted by r, so this is a few list sums, not a loop over requests."""
        bs, T, cnt = self.bs, self.T, self.cnt
        q, rem = divmod(a, bs)
        tot = q * self.B
        if rem:
            tot += cnt[(-T) % bs]
            if rem > 1:  # r in [bs − rem + 1, bs − 1]
                lo = (bs - rem + 1 - T) % bs
                hi = lo + rem - 1
                tot += sum(cnt[lo:hi]) if hi <= bs else sum(cnt[lo:]) + sum(cnt[:hi - bs])
        return tot

    def join_decode(self, r: _Req) -> None:
        off = r.computed - self.T
        r.off = off
        r.state = _DECODE
        self.dec[r.seq] = r
        self.B += 1
        self.K += off
        self.cnt[off % self.bs] += 1
        heapq.heappush(self.fin, (self.T + r.output - r.generated, r.seq, r))
        if self.Ls:
            t_cross = int(self.W) - 1 - off
            if self.T < t_cross:
                r.below = True
                self.nb += 1
                self.Kb += off
                heapq.heappush(self.win, (t_cross, r.seq, r))
            else:
                r.below = False

    def leave_decode(self, r: _Req) -> int:
        """Remove r from the decode aggregates; returns its computed tokens."""
        del self.dec[r.seq]
        off = r.off
        self.B -= 1
        self.K -= off
        self.cnt[off % self.bs] -= 1
        if r.below:
            self.nb -= 1
            self.Kb -= off
            r.below = False
        c = off + self.T
        g = r.generated + c - r.computed  # tokens generated while decoding (r.computed: at join)
        r.generated = min(r.output, g)
        r.computed = c
        return c

    def dec_attended(self, T: int) -> float:
        a = self.Lf * (self.K + self.B * (T + 1))
        if self.Ls:
            a += self.Ls * (self.Kb + self.nb * (T + 1) + self.W * (self.B - self.nb))
        return a

    def dec_load(self, T: int):
        """(tokens, sampled, decode-attended flops context, kv read) of the decoders at T."""
        B = self.B
        A = self.dec_attended(T)
        if self.k:
            k1 = self.k + 1
            return B * k1, B * k1, k1 * A + self.Lf * B * self.k * k1 / 2.0, A
        return B, B, A, A

    def draft_s(self, A: float) -> float:
        return self.draft * self.cost.step_s(self.B, self.B, 0.0, A, A) if self.draft and self.B else 0.0

    # ------------------------------------------------------------------------------ lifecycle

    def finish(self, r: _Req, c: int) -> None:
        r.state = _DONE
        r.finish_s = self.now
        self.release(r, c)
        self.release_dependents(r)

    def release_dependents(self, r: _Req) -> None:
        t = self.now + self.ro
        if self.closed and self.next_closed < self.n:
            heapq.heappush(self.dyn, (t, self.next_closed))
            self.next_closed += 1
        for ch in self.children.get(r.i, ()):
            heapq.heappush(self.dyn, (t + self.think[ch], ch))

    def preempt_tail(self) -> _Req:
        """Preempt the most recently admitted running request (vLLM: running.pop())."""
        if self.prefilling:
            r = self.prefilling.pop()
            c = r.computed
        else:
            r = self.dec[next(reversed(self.dec))]
            c = self.leave_decode(r)
        self.release(r, c, recompute=True)
        r.computed = 0
        r.total = r.prompt + r.generated
        r.state = _WAITING
        r.preempts += 1
        self.preemptions += 1
        self.waiting.appendleft(r)
        return r

    def admit_arrivals(self) -> None:
        now = self.now
        if self.async_sched and (self.B or self.prefilling or self.waiting):
            now = self.prev_start  # the step starting now was scheduled when the last one started
        st, dyn = self.static, self.dyn
        while self.sptr < len(st) and st[self.sptr][0] <= now:
            self.arrive(st[self.sptr])
            self.sptr += 1
        while dyn and dyn[0][0] <= now:
            self.arrive(heapq.heappop(dyn))

    def arrive(self, item) -> None:
        t, i = item
        r = self.reqs[i]
        r.arrival = t
        if -(-(r.prompt + r.output) // self.bs) > self.nblocks:  # can never fit: vLLM rejects it
            r.state = _REJECTED
            r.finish_s = NAN
            self.release_dependents(r)
            return
        r.state = _WAITING
        self.waiting.append(r)

    def next_arrival(self) -> float:
        t = self.static[self.sptr][0] if self.sptr < len(self.static) else INF
        if self.dyn and self.dyn[0][0] < t:
            t = self.dyn[0][0]
        return t

    # ------------------------------------------------------------------------------ scheduling

    def schedule(self):
        """One vLLM V1 scheduling pass.  Returns (chunks, preempted, advance a, blocks taken for decoders)."""
        a = self.t_of(self.G + 1) - self.T if self.B else 0
        if self.B and not self.prefilling and not self.waiting:  # the common case: decodes only
            need = self.dec_need(a)
            if need <= self.free_plain + self.ev_total:
                if need:
                    self.take(need)
                return (), False, a, need
        preempted = False
        need = self.dec_need(a) if self.B else 0
        while self.B and need > self.free_blocks():
            self.preempt_tail()
            preempted = True
            need = self.dec_need(a) if self.B else 0
        if not self.B:
            a = need = 0
        if need:
            self.take(need)
        budget = self.mnbt - self.B * (self.k + 1)
        chunks = []
        bs = self.bs
        # running prefills, in admission order
        i = 0
        while i < len(self.prefilling) and budget > 0:
            r = self.prefilling[i]
            new = min(r.total - r.computed, budget)
            blocks = -(-(r.computed + new) // bs) - r.nref - r.plain
            victim = None
            while blocks > self.free_blocks() and victim is not r:
                victim = self.preempt_tail()
                preempted = True
            if victim is r:
                break
            self.alloc_chunk(r, new)
            chunks.append((r, r.computed, new))
            budget -= new
            i += 1
        # waiting requests (FCFS), only if nothing was preempted in this step
        if not preempted:
            waiting, pc = self.waiting, self.pc
            while waiting and budget > 0 and self.B + len(self.prefilling) < self.mns:
                r = waiting[0]
                h = ev = 0
                if pc and r.computed == 0:
                    h, ev = self.lookup(r)
                start = h * bs
                new = min(r.total - start, budget)
                blocks = -(-(start + new) // bs) - h
                if blocks + ev > self.free_blocks():
                    break
                waiting.popleft()
                if not r.queried:  # prefix-cache hit statistics: first admission only
                    r.queried = True
                    r.cached = start
                self.q_tokens += r.total
                self.h_tokens += start
                r.refs = []
                r.nref = 0
                r.plain = 0
                if h:
                    self.reference_hits(r, h)
                r.nreg = h
                r.computed = start
                self.alloc_chunk(r, new)
                r.state = _PREFILL
                r.seq = self.seq
                self.seq += 1
                self.prefilling.append(r)
                chunks.append((r, start, new))
                budget -= new
        return chunks, preempted, a, need

    # ------------------------------------------------------------------------------ stepping

    def step_mixed(self, chunks, a: int) -> None:
        """One step with prefill chunks (and the decoders, if any)."""
        cost = self.cost
        tokens = sampled = att_p = att_d = kv = 0.0
        dt_draft = 0.0
        if self.B:
            tokens, sampled, att_d, kv = self.dec_load(self.T)
            if self.draft:
                dt_draft = self.draft_s(kv)
        for _, s, c in chunks:
            tokens += c
            sampled += 1
            att_p += cost.attended_prefill(s, c)
            kv += cost.prefill_kv_read(s)
            self.prefill_tokens += c
        self.prev_start = self.now
        self.now += cost.step_s(tokens, sampled, att_p, att_d, kv) + dt_draft
        self.steps += 1
        if self.B:
            self.G += 1
            self.T += a
            self.pop_finished()
        for r, s, c in chunks:
            r.computed = s + c
            if r.computed >= r.total:
                self.prefilling.remove(r)
                r.generated += 1
                if r.first_s != r.first_s:  # NaN: the first token
                    r.first_s = self.now
                if r.generated >= r.output:
                    self.finish(r, r.computed)
                else:
                    self.join_decode(r)

    def pop_finished(self) -> None:
        fin, T = self.fin, self.T
        while fin and fin[0][0] <= T:
            _, seq, r = heapq.heappop(fin)
            if r.state != _DECODE or r.seq != seq:
                continue  # stale: preempted since
            c = self.leave_decode(r)
            r.generated = r.output
            self.finish(r, c)

    def pop_window(self) -> None:
        win, T = self.win, self.T
        while win and win[0][0] <= T:
            _, seq, r = heapq.heappop(win)
            if r.state != _DECODE or r.seq != seq or not r.below:
                continue
            r.below = False
            self.nb -= 1
            self.Kb -= r.off

    def decode_sum_fn(self):
        """S(n): seconds of the next n pure-decode steps (closed form; contexts grow linearly)."""
        cost = self.cost
        g = self.g
        l0 = self.dec_load(self.T)
        c0, ac0, am0 = cost.parts(l0[0], l0[1], 0.0, l0[2], l0[3])
        # the attention terms grow linearly: d(attended)/d(T) = full layers × B + sliding × (B in window)
        dA = self.Lf * self.B + (self.Ls * self.nb if self.Ls else 0.0)
        acs = cost.ac_per_att * (self.k + 1) * dA * g  # per step (g tokens per step)
        ams = cost.am_per_kv * dA * g
        if self.draft:
            A0 = l0[3]
            d0, dac0, dam0 = cost.parts(self.B, self.B, 0.0, A0, A0)
            dacs, dams = cost.ac_per_att * dA * g, cost.am_per_kv * dA * g
            f = self.draft

            def S(n: int) -> float:
                return (n * c0 + sum_max_linear(ac0, acs, am0, ams, n)
                        + f * (n * d0 + sum_max_linear(dac0, dacs, dam0, dams, n)))
        else:
            def S(n: int) -> float:
                return n * c0 + sum_max_linear(ac0, acs, am0, ams, n)
        return S, c0 + max(ac0, am0), max(acs, ams)

    def ff_limit(self, first_need: int) -> tuple[int, object]:
        """How many pure-decode steps can run before anything but a context increment happens."""
        if not self.fast_forward:
            return 1, None
        fin = self.fin
        while fin and (fin[0][2].state != _DECODE or fin[0][2].seq != fin[0][1]):
            heapq.heappop(fin)
        n = self.steps_until_t(fin[0][0]) if fin else 1
        if self.Ls:
            win = self.win
            while win and (win[0][2].state != _DECODE or win[0][2].seq != win[0][1] or not win[0][2].below):
                heapq.heappop(win)
            if win:
                n = min(n, self.steps_until_t(win[0][0]))
        # KV: keep the decoders' block needs within the free pool (plus what step 1 already took)
        if n > 1:
            avail = self.free_blocks() + first_need
            dT = self.t_of(self.G + n) - self.T
            if self.B * (dT // self.bs + 1) > avail:
                lo, hi = 1, n  # dec_need(T(G+lo)−T) <= avail holds for lo = 1
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    if self.dec_need(self.t_of(self.G + mid) - self.T) <= avail:
                        lo = mid
                    else:
                        hi = mid
                if self.dec_need(self.t_of(self.G + hi) - self.T) > avail:
                    n = lo
                else:
                    n = hi
        S = None
        # arrivals end the run if they could be admitted (nothing waits, a sequence slot is free)
        if n > 1 and not self.waiting and self.B + len(self.prefilling) < self.mns:
            t_arr = self.next_arrival()
            if t_arr < INF:
                S, d0, d1 = self.decode_sum_fn()
                target = t_arr - self.now
                if S(n) > target:
                    # smallest m with S(m) >= target: start from the quadratic estimate, then step
                    if d1 > 0:
                        m = int((-(d0 - d1 / 2) + math.sqrt((d0 - d1 / 2) ** 2 + 2 * d1 * target)) / d1)
                    else:
                        m = int(target / d0) if d0 > 0 else 1
                    m = min(max(m, 1), n)
                    while m < n and S(m) < target:
                        m += 1
                    while m > 1 and S(m - 1) >= target:
                        m -= 1
                    n = m
        return n, S

    def step_decode(self, first_need: int) -> None:
        n, S = self.ff_limit(first_need)
        if n == 1:
            l0 = self.dec_load(self.T)
            dt = self.cost.step_s(l0[0], l0[1], 0.0, l0[2], l0[3]) + self.draft_s(l0[3])
            self.prev_start = self.now
        else:
            if S is None:
                S = self.decode_sum_fn()[0]
            dt = S(n)
            self.prev_start = self.now + S(n - 1)
            T_end = self.t_of(self.G + n)
            extra = self.dec_need(T_end - self.T) - first_need
            if extra > 0:
                self.take(extra)
        self.now += dt
        self.steps += n
        self.G += n
        self.T = self.t_of(self.G)
        self.pop_finished()

    def record(self) -> None:
        self.s_t.append(self.now)
        self.s_kv.append(self.nblocks - self.free_plain - self.ev_total)
        self.s_wait.append(len(self.waiting))
        self.s_run.append(self.B + len(self.prefilling))

    def check_invariants(self) -> None:
        """Block accounting from scratch (tests run it after every event): physical blocks in use =
        referenced cached blocks + every running request's uncached blocks."""
        used = self.nblocks - self.free_plain - self.ev_total
        ref = sum(ow.R - ow.base for ow in self.owners.values())
        ev = sum(ow.L - ow.R for ow in self.owners.values())
        assert all(ow.base <= ow.R <= ow.L for ow in self.owners.values()), "owner range"
        assert ev == self.ev_total, ("evictable", ev, self.ev_total)
        plain = sum(r.plain for r in self.prefilling)
        plain += sum(-(-(r.off + self.T) // self.bs) - r.nref for r in self.dec.values())
        assert used == ref + plain, ("used", used, ref, plain)
        assert 0 <= self.free_plain <= self.nblocks and used >= 0, "pool bounds"
        assert self.B == len(self.dec), "decoder count"
        assert sum(self.cnt) == self.B, "phase buckets"
        for r in self.prefilling:
            assert r.nref + r.plain == -(-r.computed // self.bs), ("prefill blocks", r.i)
        for r in self.dec.values():
            assert r.nref <= -(-(r.off + self.T) // self.bs), ("decode blocks", r.i)

    def run(self, debug: bool = False) -> None:
        while True:
            self.admit_arrivals()
            if not (self.B or self.prefilling or self.waiting):
                t = self.next_arrival()
                if t == INF:
                    break
                self.record()
                self.now = t
                continue
            if self.Ls:
                self.pop_window()
            self.events += 1
            chunks, preempted, a, need = self.schedule()
            self.record()
            if chunks:
                self.step_mixed(chunks, a)
            elif self.B:
                if preempted:
                    l0 = self.dec_load(self.T)
                    self.prev_start = self.now
                    self.now += self.cost.step_s(l0[0], l0[1], 0.0, l0[2], l0[3]) + self.draft_s(l0[3])
                    self.steps += 1
                    self.G += 1
                    self.T += a
                    self.pop_finished()
                else:
                    self.step_decode(need)
            elif not preempted:  # nothing runnable: the waiting head cannot be placed even in an empty engine
                r = self.waiting.popleft()
                r.state = _REJECTED
                r.finish_s = NAN
                self.release_dependents(r)
            if debug:
                self.check_invariants()
        self.record()
        if debug:
            self.check_invariants()
            assert self.free_plain + self.ev_total == self.nblocks, "blocks leaked"

    def result(self, mode: str, sequential: bool, wall_s: float) -> SimResult:
        rs = self.reqs
        f = np.fromiter
        n = self.n
        arrival = f((r.arrival for r in rs), float, n)
        first = f((r.first_s if r.state == _DONE else NAN for r in rs), float, n)
        finish = f((r.finish_s if r.state == _DONE else NAN for r in rs), float, n)
        return SimResult(
            arrival_s=arrival, first_token_s=first, finish_s=finish,
            prompt_tokens=f((r.prompt for r in rs), np.int64, n),
            output_tokens=f((r.output for r in rs), np.int64, n),
            cached_prompt_tokens=f((max(r.cached, 0) for r in rs), np.int64, n),
            preemptions_per_request=f((r.preempts for r in rs), np.int64, n),
            request_overhead_s=self.ro,
            series_t_s=np.asarray(self.s_t, dtype=float),
            series_kv_usage=np.asarray(self.s_kv, dtype=float) / max(self.nblocks, 1),
            series_waiting=np.asarray(self.s_wait, dtype=np.int64),
            series_running=np.asarray(self.s_run, dtype=np.int64),
            num_steps=self.steps, num_events=self.events, num_preemptions=self.preemptions,
            prefill_tokens_computed=self.prefill_tokens, prefix_cache_queries_tokens=self.q_tokens,
            prefix_cache_hits_tokens=self.h_tokens, kv_capacity_tokens=self.nblocks * self.bs, config=self.cfg,
            mode=mode, sequential=sequential, wall_s=wall_s,
        )


def simulate(requests: Requests, cost: StepCost, config: EngineConfig, *, debug: bool = False,
             fast_forward: bool = True) -> SimResult:
    """Simulate ``requests`` on one replica with step costs ``cost`` and engine knobs ``config``.

    ``debug`` re-checks the block accounting from scratch after every event; ``fast_forward=False``
    simulates every decode step one by one (both for tests: same results, much slower)."""
    import time

    t0 = time.perf_counter()
    eng = _Engine(requests.validate(), cost, config, fast_forward)
    eng.run(debug)
    return eng.result(cost.mode, False, time.perf_counter() - t0)


def simulate_sequential(requests: Requests, cost: StepCost) -> SimResult:
    """The seeds' naive baseline: one request at a time, FCFS, no batching and no prefix caching;
    each prompt in one forward pass and then one decode step per token, as Hugging Face
    ``generate`` serves (same step-time model; its KV memory is one request's)."""
    import time

    t0 = time.perf_counter()
    longest = int((requests.prompt_tokens + requests.output_tokens).max())
    cfg = EngineConfig(kv_capacity_tokens=longest + 16, max_num_seqs=1,
                       max_num_batched_tokens=int(requests.prompt_tokens.max()) + int(requests.output_tokens.max()),
                       block_size=16, enable_prefix_caching=False, spec=None)
    eng = _Engine(requests.validate(), cost, cfg)
    eng.run()
    return eng.result(cost.mode, True, time.perf_counter() - t0)


# ------------------------------------------------------------------------------------- SLO search


@dataclass(frozen=True)
class SloPoint:
    """The highest request rate one replica sustains within the SLOs, and what it costs."""

    max_rate_per_s: float  # per replica; 0 if even the lightest load misses
    ttft_p99_s: float
    tpot_p99_s: float
    output_tokens_per_s: float
    mean_in_system: float  # concurrency at that rate (Little's law)
    mean_running: float
    gpus_per_replica: int
    price_usd_per_gpu_hour: float
    iterations: int
    saturation_rate_per_s: float  # completed req/s at overload: the replica's capacity

    @property
    def max_rate_per_gpu(self) -> float:
        return self.max_rate_per_s / self.gpus_per_replica

    @property
    def usd_per_million_output_tokens(self) -> float:
        """All GPU time charged to output tokens at the SLO rate."""
        if self.output_tokens_per_s <= 0:
            return INF
        return self.price_usd_per_gpu_hour * self.gpus_per_replica / SECONDS_PER_HOUR / self.output_tokens_per_s \
            * MILLION

    def replicas_for(self, target_rate_per_s: float | None) -> int | None:
        if target_rate_per_s is None:
            return None
        if self.max_rate_per_s <= 0:
            return None
        return math.ceil(target_rate_per_s / self.max_rate_per_s - 1e-9)


def _meets(res: SimResult, ttft_p99_s: float, tpot_p99_s: float) -> tuple[bool, float, float]:
    done = res.completed
    if res.num_rejected or not done.any():
        return False, INF, INF
    t = _pct(res.ttft_s[done])["p99"]
    p = _pct(res.tpot_s[done])["p99"]
    t = INF if t is None else t
    p = 0.0 if p is None else p
    return (t <= ttft_p99_s and p <= tpot_p99_s), t, p


def slo_search(
    make_requests,
    cost: StepCost,
    config: EngineConfig,
    ttft_p99_s: float,
    tpot_p99_s: float,
    *,
    price_usd_per_gpu_hour: float = 0.0,
    gpus_per_replica: int = 1,
    rel_tol: float = 0.02,
    max_iter: int = 20,
) -> SloPoint:
    """Bisection over the request rate for the highest rate whose p99 TTFT and p99 TPOT meet the
    targets.  ``make_requests(rate)`` must return the workload at a rate with a *fixed seed* (the
    same arrival pattern scaled in time), so the search is deterministic.

    The upper bracket is 1.5 × the replica's throughput on a burst of the same requests (all at
    t = 0), above which no rate can be sustained; the lower one 1 % of it (if that misses the
    SLOs, the answer is 0).
    """
    if not (ttft_p99_s > 0 and tpot_p99_s > 0):
        raise ValueError("ttft_p99_ms/tpot_p99_ms: SLO targets must be > 0")
    burst = make_requests(None)
    sat = simulate(burst, cost, config)
    cap = sat.requests_per_s
    if cap <= 0:
        return SloPoint(0.0, INF, INF, 0.0, 0.0, 0.0, gpus_per_replica, price_usd_per_gpu_hour, 1, 0.0)
    it = 0

    def trial(rate):
        nonlocal it
        it += 1
        res = simulate(make_requests(rate), cost, config)
        ok, t, p = _meets(res, ttft_p99_s, tpot_p99_s)
        return ok, (rate, res, t, p)

    hi = cap * 1.5  # a burst's makespan includes its ramp-down tail: sustained capacity can be higher
    ok, best = trial(hi)
    if not ok:
        lo = cap * 0.01  # light load: if even this misses, the SLO is unreachable on this replica
        ok, best = trial(lo)
        if not ok:
            best = None
        while best is not None and it < max_iter and (hi - lo) > rel_tol * hi:
            mid = 0.5 * (lo + hi)
            ok, cand = trial(mid)
            if ok:
                lo, best = mid, cand
            else:
                hi = mid
    if best is None:
        return SloPoint(0.0, INF, INF, 0.0, 0.0, 0.0, gpus_per_replica, price_usd_per_gpu_hour, it, cap)
    rate, res, t, p = best
    return SloPoint(rate, t, p, res.output_tokens_per_s, res.mean_in_system, res.mean_running, gpus_per_replica,
                    price_usd_per_gpu_hour, it, cap)


def rate_sweep(make_requests, cost: StepCost, config: EngineConfig, rates) -> list[dict]:
    """Latency percentiles and throughput against the request rate (a dashboard's "Load" view):
    one simulation per rate of ``make_requests(rate)`` (fixed seed), one row per rate."""
    rows = []
    for rate in rates:
        res = simulate(make_requests(float(rate)), cost, config)
        s = res.summary()
        rows.append({"rate_per_s": float(rate),
                     "ttft_p50_s": s["ttft_s"]["p50"], "ttft_p90_s": s["ttft_s"]["p90"], "ttft_p99_s": s["ttft_s"]["p99"],
                     "tpot_p50_s": s["tpot_s"]["p50"], "tpot_p90_s": s["tpot_s"]["p90"], "tpot_p99_s": s["tpot_s"]["p99"],
                     "e2e_p50_s": s["e2e_s"]["p50"], "e2e_p99_s": s["e2e_s"]["p99"],
                     "output_tokens_per_s": s["output_tokens_per_s"], "requests_per_s": s["requests_per_s"],
                     "concurrency_mean": res.mean_in_system, "running_mean": s["running_mean"],
                     "kv_usage_max": s["kv_usage_max"], "queue_max": s["queue_max"], "preemptions": s["preemptions"],
                     "prefix_cache_hit_rate": s["prefix_cache_hit_rate"], "rejected": s["rejected"]})
    return rows


# ------------------------------------------------------------------------------------------ replay

#: Record schema written by ``calibration/serve_probe.py`` (one JSON object per line):
#:   {"type": "engine", "engine_id", "max_num_seqs", "max_num_batched_tokens", "block_size",
#:    "num_gpu_blocks", "kv_cache_tokens", "enable_prefix_caching", "max_model_len", "vllm_version", "gpu_name", ...}
#:   {"type": "run", "run", "engine_id", "rate_per_s", "num_requests", "prompt_tokens", "output_tokens",
#:    "shared_prefix_tokens", "seed", ...}
#:   {"type": "request", "run", "index", "arrival_offset_s", "prompt_tokens", "output_tokens",
#:    "shared_prefix_tokens", "ttft_s", "tpot_s", "e2e_s", "num_output_tokens", ...}
#:   {"type": "run_end", "run", "duration_s", "ok", ...}
RECORD_TYPES = ("engine", "run", "request", "run_end", "error")


def load_records(paths) -> list[dict]:
    """Read JSON-lines record files (a path or a list of paths); broken trailing lines are skipped."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise FileNotFoundError(2, "no such record file", missing[0])
    return [rec for p in paths for rec in read_jsonl(p)]


@dataclass(frozen=True)
class ReplayRow:
    """Measured vs predicted for one recorded run."""

    run: str
    engine_id: str
    rate_per_s: float | None
    num_requests: int
    prefix_caching: bool
    shared_prefix_tokens: int
    measured: dict
    predicted: dict

    def error_pct(self, key: str) -> float:
        m, p = self.measured.get(key), self.predicted.get(key)
        if m is None or p is None or not m:
            return NAN
        return 100.0 * (p - m) / m

    def as_dict(self) -> dict:
        keys = ("output_tokens_per_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "e2e_p50_s")
        return {"run": self.run, "engine_id": self.engine_id, "rate_per_s": self.rate_per_s,
                "num_requests": self.num_requests, "prefix_caching": self.prefix_caching,
                "shared_prefix_tokens": self.shared_prefix_tokens, "measured": self.measured,
                "predicted": self.predicted, "error_pct": {k: self.error_pct(k) for k in keys}}


def _stats(arrival, ttft, tpot, e2e, output) -> dict:
    arrival, ttft, tpot, e2e, output = (np.asarray(x, dtype=float) for x in (arrival, ttft, tpot, e2e, output))
    ok = np.isfinite(e2e)
    fin = arrival[ok] + e2e[ok]
    dur = float(fin.max() - arrival.min()) if ok.any() else 0.0
    t, p, e = _pct(ttft[ok]), _pct(tpot[ok]), _pct(e2e[ok])
    return {"output_tokens_per_s": float(output[ok].sum() / dur) if dur > 0 else None,
            "requests_per_s": float(ok.sum() / dur) if dur > 0 else None,
            "ttft_mean_s": t["mean"], "ttft_p50_s": t["p50"], "ttft_p99_s": t["p99"],
            "tpot_mean_s": p["mean"], "tpot_p50_s": p["p50"], "tpot_p99_s": p["p99"],
            "e2e_p50_s": e["p50"], "e2e_p99_s": e["p99"], "completed": int(ok.sum())}


@dataclass(frozen=True)
class ReplayReport:
    rows: list
    prefix_caching_gain: dict  # measured vs predicted TTFT and throughput ratios (on ÷ off), if recorded

    def as_dict(self) -> dict:
        return {"runs": [r.as_dict() for r in self.rows], "prefix_caching_gain": self.prefix_caching_gain}


def replay(records, model: ModelSpec, gpu: GpuSpec, profile: CalibrationProfile = IDEAL_PROFILE, *,
           weight_dtype: str = "bf16", kv_cache_dtype: str = "bf16", tensor_parallel: int = 1) -> ReplayReport:
    """Re-run recorded serving measurements through the simulator with the same arrivals, lengths
    and engine configuration (KV pool = the engine's num_gpu_blocks × block_size, less vLLM's null
    block), and compare output tokens/s, TTFT and TPOT percentiles and the prefix-caching gains.

    ``records``: a path, a list of paths, or already-loaded record dicts.
    """
    from planner.workloads import make_requests

    if not (isinstance(records, list) and (not records or isinstance(records[0], dict))):
        records = load_records(records)
    engines = {r["engine_id"]: r for r in records if r.get("type") == "engine"}
    runs = {r["run"]: r for r in records if r.get("type") == "run"}
    by_run: dict[str, list[dict]] = {}
    for r in records:
        if r.get("type") == "request":
            by_run.setdefault(r["run"], []).append(r)
    rows = []
    for name, run in runs.items():
        reqs = sorted(by_run.get(name, []), key=lambda x: x["arrival_offset_s"])
        eng = engines.get(run.get("engine_id"))
        if not reqs or eng is None or run.get("warmup"):
            continue
        bs = int(eng.get("block_size", 16))
        dep = Deployment(gpu_id=gpu.id, num_gpus=tensor_parallel, tensor_parallel=tensor_parallel,
                         weight_dtype=weight_dtype, kv_cache_dtype=kv_cache_dtype,
                         max_num_batched_tokens=int(eng["max_num_batched_tokens"]),
                         max_num_seqs=int(eng["max_num_seqs"]), block_size_tokens=bs,
                         gpu_memory_utilization=float(eng.get("gpu_memory_utilization", 0.92)))
        if eng.get("num_gpu_blocks"):
            blocks = int(eng["num_gpu_blocks"]) - 1  # block 0 is vLLM's null block
        elif eng.get("kv_cache_tokens"):
            blocks = int(eng["kv_cache_tokens"]) // bs - 1
        else:  # not recorded: the memory model's pool
            from planner.memory import memory_budget

            blocks = memory_budget(model, gpu, dep, profile).kv_capacity_tokens // bs
        cost = StepCost.from_specs(model, gpu, dep, profile)
        cfg = EngineConfig(blocks * bs, dep.max_num_seqs, dep.max_num_batched_tokens, bs,
                           bool(eng.get("enable_prefix_caching", True)))
        arr = np.array([x["arrival_offset_s"] for x in reqs], dtype=float)
        prompt = np.array([x["prompt_tokens"] for x in reqs])
        out = np.array([x["output_tokens"] for x in reqs])
        shared = np.array([x.get("shared_prefix_tokens", 0) or 0 for x in reqs])
        group = np.where(shared > 0, np.array([x.get("prefix_group", 0) or 0 for x in reqs]), -1)
        wl = make_requests(prompt, out, arr - 0.0, prefix_group=group, prefix_tokens=shared, name=name)
        res = simulate(wl, cost, cfg)
        nan = float("nan")
        measured = _stats(arr, [x.get("ttft_s", nan) if x.get("ttft_s") is not None else nan for x in reqs],
                          [x.get("tpot_s") if x.get("tpot_s") is not None else nan for x in reqs],
                          [x.get("e2e_s") if x.get("e2e_s") is not None else nan for x in reqs],
                          [x.get("num_output_tokens", x["output_tokens"]) for x in reqs])
        predicted = _stats(res.arrival_s, res.ttft_s, res.tpot_s, res.e2e_s, res.output_tokens)
        predicted["prefix_cache_hit_rate"] = res.prefix_cache_hit_rate
        predicted["preemptions"] = res.num_preemptions
        rows.append(ReplayRow(name, str(run.get("engine_id")), run.get("rate_per_s"), len(reqs),
                              cfg.enable_prefix_caching, int(shared.max()) if shared.size else 0, measured, predicted))
    gain = {}
    shared_rows = [r for r in rows if r.shared_prefix_tokens > 0]
    on = [r for r in shared_rows if r.prefix_caching]
    off = [r for r in shared_rows if not r.prefix_caching]
    if on and off:
        a, b = on[0], off[0]

        def ratio(x, y, key):
            u, v = x.get(key), y.get(key)
            return (u / v) if (u and v) else None

        gain = {
            "on_run": a.run, "off_run": b.run,
            "measured_ttft_mean_ratio_off_over_on": ratio(b.measured, a.measured, "ttft_mean_s"),
            "predicted_ttft_mean_ratio_off_over_on": ratio(b.predicted, a.predicted, "ttft_mean_s"),
            "measured_throughput_ratio_on_over_off": ratio(a.measured, b.measured, "output_tokens_per_s"),
            "predicted_throughput_ratio_on_over_off": ratio(a.predicted, b.predicted, "output_tokens_per_s"),
        }
    return ReplayReport(rows, gain)


__all__ = [
    "SPEC_PRESETS",
    "EngineConfig",
    "ReplayReport",
    "ReplayRow",
    "SimResult",
    "SloPoint",
    "SpecDecode",
    "StepCost",
    "engine_setup",
    "load_records",
    "replay",
    "simulate",
    "simulate_sequential",
    "slo_search",
    "spec_expected_tokens",
    "spec_speedup",
    "sum_max_linear",
]

