"""The serving engine's knobs (:class:`EngineConfig`, vLLM names), speculative decoding
(:class:`SpecDecode`, :data:`SPEC_PRESETS`) and :func:`engine_setup` (step costs + config of one replica)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.memory import (
    hybrid_block_tokens,
    memory_budget,
    state_blocks_per_request,
    window_admission_blocks,
    window_blocks_per_request,
)
from planner.serving.step_cost import StepCost
from planner.profile import CalibrationProfile, IDEAL_PROFILE
from planner.specs import Deployment, GpuSpec, ModelSpec

# ------------------------------------------------------------------------------ speculative decoding


def spec_expected_tokens(k: int, acceptance_rate: float) -> float:
    """Expected tokens one verify step yields per sequence with ``k`` draft tokens, each accepted
    independently with probability α: 1 + α + … + α^k = (1 − α^(k+1)) / (1 − α)
    (Leviathan et al. 2023, arXiv 2211.17192, eq. 1).  k = 4, α = 0.8: (1 − 0.8⁵)/0.2 = 3.3616."""
    if k < 0:
        raise ValueError(f"spec_k: must be >= 0, got {k}")
    if not (0.0 <= acceptance_rate <= 1.0):
        raise ValueError(f"spec_acceptance: must be in [0, 1], got {acceptance_rate}")
    a = float(acceptance_rate)
    if a >= 1.0:
        return float(k + 1)
    return (1.0 - a ** (k + 1)) / (1.0 - a)


def spec_speedup(k: int, acceptance_rate: float, draft_cost_ratio: float, verify_cost_ratio: float = 1.0) -> float:
    """Decode speed-up of speculative decoding over plain decoding (Leviathan et al. Theorem 3.8):
    expected tokens per step ÷ (c·k + v), where c = one draft step ÷ one target decode step and
    v = one verify step (k + 1 tokens per sequence) ÷ one target decode step (≈ 1 while decoding is
    memory-bound, larger at big batches).  k = 4, α = 0.8, c = 0.05, v = 1: 3.3616 / 1.2 = 2.80."""
    return spec_expected_tokens(k, acceptance_rate) / (draft_cost_ratio * k + verify_cost_ratio)


@dataclass(frozen=True)
class SpecDecode:
    """Speculative decoding as a knob on decode (chain drafts; tree verification not modelled)."""

    num_speculative_tokens: int  # k: draft tokens verified per step
    acceptance_rate: float  # α: probability each draft token is accepted (given the previous ones were)
    draft_cost_ratio: float = 0.0  # c: one draft-model step ÷ one target decode step at the same batch
    name: str = ""
    source: str = ""

    def __post_init__(self):
        spec_expected_tokens(self.num_speculative_tokens, self.acceptance_rate)  # validates k, α
        if not (math.isfinite(self.draft_cost_ratio) and 0 <= self.draft_cost_ratio <= 10):
            raise ValueError(f"spec_draft_cost: must be between 0 and 10 (one draft step ÷ one target step), "
                             f"got {self.draft_cost_ratio}")
        if self.num_speculative_tokens > 15:
            raise ValueError(f"spec_k: at most 15 draft tokens are modelled, got {self.num_speculative_tokens}")

    @property
    def expected_tokens_per_step(self) -> float:
        return spec_expected_tokens(self.num_speculative_tokens, self.acceptance_rate)


#: Presets with the acceptance rates their papers report (α per token; the ranges are in ``source``).
SPEC_PRESETS: dict[str, SpecDecode] = {
    "draft-model": SpecDecode(
        4, 0.7, 0.1, "small draft model",
        "Leviathan et al. 2023 (arXiv 2211.17192) Table 2: T5-small drafting for T5-XXL, alpha 0.62-0.75 "
        "(T5-large 0.71-0.82). c = 0.1 is our assumption for a ~100M-1B draft on a GPU, where a small "
        "model's step is launch-bound and costs far more than its parameter ratio",
    ),
    "eagle": SpecDecode(
        5, 0.8, 0.05, "EAGLE",
        "Li et al. 2024 (arXiv 2401.15077): draft head predicts features with ~0.8 top-1 accuracy vs ~0.6 "
        "for Medusa (their Fig. 3 comparison); average acceptance length 3.5-4 tokens on MT-bench with a "
        "tree. c = 0.05: one decoder layer + LM head (0.24B params for a 7B target, ~3.6%)",
    ),
    "medusa": SpecDecode(
        4, 0.6, 0.02, "Medusa",
        "Cai et al. 2024 (arXiv 2401.10774): 2.2x (Medusa-1) to 2.3-3.6x (Medusa-2) speed-up; head-1 "
        "top-1 accuracy ~0.6 (EAGLE paper's measurement). c = 0.02 per draft token: all heads run once "
        "per step, each a small block + LM head",
    ),
}


# --------------------------------------------------------------------------------- engine config


@dataclass(frozen=True)
class EngineConfig:
    """The serving engine's knobs (vLLM names)."""

    # the KV pool: its blocks (vLLM's num_gpu_blocks, each a page of every layer of one KV group) × block_size
    kv_capacity_tokens: int
    max_num_seqs: int = Deployment.default("max_num_seqs")
    max_num_batched_tokens: int = Deployment.default("max_num_batched_tokens")
    block_size: int = Deployment.default("block_size_tokens")
    enable_prefix_caching: bool = True
    spec: SpecDecode | None = None
    # vLLM 0.26 schedules step N+1 when step N's launch call returns (a CUDA-graph step's start, an eager step's
    # start + its CPU call), while the GPU still runs step N, and sends step N's tokens when step N+1's call returns:
    # a request that arrives after that joins the step after the one already scheduled (Engine.send_outputs)
    async_scheduling: bool = True
    # the OpenAI HTTP server's own time per request (tokenise, HTTP, first-token streaming) on top of the
    # engine's; 0 for an in-process engine (vLLM's AsyncLLM or LLM)
    frontend_overhead_s: float = 0.0
    # ... and its time per prompt token (tokenising the text prompt) before the engine sees the request; 0 in-process
    frontend_token_overhead_s: float = 0.0
    # ... and its output handling: a first or last token reaches its client this much later per request running (the
    # server streams every running request's token of each step); 0 in-process
    stream_output_overhead_s: float = 0.0
    # the engine as vllm serve started it: its Triton MoE has compiled no step size above the CUDA graphs but the
    # start-up run's, so a step with a new compile key stalls (StepCost.shape_compile_s, planner.compile_keys) —
    # what a replayed recorded run saw; False (plans): an engine past them
    cold_step_shapes: bool = False
    # ... and the compile keys it had compiled before this run besides (an earlier warm-up of step sizes)
    compiled_step_keys: frozenset = frozenset()
    # blocks of the pool one running request's recurrent state holds besides its tokens' (a model's linear-attention
    # / Mamba layers: planner.memory.state_blocks_per_request); 0 for attention-only models
    state_blocks: int = 0
    # sliding-window KV groups, and the blocks each holds for one request at most (its last window): a running request
    # holds window_groups × min(its blocks at its last token, window_blocks) besides its tokens' blocks
    # (planner.memory.window_blocks_per_request); 0 without sliding layers
    window_groups: int = 0
    window_blocks: int = 0
    # ... and the blocks of each sliding group its admission asks free at most (planner.memory.window_admission_blocks)
    window_admission_blocks: int = 0
    # vLLM's Mamba 'align' cache mode (prefix caching on a Gated DeltaNet hybrid): a prompt's chunks end on block
    # boundaries up to its last one, where its state is cached (Scheduler.aligned_chunk)
    state_aligned_chunks: bool = False

    def __post_init__(self):
        for name in ("kv_capacity_tokens", "max_num_seqs", "max_num_batched_tokens", "block_size"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name}: must be an integer >= 1, got {v!r}")
        for name, top in (("frontend_overhead_s", 60), ("stream_output_overhead_s", 60),
                          ("frontend_token_overhead_s", 1e-3)):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 <= v < top):
                raise ValueError(f"{name}: must be a number of seconds in [0, {top:g}), got {v!r}")
        if self.state_aligned_chunks not in (True, False):
            raise ValueError(f"state_aligned_chunks: must be true or false, got {self.state_aligned_chunks!r}")
        for name in ("state_blocks", "window_groups", "window_blocks", "window_admission_blocks"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"{name}: must be an integer >= 0, got {v!r}")
        if self.kv_capacity_tokens < self.block_size:
            raise ValueError(f"kv_capacity_tokens: {self.kv_capacity_tokens} holds no {self.block_size}-token block "
                             "(the model does not fit)")

    @property
    def num_blocks(self) -> int:
        return int(self.kv_capacity_tokens // self.block_size)

    @property
    def pool_tokens(self) -> int:
        """The pool as the memory model states it (:attr:`planner.memory.MemoryBudget.kv_capacity_tokens`: tokens
        if every attention layer held every token), from its blocks."""
        return self.num_blocks * self.block_size // (1 + self.window_groups)


def prefix_caching_for(model: ModelSpec, asked: bool | None = None) -> bool:
    """Automatic prefix caching as asked, or (``asked`` None) vLLM 0.26 serve's default for ``model``: on, except for a
    model with recurrent-state (Mamba / linear-attention) layers, where vLLM keeps it opt-in ("Hybrid models support
    prefix caching but keep it opt-in for now", EngineArgs; its Mamba cache then runs in an experimental 'all' or
    'align' mode).  Every surface resolves the setting here."""
    return not model.num_linear_layers if asked is None else bool(asked)


def engine_setup(model: ModelSpec, gpu: GpuSpec, deployment: Deployment, profile: CalibrationProfile = IDEAL_PROFILE,
                 *, enable_prefix_caching: bool | None = None, spec: SpecDecode | None = None,
                 kv_capacity_tokens: int | None = None, http_frontend: bool = True) -> tuple[StepCost, EngineConfig]:
    """Step costs and engine config of one replica; the KV pool from
    :func:`planner.memory.memory_budget` unless ``kv_capacity_tokens`` is given (the memory model's measure: tokens
    if every attention layer held every token; a sliding-window model's pool has 1 + its sliding groups blocks per
    block of those tokens).  ``http_frontend``: users
    reach the engine through vLLM's OpenAI server (the profile's measured HTTP overhead per request).
    ``enable_prefix_caching`` None: vLLM's default for the model (:func:`prefix_caching_for`)."""
    if kv_capacity_tokens is None:
        mb = memory_budget(model, gpu, deployment, profile)
        if not mb.fits:
            raise ValueError(f"gpu: {model.id} on {gpu.id}: {mb.explain()}")
        kv_capacity_tokens = mb.kv_capacity_tokens
    caching = prefix_caching_for(model, enable_prefix_caching)
    terms = pool_terms(model, deployment, caching)
    cfg = EngineConfig(pool_blocks(kv_capacity_tokens, terms) * terms["block_size"], deployment.max_num_seqs,
                       deployment.max_num_batched_tokens, enable_prefix_caching=caching, spec=spec,
                       **http_terms(profile, http_frontend), **terms)
    return StepCost.from_specs(model, gpu, deployment, profile), cfg


def pool_terms(model: ModelSpec, deployment: Deployment, prefix_caching: bool = False) -> dict[str, int | bool]:
    """The EngineConfig fields of the block pool vLLM lays out for ``model``: its attention block
    (:func:`planner.memory.hybrid_block_tokens`: the configured one, raised for a recurrent-state hybrid, to a multiple
    of its Mamba-2 chunk with ``prefix_caching``) and the blocks a running request's state holds
    (:func:`planner.memory.state_blocks_per_request`, 0 without one), its sliding groups and the blocks each holds
    (:func:`planner.memory.window_blocks_per_request`) and ask free at admission
    (:func:`planner.memory.window_admission_blocks`), and whether its prompts' chunks end on block boundaries (vLLM's
    Mamba 'align' mode: ``prefix_caching`` on a hybrid without Mamba-2 layers, i.e. Gated DeltaNet)."""
    window_groups, window_blocks = window_blocks_per_request(model, deployment)
    admission = window_admission_blocks(model, deployment)
    state = bool(model.num_linear_layers and model.linear_state_bytes_per_layer)
    return {"block_size": hybrid_block_tokens(model, deployment.kv_cache_dtype, deployment.block_size_tokens,
                                              prefix_caching),
            "state_blocks": state_blocks_per_request(model, deployment, prefix_caching), "window_groups": window_groups,
            "window_blocks": window_blocks, "window_admission_blocks": admission,
            "state_aligned_chunks": state and prefix_caching and not model.mamba_chunk_tokens}


def pool_blocks(kv_capacity_tokens: int, terms: dict) -> int:
    """vLLM's blocks (a page of every layer of one KV group) in a pool of ``kv_capacity_tokens`` as the memory model
    counts them (every attention layer holding every token), for the pool :func:`pool_terms` lays out: a sliding-window
    model has 1 + its sliding groups blocks per block of those tokens (Gemma-3-27B: 7)."""
    return int(kv_capacity_tokens) // terms["block_size"] * (1 + terms["window_groups"])


def http_terms(profile: CalibrationProfile, http_frontend: bool = True) -> dict[str, float]:
    """The EngineConfig fields of vLLM's OpenAI server from ``profile`` (its per-request and per-prompt-token time
    before the engine, its output streaming per running request); all 0 for an in-process engine."""
    return {"frontend_overhead_s": profile.http_frontend_overhead_s if http_frontend else 0.0,
            "frontend_token_overhead_s": profile.http_frontend_token_s if http_frontend else 0.0,
            "stream_output_overhead_s": profile.stream_output_overhead_s if http_frontend else 0.0}
