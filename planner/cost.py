"""Throughput, cost per million tokens and the fleet a request rate needs.

The steady-state picture (continuous batching, one replica = tensor_parallel × pipeline_parallel GPUs):
``batch_size`` requests are in flight; over one request lifetime the replica spends

    prefill_busy_s   prefilling the ``batch_size`` prompts that replace the finishing requests
                     (their tokens packed into steps of ``max_num_batched_tokens``; see
                     :func:`prefill_busy_costs`), and
    decode_busy_s    ``output_tokens`` decode steps of ``batch_size`` sequences, ``output_tokens × TPOT``.

So one *cycle* of ``prefill_busy_s + decode_busy_s`` seconds serves ``batch_size`` requests.  GPU time
(price × GPUs × seconds) is split by phase: the prefill share pays for input tokens, the decode share
for output tokens.  This is the model's answer, not a measurement: prefill and decode chunks that
vLLM runs in the same step are counted as if they ran back to back (an upper bound on busy time).

Every function is plain arithmetic and works elementwise on numpy arrays, so :func:`planner.sweep.sweep`
uses the very same formulas as :func:`planner.plan.plan`.  Results are frozen dataclasses that keep
their parts (SI units: seconds, tokens, USD; names carry the unit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.attention_sums import attended_prefill
from planner.roofline import HwCoeffs, ModelCosts, step_time
from planner.specs import Deployment, GpuSpec, Source
from planner.units import MILLION, SECONDS_PER_HOUR

# ------------------------------------------------------------------------------------ prefill busy


def effective_tpot_s(decode_step_s, batch_size, prefill_busy_s, output_tokens):
    """Mean time per output token a user sees under continuous batching: the decode step plus the
    prefills of the other B − 1 requests, which chunked prefill mixes into the decode steps while a
    request emits its N tokens: TPOT = decode_step + (B − 1)/B × prefill_busy(B) / N.

    B = 21 requests of 512 prompt / 128 output tokens on an H200 (5.6 ms steps, ~0.27 s to prefill
    21 prompts): 5.6 + 20/21 × 270/128 ≈ 7.6 ms; the pure decode step alone would promise 5.6 ms.
    """
    b = np.asarray(batch_size, dtype=float)
    share = np.where(b > 0, (b - 1.0) / np.maximum(b, 1.0), 0.0)
    return np.asarray(decode_step_s, dtype=float) + share * np.asarray(prefill_busy_s, dtype=float) / float(output_tokens)


def prefill_busy_costs(mc: ModelCosts, hw: HwCoeffs, prompt_tokens, batch_size,
                       max_num_batched_tokens=Deployment.default("max_num_batched_tokens")):
    """GPU-busy seconds to prefill ``batch_size`` prompts of ``prompt_tokens`` in steady state.

    The B·P prompt tokens go through steps of at most M = ``max_num_batched_tokens`` tokens.  Below M
    they share one step (its weights read once); above M every step is full, and a partial last step
    is charged pro rata (in steady state the next requests' chunks fill it).  So the cost per request
    never rises with the batch: ``busy(B) / B`` is non-increasing, which keeps throughput monotone.
    Causal attention, the KV re-read of chunked long prompts and the lm_head of each prompt's first
    token are included; ``request_overhead_s`` (CPU-side, overlapped) is not.  Broadcasts over arrays.
    """
    p = np.asarray(prompt_tokens, dtype=float)
    b = np.asarray(batch_size, dtype=float)
    m = np.asarray(max_num_batched_tokens, dtype=float)  # per GPU in a sweep: arrays broadcast
    total = p * b
    step_tokens = np.minimum(total, m)
    share = np.where(total > 0, step_tokens / np.maximum(total, 1.0), 0.0)  # fraction of the work in one step
    att_total = b * attended_prefill(mc, 0.0, p)
    chunks = np.ceil(p / m)
    reread = b * mc.full_layers * m * chunks * (chunks - 1) / 2.0
    st = step_time(mc, hw, prefill_tokens=step_tokens, prefill_attended=att_total * share,
                   prefill_kv_read_tokens=reread * share, sampled_seqs=b * share)
    n_steps = np.maximum(total / m, 1.0)
    return np.asarray(st.total_s) * n_steps


# --------------------------------------------------------------------------------------- throughput


@dataclass(frozen=True)
class Throughput:
    """Steady-state throughput of one replica at ``batch_size`` requests in flight (arrays allowed)."""

    batch_size: object
    prompt_tokens: object
    output_tokens: object
    gpus_per_replica: object
    tpot_s: object  # one decode step of batch_size sequences
    prefill_busy_s: object  # prefilling batch_size prompts
    decode_busy_s: object  # output_tokens decode steps

    @property
    def cycle_s(self):
        """Seconds of replica time that serve ``batch_size`` whole requests."""
        return np.asarray(self.prefill_busy_s) + self.decode_busy_s

    @property
    def prefill_time_share(self):
        return np.asarray(self.prefill_busy_s) / np.maximum(self.cycle_s, 1e-300)

    @property
    def requests_per_s(self):
        """Completed requests per second per replica."""
        return np.asarray(self.batch_size, dtype=float) / np.maximum(self.cycle_s, 1e-300)

    @property
    def output_tokens_per_s(self):
        """Generated tokens per second per replica (all sequences together)."""
        return self.requests_per_s * self.output_tokens

    @property
    def input_tokens_per_s(self):
        """Prompt tokens per second per replica."""
        return self.requests_per_s * self.prompt_tokens

    @property
    def output_tokens_per_s_per_gpu(self):
        return self.output_tokens_per_s / np.asarray(self.gpus_per_replica, dtype=float)

    @property
    def requests_per_s_per_gpu(self):
        return self.requests_per_s / np.asarray(self.gpus_per_replica, dtype=float)

    @property
    def decode_tokens_per_s(self):
        """Tokens/s while only decoding (batch ÷ TPOT): the ceiling without prefill interruptions."""
        return np.asarray(self.batch_size, dtype=float) / np.maximum(np.asarray(self.tpot_s), 1e-300)

    @property
    def output_tokens_per_s_per_user(self):
        """What one user sees while decoding: 1 ÷ TPOT."""
        return 1.0 / np.maximum(np.asarray(self.tpot_s), 1e-300)


def throughput(batch_size, tpot_s, prefill_busy_s, prompt_tokens, output_tokens, gpus_per_replica=1) -> Throughput:
    """Throughput at ``batch_size`` from TPOT at that batch and the prefill busy time of its prompts.

    Mistral 7B bf16 on one H200, batch 64, TPOT 10.1 ms, 512 output tokens, prefill of 64 × 4,096
    tokens ≈ 4.0 s: cycle = 4.0 + 512 × 0.0101 = 9.2 s; 64 × 512 / 9.2 ≈ 3,560 output tokens/s.
    """
    return Throughput(batch_size, prompt_tokens, output_tokens, gpus_per_replica, tpot_s, prefill_busy_s,
                      np.asarray(output_tokens, dtype=float) * tpot_s)


# --------------------------------------------------------------------------------------------- cost


@dataclass(frozen=True)
class TokenCost:
    """Cost per million tokens from the price of the replica's GPU-hours (USD; arrays allowed).

    ``usd_per_million_output_tokens`` charges output tokens the decode share of the GPU time;
    ``usd_per_million_input_tokens`` charges prompt tokens the prefill share;
    ``usd_per_million_tokens_blended`` is all the GPU time over all tokens (input + output) of this
    workload's mix; ``usd_per_million_output_tokens_all_in`` puts the whole bill on the output tokens
    (what a "cost per generated token" headline usually means).
    """

    price_usd_per_gpu_hour: object
    gpus_per_replica: object
    usd_per_replica_second: object
    prefill_busy_s: object
    decode_busy_s: object
    batch_size: object
    prompt_tokens: object
    output_tokens: object

    @property
    def price_usd_per_replica_hour(self):
        return np.asarray(self.price_usd_per_gpu_hour) * self.gpus_per_replica

    def _per_million(self, seconds, tokens):
        tok = np.asarray(self.batch_size, dtype=float) * tokens
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(tok > 0, self.usd_per_replica_second * np.asarray(seconds) / np.maximum(tok, 1e-300)
                            * MILLION, np.inf)

    @property
    def usd_per_million_output_tokens(self):
        return self._per_million(self.decode_busy_s, self.output_tokens)

    @property
    def usd_per_million_input_tokens(self):
        return self._per_million(self.prefill_busy_s, self.prompt_tokens)

    @property
    def usd_per_million_tokens_blended(self):
        return self._per_million(np.asarray(self.prefill_busy_s) + self.decode_busy_s,
                                 np.asarray(self.prompt_tokens) + self.output_tokens)

    @property
    def usd_per_million_output_tokens_all_in(self):
        return self._per_million(np.asarray(self.prefill_busy_s) + self.decode_busy_s, self.output_tokens)

    @property
    def usd_per_request(self):
        b = np.asarray(self.batch_size, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(b > 0, self.usd_per_replica_second * (np.asarray(self.prefill_busy_s)
                                                                  + self.decode_busy_s) / np.maximum(b, 1e-300),
                            np.inf)


def token_cost(tp: Throughput, price_usd_per_gpu_hour) -> TokenCost:
    """Price the replica's time: USD/s = price per GPU-hour × GPUs per replica ÷ 3,600.

    $3.50/GPU-h on one GPU, batch 64, TPOT 10 ms: 3.5 / 3600 × 0.010 / 64 × 1e6 ≈ $0.15 per million
    output tokens (decode share).
    """
    per_s = np.asarray(price_usd_per_gpu_hour, dtype=float) * tp.gpus_per_replica / SECONDS_PER_HOUR
    return TokenCost(price_usd_per_gpu_hour, tp.gpus_per_replica, per_s, tp.prefill_busy_s, tp.decode_busy_s,
                     tp.batch_size, tp.prompt_tokens, tp.output_tokens)


def with_price(gpu: GpuSpec, price_usd_per_hour: float, source: Source) -> GpuSpec:
    """``gpu`` at another price per GPU-hour (a user's override), ``source`` saying where it came from
    (``sources['price_usd_per_hour']``, so every export names the price it used).  Validated like a catalog
    price (a pydantic ValidationError naming ``price_usd_per_hour`` outside 0.01-1,000 USD/h).  The catalog's price
    table is dropped: the GPU's one price is now this one."""
    d = gpu.model_dump()
    d["sources"]["price_usd_per_hour"] = source.model_dump()
    return type(gpu).model_validate({**d, "price_usd_per_hour": price_usd_per_hour, "prices": ()})


# -------------------------------------------------------------------------------------------- fleet


@dataclass(frozen=True)
class Fleet:
    """Replicas (and GPUs) a target load needs at the chosen per-replica batch."""

    request_rate_per_s: float | None  # target arrival rate (None: not given)
    concurrency: int | None  # target requests in flight (None: not given)
    requests_per_s_per_replica: float
    batch_size_per_replica: int
    gpus_per_replica: int
    replicas_for_rate: int
    replicas_for_concurrency: int

    @property
    def replicas(self) -> int:
        """Replicas needed: the larger of what the rate and the concurrency need (at least 1)."""
        return max(1, self.replicas_for_rate, self.replicas_for_concurrency)

    @property
    def num_gpus(self) -> int:
        return self.replicas * self.gpus_per_replica

    @property
    def utilization(self) -> float:
        """Fraction of the fleet's request capacity the target rate uses (nan without a rate)."""
        if not self.request_rate_per_s or self.requests_per_s_per_replica <= 0:
            return float("nan")
        return self.request_rate_per_s / (self.replicas * self.requests_per_s_per_replica)


def _ceil_div(need: float, per: float) -> int:
    if need is None or need <= 0:
        return 0
    if not per > 0 or not np.isfinite(per):
        return 0
    return int(np.ceil(need / per - 1e-9))


def fleet_for(request_rate_per_s: float | None, requests_per_s_per_replica: float, gpus_per_replica: int,
              batch_size_per_replica: int, concurrency: int | None = None) -> Fleet:
    """Replicas = ceil(rate ÷ requests/s per replica), and ceil(concurrency ÷ batch) if a concurrency is set.

    10 req/s at 2.6 req/s per 1-GPU replica: ceil(3.85) = 4 replicas = 4 GPUs.
    A replica that serves nothing (batch 0) needs 0 replicas here; the plan marks it infeasible.
    """
    return Fleet(
        request_rate_per_s, concurrency, float(requests_per_s_per_replica), int(batch_size_per_replica),
        int(gpus_per_replica),
        _ceil_div(request_rate_per_s, requests_per_s_per_replica),
        _ceil_div(concurrency, batch_size_per_replica) if batch_size_per_replica > 0 else 0,
    )
