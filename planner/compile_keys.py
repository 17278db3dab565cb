"""Which engine steps make a vLLM 0.26 engine compile a Triton MoE kernel on first use, what that costs, and how
to warm an engine past them (pure; no torch/vLLM).

Above the CUDA graphs (steps of more than :func:`~planner.kernel_families.cudagraph_max_tokens` tokens: the chunks
of long prompts) the MoE kernels run eagerly, and Triton compiles a kernel again the first time it is called with a
new specialisation: other constexpr values (the kernel configuration) or integer arguments that differ in being a
multiple of 16.  The compile stalls that step by ~1-2 s.  A step of M tokens has the compile key:

* Triton fused MoE (bf16 and fp8 W8A8 experts; Qwen3-MoE, Mixtral, DeepSeek/Moonlight): the configuration M runs
  with (:func:`planner.fused_moe_configs.step_config`: tuned for the shape and GPU, or the default), and whether
  EM = M·k + E·(BLOCK_SIZE_M − 1) (``moe_align_block_size``'s padded length) and M·k are multiples of 16;
* Triton MXFP4 MoE (gpt-oss): M // 32, and whether M is a multiple of 16.

The start-up profiling run (a step of max_num_batched_tokens) compiles its key, and for the fused MoE the CUDA-graph
captures theirs (:func:`keys_at_start`).
Traced under ``vllm serve`` on an H200 (calibration/data/h200-2026-12-02-serve-steps b/, f/, -serve-mxfp4 g/ to k/,
-serve-fusedmoe l/ to p/), every eager step of twelve engines: 525 of the 526 steps with a new key stalled, 3 of the
3,280 with a seen key did, each an MLA engine's early prompt chunk with context, MLA's own Triton kernel
(calibration/trace_points.shape_compiles, context_stalls; tests/test_compile_keys.py pins the counts).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable

from planner.boots import boot_range_words
from planner.fused_moe_configs import step_config, tuned_table
from planner.kernel_families import MLA_DECODE_PATH_MAX_QUERY_TOKENS, cudagraph_max_tokens, moe_coeffs, moe_variant
from planner.specs import Deployment, ModelSpec

#: the Triton MXFP4 MoE's step-size bucket: its keys are M // 32 (and M % 16 == 0)
MXFP4_BUCKET_TOKENS = 32
#: at most this many warm-up prompt sizes are listed one by one in the plan's note (gpt-oss has 448: a recipe)
LISTED_WARM_UP_SIZES = 16


#: the compile key of MLA's chunked prefill with context: a Triton kernel of its own, compiled once per engine
MLA_CONTEXT_KEY = "mla-chunked-context"


def context_compile_s(model: ModelSpec, profile) -> float:
    """Seconds an MLA engine stalls once, on its first step that mixes a prompt chunk with context on MLA's prefill
    pathway and a fresh prompt (:func:`mixed_context`): the profile's ``mla_context_compile_s``; 0 for other attention
    or no profile."""
    return profile.mla_context_compile_s if profile is not None and model.attention.kind == "mla" else 0.0


def mixed_context(starts, chunks, decode_path_max_tokens: float = MLA_DECODE_PATH_MAX_QUERY_TOKENS) -> bool:
    """Whether a step's prompt chunks (``chunks`` tokens, ``starts`` computed before each) hold one with context on
    MLA's prefill pathway (more than ``decode_path_max_tokens``: kernel_families.MLA_DECODE_PATH_MAX_QUERY_TOKENS)
    beside a fresh prompt's.  Traced under vllm serve on eleven MLA engines (2026-12-02..05; planner.compile_keys'
    tests), the stall came on the first such step on each; a context chunk on the decode pathway did not stall (e/:
    a 9-token chunk beside a fresh 1,709-token prompt, 3,635 steps before its stall on a 746-token one; n/ likewise),
    nor did a lone chunk with context (mla-long b/: five in a row, up to 13,944 tokens of context), nor an engine
    that never ran such a step (an H100's 8,192-graph Moonlight)."""
    return any(s > 0 and c > decode_path_max_tokens for s, c in zip(starts, chunks)) and any(s == 0 for s in starts)


def mxfp4_key(tokens: int) -> tuple[int, bool]:
    """The Triton MXFP4 MoE's compile key of a step of ``tokens`` tokens above the CUDA graphs."""
    return int(tokens) // MXFP4_BUCKET_TOKENS, int(tokens) % 16 == 0


def fused_moe_key(table: dict | None, num_experts: int, top_k: int, weight_dtype: str, tokens: int) -> tuple:
    """The Triton fused MoE's compile key of a step of ``tokens`` = M tokens: (its configuration, EM % 16 == 0,
    M·k % 16 == 0), EM being the sorted-token buffer ``invoke_fused_moe_triton_kernel`` passes (vLLM 0.26
    ``moe_align_block_size``: M·k + E·(BLOCK_SIZE_M − 1), at most M·k·BLOCK_SIZE_M below E routed slots)."""
    m = int(tokens)
    cfg = step_config(table, m, num_experts, weight_dtype)
    bm, slots = cfg["BLOCK_SIZE_M"], m * top_k
    em = slots + num_experts * (bm - 1)
    if slots < num_experts or m < bm:  # moe_align's few-slot buffer; the kernel call's small-batch path
        em = min(em, slots * bm)
    return tuple(sorted(cfg.items())), em % 16 == 0, slots % 16 == 0


def step_compile_key(model: ModelSpec | None, deployment: Deployment) -> Callable[[int], Hashable] | None:
    """tokens -> compile key of the model's MoE kernel on this deployment; None where no first-use compile of a
    step size is known (dense models, int4 experts)."""
    variant = moe_variant(model, deployment.weight_dtype)
    if variant == "mxfp4":
        return mxfp4_key
    if variant is None or deployment.weight_dtype not in ("bf16", "fp8"):
        return None
    table = tuned_table(model, deployment.weight_dtype, deployment.gpu_id, deployment.tensor_parallel)
    e, k = model.moe.num_experts, model.moe.experts_per_token
    return functools.partial(fused_moe_key, table, e, k, deployment.weight_dtype)


def capture_sizes(deployment: Deployment, model: ModelSpec | None) -> list[int]:
    """vLLM 0.26's CUDA-graph capture sizes (config/vllm.py): 1, 2, 4, multiples of 8 below 256, multiples of 16
    from 256, up to the largest graph, and max_num_batched_tokens if it is within it."""
    cap = cudagraph_max_tokens(deployment, model)
    sizes = {s for s in (1, 2, 4) if s <= cap} | set(range(8, min(cap + 1, 256), 8)) | set(range(256, cap + 1, 16))
    if deployment.max_num_batched_tokens <= cap:
        sizes.add(deployment.max_num_batched_tokens)
    return sorted(sizes)


def graph_count(deployment: Deployment, model: ModelSpec | None) -> int:
    """The CUDA graphs vLLM 0.26 captures (its log's "Profiling CUDA graph memory: PIECEWISE=..., FULL=..."): a
    piecewise graph per capture size and a full graph per size up to max_num_seqs (the uniform decode batches):
    51 + 51 at vllm serve's defaults, 83 + 83 for gpt-oss, 531 + 83 with --max-cudagraph-capture-size 8192 (logged)."""
    sizes = capture_sizes(deployment, model)
    return len(sizes) + sum(1 for s in sizes if s <= deployment.max_num_seqs)


def extra_graphs(deployment: Deployment, model: ModelSpec | None) -> int:
    """The graphs ``deployment`` captures beyond those of vLLM's default largest graph (negative below it; 0 at the
    default, without counting: every sweep row's start-up check asks)."""
    if deployment.max_cudagraph_capture_tokens is None:
        return 0
    return graph_count(deployment, model) - graph_count(deployment.replace(max_cudagraph_capture_tokens=None), model)


def v1_graph_estimate_bytes(model: ModelSpec, deployment: Deployment, profile) -> float:
    """The CUDA-graph memory vLLM's V1 runner (MoE models) subtracts from the KV pool at start-up: the profile's
    estimate with the default graphs plus its bytes per graph for each graph more.  Logged on an H100
    (calibration/data/h100-2026-12-05-capture): 614 graphs against 102 added 3.15 GiB to Qwen3-30B-A3B's (the fit)
    and 3.12 GiB to Moonlight-16B-A3B's (held out; 6.3 MiB a graph predicts 3.15)."""
    return max(0.0, profile.v1_cudagraph_estimate_bytes
               + profile.v1_cudagraph_bytes_per_graph * extra_graphs(deployment, model))


def keys_at_start(deployment: Deployment, model: ModelSpec | None,
                  key: Callable[[int], Hashable] | None = None) -> frozenset:
    """The compile keys a freshly started engine has: the profiling run's, and for the fused MoE the graph
    captures' (traced: Qwen3-30B-A3B's first 514-768-token even step ran its 512 capture's kernel without a stall;
    gpt-oss-20b's first 1,040-token step stalled on its 1,024 capture's MXFP4 key: those captures compile apart).
    ``key``: the deployment's :func:`step_compile_key`, where the caller has it."""
    key = key or step_compile_key(model, deployment)
    if key is None:
        return frozenset()
    captured = capture_sizes(deployment, model) if key is not mxfp4_key else []
    return frozenset(key(t) for t in [deployment.max_num_batched_tokens, *captured])


def warm_up_sizes(deployment: Deployment, model: ModelSpec) -> list[int]:
    """The smallest step size above the CUDA graphs of every compile key a fresh engine lacks, ascending: one
    prompt of each, sent one at a time (a prompt alone in its step is a step of its length), warms the engine."""
    key = step_compile_key(model, deployment)
    if key is None:
        return []
    seen, out = set(keys_at_start(deployment, model, key)), []
    for t in range(cudagraph_max_tokens(deployment, model) + 1, deployment.max_num_batched_tokens + 1):
        if (k := key(t)) not in seen:
            seen.add(k)
            out.append(t)
    return out


def shape_compile_s(model: ModelSpec, weight_dtype: str, profile) -> float:
    """Seconds a step above the CUDA graphs stalls on a new compile key: the profile's ``shape_compile_layer_s`` of
    the model's MoE kernel × its MoE layers, or (the Triton MXFP4 MoE) its ``shape_compile_expert_s`` × (its
    ``shape_compile_offset_experts`` + the experts); 0 where none was measured."""
    moe = moe_coeffs(model, weight_dtype, profile)
    if moe is None or model.moe is None:
        return 0.0
    layers = model.num_layers - model.moe.num_dense_layers
    return (moe.shape_compile_layer_s * layers
            + moe.shape_compile_expert_s * (moe.shape_compile_offset_experts + model.moe.num_experts))


def cold_start_note(model: ModelSpec, deployment: Deployment, profile=None, max_model_len: int | None = None) -> str:
    """What a cold vLLM 0.26 engine does before it serves at the predicted speed, and how to warm it (its start: the
    measured boots of :mod:`planner.boots` on the deployment's GPU, else on every GPU; on the H200 54-258 s over 71
    boots, median 129 s: Llama-3.1-8B 54-144 s, gpt-oss-120b 258 s): the graph capture, and for a MoE model the
    Triton compile of each new step-size key above the graphs (module docstring), how many, how long (``profile``'s
    :func:`shape_compile_s`) and which prompts warm them: only those up to the engine's ``max_model_len`` (vLLM
    refuses a longer prompt), the keys of larger steps being left to the first traffic (gpt-oss at 2,000 + 400
    tokens: 86 of its 448 keys can be warmed)."""
    cap, top = cudagraph_max_tokens(deployment, model), deployment.max_num_batched_tokens
    note = (f"cold start: vLLM compiles the model (torch.compile, ~20-55 s) and captures CUDA graphs for steps of "
            f"1-{cap} tokens before it serves (measured engine starts: {boot_range_words(deployment.gpu_id)}); "
            + ("larger steps run without graphs" if top > cap else "no step is larger"))
    graphs, default = (graph_count(d, model) for d in (deployment,
                                                      deployment.replace(max_cudagraph_capture_tokens=None)))
    if graphs > default:  # measured on an H100: Qwen3-30B-A3B 22 -> 119 s of capture, Moonlight-16B-A3B 31 -> 132 s
        s = (graphs - default) * profile.cudagraph_capture_s_per_graph if profile is not None else 0.0
        note += (f"; {graphs} CUDA graphs where vLLM's default captures {default}: "
                 + (f"about {s:.0f} s more start-up ({profile.cudagraph_capture_s_per_graph:.2f} s a graph)" if s
                    else "a longer start-up"))
    if model.attention.kind == "mla":  # traced on eleven MLA engines (context_compile_s, mixed_context)
        s = context_compile_s(model, profile)
        note += (f"; an MLA engine also stalls once{f', {s:.2f} s' if s else ''} (0.48-0.81 s traced), on its first "
                 f"step that holds a prompt chunk of more than {MLA_DECODE_PATH_MAX_QUERY_TOKENS} tokens with context "
                 "beside a fresh prompt (a Triton kernel of MLA's chunked prefill): prompts sent at once that total "
                 f"more than {top + MLA_DECODE_PATH_MAX_QUERY_TOKENS:,} tokens (each within the engine's "
                 "--max-model-len), then a short one, make such a step: the step budget splits the last long one "
                 "and its rest goes with the short one (this warm-up not measured)")
    if model.moe is None:
        return note
    if step_compile_key(model, deployment) is None:
        return note + "; warm it with a few requests of the prompt lengths you expect (first-use MoE kernel compiles)"
    sizes = warm_up_sizes(deployment, model)  # gpt-oss at vllm serve's 8,192 tokens per step: 448; Qwen3-30B-A3B 4
    if not sizes:
        return note + "; warm it with a few requests before taking traffic (no larger step lacks its MoE kernel)"
    n, each = len(sizes), shape_compile_s(model, deployment.weight_dtype, profile) if profile is not None else 0.0
    total = f"{n * each:.0f} s" if n * each < 90 else f"{n * each / 60:.1f} min"
    cost = f"~{each:.1f} s each here, ~{total} in all" if each else "0.6-6 s each on an H200"
    mxfp4 = moe_variant(model, deployment.weight_dtype) == "mxfp4"
    kernel = "Triton MXFP4 MoE" if mxfp4 else "Triton fused MoE"
    note += (f"; the {kernel} compiles again the first time a larger step has a new kernel key (its configuration "
             f"and sizes' divisibility by 16): {n} key{'s' if n > 1 else ''} from {cap + 1:,} to {top:,} tokens "
             f"({cost}), spread over the first traffic (served chat on an H200: TTFT p50 ~1 s for 2,000 requests on "
             f"gpt-oss, p99 x5-8 on Qwen3-30B-A3B and Mixtral); the latencies here are for an engine past them. ")
    mml = top if max_model_len is None else int(max_model_len)
    if mxfp4 and n > LISTED_WARM_UP_SIZES:  # two keys a 32-token bucket: 32k + 16 and 32k + 17 tokens warm them
        lo, hi = sizes[0] // MXFP4_BUCKET_TOKENS, min(top - 1, mml - 17) // MXFP4_BUCKET_TOKENS
        sent = 2 * max(0, hi - lo + 1)
        prompts = f"32k + 16 and 32k + 17 tokens for k = {lo}..{hi}"
    else:
        ok = [s for s in sizes if s <= mml]
        sent = len(ok)
        prompts = (", ".join(f"{s:,}" for s in ok) + " tokens" if sent <= LISTED_WARM_UP_SIZES else
                   f"the {sent} sizes `planner.compile_keys.warm_up_sizes` lists ({ok[0]:,} to {ok[-1]:,})")
    if sent:
        note += (f"Warm it with {sent} request{'s' if sent > 1 else ''} sent one at a time to the idle engine, output "
                 f"1 token, texts no cache shares, prompts of {prompts} (measured: no stall afterwards)")
    if sent < n:
        many = n - sent > 1
        note += (f"{'; the other' if sent else 'The'} {n - sent} key{'s' if many else ''} {'are' if many else 'is'} "
                 f"of steps of more than {mml:,} tokens, which only steps packing several prompts make (vLLM refuses "
                 f"a prompt over --max-model-len {mml:,}): {'they compile' if many else 'it compiles'} in the first "
                 "traffic")
    return note + (f"{'; or' if note.endswith('traffic') else ', or'} serve with --max-num-batched-tokens {cap} "
                   f"(every step inside the graphs: no stall in 10,000 steps, TTFT p50 46 ms and 29 % more throughput "
                   f"at 30 req/s on gpt-oss-20b)" if mxfp4 else "")
