"""MLA's two attention pathways inside the CUDA graphs, read from traced ``vllm serve`` engines (issue #21; pure: no
torch/vLLM).  vLLM 0.26's FLASH_ATTN_MLA runs a request of up to
:data:`planner.kernel_families.MLA_DECODE_PATH_MAX_QUERY_TOKENS` query tokens in a step down MLA's decode pathway and
a longer prompt chunk down its prefill pathway; a piecewise prompt step holding such a chunk launches both from the
CPU (calibration/data/h200-2026-12-05-mla-graphs).  :func:`mla_piecewise_launch` splits a traced engine's prompt steps
by pathway, :func:`mla_piecewise_terms` fits the profile's two per-layer terms (calibration.refit for the committed
profile, calibration.serve_floor.with_traces for a host's own ``+serve`` traces)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calibration.trace_points import graph_calls
from calibration.variants import probe_model
from planner.kernel_families import decode_path_max_tokens
from planner.profile import CalibrationProfile


@dataclass(frozen=True)
class PathwayLaunch:
    """An MLA engine's piecewise prompt steps by the pathway their longest chunk takes (vLLM 0.26's FLASH_ATTN_MLA:
    up to planner.kernel_families.MLA_DECODE_PATH_MAX_QUERY_TOKENS its decode pathway, longer its prefill pathway):
    each class's median call beyond a decode-only step's (nan where fewer than ``min_steps`` ran) and its steps."""

    model_id: str
    decode_path_s: float
    prefill_path_s: float
    decode_path_steps: int
    prefill_path_steps: int

    @property
    def per_layer_s(self) -> tuple[float, float]:
        layers = probe_model(self.model_id).num_layers
        return self.decode_path_s / layers, self.prefill_path_s / layers


def mla_piecewise_launch(folder: Path, model_id: str, min_steps: int = 5) -> PathwayLaunch:
    """:class:`PathwayLaunch` of a traced MLA engine.  Traced: Moonlight-16B-A3B with 8,192-token graphs on an H100
    (2026-12-05 capture/c): 13.17 ms (139 steps) and 25.14 ms (794 steps), 0.488 and 0.931 ms a layer (27); the
    eight H200 engines with vLLM's default graphs (the decode pathway only inside them) 0.27-0.53 ms a layer."""
    dec, short, long = graph_calls(folder, model_id, decode_path_max_tokens(probe_model(model_id)))
    if not dec or len(short) < min_steps:
        raise ValueError(f"{folder}: fewer than {min_steps} traced decode-pathway prompt steps inside the CUDA graphs, "
                         "or no decode-only step")
    base, n = float(np.median(dec)), len(long)
    return PathwayLaunch(model_id, float(np.median(short)) - base,
                         float(np.median(long)) - base if n >= min_steps else float("nan"), len(short), n)


def mla_piecewise_terms(prof: CalibrationProfile, engines: Sequence[PathwayLaunch],
                        pathways: Sequence[PathwayLaunch] = ()) -> dict:
    """An MLA engine's piecewise prompt-step launch per layer (:func:`mla_piecewise_launch`):
    its decode pathway's, the median over ``engines`` (their hosts' own: as the MLA eager launch, a median of hosts),
    and its prefill pathway's, that times the median prefill/decode ratio of ``pathways`` (engines traced with chunks
    above the decode pathway inside their graphs: one engine's two classes on one host, so its CPU cancels), or the
    profile's ratio without any.  The committed profile: 0.424 ms a layer (8 engines on 8 H200 hosts, 0.27-0.53) and
    x 1.84 (Moonlight with 8,192-token graphs on an H100, 0.931 / 0.488, and on an H200, 0.764 / 0.432; DeepSeek-V2-Lite
    held out: 0.426 and 0.744 ms, x 1.75)."""
    if not engines:
        return {}
    decode = float(np.median([e.per_layer_s[0] for e in engines]))
    ratios = [e.prefill_path_s / e.decode_path_s for e in pathways if e.decode_path_s > 0 and e.prefill_path_s > 0]
    if ratios:
        ratio = float(np.median(ratios))
    elif prof.mla_piecewise_layer_launch_s > 0 and prof.mla_prefill_layer_launch_s > 0:
        ratio = prof.mla_prefill_layer_launch_s / prof.mla_piecewise_layer_launch_s
    else:
        ratio = 1.0
    return {"mla_piecewise_layer_launch_s": decode, "mla_prefill_layer_launch_s": decode * ratio}
