"""Disaggregated prefill/decode as a planning option: a prefill pool and a decode pool sized apart, the KV
handed from one to the other per request, compared with co-located serving on the same workload.

* Prefill pool: one replica prefills one prompt in ``prefill_s`` (the plan's TTFT on an idle replica);
  prompts arrive at ``rate``; with ``n`` replicas each is busy ρ = rate × prefill_s ÷ n of the time and a
  prompt waits the M/D/1 mean ρ·prefill_s ÷ (2(1 − ρ)) (Pollaczek–Khinchine, deterministic service).
  ``n`` is the smallest with ρ < 1 whose wait + prefill + KV transfer + one decode step meets the TTFT
  target, or ρ ≤ :data:`PREFILL_MAX_UTILIZATION` without one.
* Decode pool: a decode replica runs no prefills, so its TPOT is the decode step alone; the batch
  per replica is the largest whose step meets the TPOT target and whose KV fits (``batch``: the replica's
  capacity, the decode knee); a request stays ``output_tokens × step_s`` in decode, so a replica serves
  ``batch ÷ (output_tokens × step_s)`` requests/s and the pool is the fleet engine's
  :func:`planner.cost.fleet_for` of that: ⌈rate × output_tokens × step_s ÷ batch⌉ (Little's law).  The
  pool then runs below its knee: its batch is the fixed point ``b = rate × output_tokens × step(b) ÷ n``
  (:func:`operating_batch`), and the TPOT it gives is ``step(b)``.
* KV transfer (vLLM 0.26 NixlConnector = ``NixlPullConnector``): the prefill replica computes the whole prompt
  and returns; the decode replica allocates blocks for every prompt token *before* the transfer
  (``vllm/v1/core/sched/scheduler.py`` lines 927-942, 979-998: ``allocate_slots`` with the external tokens,
  then ``WAITING_FOR_REMOTE_KVS``) and READs them in one NIXL transfer per request
  (``nixl/pull_worker.py`` lines 326-342), one descriptor per block per layer for K and for V
  (``nixl/base_worker.py`` lines 421-423, 1362-1384): whole blocks, not layer by layer
  (``nixl/connector.py`` lines 277-289: no layer-wise save or load).  Bytes = KV bytes per token × prompt
  tokens rounded up to whole blocks (:func:`planner.memory.kv_bytes_per_request`), each of the TP × PP GPUs
  reading its own shard over its own link: NVLink (``hardware/*.yaml`` ``interconnect_bandwidth_bytes_per_s``)
  when the pair shares a node, the network otherwise (:data:`NETWORK_BYTES_PER_S_PER_GPU`).  Pools
  scheduled apart by Kubernetes talk over the network, so TTFT uses the network time.
* The decode side of TTFT is counted in decode steps (:func:`decode_side_s`), from vLLM 0.26's engine loop.

NOT measured: our GPU machine's vLLM 0.26 bundle has no ``nixl`` package (0.26 has no NCCL-based KV
connector), so no 1P1D pair has run; every number here is the model's.
``calibration/campaigns/h200x2-disagg.sh`` measures a 1P1D pair and ``benchmarks/disagg_accuracy.py`` compares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.batching import decode_context_tokens
from planner.cost import fleet_for
from planner.memory import kv_bytes_per_request
from planner.phases import decode_step_time
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.report import SizingReport
from planner.specs import Deployment, GpuSpec, ModelSpec, Workload
from planner.units import GBIT_PER_S, fmt_ms

#: Inter-node bandwidth per GPU for the KV hand-off: 400 Gb/s = 50e9 B/s, one 400G NIC per GPU as on
#: NVIDIA DGX/HGX H100 and H200 nodes (8 × ConnectX-7 400 Gb/s for the compute fabric, NVIDIA DGX H100 user
#: guide).  Clouds give less on some instance types (e.g. 200 Gb/s per GPU); override with
#: ``--network-gbps``.  Raw line rate: protocol overhead is not subtracted.
NETWORK_BYTES_PER_S_PER_GPU = 400 * GBIT_PER_S
#: Prefill replicas kept at most this busy when no TTFT target bounds the queue.
PREFILL_MAX_UTILIZATION = 0.8
MAX_REPLICAS = 100_000
#: Decode steps between a request reaching the decode replica and its first token, besides the steps the
#: transfer itself spans, with vLLM 0.26's asynchronous scheduling (on by default: ``vllm/config/vllm.py``
#: lines 1059-1107; the engine keeps two batches in flight, ``vllm/v1/engine/core.py`` lines 617-705):
#: ½ (the request waits for the step under way to end before it is scheduled) + 1 (the batch scheduled
#: before it is still on the GPU when the READ is posted at the start of its own step, ``nixl/pull_worker.py``
#: lines 44-75) + 1 (the finished transfer, reported at the end of a step, is seen only after the next batch
#: was scheduled) + 1 (the step that recomputes the last prompt token and samples the first output token:
#: ``scheduler.py`` lines 2579-2582 set ``num_computed_tokens = num_tokens − 1``).
DECODE_SIDE_STEPS = 3.5


def md1_wait_s(utilization: float, service_s: float) -> float:
    """Mean queueing delay of an M/D/1 queue: ρ·s ÷ (2(1 − ρ)).  ρ = 0.5, s = 0.1 s: 0.05 ÷ 1 = 0.05 s."""
    if not 0.0 <= utilization < 1.0:
        return math.inf
    return utilization * service_s / (2.0 * (1.0 - utilization))


@dataclass(frozen=True)
class KvTransfer:
    """One request's KV hand-off from a prefill replica to a decode replica."""

    bytes_per_request: float
    sending_gpus: int  # the prefill replica's TP × PP GPUs, each sending its shard over its own link
    link: str  # 'network' or 'nvlink'
    bandwidth_bytes_per_s_per_gpu: float

    @property
    def time_s(self) -> float:
        """bytes ÷ (GPUs × bandwidth per GPU).  134,217,728 B from 1 GPU at 50e9 B/s: 2.684 ms."""
        return self.bytes_per_request / (self.sending_gpus * self.bandwidth_bytes_per_s_per_gpu)


@dataclass(frozen=True)
class PrefillPool:
    replicas: int
    prefill_s: float  # one prompt on an idle replica
    rate_per_s: float
    utilization: float  # of each replica
    queue_wait_s: float  # M/D/1 mean


def size_prefill_pool(rate_per_s: float, prefill_s: float, ttft_budget_s: float | None = None,
                      max_utilization: float = PREFILL_MAX_UTILIZATION) -> PrefillPool:
    """Smallest prefill pool for ``rate_per_s`` prompts of ``prefill_s`` each.  With ``ttft_budget_s`` (the
    TTFT target less the decode side, :func:`decode_side_s`): the smallest ``n`` with wait + prefill_s ≤ budget;
    without: the smallest ``n`` with ρ ≤ ``max_utilization``.  ValueError naming ``--ttft-slo-ms`` if no
    pool meets the budget (the prefill alone exceeds it)."""
    load = rate_per_s * prefill_s  # replicas' worth of work
    if ttft_budget_s is None:
        n = max(1, math.ceil(load / max_utilization - 1e-12))
    else:
        if prefill_s > ttft_budget_s:
            raise ValueError(f"--ttft-slo-ms: one prompt's prefill ({fmt_ms(prefill_s)}) plus the KV hand-off "
                             f"and first decode step exceed the TTFT target")
        n = max(1, math.floor(load) + 1)
        while md1_wait_s(load / n, prefill_s) + prefill_s > ttft_budget_s:
            n += 1
            if n > MAX_REPLICAS:
                raise ValueError("--ttft-slo-ms: no prefill pool of at most 100,000 replicas meets it")
    return PrefillPool(n, prefill_s, rate_per_s, load / n, md1_wait_s(load / n, prefill_s))


@dataclass(frozen=True)
class DecodePool:
    replicas: int
    batch_per_replica: int  # largest batch meeting the TPOT target within the KV pool
    step_s: float  # decode step at that batch: the TPOT a decode replica gives
    in_flight: float  # requests in decode across the pool: rate × output tokens × step_s


def size_decode_pool(rate_per_s: float, output_tokens: int, batch_per_replica: int, step_s: float,
                     gpus_per_replica: int = 1) -> DecodePool:
    """The fleet engine's replicas (:func:`planner.cost.fleet_for`) for a decode replica serving
    ``batch ÷ (output_tokens × step_s)`` requests/s: ceil(rate × output_tokens × step_s ÷ batch).
    20 req/s × 512 tokens × 0.030 s = 307.2 in flight; at 256 per replica: ceil(1.2) = 2 replicas."""
    if batch_per_replica < 1:
        raise ValueError("--tpot-slo-ms: no decode batch meets it within the KV pool")
    in_flight = rate_per_s * output_tokens * step_s
    fleet = fleet_for(rate_per_s, batch_per_replica / (output_tokens * step_s), gpus_per_replica, batch_per_replica)
    return DecodePool(fleet.replicas, int(batch_per_replica), step_s, in_flight)


def operating_batch(rate_per_s: float, output_tokens: int, replicas: int, step_of_batch, batch_cap: int,
                    iterations: int = 100) -> tuple[float, float]:
    """The batch a decode replica actually runs, and its step: the fixed point of
    ``b = rate × output_tokens × step(b) ÷ replicas`` (Little's law with the step at that batch), at most
    ``batch_cap``.  Found by bisection on [1, batch_cap] (step times rise with the batch, so ``g(b) − b`` changes
    sign once where the iteration b ← g(b) would converge; that iteration crawls when g's slope nears 1: 0.88 left
    8e-4 of error after 60 steps).  ``step_of_batch``: batch (float ≥ 1) → step seconds."""
    def g(b: float) -> float:
        return min(float(batch_cap), max(1.0, rate_per_s * output_tokens * step_of_batch(b) / replicas))

    lo, hi = 1.0, float(batch_cap)
    if g(hi) >= hi:
        return hi, float(step_of_batch(hi))
    for _ in range(iterations):  # invariant: g(lo) >= lo, g(hi) < hi
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if g(mid) >= mid else (lo, mid)
        if hi - lo <= 1e-12 * hi:
            break
    return lo, float(step_of_batch(lo))


def decode_side_s(transfer_s: float, step_s: float, steps: float = DECODE_SIDE_STEPS) -> float:
    """Arrival at the decode replica to its first token: the transfer spans ⌈transfer ÷ step⌉ ≥ 1 steps (its
    completion is polled once per step), plus :data:`DECODE_SIDE_STEPS`.  2.7 ms over 10 ms steps:
    (3.5 + 1) × 10 ms = 45 ms; 25 ms: (3.5 + 3) × 10 ms = 65 ms."""
    if step_s <= 0:
        return transfer_s
    return (steps + max(1, math.ceil(transfer_s / step_s - 1e-9))) * step_s


def largest_decode_batch(batch_sizes: np.ndarray, step_s: np.ndarray, tpot_slo_s: float | None) -> int:
    """The largest batch whose decode step meets ``tpot_slo_s`` (all of ``batch_sizes`` without a target;
    0 if none meets it).  Step times must rise with the batch."""
    ok = np.ones_like(step_s, dtype=bool) if tpot_slo_s is None else (np.asarray(step_s) <= tpot_slo_s)
    return int(np.asarray(batch_sizes)[ok].max()) if ok.any() else 0


@dataclass(frozen=True)
class ServingCost:
    """GPUs, $/hour and latency of one way of serving the workload."""

    replicas: int
    gpus: int
    usd_per_hour: float
    ttft_s: float
    tpot_s: float


@dataclass(frozen=True)
class DisaggPlan:
    """Disaggregated prefill/decode beside co-located serving, same workload, same replica shape."""

    prefill: PrefillPool
    decode: DecodePool
    kv_network: KvTransfer
    kv_nvlink: KvTransfer
    gpus_per_replica: int
    price_usd_per_gpu_hour: float
    colocated: ServingCost
    decode_operating_batch: float = math.nan  # per decode replica at the demand (below the knee)
    decode_operating_step_s: float = math.nan  # the step at that batch: the TPOT the pool gives

    @property
    def tpot_s(self) -> float:
        return self.decode.step_s if math.isnan(self.decode_operating_step_s) else self.decode_operating_step_s

    @property
    def decode_side_s(self) -> float:
        """The decode replica's part of TTFT: the hand-off over the network and the steps around it."""
        return decode_side_s(self.kv_network.time_s, self.tpot_s)

    @property
    def ttft_s(self) -> float:
        """Queue wait + prefill + the decode side (hand-off over the network + :data:`DECODE_SIDE_STEPS`)."""
        return self.prefill.queue_wait_s + self.prefill.prefill_s + self.decode_side_s

    @property
    def disaggregated(self) -> ServingCost:
        n = self.prefill.replicas + self.decode.replicas
        g = n * self.gpus_per_replica
        return ServingCost(n, g, g * self.price_usd_per_gpu_hour, self.ttft_s, self.tpot_s)

    @property
    def verdict(self) -> str:
        """'disaggregated wins' if its pools cost less per hour than the co-located fleet for the same demand
        and targets (both meet them by construction), else 'disaggregated loses' (a tie goes to co-located:
        one pool, no hand-off)."""
        return ("disaggregated wins" if self.disaggregated.usd_per_hour < self.colocated.usd_per_hour
                else "disaggregated loses")

    def to_dict(self) -> dict:
        d, c = self.disaggregated, self.colocated
        return {
            "prefill_replicas": self.prefill.replicas, "prefill_s": self.prefill.prefill_s,
            "prefill_utilization": self.prefill.utilization, "prefill_queue_wait_s": self.prefill.queue_wait_s,
            "decode_replicas": self.decode.replicas, "decode_batch_per_replica": self.decode.batch_per_replica,
            "decode_step_s": self.decode.step_s, "decode_in_flight": self.decode.in_flight,
            "decode_operating_batch": self.decode_operating_batch, "decode_operating_step_s": self.tpot_s,
            "decode_side_s": self.decode_side_s, "decode_side_steps": DECODE_SIDE_STEPS,
            "kv_transfer_bytes_per_request": self.kv_network.bytes_per_request,
            "kv_transfer_sending_gpus": self.kv_network.sending_gpus,
            "kv_transfer_network_bytes_per_s_per_gpu": self.kv_network.bandwidth_bytes_per_s_per_gpu,
            "kv_transfer_network_s": self.kv_network.time_s,
            "kv_transfer_nvlink_bytes_per_s_per_gpu": self.kv_nvlink.bandwidth_bytes_per_s_per_gpu,
            "kv_transfer_nvlink_s": self.kv_nvlink.time_s,
            "disaggregated": {"replicas": d.replicas, "gpus": d.gpus, "usd_per_hour": d.usd_per_hour,
                              "ttft_s": d.ttft_s, "tpot_s": d.tpot_s},
            "colocated": {"replicas": c.replicas, "gpus": c.gpus, "usd_per_hour": c.usd_per_hour,
                          "ttft_s": c.ttft_s, "tpot_s": c.tpot_s},
            "verdict": self.verdict, "measured": False,
        }


def plan_disaggregated(model: ModelSpec, gpu: GpuSpec, deployment: Deployment, workload: Workload,
                       report: SizingReport, profile: CalibrationProfile = IDEAL_PROFILE,
                       network_bytes_per_s_per_gpu: float = NETWORK_BYTES_PER_S_PER_GPU) -> DisaggPlan:
    """Size both pools for ``workload`` (it needs a rate) with replicas shaped like ``deployment``;
    ``report`` is :func:`planner.plan.plan` of the same inputs (its idle-replica TTFT is the prefill time,
    its max concurrency bounds the decode batch, its fleet is the co-located answer)."""
    rate = workload.request_rate_per_s
    if not rate:
        raise ValueError("--rate: disaggregated serving sizes its prefill pool from the prompt rate; give --rate")
    kv_bytes = kv_bytes_per_request(model, deployment.kv_cache_dtype, workload.prompt_tokens,
                                    deployment.block_size_tokens).total_bytes
    g = deployment.gpus_per_replica
    net = KvTransfer(kv_bytes, g, "network", network_bytes_per_s_per_gpu)
    nvl = KvTransfer(kv_bytes, g, "nvlink", gpu.interconnect_bandwidth_bytes_per_s)
    limit = min(report.max_concurrency, deployment.max_num_seqs)
    if limit < 1:
        raise ValueError(f"--max-model-len: no request of {workload.context_tokens:,} tokens fits the KV pool")
    batches = np.arange(1, limit + 1)
    steps = np.atleast_1d(np.asarray(decode_step_time(model, gpu, deployment, batches, decode_context_tokens(workload),
                                                      profile).time_s, dtype=float))
    b = largest_decode_batch(batches, steps, workload.tpot_slo_s)
    if b < 1:
        raise ValueError(f"--tpot-slo-ms: the decode step of one sequence ({fmt_ms(float(steps[0]))}) exceeds "
                         f"the TPOT target")
    decode = size_decode_pool(rate, workload.output_tokens, b, float(steps[b - 1]), g)
    op_b, op_step = operating_batch(rate, workload.output_tokens, decode.replicas,
                                    lambda x: float(np.interp(x, batches, steps)), b)
    budget = (None if workload.ttft_slo_s is None
              else workload.ttft_slo_s - decode_side_s(net.time_s, op_step))
    prefill = size_prefill_pool(rate, float(report.ttft.time_s), budget)
    fleet = report.fleet
    colocated = ServingCost(fleet.replicas, fleet.num_gpus, fleet.num_gpus * gpu.price_usd_per_hour,
                            float(report.slo.ttft_s), float(report.tpot_effective_s))
    return DisaggPlan(prefill, decode, net, nvl, g, gpu.price_usd_per_hour, colocated, op_b, op_step)
