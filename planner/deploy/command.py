"""One replica's exact ``vllm serve`` command (:func:`serve_command`), flags in vLLM 0.26's spelling.

Every flag written here is one of vLLM 0.26.0's own option strings: ``tests/test_deploy_flags.py`` parses
each generated command with a parser built from the pinned list in ``planner/data`` (see
:mod:`planner.deploy.flags`), and with vLLM's own parser where vLLM is installed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from planner.deploy.vendor import multi_gpu_env
from planner.startup import StartupCheck, startup_check
from planner.memory import (admission_kv_bytes_per_gpu, hybrid_block_tokens, kv_pool_concurrency,
                            request_kv_bytes_per_gpu)
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.quoting import shell_line, visible
from planner.serving.config import prefix_caching_for
from planner.specs import Deployment, GpuSpec, ModelSpec

#: vLLM 0.26 ``--kv-cache-dtype`` / ``--quantization`` spellings of the planner's dtypes.
KV_CACHE_DTYPE_FLAG = {"bf16": "auto", "fp16": "auto", "fp8": "fp8"}
#: Weight formats vLLM can quantise a 16-bit checkpoint into at load time; the others need a
#: pre-quantised checkpoint whose config.json carries its quantization_config (vLLM reads it).
ONLINE_QUANTIZATION = {"fp8": "fp8"}
PREQUANTIZED = {"int4": "a GPTQ/AWQ int4 checkpoint", "int8": "a GPTQ int8 or W8A8 checkpoint",
                "nf4": "a bitsandbytes nf4 checkpoint", "mxfp4": "an MXFP4 checkpoint (e.g. gpt-oss)"}


#: vLLM's OpenAI server port when ``--port`` is not given (vLLM 0.26).
DEFAULT_PORT = 8000


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
        return shell_line(self.argv, self.env)

    def serve_args(self) -> list[str]:
        """The arguments after ``vllm serve`` (what vLLM's own parser takes)."""
        return list(self.argv[2:])


def prefix_caching_note(model: ModelSpec, deployment: Deployment, enabled: bool) -> str:
    """What prefix caching does on a model with recurrent-state (Mamba / linear-attention) layers in vLLM 0.26, and
    what the planner counts of it."""
    if not enabled:
        return ("prefix caching is off: vLLM 0.26 keeps it opt-in for a model with Mamba / linear-attention layers "
                "(--prefix-caching turns it on, experimental in vLLM); shared prompt prefixes are computed again")
    kv, bs = deployment.kv_cache_dtype, deployment.block_size_tokens
    block = hybrid_block_tokens(model, kv, bs, prefix_caching=True)
    if model.mamba_chunk_tokens:
        mode = (f"it caches the Mamba-2 state at every block ('all' mode), the KV block raised to {block} tokens (a "
                f"multiple of their {model.mamba_chunk_tokens}-token chunk; {hybrid_block_tokens(model, kv, bs)} "
                f"without caching), which the simulator counts and the plan's KV per request does not")
    else:
        mode = (f"it caches the linear layers' state only where a prompt chunk ends ('align' mode): chunks end on "
                f"{block}-token block boundaries up to the prompt's last one (a step more for a longer prompt), which "
                f"the simulator counts")
    return (f"prefix caching on a model with Mamba / linear-attention layers is experimental in vLLM 0.26: {mode}; "
            f"hits are counted at every cached block from the first request that computed it (vLLM caches the state "
            f"at a shared prefix's boundary for the second): an upper bound on what the cache saves")


def json_arg(obj: dict) -> str:
    """A JSON flag value (``--speculative-config``, ``--kv-transfer-config``): compact, keys sorted."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def serve_command(model: ModelSpec, gpu: GpuSpec, deployment: Deployment, *, max_model_len: int,
                  profile: CalibrationProfile = IDEAL_PROFILE, enable_prefix_caching: bool | None = None,
                  speculative_config: dict | None = None, model_path: str | None = None,
                  served_model_name: str | None = None, port: int = DEFAULT_PORT,
                  kv_cache_memory_bytes: int | None = None, kv_transfer_config: dict | None = None,
                  distributed_executor_backend: str | None = None,
                  extra_args: tuple[str, ...] = ()) -> ServeCommand:
    """``vllm serve`` for one replica of ``deployment`` (TP × PP GPUs), flags in vLLM 0.26's spelling.

    ``model_path`` defaults to the catalog's Hugging Face repository.  ``kv_cache_memory_bytes`` pins the
    KV pool per GPU instead of letting vLLM size it from ``gpu_memory_utilization``.
    ``kv_transfer_config`` (disaggregated prefill/decode) and ``distributed_executor_backend`` ('ray'
    for a replica across nodes) are written as given."""
    path = model_path or model.hf_repo or model.id
    if path.startswith("-"):  # a positional that vLLM's parser would take for an option (flag injection)
        raise ValueError(f"{'--model-path' if model_path else 'hf_repo'}: {visible(path)[:60]!r} starts with '-': "
                         "vllm serve would read it as an option")
    check = startup_check(model, gpu, deployment, max_model_len, profile)
    notes: list[str] = []
    argv = ["vllm", "serve", path,
            "--served-model-name", served_model_name or model.id,
            "--tensor-parallel-size", str(deployment.tensor_parallel),
            "--pipeline-parallel-size", str(deployment.pipeline_parallel),
            "--max-model-len", str(int(max_model_len)),
            "--max-num-seqs", str(deployment.max_num_seqs),
            "--max-num-batched-tokens", str(deployment.max_num_batched_tokens)]
    if deployment.max_cudagraph_capture_tokens is not None:
        argv += ["--max-cudagraph-capture-size", str(deployment.max_cudagraph_capture_tokens)]
    # --block-size only when it is not vLLM's default: given, it also rules out every attention backend that cannot
    # run it ("--block-size 16 precluded higher-priority backend(s)": on a B200 an MLA model falls from FlashInfer MLA
    # to Triton MLA); left out, vLLM takes its default (16) where the backend runs it, else the backend's smallest
    if deployment.block_size_tokens != Deployment.default("block_size_tokens"):
        argv += ["--block-size", str(deployment.block_size_tokens)]
    argv += ["--kv-cache-dtype", KV_CACHE_DTYPE_FLAG[deployment.kv_cache_dtype]]
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
    enable_prefix_caching = prefix_caching_for(model, enable_prefix_caching)
    block = hybrid_block_tokens(model, deployment.kv_cache_dtype, deployment.block_size_tokens)
    if block > deployment.block_size_tokens:
        notes.append(f"vLLM raises the KV block to {block} tokens for this model: one attention layer's page must hold "
                     f"one linear layer's recurrent state; the KV pool and concurrency here count it")
    argv.append("--enable-prefix-caching" if enable_prefix_caching else "--no-enable-prefix-caching")
    if model.num_linear_layers:
        notes.append(prefix_caching_note(model, deployment, enable_prefix_caching))
    if speculative_config:
        argv += ["--speculative-config", json_arg(speculative_config)]
    if kv_transfer_config:
        argv += ["--kv-transfer-config", json_arg(kv_transfer_config)]
    if distributed_executor_backend:
        argv += ["--distributed-executor-backend", distributed_executor_backend]
    argv += ["--port", str(int(port))]
    argv += list(extra_args)
    # the collective library's settings for the GPU's vendor (planner.deploy.vendor)
    env = multi_gpu_env(gpu) if deployment.tensor_parallel * deployment.pipeline_parallel > 1 else {}
    per_req = request_kv_bytes_per_gpu(model, deployment, max_model_len) if max_model_len > 0 else 0.0
    conc = kv_pool_concurrency(check.kv_pool_bytes_per_gpu, per_req, check.ok, admission_kv_bytes_per_gpu(
        model, deployment, max_model_len) if max_model_len > 0 else None)
    return ServeCommand(tuple(argv), env, check, tuple(notes), check.kv_pool_bytes_per_gpu,
                        check.kv_capacity_tokens, conc)
