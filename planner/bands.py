"""The expected error of a prediction ("±x %"), from how its kernel families did on measurements.

A prediction belongs to families by what it runs: its weight format (fp8, int4, ... ; dense 16-bit
otherwise), ``moe`` for a mixture-of-experts model, ``kv-fp8`` for an fp8 KV cache, ``tp`` under tensor
parallel.  The calibration fit stores, per ``<family>/<regime>``, the p90 absolute error on held-out
engines (or, where none was measured, on the engines it was fitted on; the basis says which) —
:class:`planner.profile.ErrorBand`.  A prediction's band is the widest of its families' bands for its
regime; a transferred profile (another GPU's calibration on this GPU's datasheet roofs) adds, in
quadrature, the error measured against published numbers for this GPU.  Where any family or the GPU has
no measured basis the band says so instead of showing a number.

Regimes: ``decode`` (a decode step / TPOT), ``prefill_short`` (prompts of ≤ 2,048 tokens: CPU overheads
and CUDA-graph boundaries dominate), ``prefill_long``, ``mixed`` (a prefill chunk with running decodes),
``kv_capacity``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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


def families(model: ModelSpec, deployment: Deployment) -> tuple[str, ...]:
    """The kernel families a prediction for ``model`` on ``deployment`` runs through."""
    out = []
    if deployment.weight_dtype not in ("bf16", "fp16"):
        out.append(deployment.weight_dtype)
    if model.moe is not None:
        out.append("moe")
    if deployment.kv_cache_dtype == "fp8":
        out.append("kv-fp8")
    if deployment.tensor_parallel * deployment.pipeline_parallel > 1:
        out.append("tp")
    return tuple(out) or ("dense",)


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
        b = profile.error_bands.get(key) or (profile.error_bands.get("all/kv_capacity") if regime == "kv_capacity"
                                             else None)
        if b is None:
            return Band(None, f"no measured basis for {fam} ({regime.replace('_', ' ')})")
        pcts.append(b.pct)
        bases.append(f"{fam}: {b.basis}")
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
