"""The attention sums the step formula takes (:func:`planner.roofline.attention_parts`): the layer-weighted context a
decode token attends, the sum over a prompt chunk's new tokens of theirs (causal; sliding-window layers at most W),
and the cached tokens a chunk reads.  Plain arithmetic on numpy arrays (``xp=np``) or floats (``xp=SCALAR``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from planner.roofline import ModelCosts


def attended_decode(mc: ModelCosts, ctx, xp=np):
    """Layer-weighted context one decode token attends: full layers × ctx + sliding × min(ctx, W)."""
    if xp is np:
        ctx = np.asarray(ctx, dtype=float)
    return mc.full_layers * ctx + mc.sliding_layers * xp.minimum(ctx, mc.window_tokens)


def attended_prefill(mc: ModelCosts, start, chunk, xp=np):
    """Σ over the ``chunk`` new tokens at positions start+1 … start+chunk of their attended context,
    layer-weighted (causal: token p attends p keys; sliding layers at most W)."""
    if xp is np:
        start, chunk = np.asarray(start, dtype=float), np.asarray(chunk, dtype=float)
    s, c = start, chunk
    full = mc.full_layers * (c * s + c * (c + 1) / 2.0)
    if not mc.sliding_layers:
        return full
    w = mc.window_tokens
    # Σ_{p=s+1}^{s+c} min(p, w) = Σ p over p ≤ w, plus w for the rest
    lo, hi = xp.minimum(s, w), xp.minimum(s + c, w)
    below = (hi * (hi + 1) - lo * (lo + 1)) / 2.0
    above = xp.maximum(s + c - xp.maximum(s, w), 0.0) * w
    return full + mc.sliding_layers * (below + above)


def prefill_kv_read(mc: ModelCosts, start, xp=np):
    """Layer-weighted cached tokens a prefill chunk starting at ``start`` reads (its prior context)."""
    full = mc.full_layers * start
    return full + mc.sliding_layers * xp.minimum(start, mc.window_tokens) if mc.sliding_layers else full
