"""The one rule for "can this deployment start" (:func:`startup_check`).

:func:`startup_check` is what vLLM 0.26 itself refuses or runs out of memory on at start-up, checked
before anything is launched: tensor parallel beyond one node or not dividing the attention/KV heads,
pipeline stages beyond the layer count, a context beyond the model's limit, a scheduler budget below
the sequence limit, weights + activations beyond ``gpu_memory_utilization`` (no KV pool), a KV pool
that cannot hold one request of ``max_model_len`` (vLLM raises "larger than the available KV cache
memory"), and too little headroom above ``gpu_memory_utilization`` for the CUDA graphs vLLM captures
after sizing the pool.

Every command and the dashboard ask it: ``deploy``, ``simulate`` and ``slo-search`` refuse (exit 1) or skip a
deployment it rejects, ``size`` (:func:`planner.plan.plan`) and ``sweep`` report it as infeasible (the sweep's
``starts`` column), ``validate`` refuses a measured row whose layout vLLM would refuse, and the dashboard's
:func:`planner.dashboard.scenario.scenario_problems` stops on a layout problem.  Each problem has a ``kind``: ``layout``
(the parallel layout or the scheduler limits: vLLM refuses the flags themselves), ``context`` (the context
beyond the model's limit) or ``memory`` (the weights, one request's KV or the CUDA-graph headroom do not fit).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.compile_keys import extra_graphs
from planner.kernel_families import uses_v1_runner
from planner.memory import MemoryBudget, memory_budget, request_kv_bytes_per_gpu
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.specs import Deployment, GpuSpec, ModelSpec
from planner.units import GiB, fmt_gib

#: Headroom vLLM needs above gpu_memory_utilization × total for what it allocates after sizing the KV
#: pool (CUDA graphs, NCCL buffers, the sampler's scratch): the larger of the profile's measured CUDA-graph
#: capture and this floor.  On the H200 (vLLM 0.26) graph capture took 0.3-1.3 GiB.
MIN_HEADROOM_BYTES = 1.0 * GiB

#: Pipeline stages tried (TP = the node) when no single-node layout starts: the fleet engine's candidates
#: (:func:`planner.fleet_eval.candidate_layouts`) and the sweep's rows (:func:`planner.sweep.sweep`) alike.
PIPELINE_STAGES = (2, 3, 4, 6, 8)


def pipeline_stages(num_layers: int) -> tuple[int, ...]:
    """The stage counts of :data:`PIPELINE_STAGES` a model of ``num_layers`` layers can be split into, in order."""
    return tuple(pp for pp in PIPELINE_STAGES if pp <= num_layers)


@dataclass(frozen=True)
class StartupProblem:
    """One reason a deployment would not start: the field (flag) at fault and a sentence with numbers."""

    field: str
    reason: str
    kind: str = "layout"  # 'layout', 'context' or 'memory' (module docstring)

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


@dataclass(frozen=True)
class StartupCheck:
    """Whether vLLM would start this deployment, and why not."""

    problems: tuple[StartupProblem, ...]
    kv_pool_bytes_per_gpu: float
    kv_capacity_tokens: int
    max_model_len: int
    headroom_bytes: float
    budget: MemoryBudget | None = field(default=None, repr=False, compare=False)  # what the pool came from

    @property
    def ok(self) -> bool:
        return not self.problems

    def reasons(self) -> list[str]:
        return [str(p) for p in self.problems]


def startup_check(model: ModelSpec, gpu: GpuSpec, deployment: Deployment, max_model_len: int,
                  profile: CalibrationProfile = IDEAL_PROFILE, *, kv_capacity_tokens: int | None = None,
                  budget: MemoryBudget | None = None) -> StartupCheck:
    """Every reason vLLM 0.26 would refuse or fail to start ``deployment`` serving ``max_model_len``.
    ``kv_capacity_tokens``: the KV pool in tokens when it is known (a measured engine's, ``--kv-capacity-tokens``)
    instead of the memory model's; then one request of ``max_model_len`` must fit in it.  ``budget``: the
    deployment's :func:`~planner.memory.memory_budget` when the caller has it (computed here otherwise); the
    check keeps it (``StartupCheck.budget``) for the caller to pass on, so one command derives it once."""
    problems: list[StartupProblem] = []
    tp, pp = deployment.tensor_parallel, deployment.pipeline_parallel
    a = model.attention
    if tp > gpu.max_gpus_per_node:
        problems.append(StartupProblem("tensor_parallel", (
            f"TP {tp} spans more GPUs than one {gpu.id} node has ({gpu.max_gpus_per_node}); keep TP inside a node "
            f"and split across nodes with pipeline parallelism")))
    if a.num_heads % tp:
        problems.append(StartupProblem("tensor_parallel", (
            f"TP {tp} does not divide the model's {a.num_heads} attention heads (vLLM refuses it)")))
    elif a.kind != "mla" and (a.num_kv_heads % tp if tp <= a.num_kv_heads else tp % a.num_kv_heads):
        problems.append(StartupProblem("tensor_parallel", (
            f"TP {tp} and the model's {a.num_kv_heads} KV heads: one must divide the other (vLLM refuses it)")))
    if pp > model.num_layers:
        problems.append(StartupProblem("pipeline_parallel", (
            f"PP {pp} exceeds the model's {model.num_layers} layers")))
    if max_model_len > model.max_context_tokens:
        problems.append(StartupProblem("max_model_len", (
            f"{max_model_len:,} tokens exceeds the model's {model.max_context_tokens:,}-token limit"), "context"))
    if deployment.max_num_batched_tokens < deployment.max_num_seqs:
        problems.append(StartupProblem("max_num_batched_tokens", (
            f"{deployment.max_num_batched_tokens:,} is below max_num_seqs {deployment.max_num_seqs:,} "
            f"(vLLM requires max_num_batched_tokens >= max_num_seqs)")))
    if budget is None:
        budget = memory_budget(model, gpu, deployment, profile)
    if not budget.fits:  # a KV pool given in tokens does not make the weights fit
        problems.append(StartupProblem("gpu_memory_utilization", budget.explain(), "memory"))
    elif kv_capacity_tokens is not None:
        if max_model_len > kv_capacity_tokens:
            problems.append(StartupProblem("max_model_len", (
                f"one request of {max_model_len:,} tokens does not fit in the KV pool of {kv_capacity_tokens:,} "
                f"tokens (vLLM refuses to start)"), "memory"))
    elif max_model_len > 0 and request_kv_bytes_per_gpu(model, deployment, max_model_len) > budget.kv_pool_bytes:
        need = request_kv_bytes_per_gpu(model, deployment, max_model_len)
        problems.append(StartupProblem("max_model_len", (
            f"one request of {max_model_len:,} tokens needs {fmt_gib(need)} of KV per GPU, the pool has "
            f"{fmt_gib(budget.kv_pool_bytes)} (vLLM refuses to start)"), "memory"))
    headroom = (1.0 - deployment.gpu_memory_utilization) * budget.gpu_memory_bytes
    # the V2 runner (dense models) captures its graphs after sizing the pool: graphs beyond vLLM's default need room
    # there too, at the V1 runner's estimate per graph (measured once on the V2 runner, DeepSeek-V2-Lite on an H200:
    # 4.65 - 1.20 GiB for 512 graphs more, 6.9 MiB a graph, 9 % above it; the V1 runner's own captures took 6.5 and
    # 8.1 MiB: calibration/data/h200-2026-12-05-mla-graphs)
    more = 0 if uses_v1_runner(model) else max(0, extra_graphs(deployment, model))
    graph_bytes = more * profile.v1_cudagraph_bytes_per_graph
    need_headroom = MIN_HEADROOM_BYTES + graph_bytes
    if headroom < need_headroom:
        graphs = f" ({more} CUDA graphs more than vLLM's default)" if graph_bytes else ""
        problems.append(StartupProblem("gpu_memory_utilization", (
            f"{deployment.gpu_memory_utilization:.3g} leaves {fmt_gib(headroom)} above the KV pool; CUDA-graph "
            f"capture{graphs} and NCCL buffers need about {fmt_gib(need_headroom)} (lower it)"), "memory"))
    return StartupCheck(tuple(problems), budget.kv_pool_bytes, budget.kv_capacity_tokens, int(max_model_len),
                        headroom, budget)
