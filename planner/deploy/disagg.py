"""Disaggregated prefill/decode as a planning option: a prefill pool and a decode pool sized apart, the KV
handed from one to the other per request, compared with co-located serving on the same workload.

* Prefill pool: one replica prefills one prompt in ``prefill_s`` (the plan's TTFT on an idle replica);
  prompts arrive at ``rate``; with ``n`` replicas each is busy ρ = rate × prefill_s ÷ n of the time and a
  prompt waits the M/D/1 mean ρ·prefill_s ÷ (2(1 − ρ)) (Pollaczek–Khinchine, deterministic service).
  ``n`` is the smallest with ρ < 1 whose wait + prefill + KV transfer + one decode step meets the TTFT
  target, or ρ ≤ :data:`PREFILL_MAX_UTILIZATION` without one.
* Decode pool: a decode replica runs no prefills, so its TPOT is the decode step alone; the batch
  per replica is the largest whose step meets the TPOT target and whose KV fits (``batch``); requests
  stay ``output_tokens × step_s`` in decode, so ``rate × output_tokens × step_s`` are in flight (Little's
  law) and the pool is that ÷ ``batch`` replicas, rounded up.
* KV transfer: KV bytes per token × prompt tokens (whole blocks; :func:`planner.memory.kv_bytes_per_request`),
  sent by the prefill replica's TP × PP GPUs in parallel, each over its own link: NVLink
  (``hardware/*.yaml`` ``interconnect_bandwidth_bytes_per_s``) when the pair shares a node, the network
  otherwise (:data:`NETWORK_BYTES_PER_S_PER_GPU`).  Pools scheduled apart by Kubernetes talk over the
  network, so TTFT uses the network time.

Written for vLLM's NixlConnector.  NOT measured: our GPU machine's vLLM 0.26 bundle has no NIXL, and 0.26
has no NCCL-based KV connector, so no 1P1D pair was booted; every number here is the model's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.batching import decode_context_tokens
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
    TTFT target less the KV transfer and one decode step): the smallest ``n`` with wait + prefill_s ≤ budget;
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


def size_decode_pool(rate_per_s: float, output_tokens: int, batch_per_replica: int, step_s: float) -> DecodePool:
    """ceil(rate × output_tokens × step_s ÷ batch).  20 req/s × 512 tokens × 0.030 s = 307.2 in flight;
    at 256 per replica: ceil(1.2) = 2 replicas."""
    if batch_per_replica < 1:
        raise ValueError("--tpot-slo-ms: no decode batch meets it within the KV pool")
    in_flight = rate_per_s * output_tokens * step_s
    return DecodePool(max(1, math.ceil(in_flight / batch_per_replica - 1e-12)), int(batch_per_replica), step_s,
                      in_flight)


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

    @property
    def ttft_s(self) -> float:
        """Queue wait + prefill + KV hand-off over the network + the decode replica's first step."""
        return self.prefill.queue_wait_s + self.prefill.prefill_s + self.kv_network.time_s + self.decode.step_s

    @property
    def disaggregated(self) -> ServingCost:
        n = self.prefill.replicas + self.decode.replicas
        g = n * self.gpus_per_replica
        return ServingCost(n, g, g * self.price_usd_per_gpu_hour, self.ttft_s, self.decode.step_s)

    def to_dict(self) -> dict:
        d, c = self.disaggregated, self.colocated
        return {
            "prefill_replicas": self.prefill.replicas, "prefill_s": self.prefill.prefill_s,
            "prefill_utilization": self.prefill.utilization, "prefill_queue_wait_s": self.prefill.queue_wait_s,
            "decode_replicas": self.decode.replicas, "decode_batch_per_replica": self.decode.batch_per_replica,
            "decode_step_s": self.decode.step_s, "decode_in_flight": self.decode.in_flight,
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
            "measured": False,
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
    decode = size_decode_pool(rate, workload.output_tokens, b, float(steps[b - 1]))
    budget = None if workload.ttft_slo_s is None else workload.ttft_slo_s - net.time_s - decode.step_s
    prefill = size_prefill_pool(rate, float(report.ttft.time_s), budget)
    fleet = report.fleet
    colocated = ServingCost(fleet.replicas, fleet.num_gpus, fleet.num_gpus * gpu.price_usd_per_hour,
                            float(report.slo.ttft_s), float(report.tpot_effective_s))
    return DisaggPlan(prefill, decode, net, nvl, g, gpu.price_usd_per_hour, colocated)
