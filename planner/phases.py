"""A phase's latency from roofline steps: prefill (TTFT) and one decode step (TPOT).

A phase is a number of engine steps (:func:`planner.roofline.step_time`); its :class:`PhaseTime` keeps
the parts summed over the steps and names the bound.  Every function works elementwise on numpy arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.attention_sums import attended_decode, attended_prefill
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.roofline import STEP_PARTS, HwCoeffs, ModelCosts, StepTime, hw_coeffs, model_costs, step_time
from planner.specs import Deployment, GpuSpec, ModelSpec


@dataclass(frozen=True)
class PhaseTime:
    """A phase's latency, its parts summed over its steps, and its bound."""

    phase: str
    time_s: object
    num_steps: object
    compute_s: object
    memory_s: object
    comm_s: object
    overhead_s: object
    flops: object
    bytes: object
    bound: object
    mode: str

    @property
    def arithmetic_intensity(self):
        return np.asarray(self.flops) / np.maximum(np.asarray(self.bytes), 1.0)

    @property
    def achieved_flops_per_s(self):
        return np.asarray(self.flops) / np.maximum(np.asarray(self.time_s), 1e-30)


def phase_time(phase: str, st: StepTime, n_steps, extra_s=0.0) -> PhaseTime:
    """A phase of ``n_steps`` steps like ``st`` plus ``extra_s`` once (e.g. the request overhead)."""
    total = np.asarray(st.total_s) + extra_s
    return PhaseTime(phase, as_scalar(total), as_scalar(n_steps), as_scalar(st.compute_s), as_scalar(st.memory_s),
                     as_scalar(st.comm_s), as_scalar(np.asarray(st.overhead_s) + extra_s), as_scalar(st.flops),
                     as_scalar(st.bytes), st.bound, st.mode)


def as_scalar(x):
    """A 0-d array as a Python number; anything else as an array."""
    a = np.asarray(x)
    return a.item() if a.ndim == 0 else a


def sum_steps(a: StepTime, na, b: StepTime, nb) -> StepTime:
    """na steps like ``a`` plus nb steps like ``b`` (every part, by name)."""
    return StepTime(mode=a.mode, **{name: np.asarray(getattr(a, name)) * na + np.asarray(getattr(b, name)) * nb
                                    for name in STEP_PARTS})


def prefill_time_costs(mc: ModelCosts, hw: HwCoeffs, prompt_tokens, batch_size=1,
                       max_num_batched_tokens=Deployment.default("max_num_batched_tokens")) -> PhaseTime:
    """Prefill of ``batch_size`` prompts of ``prompt_tokens`` submitted together to an idle engine:
    the B·P tokens are packed into steps of ``max_num_batched_tokens`` (chunked prefill).  Attention
    work is spread over the steps in proportion to their tokens."""
    p = np.asarray(prompt_tokens, dtype=float)
    b = np.asarray(batch_size, dtype=float)
    m = float(max_num_batched_tokens)
    total = p * b
    full_steps = np.floor(total / m)
    rem = total - full_steps * m
    att_total = b * attended_prefill(mc, 0.0, p)
    # KV re-read by later chunks of a chunked prompt: chunk i reads i·m prior tokens
    chunks_per_prompt = np.ceil(p / m)
    reread = b * mc.full_layers * m * chunks_per_prompt * (chunks_per_prompt - 1) / 2.0
    share_full = np.where(total > 0, m / np.maximum(total, 1.0), 0.0)
    share_rem = np.where(total > 0, rem / np.maximum(total, 1.0), 0.0)
    seqs_per_full = np.minimum(b, np.maximum(1.0, b * share_full))
    st_full = step_time(mc, hw, prefill_tokens=np.where(full_steps > 0, m, 0.0),
                        prefill_attended=att_total * share_full, prefill_kv_read_tokens=reread * share_full,
                        sampled_seqs=np.where(full_steps > 0, seqs_per_full, 0.0))
    st_rem = step_time(mc, hw, prefill_tokens=rem, prefill_attended=att_total * share_rem,
                       prefill_kv_read_tokens=reread * share_rem,
                       sampled_seqs=np.where(rem > 0, np.maximum(1.0, b * share_rem), 0.0))
    st = sum_steps(st_full, full_steps, st_rem, 1.0)
    n_steps = full_steps + (rem > 0)
    return phase_time("prefill", st, n_steps, extra_s=hw.request_overhead_s)


def decode_step_costs(mc: ModelCosts, hw: HwCoeffs, batch_size, context_tokens) -> PhaseTime:
    """One decode step of ``batch_size`` sequences each holding ``context_tokens`` (TPOT)."""
    b = np.asarray(batch_size, dtype=float)
    st = step_time(mc, hw, decode_seqs=b, decode_attended=b * attended_decode(mc, context_tokens))
    return phase_time("decode", st, 1.0)


def mixed_step_time(mc: ModelCosts, hw: HwCoeffs, batch_size, context_tokens, chunk_tokens) -> StepTime:
    """One continuous-batching step: ``batch_size`` sequences decode at ``context_tokens`` while a new prompt's
    ``chunk_tokens`` are prefilled from position 0 (its first chunk); the new prompt is sampled too."""
    b = np.asarray(batch_size, dtype=float)
    c = np.asarray(chunk_tokens, dtype=float)
    return step_time(mc, hw, prefill_tokens=c, prefill_attended=attended_prefill(mc, 0.0, c), decode_seqs=b,
                     decode_attended=b * attended_decode(mc, context_tokens), sampled_seqs=b + 1.0)


# -------------------------------------------------------------------------------- convenience API


def prefill_time(model: ModelSpec, gpu: GpuSpec, deployment: Deployment, prompt_tokens, batch_size=1,
                 profile: CalibrationProfile = IDEAL_PROFILE) -> PhaseTime:
    """TTFT of ``batch_size`` requests of ``prompt_tokens`` arriving together at an idle engine."""
    _check_tokens("prompt_tokens", prompt_tokens)
    return prefill_time_costs(model_costs(model, deployment), hw_coeffs(gpu, deployment.weight_dtype, profile, model),
                              prompt_tokens, batch_size, deployment.max_num_batched_tokens)


def decode_step_time(model: ModelSpec, gpu: GpuSpec, deployment: Deployment, batch_size, context_tokens,
                     profile: CalibrationProfile = IDEAL_PROFILE) -> PhaseTime:
    """TPOT: one decode step of ``batch_size`` sequences at ``context_tokens`` each."""
    _check_tokens("batch_size", batch_size)
    _check_tokens("context_tokens", context_tokens)
    return decode_step_costs(model_costs(model, deployment), hw_coeffs(gpu, deployment.weight_dtype, profile, model),
                             batch_size, context_tokens)


def _check_tokens(name: str, value) -> None:
    a = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")


def routing_note(model: ModelSpec, gpu: GpuSpec, deployment: Deployment, profile: CalibrationProfile, batch_size: int,
                 context_tokens: float, planned_s: float) -> str | None:
    """For a MoE model whose kernel family's expert touch share (fitted on dummy-weight probes) is below 1: what one
    decode step of the plan's batch (``planned_s`` with ``profile``) would take if the routing spread as uniform
    routing does, as trained routers do (README, 'MoE routing is the probes' own'; :mod:`calibration.dummy_routing`).
    None where it does not apply."""
    from planner.kernel_families import moe_coeffs, moe_variant

    moe = moe_coeffs(model, deployment.weight_dtype, profile, gpu.id) if model.moe is not None else None
    if moe is None or moe.expert_touch_fraction >= 1.0 or batch_size < 2:
        return None
    variant = moe_variant(model, deployment.weight_dtype)
    spread = moe.model_copy(update={"expert_touch_fraction": 1.0})
    uniform = profile.model_copy(update={"moe_variants": {**profile.moe_variants, variant: spread}} if variant
                                 else {"moe": spread})
    wide = float(decode_step_time(model, gpu, deployment, batch_size, context_tokens, uniform).time_s)
    return (f"MoE routing: the decode steps are priced with the routing the calibration's dummy-weight engines showed "
            f"({moe.expert_touch_fraction:.2f} of uniform routing's spread over the experts); with trained weights "
            f"routing spreads wider, and a decode step of {batch_size:,} sequences would take up to "
            f"{1e3 * wide:.1f} ms (here {1e3 * planned_s:.1f} ms) if it reached as many experts as uniform routing "
            f"does")


def graph_note(model: ModelSpec, gpu: GpuSpec, deployment: Deployment, profile: CalibrationProfile, batch_size: int,
               context_tokens: float, prompt_tokens: int) -> str | None:
    """Where a step carrying one of the plan's prompts beside its decodes is larger than vLLM's largest CUDA graph
    (:func:`~planner.kernel_families.cudagraph_max_tokens`) and the CPU's kernel-by-kernel launch makes it slower
    than the same step as piecewise graphs: both step times, and the flag that captures graphs up to the token
    budget.  None where it does not apply (no such step, or the graphs gain less than 10 %)."""
    from planner.compile_keys import extra_graphs
    from planner.kernel_families import cudagraph_max_tokens, uses_v1_runner
    from planner.roofline import hw_coeffs, model_costs
    from planner.units import fmt_gib

    cap, top = cudagraph_max_tokens(deployment, model), deployment.max_num_batched_tokens
    b, chunk = max(int(batch_size), 1), min(int(prompt_tokens), top)
    if top <= cap or b + chunk <= cap:
        return None
    hw = hw_coeffs(gpu, deployment.weight_dtype, profile, model)
    eager = mixed_step_time(model_costs(model, deployment), hw, b, context_tokens, chunk)
    graphs = mixed_step_time(model_costs(model, deployment.replace(max_cudagraph_capture_tokens=top)), hw, b,
                             context_tokens, chunk)
    slow, fast = float(eager.total_s), float(graphs.total_s)
    if slow < 1.1 * fast:
        return None
    more = extra_graphs(deployment.replace(max_cudagraph_capture_tokens=top), model)
    pool = " from the KV pool" if uses_v1_runner(model) else ""
    cost = (f"; its {more} graphs more take about {fmt_gib(more * profile.v1_cudagraph_bytes_per_graph)} of memory"
            f"{pool} and {more * profile.cudagraph_capture_s_per_graph:.0f} s more start-up"
            if profile.v1_cudagraph_bytes_per_graph else "")
    return (f"CUDA graphs: a step with one {chunk:,}-token prompt beside {b:,} decodes is above vLLM's largest graph "
            f"({cap:,} tokens) and takes {1e3 * slow:.1f} ms, {1e3 * float(eager.launch_s):.1f} ms of it the CPU "
            f"launching its kernels one by one; with --max-cudagraph-capture-size {top} (vLLM captures every step "
            f"size up to it at start, and compiles every MoE kernel key then) it would run as piecewise graphs in "
            f"{1e3 * fast:.1f} ms: TTFT and, with prompts arriving, TPOT improve (planner simulate "
            f"--max-cudagraph-capture-size {top} shows the served effect; measured on an H100, Moonlight-16B-A3B chat "
            f"at 30 req/s TPOT p50 70.5 -> 10.1 ms, Qwen3-30B-A3B at 8 req/s 36.5 -> 23.4 ms; on an H200, "
            f"DeepSeek-V2-Lite at 20 req/s TPOT p50 22.8 -> 5.6 ms, TTFT p50 225 -> 46 ms){cost}")
