"""Where one replica's GPUs sit (:class:`ReplicaLayout`), the layouts tried when none is asked for
(:func:`layout_candidates`), and how long a replica takes to boot (:func:`boot_estimate_s`, for the probes).

Layout rule: tensor parallel stays inside a node (NVLink); a replica that does not fit on one node
takes TP = the node's GPUs and PP = nodes, pipeline stages across nodes on Ray — vLLM's own
multi-node rule ("the tensor parallel size is the number of GPUs you want to use in each node, and the
pipeline parallel size is the number of nodes", docs.vllm.ai/en/v0.8.3/serving/distributed_serving.html,
read 2026-11-30).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from planner.memory import weight_bytes
from planner.specs import GpuSpec, ModelSpec, tensor_parallel_candidates
from planner.startup import pipeline_stages
from planner.units import fmt_layout

#: Engine start-up without reading weights: process start, torch.compile, KV-pool profiling and CUDA-graph
#: capture.  Our vLLM 0.26 boots on the H200 with dummy weights took 89 s (Llama-3.1-8B), 117 s
#: (Mixtral-8x7B) and 117 s (Qwen2.5-32B TP 2) to /health (calibration/data/h200x2-2026-11-30/serve-*,
#: ``boot_s``); 120 s covers them.
BOOT_OVERHEAD_S = 120.0
#: The fastest engine initialisation we logged (Llama-3.1-8B, ``init_engine_s`` 42 s) rounded up: no
#: probe is sent before it.
MIN_BOOT_S = 60.0
#: Reading the checkpoint on one node: 1 GB/s, a local NVMe or a network volume's sustained read (our
#: assumption; a first start that downloads from the Hugging Face hub takes longer: the startup probe
#: allows :data:`BOOT_MARGIN` × the estimate).
WEIGHT_LOAD_BYTES_PER_S = 1.0e9
BOOT_MARGIN = 3.0


@dataclass(frozen=True)
class ReplicaLayout:
    """One replica's GPUs: TP × PP, spread over ``nodes`` nodes of ``gpus_per_node`` GPUs each."""

    tensor_parallel: int
    pipeline_parallel: int
    gpus_per_node: int  # this replica's GPUs on each of its nodes
    nodes: int
    auto: bool  # chosen by layout_candidates (True) or given (False: the fleet plan's TP/PP)

    @property
    def gpus(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def multi_node(self) -> bool:
        return self.nodes > 1

    def describe(self) -> str:
        where = f"{self.nodes} nodes × {self.gpus_per_node} GPUs" if self.multi_node else "one node"
        how = "chosen: the smallest layout that starts" if self.auto else "the fleet plan's: TP/PP as asked, else chosen"
        layout = fmt_layout(self.tensor_parallel, self.pipeline_parallel, always_pp=True)
        return f"{layout} = {self.gpus} GPU(s) per replica on {where} ({how})"


def replica_layout(gpu: GpuSpec, tensor_parallel: int, pipeline_parallel: int, auto: bool = False) -> ReplicaLayout:
    """The nodes a TP × PP replica needs on ``gpu`` nodes.  A replica larger than a node must fill whole
    nodes (TP × PP a multiple of the node's GPUs); ValueError naming ``--pp`` otherwise."""
    n = tensor_parallel * pipeline_parallel
    per_node = gpu.max_gpus_per_node
    if n <= per_node:
        return ReplicaLayout(tensor_parallel, pipeline_parallel, n, 1, auto)
    if n % per_node:
        raise ValueError(f"--pp: TP × PP = {n} GPUs is not a whole number of {per_node}-GPU {gpu.id} nodes; "
                         f"a replica across nodes takes whole nodes (TP = {per_node}, PP = nodes)")
    return ReplicaLayout(tensor_parallel, pipeline_parallel, per_node, n // per_node, auto)


def layout_candidates(model: ModelSpec, gpu: GpuSpec) -> Iterator[ReplicaLayout]:
    """Layouts from smallest to largest: every TP of :func:`planner.specs.tensor_parallel_candidates` on one
    node (PP 1), then TP = the node's GPUs (the largest candidate) with the fleet engine's pipeline stages
    (:func:`planner.startup.pipeline_stages`: 2, 3, 4, 6, 8 nodes, at most the model's layer count)."""
    tps = tensor_parallel_candidates(model, gpu)
    for tp in tps:
        yield replica_layout(gpu, tp, 1, auto=True)
    if not tps or tps[-1] != gpu.max_gpus_per_node:
        return  # TP cannot fill a node: no whole-node multi-node layout
    for pp in pipeline_stages(model.num_layers):
        yield replica_layout(gpu, tps[-1], pp, auto=True)


def checkpoint_bytes(model: ModelSpec) -> float:
    """Bytes of the published checkpoint (its native dtype): what a node reads, or downloads, at start-up."""
    return weight_bytes(model, model.native_dtype).total_bytes


def boot_estimate_s(model: ModelSpec, layout: ReplicaLayout) -> float:
    """Seconds from container start to ``/health`` answering: :data:`BOOT_OVERHEAD_S` + the checkpoint share
    of one node ÷ :data:`WEIGHT_LOAD_BYTES_PER_S`.

    Llama-3.1-8B (16.06e9 B, one node): 120 + 16.06 = 136 s.  Llama-3.1-405B on 2 nodes: 120 + 811e9 / 2 / 1e9
    ≈ 526 s."""
    return BOOT_OVERHEAD_S + checkpoint_bytes(model) / layout.nodes / WEIGHT_LOAD_BYTES_PER_S


@dataclass(frozen=True)
class ProbeTimes:
    """Kubernetes probe timing for ``/health`` derived from the boot estimate."""

    boot_estimate_s: float
    startup_initial_delay_s: int  # no probe before the fastest boot we logged
    startup_period_s: int
    startup_failure_threshold: int  # startup allowed: initial delay + period × threshold ≥ BOOT_MARGIN × estimate
    readiness_initial_delay_s: int
    liveness_initial_delay_s: int  # the boot estimate: a restart never races a normal boot

    @property
    def startup_budget_s(self) -> int:
        return self.startup_initial_delay_s + self.startup_period_s * self.startup_failure_threshold


def probe_times(boot_s: float) -> ProbeTimes:
    """Probe timing for a replica expected to boot in ``boot_s``: 136 s → startup probes from 60 s every 10 s,
    ceil((3 × 136 − 60) / 10) = 35 failures allowed (410 s in all); liveness from 136 s."""
    start = int(MIN_BOOT_S)
    period = 10
    threshold = max(1, math.ceil((BOOT_MARGIN * boot_s - start) / period))
    return ProbeTimes(float(boot_s), start, period, threshold, start, math.ceil(boot_s))
