"""Every configuration at once: :func:`sweep` ranks GPU × weight dtype × KV dtype × TP (× PP where no node holds
the model) × prompt length × batch.

Each row is what :func:`planner.plan.plan` would say for that configuration at that batch (the same
formulas, evaluated with numpy over arrays of shape (configurations, batches, prompts); a test pins
the two together), ranked by the all-in cost per million output tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from planner.bands import band, prefill_regime
from planner.batching import MAX_TOKENS, check_workload_tokens, ttft_under_load_costs
from planner.cost import effective_tpot_s, prefill_busy_costs, throughput, token_cost
from planner.dtypes import KV_BYTES, WEIGHT_BITS
from planner.memory import (
    MemoryBudget,
    admission_kv_bytes_per_gpu,
    kv_bytes_per_request,
    kv_bytes_per_token,
    kv_pool_concurrency,
    kv_shard_fraction,
    memory_budget,
    weight_bytes,
)
from planner.phases import decode_step_costs
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.quality import quality_estimate
from planner.ranking import rank
from planner.roofline import HwCoeffs, ModelCosts, hw_coeffs, model_costs
from planner.specs import Deployment, GpuSpec, ModelSpec, Workload, tensor_parallel_candidates
from planner.startup import pipeline_stages, startup_check

__all__ = ["BOUNDS", "DEFAULT_BATCH_SIZES", "MAX_SWEEP_ROWS", "SWEEP_COLUMNS", "sweep"]

#: Most rows one sweep builds (about 300 bytes each): a wider one is refused, naming its dimensions.
MAX_SWEEP_ROWS = 2_000_000

#: Batch sizes :func:`sweep` tries when none are given.
DEFAULT_BATCH_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)

#: Columns of the :func:`sweep` DataFrame, in order.  Units are in the names (s, bytes, usd).
SWEEP_COLUMNS: tuple[str, ...] = (
    "rank",
    "model_id",
    "gpu_id",
    "weight_dtype",
    "kv_cache_dtype",
    "tensor_parallel",
    "pipeline_parallel",
    "num_gpus",
    "prompt_tokens",
    "output_tokens",
    "context_tokens",
    "batch_size",
    "starts",
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
    "ttft_error_band_pct",
    "tpot_error_band_pct",
)


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
    deployment: Deployment


def _stack(objs: Sequence, names: Iterable[str]) -> dict[str, np.ndarray]:
    """Field arrays of shape (n_blocks, 1, 1) so they broadcast against (batch, prompt) axes."""
    return {n: np.array([getattr(o, n) for o in objs], dtype=float)[:, None, None] for n in names}


_MC_BLOCK_FIELDS = ("dense_weight_bytes", "linear_kernel_bytes", "expert_weight_bytes", "kv_bytes_per_ctx_layer",
                    "cudagraph_max_tokens", "quantized_params_per_token", "expert_params", "expert_width",
                    "state_bytes_per_seq", "decode_path_max_tokens")
_HW_BLOCK_FIELDS = (
    "linear_peak_flops_per_s", "attn_peak_flops_per_s", "hbm_bandwidth_bytes_per_s", "matmul_efficiency_max",
    "matmul_half_tokens", "attention_compute_efficiency", "weight_bandwidth_efficiency",
    "kv_bandwidth_efficiency", "step_overhead_s", "per_seq_overhead_s", "per_token_overhead_s",
    "request_overhead_s", "link_bandwidth_bytes_per_s", "allreduce_latency_s", "kv_bandwidth_efficiency_fp8",
    "prefill_layer_overhead_s", "eager_layer_overhead_s", "dequant_s_per_token_param", "moe_weight_bandwidth_efficiency",
    "moe_matmul_efficiency_max", "moe_matmul_half_tokens", "moe_layer_overhead_s", "moe_eager_layer_overhead_s",
    "moe_prefill_layer_overhead_s", "moe_prefill_expert_overhead_s", "shape_extra_s_per_layer", "shape_tokens_lo",
    "shape_tokens_hi",
    "allreduce_custom_max_bytes", "nccl_latency_s", "nccl_bandwidth_bytes_per_s", "moe_touch_fraction",
    "hybrid_step_overhead_s", "moe_seq_layer_overhead_s", "eager_layer_launch_s",
    "moe_eager_layer_launch_s", "piecewise_step_launch_s", "piecewise_layer_launch_s", "prefill_path_layer_launch_s",
    "moe_kernel_efficiency",
    "moe_pad_tokens_per_expert", "moe_inner_overhead_dim",
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
    """Rank every (GPU × weight dtype × KV dtype × TP (× PP) × prompt length × batch) configuration.

    * ``gpus``: GpuSpecs (default: every GPU in the catalog).
    * ``weight_dtypes`` (default: every known), ``kv_dtypes`` (default bf16, fp8).
    * ``tensor_parallels`` (default 1, 2, 4, 8), kept where ≤ ``gpu.max_gpus_per_node`` and dividing
      the attention heads (:func:`planner.specs.tensor_parallel_candidates`).  One replica = TP × PP GPUs
      (``num_gpus``), PP 1 — except, TPs left out, for a GPU and formats no layout of one node starts at the
      longest context: then also the fleet engine's layout across nodes, the first pipeline stage count of
      :func:`planner.startup.pipeline_stages` at the node's TP that starts (:func:`_pipeline_layout`, the rule of
      :func:`planner.fleet_eval.candidate_layouts`).
    * ``contexts``: **prompt** lengths to try (default: ``workload.prompt_tokens``); each row's
      ``context_tokens`` = prompt + ``workload.output_tokens`` (what a request holds at its end).
    * ``batch_sizes``: requests in flight per replica (default :data:`DEFAULT_BATCH_SIZES`).
    * ``profile_for(gpu_id)``: the calibration profile per GPU, e.g.
      ``lambda g: catalog.resolve_profile("auto", g)[0]``; None: the ideal roofline on every GPU.
    * ``deployment_defaults``: other :class:`Deployment` fields (gpu_memory_utilization,
      max_num_batched_tokens, max_num_seqs, block_size_tokens) applied to every row; unset scheduler
      limits are each GPU's vLLM serve defaults (:meth:`Deployment.for_gpu`).

    Each row: ``starts`` (vLLM would start this deployment with max_model_len = prompt + output:
    :func:`planner.startup.startup_check`, the rule every command shares), ``fits`` (the batch fits in the KV
    pool and within max_num_seqs), ``meets_slo`` (starts, fits and TTFT/TPOT meet the workload's targets),
    TTFT at that batch (a new request joining batch − 1 decoding sequences,
    :func:`planner.batching.ttft_under_load_costs`), TPOT at P + N/2, throughput and $/Mtok as
    :func:`planner.plan.plan` computes them.  Rows are in the one ranking order, :func:`planner.ranking.rank`
    (rows meeting every target first — ``workload.concurrency``, when set, is the users no replica can
    exceed — then by the all-in cost per million output tokens: all GPU time, prefill included, over the
    generated tokens); ``rank`` numbers them from 1.  Evaluation is vectorised with numpy per
    tensor-parallel group.  Each repeated value (a GPU, dtype, TP, context or batch given twice) counts once.
    """
    from planner.io import catalog

    check_workload_tokens(workload)
    # each value once, in the order given (a repeated --weight-dtype is one dtype, not a duplicate row set)
    gpu_list = list({g.id: g for g in gpus}.values()) if gpus is not None else list(catalog.gpus().values())
    wds = list(dict.fromkeys(weight_dtypes)) if weight_dtypes is not None else list(WEIGHT_BITS)
    kvs = list(dict.fromkeys(kv_dtypes)) if kv_dtypes is not None else ["bf16", "fp8"]
    tensor_parallels = list(dict.fromkeys(tensor_parallels)) if tensor_parallels is not None else None
    for d in wds:
        if d not in WEIGHT_BITS:
            raise ValueError(f"weight_dtype: unknown dtype '{d}'; known: {', '.join(WEIGHT_BITS)}")
    for d in kvs:
        if d not in KV_BYTES:
            raise ValueError(f"kv_cache_dtype: unknown dtype '{d}'; known: {', '.join(KV_BYTES)}")
    prompts = np.array(list(dict.fromkeys(contexts)) if contexts is not None else [workload.prompt_tokens], dtype=float)
    batches = np.array(list(dict.fromkeys(batch_sizes)) if batch_sizes is not None else DEFAULT_BATCH_SIZES,
                       dtype=float)
    for name, arr in (("contexts", prompts), ("batch_sizes", batches)):
        if (arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < 1) or np.any(arr != np.round(arr))
                or np.any(arr > MAX_TOKENS)):
            raise ValueError(f"{name}: need whole numbers ≥ 1, got {arr.tolist()!r}")
    defaults = dict(deployment_defaults or {})
    n_out = float(workload.output_tokens)

    frames = []
    n_rows = sum(len(tensor_parallel_candidates(model, g, tensor_parallels)) for g in gpu_list) * len(wds) * len(kvs)
    if n_rows * prompts.size * batches.size > MAX_SWEEP_ROWS:
        raise ValueError(f"sweep: {n_rows:,} configurations × {prompts.size} prompt lengths × {batches.size} batch "
                         f"sizes = {n_rows * prompts.size * batches.size:,} rows, more than {MAX_SWEEP_ROWS:,}; "
                         f"narrow the GPUs, dtypes, TP sizes, contexts or batches")
    wb_cache = {d: weight_bytes(model, d).total_bytes for d in wds}
    kvtok_cache = {d: kv_bytes_per_token(model, d) for d in kvs}
    prof_cache = {g.id: profile_for(g.id) if profile_for else IDEAL_PROFILE for g in gpu_list}
    hw_cache = {(g.id, wd): hw_coeffs(g, wd, prof_cache[g.id], model) for g in gpu_list for wd in wds}
    ctx_tokens = prompts + n_out
    layouts: dict[tuple[int, int], list[tuple[GpuSpec, str, str]]] = {}  # (TP, PP) -> its GPUs and formats
    for g in gpu_list:
        tps_g = tensor_parallel_candidates(model, g, tensor_parallels)
        for wd in wds:
            for kv in kvs:
                for tp in tps_g:
                    layouts.setdefault((tp, 1), []).append((g, wd, kv))
                if tensor_parallels is None and (across := _pipeline_layout(
                        model, g, wd, kv, tps_g, prof_cache[g.id], defaults, int(ctx_tokens.max()))):
                    layouts.setdefault(across, []).append((g, wd, kv))
    # fixed categories so the per-group frames concatenate as categoricals
    cats = {
        "gpu_id": sorted({g.id for g in gpu_list}),
        "weight_dtype": wds,
        "kv_cache_dtype": kvs,
        "price_source": sorted({g.price_source.url for g in gpu_list}),
        "price_date": sorted({g.price_source.date for g in gpu_list}),
        "calibration_mode": ["ideal", "calibrated", "transferred"],
    }
    for tp, pp in sorted(layouts):
        blocks: list[_Block] = []
        mc_cache: dict[tuple[str, str], ModelCosts] = {}
        for g, wd, kv in layouts[tp, pp]:
            prof = prof_cache[g.id]
            dep = Deployment.for_gpu(g, num_gpus=tp * pp, tensor_parallel=tp, pipeline_parallel=pp, weight_dtype=wd,
                                     kv_cache_dtype=kv, **defaults)
            key = (wd, kv, dep.max_num_batched_tokens, dep.max_num_seqs)
            if key not in mc_cache:
                mc_cache[key] = model_costs(model, dep)
            budget = memory_budget(model, g, dep, prof, model_weight_bytes=wb_cache[wd],
                                   model_kv_bytes_per_token=kvtok_cache[kv])
            blocks.append(_Block(g, wd, kv, prof, mc_cache[key], hw_cache[g.id, wd], budget,
                                 dep.max_num_batched_tokens, dep.max_num_seqs, dep))
        for knots in dict.fromkeys(b.hw.linear_knots for b in blocks):  # a law's knots are not stacked: one group each
            frames.append(_sweep_group(model, workload, [b for b in blocks if b.hw.linear_knots == knots], prompts,
                                       batches, ctx_tokens, tp, pp, dep, cats))
    if not frames:
        return pd.DataFrame(columns=list(SWEEP_COLUMNS))
    return rank(pd.concat(frames, ignore_index=True), users=workload.concurrency)


def _pipeline_layout(model: ModelSpec, g: GpuSpec, wd: str, kv: str, tps: Sequence[int], prof: CalibrationProfile,
                     defaults: dict, context_tokens: int) -> tuple[int, int] | None:
    """``(TP, PP)`` across nodes for GPU ``g`` in these formats when no TP of ``tps`` (one node's) starts at PP 1
    at ``context_tokens``: the first of :func:`~planner.startup.pipeline_stages` at the
    largest TP that starts, as :func:`planner.fleet_eval.candidate_layouts` tries them; None when a single-node
    layout starts, or none across nodes does."""

    def starts(tp: int, pp: int) -> bool:
        dep = Deployment.for_gpu(g, num_gpus=tp * pp, tensor_parallel=tp, pipeline_parallel=pp, weight_dtype=wd,
                                 kv_cache_dtype=kv, **defaults)
        return startup_check(model, g, dep, context_tokens, prof).ok

    if not tps or any(starts(tp, 1) for tp in tps):
        return None
    tp = max(tps)
    return next(((tp, pp) for pp in pipeline_stages(model.num_layers) if starts(tp, pp)), None)


def _kv_per_request_bytes(model: ModelSpec, kv_dtype: str, context_tokens: np.ndarray, block: int) -> np.ndarray:
    """Vectorised :func:`planner.memory.kv_bytes_per_request` total over an array of contexts."""
    return np.array([kv_bytes_per_request(model, kv_dtype, int(c), block).total_bytes for c in context_tokens])


#: Values of the bound columns (categorical).
BOUNDS: tuple[str, ...] = ("compute", "memory", "communication", "overhead")


def _band_pct(model, blocks: list[_Block], prompts: np.ndarray, kind: str) -> np.ndarray:
    """Error band (±%, NaN where there is no measured basis) per (block, 1, prompt): planner.bands."""
    out = np.full((len(blocks), 1, prompts.size), np.nan)
    for i, b in enumerate(blocks):
        for j, p in enumerate(prompts):
            pct = band(b.profile, model, b.deployment, prefill_regime(p) if kind == "prefill" else "decode").pct
            out[i, 0, j] = np.nan if pct is None else pct
    return out


def _sweep_group(model, workload, blocks: list[_Block], prompts, batches, ctx_tokens, tp, pp, dep,
                 cats: dict[str, list[str]]) -> pd.DataFrame:
    """Evaluate one TP × PP group: arrays of shape (blocks, batches, prompts)."""
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
    shard = kv_shard_fraction(model, tp, pp)
    per_req = np.stack([kv_req_cache[b.kv_cache_dtype] for b in blocks])[:, None, :] * shard
    ask = np.array([[admission_kv_bytes_per_gpu(model, b.deployment, int(c)) for c in ctx_tokens] for b in blocks]
                   )[:, None, :] if model.num_sliding_layers else None  # a sliding-window model's admission ask
    conc = kv_pool_concurrency(pool, per_req, fits_mem, ask)
    fits = (B <= conc) & (B <= mns)
    # the one start-up rule, per configuration and prompt length (max_model_len = prompt + output)
    starts = np.array([[startup_check(model, b.gpu, b.deployment, int(c), b.profile).ok for c in ctx_tokens]
                       for b in blocks])[:, None, :]

    # latency
    ttft = ttft_under_load_costs(mc, hw, P, B, P + n_out / 2.0, m_tok)
    tpot = decode_step_costs(mc, hw, B, P + n_out / 2.0)
    busy = prefill_busy_costs(mc, hw, P, B, m_tok)
    shape = (n_blk, n_b, n_p)
    ttft_s = np.broadcast_to(ttft.time_s, shape)
    step_s = np.broadcast_to(tpot.time_s, shape)
    tpot_s = np.broadcast_to(effective_tpot_s(tpot.time_s, B, busy, n_out), shape)
    thr = throughput(B, step_s, np.broadcast_to(busy, shape), P, n_out, tp * pp)
    price = np.array([b.gpu.price_usd_per_hour for b in blocks])[:, None, None]
    cost = token_cost(thr, price)
    meets = fits & starts
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
        "pipeline_parallel": np.full(n_blk * n_b * n_p, pp),
        "num_gpus": np.full(n_blk * n_b * n_p, tp * pp),
        "prompt_tokens": full(P).astype(np.int64),
        "output_tokens": np.full(n_blk * n_b * n_p, int(n_out)),
        "context_tokens": full(P + n_out).astype(np.int64),
        "batch_size": full(B).astype(np.int64),
        "starts": full(starts),
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
        "ttft_error_band_pct": full(_band_pct(model, blocks, prompts, "prefill")),
        "tpot_error_band_pct": full(_band_pct(model, blocks, prompts, "decode")),
    }
    return pd.DataFrame(cols)
