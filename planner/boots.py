"""The measured vLLM 0.26.0 boots (container start to /health answering, ``--load-format dummy``): every boot record
of a serve_bench.jsonl under calibration/data, collected into planner/data by ``python -m calibration.boots --write``
(tests/test_capacity_autoscale.py checks the table against the files and their engines' logs).  The capacity plan's
scale-up lead time (:func:`planner.capacity.autoscale.lead_time`) and the plan's cold-start note
(:func:`planner.compile_keys.cold_start_note`) read them here."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

BOOTS_TABLE = Path(__file__).resolve().parent / "data" / "measured_boots_vllm-0.26.0.json"


@dataclass(frozen=True)
class BootRecord:
    """One measured vLLM boot: container start to /health answering, dummy weights."""

    model_id: str
    gpu_id: str
    tensor_parallel: int
    boot_s: float
    init_engine_s: float
    date: str
    source: str
    max_cudagraph_capture_tokens: int | None = None  # the engine's --max-cudagraph-capture-size; None: vLLM's default


MEASURED_BOOTS = tuple(BootRecord(**b) for b in json.loads(BOOTS_TABLE.read_text(encoding="utf-8"))["boots"])


def default_graph_boots(gpu_id: str | None = None) -> tuple[BootRecord, ...]:
    """The boots of engines with vLLM's default CUDA graphs (more graphs start longer), on ``gpu_id`` where any was
    measured there, else on every GPU."""
    default = tuple(b for b in MEASURED_BOOTS if b.max_cudagraph_capture_tokens is None)
    return tuple(b for b in default if b.gpu_id == gpu_id) or default


def boot_range_words(gpu_id: str | None = None) -> str:
    """'54-258 s over 71 boots on h200-sxm, median 129 s': :func:`default_graph_boots`' spread, in words."""
    boots = default_graph_boots(gpu_id)
    s = sorted(b.boot_s for b in boots)
    gpus = sorted({b.gpu_id for b in boots})
    return (f"{s[0]:.0f}-{s[-1]:.0f} s over {len(s)} boots on {', '.join(gpus)}, median {statistics.median(s):.0f} s")
