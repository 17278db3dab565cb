"""Serving under load: a discrete-event simulator of a vLLM-V1-style engine (pure Python + numpy).

What it models, step by step, the way vLLM V1 does — one module per part, as vLLM keeps them apart:

* :mod:`~planner.serving.scheduler` (vLLM ``v1/core/sched/scheduler.py``) — **continuous batching**:
  every step schedules the running requests first (a decode token each, or the next chunk of a prompt
  still being prefilled), then admits waiting requests FCFS while ``max_num_batched_tokens`` and
  ``max_num_seqs`` allow; a prompt larger than the remaining budget is split (chunked prefill).  A
  request that finishes its prompt in a step samples its first token at the end of that step (TTFT);
  every later step gives it one more token.  If the pool is full the *last* admitted running request
  is preempted (RECOMPUTE mode) and no new request is admitted in that step.  Each pass returns a
  ``StepPlan`` (vLLM's ``SchedulerOutput``): the prefill chunks, whether it preempted, the decoders' blocks.
* :mod:`~planner.serving.block_pool` (vLLM ``v1/core/kv_cache_manager.py``) — the **paged KV pool** of
  ``kv_capacity_tokens`` in blocks of ``block_size`` (vLLM's blocks: a page of every layer of one KV group; a
  request also holds its recurrent state's blocks and, in each sliding-window group, its last window's) and
  **automatic prefix caching**: a newly admitted
  request reuses the cached blocks of its longest cached prefix (at most all but its last token);
  unreferenced cached blocks are evicted least-recently-freed first.  The block counts stay behind the pool
  (``admit``, ``blocks_for``, ``allocate_chunk``, ``release``), as vLLM's KVCacheManager hides its blocks.
* :mod:`~planner.serving.request` (vLLM ``v1/request.py``) — per-request state.
* :mod:`~planner.serving.decode_batch` — the running decoders as aggregates (count, Σ context, counts
  per block phase), never iterated per step.
* :mod:`~planner.serving.step_cost` — **step time** of each mixed batch: the one step formula
  (:func:`planner.roofline.step_parts`'s terms) on floats by :class:`StepCost`, equal to ``step_time``'s
  bit for bit.  A calibrated :class:`~planner.specs.CalibrationProfile` enters through
  :func:`planner.roofline.hw_coeffs`; ``request_overhead_s`` is added to each request's TTFT and E2E, and behind
  the HTTP server a first or last token reaches its client ``stream_output_overhead_s`` later per request its step
  served (the OpenAI server streams every running request's token).
* :mod:`~planner.serving.engine` (vLLM ``v1/engine/core.py``) — the loop, and the closed-form
  **fast-forward** over runs of pure decode steps (10,000 chat requests in well under a second,
  ``benchmarks/simulate_speed.py``); ``debug=True`` re-checks the block accounting after every event.
* :mod:`~planner.serving.config` — :class:`EngineConfig` and **speculative decoding**: a decode step
  verifies k draft tokens per sequence (k + 1 tokens through the target) after the draft model spent
  ``c × k`` target decode steps proposing them, and accepts on average (1 − α^(k+1)) / (1 − α) tokens
  (Leviathan et al., arXiv 2211.17192).
* :mod:`~planner.serving.result` — :class:`SimResult`: timings, percentiles, time series.
* :mod:`~planner.serving.load` — latency vs request rate, the highest rate meeting p99 TTFT/TPOT
  targets (:func:`max_rate_under_slo`) and the fleet candidates of ``planner slo-search``.
* :mod:`~planner.serving.replay` — recorded vLLM serving measurements (``calibration/serve_probe.py``)
  re-run through the simulator.

Also: :func:`simulate_sequential`, a sequential baseline (one request at a time, no batching: HF
``generate``-style).
"""

from planner.serving.config import (
    SPEC_PRESETS,
    EngineConfig,
    SpecDecode,
    engine_setup,
    spec_expected_tokens,
    spec_speedup,
)
from planner.serving.engine import simulate, simulate_sequential
from planner.serving.load import (
    FLEET_COLUMNS,
    LoadCurve,
    SloPoint,
    fleet_candidates,
    load_curve,
    max_rate_under_slo,
    meets_slo,
    rate_sweep,
)
from planner.serving.replay import RECORD_TYPES, ReplayReport, ReplayRow, load_records, replay
from planner.serving.result import SimResult, percentiles
from planner.serving.step_cost import StepCost, sum_max_linear

__all__ = [
    "FLEET_COLUMNS",
    "RECORD_TYPES",
    "SPEC_PRESETS",
    "EngineConfig",
    "LoadCurve",
    "ReplayReport",
    "ReplayRow",
    "SimResult",
    "SloPoint",
    "SpecDecode",
    "StepCost",
    "engine_setup",
    "fleet_candidates",
    "load_curve",
    "load_records",
    "max_rate_under_slo",
    "meets_slo",
    "percentiles",
    "rate_sweep",
    "replay",
    "simulate",
    "simulate_sequential",
    "spec_expected_tokens",
    "spec_speedup",
    "sum_max_linear",
]
