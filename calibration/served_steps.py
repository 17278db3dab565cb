"""The step formula on the very steps a real ``vllm serve`` ran (issue #21; pure: no torch/vLLM).

A traced run (``serve_bench --step-trace``, :mod:`calibration.steptrace`) records every engine step's batch: its
tokens, its prefill chunks with the context each had computed, its decodes and (from 2026-12-02's fourth campaign
on, ``dctx``) the decodes' computed contexts summed; and the CPU's time in each call of the engine loop.  Each step's
GPU work is costed by the profile's step formula (:meth:`planner.serving.StepCost.parts`: GEMMs, attention at its
roof, overheads) and laid on the engine's timeline with the CPU calls the trace measured; the run's predicted span,
first step to last, is compared with the measured one.  The simulator's own batching is not involved: this checks
what a served batch costs on the GPU, dense and MoE alike, under real variable-length traffic.  Runs traced before
``dctx`` take their decodes' mean context from the run's lengths (Σ out·(prompt + out/2) / Σ out: each request is in
the batch for ``out`` steps at prompt..prompt+out) and say so.

The timeline (vLLM 0.26's asynchronous scheduling, as the traces show it and :mod:`planner.serving.engine` runs it):
the loop schedules step n (``t1 - t0`` of its record), launches it (``execute_model``, ``x``), waits for step n-1's
output, then takes it (``sample_tokens`` + ``update_from_output``: ``y``, ``u1 - u0`` of the next record) and
schedules n+1.  The GPU runs step n after step n-1 and not before n's launch call starts; an eager step (its kernels
launched one by one) ends no earlier than its launch call returns.

    for r in served_runs(folder, "llama-3.1-8b", profile): print(r.run, r.error_pct)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calibration.serving_points import chunk_starts, serving_setup
from calibration.trace_points import bench_steps


@dataclass(frozen=True)
class ServedRun:
    run: str
    steps: int
    measured_s: float  # first traced step's schedule to the last's
    predicted_s: float  # the same steps on the timeline with the formula's GPU times and the traced CPU calls
    formula_s: float  # the formula's step times (GPU work and per-step overheads) of those steps, summed
    exact_contexts: bool  # the decodes' contexts traced per step (else the run's mean from its lengths)

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted_s / self.measured_s - 1.0)

    @property
    def formula_share(self) -> float:
        """The formula's step times over the measured span: near 1 the formula decides the span (the steps ran back
        to back on the GPU); well below it the traced CPU calls do (launch-bound eager steps, compile stalls), and the
        check says little about the formula."""
        return self.formula_s / self.measured_s


def mean_decode_context(bench_file: Path) -> float:
    """A run's decodes' mean computed context from its requests' lengths: request i decodes ``out_i`` steps at
    contexts prompt_i .. prompt_i + out_i - 1."""
    d = json.loads(Path(bench_file).read_text(encoding="utf-8"))
    p, o = np.asarray(d["input_lens"], dtype=float), np.asarray(d["output_lens"], dtype=float)
    return float(((o * p).sum() + (o * (o - 1.0)).sum() / 2.0) / o.sum())


def gpu_step_s(cost, step: dict, decode_context: float | None) -> float:
    """The formula's seconds of one traced step without its launch floor (GPU work and per-step overheads): its
    tokens and sampled sequences, its chunks' attention over their computed contexts, its decodes' over theirs
    (``dctx``, or ``decode_context`` each)."""
    mc, dec = cost.model_costs, step["dec"]
    # the trace reads the contexts after vLLM's Scheduler.schedule (a decode's is its context and itself; chunks:
    # chunk_starts)
    per = (step["dctx"] / dec if "dctx" in step else (decode_context or 0.0) + 1.0) if dec else 0.0
    attended = dec * (mc.full_layers * per + mc.sliding_layers * min(per, mc.window_tokens or per))
    att_prefill, short, kv_read, longest = cost.chunk_sums(list(zip(chunk_starts(step), step["chunks"])), attended)
    const, ac, am = cost.parts(step["tok"], dec + len(step["chunks"]), att_prefill, attended + short, kv_read, longest)
    return const + max(ac, am)


def replay_steps(cost, steps: list[dict], decode_context: float | None = None) -> tuple[float, float]:
    """(predicted span s, the formula's step seconds summed) of a run's consecutive traced steps (each with
    ``exec_s``, its launch call)."""
    graph_max = cost.model_costs.cudagraph_max_tokens
    t = steps[0]["t0"]
    gpu_free = prev_end = t
    gpu_total = 0.0
    for s, nxt in zip(steps, steps[1:]):
        g = gpu_step_s(cost, s, decode_context)
        gpu_total += g
        launch_start = t + (s["t1"] - s["t0"])
        launch_end = launch_start + s["exec_s"]
        end = max(gpu_free, launch_start) + g
        if s["tok"] > graph_max:
            end = max(end, launch_end)
        gpu_free = end
        t = max(launch_end, prev_end) + (nxt.get("y") or 0.0) + (nxt.get("u1", 0.0) - nxt.get("u0", 0.0))
        prev_end = end
    return t - steps[0]["t0"], gpu_total


def served_runs(folder: Path, model_id: str, profile, min_steps: int = 20) -> list[ServedRun]:
    """Every ``vllm bench serve`` run of a traced serve_bench folder: its measured span against the formula's."""
    folder = Path(folder)
    cost, _ = serving_setup(folder, model_id, profile)
    out = []
    for b, steps in bench_steps(folder):
        run = [s for s in steps if s.get("exec_s") is not None]
        if not b.get("file") or len(run) < min_steps:
            continue
        exact = all("dctx" in s for s in run)
        predicted, gpu = replay_steps(cost, run, None if exact else mean_decode_context(folder / b["file"]))
        out.append(ServedRun(Path(b["file"]).stem, len(run) - 1, run[-1]["t0"] - run[0]["t0"], predicted, gpu,
                             exact))
    return out
