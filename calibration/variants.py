"""Probe-only variants of catalog models (issue #21): the same model with fewer layers or fewer experts, run with
dummy weights, so that one family's probes can tell a per-step cost from a per-layer one and a per-layer cost from a
per-expert one (on one model these move together).  They are never planned: only the calibration code resolves them.

    probe_model("gpt-oss-120b-l18")   # gpt-oss-120b with 18 of its 36 layers (9 sliding, 9 full)
    probe_model("llama-3.1-70b-i7168")  # Llama-3.1-70B's 80 layers, a quarter of its FFN width
"""

from __future__ import annotations

from planner.io import catalog
from planner.specs import ModelSpec, count_params

#: variant id -> (catalog model, fields replaced; a dict value replaces fields of that nested object)
VARIANTS: dict[str, tuple[str, dict]] = {
    "gpt-oss-120b-l18": ("gpt-oss-120b", {"num_layers": 18, "num_sliding_layers": 9}),
    "gpt-oss-120b-e32": ("gpt-oss-120b", {"moe": {"num_experts": 32}}),
    # Llama-3.1-70B's 80 layers with a quarter of its FFN width (28,672 -> 7,168): 28 B parameters, one H200, the
    # CPU launches of the real model's layers (the piecewise prompt steps' launch at 80 layers, 2026-12-03)
    "llama-3.1-70b-i7168": ("llama-3.1-70b", {"intermediate_size": 7168}),
    # Qwen3-235B-A22B's layer (4,096 wide, 64/4 heads, 128 experts of 1,536, top-8) 16 times: 41 B parameters, one
    # H200; a fused-MoE model no profile term was fitted on, served under chat load (2026-12-03)
    "qwen3-235b-a22b-l16": ("qwen3-235b-a22b", {"num_layers": 16}),
    # the dense and the fused-MoE fit models with other layer counts (2026-12-03): a decode step's cost per step and
    # its cost per layer, which one model's probes cannot tell apart
    "mistral-7b-v0.3-l16": ("mistral-7b-v0.3", {"num_layers": 16}),
    "mistral-7b-v0.3-l64": ("mistral-7b-v0.3", {"num_layers": 64}),
    "qwen3-30b-a3b-l24": ("qwen3-30b-a3b", {"num_layers": 24}),
    # ... and with 12 (2026-12-04): whether an eager prompt step's CPU cost grows with the MoE layers (eager_trace.py)
    "qwen3-30b-a3b-l12": ("qwen3-30b-a3b", {"num_layers": 12}),
    # ... and another dense model's, held out of that fit (2026-12-04)
    "llama-3.1-8b-l16": ("llama-3.1-8b", {"num_layers": 16}),
    "llama-3.1-8b-l64": ("llama-3.1-8b", {"num_layers": 64}),
}


def probe_model(model_id: str) -> ModelSpec:
    """The catalog model ``model_id``, or the probe variant of that id (:data:`VARIANTS`)."""
    if model_id not in VARIANTS:
        return catalog.model(model_id)
    name, update = VARIANTS[model_id]
    base = catalog.model(name)
    changed = base.model_copy(update={k: getattr(base, k).model_copy(update=v) if isinstance(v, dict) else v
                                      for k, v in update.items()})
    # its published parameter counts are the base model's: its own, counted from its fields (the catalog checks them)
    counted = count_params(changed)
    return ModelSpec.model_validate(dict(changed.model_dump(), id=model_id, published_total_params=counted.total,
                                         published_active_params=counted.active))
