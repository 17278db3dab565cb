"""Mixed engine steps measured by :mod:`calibration.mixed_probe` (``mixed_grid`` records: ``batch`` decodes at
``context`` tokens + one new prompt of ``chunk`` tokens, in-process engine core with vllm serve's scheduler
defaults) -> calibration points (pure: no torch/vLLM).

One point per (model, batch, context, chunk) cell: the median of its repeats' ``mixed_step_s`` (the repeats of
one cell spread 40-93 ms on Qwen3-30B-A3B's eager steps, so no single repeat is trusted), as a ``mixed_step_s``
measurement of ``batch`` decoders at ``context`` tokens plus a ``chunk``-token first chunk (batch 0: the lone
prompt's step, no request overhead: the probe times the engine calls only).  The engine's own token budget (its
``mixed_engine`` record) goes into the deployment, so terms that depend on it see what the engine ran.

    points = mixed_points(path, roles={"qwen3-30b-a3b": "fit", "llama-3.1-8b": "validate"})
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from planner.io import catalog
from planner.io.jsonl import read_jsonl
from planner.specs import Deployment
from planner.validate import Measurement


def _ok(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def mixed_cells(records: list[dict], excluded: list[str] | None = None,
                prompts: int = 1) -> dict[tuple, list[float]]:
    """(model, batch, context, chunk) -> the repeats' mixed_step_s of the finished ``mixed_grid`` cells whose chunk
    was split among ``prompts`` new prompts (records without the field had one); a cell whose prompts did not
    finish or whose time is not a finite positive number is left out (and listed in ``excluded`` as 'line N: why')."""
    cells: dict[tuple, list[float]] = {}
    for k, r in enumerate(records, 1):
        if r.get("type") != "mixed_grid" or r.get("prompts", 1) != prompts:
            continue
        try:
            key = (str(r["model"]), int(r["batch_size"]), float(r["context_tokens"]), int(r["chunk_tokens"]))
        except (KeyError, TypeError, ValueError) as err:
            if excluded is not None:
                excluded.append(f"line {k}: {err}")
            continue
        if not r.get("finished") or not _ok(r.get("mixed_step_s")) or key[0] not in catalog.models() \
                or key[1] < 0 or key[3] < 1:
            if excluded is not None:
                excluded.append(f"line {k}: unfinished, unknown model or no positive mixed_step_s")
            continue
        cells.setdefault(key, []).append(float(r["mixed_step_s"]))
    return cells


def mixed_points(path: Path, roles: dict[str, str], source: str = "",
                 excluded: list[str] | None = None) -> list[Measurement]:
    """The cells' medians as measurements of the models in ``roles`` (model id -> 'fit' or 'validate'), on the
    GPU and with the token budget of the file's ``mixed_engine`` records."""
    records = read_jsonl(Path(path))
    engines = {r.get("model"): r for r in records if r.get("type") == "mixed_engine"}
    source = source or str(path)
    bad: list[str] = []
    out = []
    for (model_id, batch, context, chunk), values in sorted(mixed_cells(records, bad).items()):
        if model_id not in roles:
            continue
        eng = engines.get(model_id, {})
        gpu = catalog.gpu(eng.get("gpu", "h200-sxm"))
        budget = eng.get("max_num_batched_tokens", 8192)
        dep = Deployment.for_gpu(gpu, weight_dtype=eng.get("weight_dtype", "bf16"),
                                 max_num_batched_tokens=int(budget) if _ok(budget) else 8192)
        out.append(Measurement(catalog.model(model_id), dep, "mixed_step_s", batch, int(round(context)), 0,
                               float(np.median(values)), str(eng.get("vllm_version", "")), source, roles[model_id],
                               None, chunk))
    if excluded is not None:
        excluded += [f"{Path(path).name}:{x}" for x in bad]
    return out
