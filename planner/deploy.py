"""From a plan to a launch configuration: the one rule for "can this deployment start", and the exact
``vllm serve`` command of one replica with the planner's predictions beside it.

:func:`startup_check` is what vLLM 0.26 itself refuses or runs out of memory on at start-up, checked
before anything is launched: tensor parallel beyond one node or not dividing the attention/KV heads,
pipeline stages beyond the layer count, a context beyond the model's limit, a scheduler budget below
the sequence limit, weights + activations beyond ``gpu_memory_utilization`` (no KV pool), a KV pool
that cannot hold one request of ``max_model_len`` (vLLM raises "larger than the available KV cache
memory"), and too little headroom above ``gpu_memory_utilization`` for the CUDA graphs vLLM captures
after sizing the pool.  ``size``, ``sweep``, ``simulate`` and ``deploy`` all refuse a plan through it.

:func:`serve_command` turns a deployment into ``vllm serve`` arguments (flag names as vLLM 0.26's own
parser defines them; ``tests`` check every generated command against a pinned copy of that parser's
option list, and on a machine with vLLM against the parser itself).
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass, field

from planner.memory import memory_budget, request_kv_bytes_per_gpu
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.specs import Deployment, GpuSpec, ModelSpec
from planner.units import GiB, fmt_gib

#: Headroom vLLM needs above gpu_memory_utilization × total for what it allocates after sizing the KV
#: pool (CUDA graphs, NCCL buffers, the sampler's scratch): the larger of the profile's measured CUDA-graph
#: capture and this floor.  On the H200 (vLLM 0.26) graph capture took 0.3-1.3 GiB.
MIN_HEADROOM_BYTES = 1.0 * GiB

#: vLLM 0.26 ``--kv-cache-dtype`` / ``--quantization`` spellings of the planner's dtypes.
KV_CACHE_DTYPE_FLAG = {"bf16": "auto", "fp16": "auto", "fp8": "fp8"}
#: Weight formats vLLM can quantise a 16-bit checkpoint into at load time; the others need a
#: pre-quantised checkpoint whose config.json carries its quantization_config (vLLM reads it).
ONLINE_QUANTIZATION = {"fp8": "fp8"}
PREQUANTIZED = {"int4": "a GPTQ/AWQ int4 checkpoint", "int8": "a GPTQ int8 or W8A8 checkpoint",
                "nf4": "a bitsandbytes nf4 checkpoint", "mxfp4": "an MXFP4 checkpoint (e.g. gpt-oss)"}


@dataclass(frozen=True)
class StartupProblem:
    """One reason a deployment would not start: the field (flag) at fault and a sentence with numbers."""

    field: str
    reason: str

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

    @property
    def ok(self) -> bool:
        return not self.problems

    def reasons(self) -> list[str]:
        return [str(p) for p in self.problems]


def startup_check(model: ModelSpec, gpu: GpuSpec, deployment: Deployment, max_model_len: int,
                  profile: CalibrationProfile = IDEAL_PROFILE) -> StartupCheck:
    """Every reason vLLM 0.26 would refuse or fail to start ``deployment`` serving ``max_model_len``."""
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
            f"{max_model_len:,} tokens exceeds the model's {model.max_context_tokens:,}-token limit")))
    if deployment.max_num_batched_tokens < deployment.max_num_seqs:
        problems.append(StartupProblem("max_num_batched_tokens", (
            f"{deployment.max_num_batched_tokens:,} is below max_num_seqs {deployment.max_num_seqs:,} "
            f"(vLLM requires max_num_batched_tokens >= max_num_seqs)")))
    budget = memory_budget(model, gpu, deployment, profile)
    if not budget.fits:
        problems.append(StartupProblem("gpu_memory_utilization", budget.explain()))
    elif max_model_len > 0 and request_kv_bytes_per_gpu(model, deployment, max_model_len) > budget.kv_pool_bytes:
        need = request_kv_bytes_per_gpu(model, deployment, max_model_len)
        problems.append(StartupProblem("max_model_len", (
            f"one request of {max_model_len:,} tokens needs {fmt_gib(need)} of KV per GPU, the pool has "
            f"{fmt_gib(budget.kv_pool_bytes)} (vLLM refuses to start)")))
    headroom = (1.0 - deployment.gpu_memory_utilization) * budget.gpu_memory_bytes
    need_headroom = MIN_HEADROOM_BYTES
    if headroom < need_headroom:
        problems.append(StartupProblem("gpu_memory_utilization", (
            f"{deployment.gpu_memory_utilization:.3g} leaves {fmt_gib(headroom)} above the KV pool; CUDA-graph "
            f"capture and NCCL buffers need about {fmt_gib(need_headroom)} (lower it)")))
    return StartupCheck(tuple(problems), budget.kv_pool_bytes, budget.kv_capacity_tokens, int(max_model_len),
                        headroom)


@dataclass(frozen=True)
class ServeCommand:
    """One replica's ``vllm serve`` command and what the planner predicts it will do."""

    argv: tuple[str, ...]
    env: dict = field(default_factory=dict)
    check: StartupCheck | None = None
    notes: tuple[str, ...] = ()
    predicted_kv_pool_bytes_per_gpu: float = math.nan
    predicted_kv_capacity_tokens: int = 0
    predicted_max_concurrency: int = 0

    def shell(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return (env + " " if env else "") + shlex.join(self.argv)

    def serve_args(self) -> list[str]:
        """The arguments after ``vllm serve`` (what vLLM's own parser takes)."""
        return list(self.argv[2:])


def serve_command(model: ModelSpec, gpu: GpuSpec, deployment: Deployment, *, max_model_len: int,
                  profile: CalibrationProfile = IDEAL_PROFILE, enable_prefix_caching: bool = True,
                  speculative_config: dict | None = None, model_path: str | None = None,
                  served_model_name: str | None = None, port: int = 8000,
                  kv_cache_memory_bytes: int | None = None, extra_args: tuple[str, ...] = ()) -> ServeCommand:
    """``vllm serve`` for one replica of ``deployment`` (TP × PP GPUs), flags in vLLM 0.26's spelling.

    ``model_path`` defaults to the catalog's Hugging Face repository.  ``kv_cache_memory_bytes`` pins the
    KV pool per GPU instead of letting vLLM size it from ``gpu_memory_utilization``."""
    check = startup_check(model, gpu, deployment, max_model_len, profile)
    notes: list[str] = []
    argv = ["vllm", "serve", model_path or model.hf_repo or model.id,
            "--served-model-name", served_model_name or model.id,
            "--tensor-parallel-size", str(deployment.tensor_parallel),
            "--pipeline-parallel-size", str(deployment.pipeline_parallel),
            "--max-model-len", str(int(max_model_len)),
            "--max-num-seqs", str(deployment.max_num_seqs),
            "--max-num-batched-tokens", str(deployment.max_num_batched_tokens),
            "--block-size", str(deployment.block_size_tokens),
            "--kv-cache-dtype", KV_CACHE_DTYPE_FLAG[deployment.kv_cache_dtype]]
    if kv_cache_memory_bytes is not None:
        argv += ["--kv-cache-memory-bytes", str(int(kv_cache_memory_bytes))]
    else:
        argv += ["--gpu-memory-utilization", f"{deployment.gpu_memory_utilization:g}"]
    wd = deployment.weight_dtype
    if wd in ONLINE_QUANTIZATION and model.native_dtype in ("bf16", "fp16"):
        argv += ["--quantization", ONLINE_QUANTIZATION[wd]]
    elif wd in PREQUANTIZED and model.native_dtype != wd:
        notes.append(f"weights {wd}: point the command at {PREQUANTIZED[wd]} of {model.name}; vLLM reads its "
                     f"quantization_config (no --quantization flag needed)")
    argv.append("--enable-prefix-caching" if enable_prefix_caching else "--no-enable-prefix-caching")
    if speculative_config:
        argv += ["--speculative-config", json.dumps(speculative_config, sort_keys=True, separators=(",", ":"))]
    argv += ["--port", str(int(port))]
    argv += list(extra_args)
    env = {}
    if deployment.tensor_parallel * deployment.pipeline_parallel > 1:
        env = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    per_req = request_kv_bytes_per_gpu(model, deployment, max_model_len) if max_model_len > 0 else 0.0
    conc = int(check.kv_pool_bytes_per_gpu // per_req) if check.ok and per_req > 0 else 0
    return ServeCommand(tuple(argv), env, check, tuple(notes), check.kv_pool_bytes_per_gpu,
                        check.kv_capacity_tokens, conc)
