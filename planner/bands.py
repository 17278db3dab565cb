"""The expected error of a prediction ("±x %"), from how its kernel families did on measurements.

A prediction belongs to families by what it runs (:func:`families`): its kernel family (:func:`kernel_family`: the
MoE variant, ``moe``, ``moe-mxfp4``, ``moe-mla`` or ``moe-fp8``, or ``hybrid-swa`` for a sliding-window hybrid dense
model), its weight format (fp8, int4, ... ; dense 16-bit otherwise) where that family does not already run it,
``kv-fp8`` for an fp8 KV cache, ``tp`` under tensor parallel. The calibration fit stores, per ``<family>/<regime>``,
the p90 absolute error on held-out engines (or, where none was measured, on the engines it was fitted on; the basis
says which) — :class:`planner.profile.ErrorBand`. A prediction's band is the widest of its families' bands for its
regime; a transferred profile (another GPU's calibration on this GPU's datasheet roofs) adds, in quadrature, the
error measured against published numbers for this GPU. Where any family or the GPU has no measured basis the band
says so instead of showing a number.

Regimes: ``decode`` (a decode step / TPOT), ``prefill_short`` (prompts of ≤ 2,048 tokens: CPU overheads
and CUDA-graph boundaries dominate), ``prefill_long``, ``mixed`` (a prefill chunk with running decodes),
``kv_capacity``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.kernel_families import is_hybrid_swa, moe_variant
from planner.profile import CalibrationProfile
from planner.specs import Deployment, ModelSpec

SHORT_PREFILL_TOKENS = 2048
REGIMES = ("decode", "prefill_short", "prefill_long", "mixed", "kv_capacity")
#: the transfer check compares published numbers by these coarser regimes
TRANSFER_REGIME = {"decode": "decode", "mixed": "decode", "prefill_short": "prefill", "prefill_long": "prefill",
                   "kv_capacity": None}


@dataclass(frozen=True)
class Band:
    """± ``pct`` percent (p90 of measured |error|), or None with ``basis`` saying why there is no band."""

    pct: float | None
    basis: str

    def text(self) -> str:
        return f"±{self.pct:.0f} %" if self.pct is not None else "no measured basis"

    def as_dict(self, prefix: str) -> dict:
        return {f"{prefix}_error_band_pct": self.pct, f"{prefix}_error_band_basis": self.basis}


def kernel_family(model: ModelSpec, deployment: Deployment) -> str:
    """The one family whose coefficients a measurement of ``model`` on ``deployment`` identifies, and under which the
    calibration stores its error (calibration.families.family_of): the MoE kernel variant
    (:func:`planner.kernel_families.moe_variant`: ``moe`` for the bf16 Triton fused MoE, else ``moe-<variant>``), then
    ``hybrid-swa``, then ``tp``, then the weight format, then ``kv-fp8``, else ``dense``."""
    variant = moe_variant(model, deployment.weight_dtype)
    if variant is not None:
        return "moe" if variant == "default" else f"moe-{variant}"
    if is_hybrid_swa(model):
        return "hybrid-swa"
    if deployment.tensor_parallel * deployment.pipeline_parallel > 1:
        return "tp"
    if deployment.weight_dtype not in ("bf16", "fp16"):
        return deployment.weight_dtype
    if deployment.kv_cache_dtype == "fp8":
        return "kv-fp8"
    return "dense"


def families(model: ModelSpec, deployment: Deployment) -> tuple[str, ...]:
    """Every kernel family a prediction for ``model`` on ``deployment`` runs through: its :func:`kernel_family`, the
    weight format's where that family does not run it (an fp8 MoE's experts: ``moe-fp8`` beside ``moe-mla``; fp8
    linear layers beside ``hybrid-swa``), ``kv-fp8``, ``tp``.  gpt-oss at mxfp4 -> ('moe-mxfp4',); DeepSeek-V3 fp8 on
    TP 8 -> ('moe-mla', 'moe-fp8', 'tp'); Gemma-3-27B bf16 -> ('hybrid-swa',); Llama fp8 with an fp8 KV cache ->
    ('fp8', 'kv-fp8')."""
    first = kernel_family(model, deployment)
    out = [first]
    w = deployment.weight_dtype
    if w not in ("bf16", "fp16") and not first.endswith(w):
        out.append(f"moe-{w}" if model.moe is not None and w == "fp8" else w)
    if deployment.kv_cache_dtype == "fp8":
        out.append("kv-fp8")
    if deployment.tensor_parallel * deployment.pipeline_parallel > 1:
        out.append("tp")
    return tuple(dict.fromkeys(out))


def prefill_regime(prompt_tokens: float) -> str:
    return "prefill_short" if prompt_tokens <= SHORT_PREFILL_TOKENS else "prefill_long"


def band(profile: CalibrationProfile, model: ModelSpec, deployment: Deployment, regime: str) -> Band:
    """The expected error of a ``regime`` prediction (module docstring)."""
    if regime not in REGIMES:
        raise ValueError(f"regime: unknown '{regime}'; known: {', '.join(REGIMES)}")
    if profile.mode == "ideal":
        return Band(None, "ideal roofline (no calibration): no measured basis")
    pcts, bases = [], []
    for fam in families(model, deployment):
        key = f"{fam}/{regime}"
        if regime == "mixed" and key not in profile.error_bands:
            key = f"{fam}/decode"  # a mixed step's error was not measured separately for this family
        if regime == "kv_capacity" and key not in profile.error_bands:
            key = "all/kv_capacity"  # one memory model for every family: its error pooled over all engines
        b = profile.error_bands.get(key)
        if b is None:
            return Band(None, f"no measured basis for {fam} ({regime.replace('_', ' ')})")
        pcts.append(b.pct)
        basis = f"{key.split('/')[0]}: {b.basis}"
        if basis not in bases:
            bases.append(basis)
    pct = max(pcts)
    if profile.mode == "transferred":
        coarse = TRANSFER_REGIME.get(regime)
        if coarse is None:
            bases.append(f"transferred to {deployment.gpu_id}: memory terms carried over")
        else:
            t = profile.transfer_error_bands.get(f"{deployment.gpu_id}/{coarse}")
            if t is None:
                return Band(None, f"transferred from {profile.transferred_from} to {deployment.gpu_id}: no published "
                                  f"{coarse} measurement of this GPU to check the transfer against")
            pct = math.hypot(pct, t.pct)
            bases.append(f"transfer to {deployment.gpu_id}: {t.basis}")
    return Band(round(pct, 1), "; ".join(bases))
