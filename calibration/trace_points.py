"""Engine steps timed inside a real ``vllm serve`` (:mod:`calibration.steptrace`, ``serve_bench --step-trace``) ->
the CPU launch floor of an eager step (pure: no torch/vLLM).

Under load the steps above the largest CUDA graph (every step that carries a prompt of more than ~500 tokens) are
launched layer by layer from Python.  Their ``execute_model`` call keeps the CPU for the launch of every kernel;
the GPU runs them as they come, so the step lasts max(GPU work, launch) (:func:`planner.roofline.step_total`).  The
traces time that call for every step: on the H200 of 2026-12-02 Llama-3.1-8B's eager steps took 25.7 ms (median
of 385) from 513 to 8,192 tokens alike, and Qwen3-30B-A3B's 91.7 ms (233), where its CUDA-graph steps' calls took
1.8 and 4.0 ms (preparing inputs and sampling, which an eager step does too).  The launch floor of an engine =
median eager call − median graph-step call, over its runs after the warm-up (a cold engine's first traffic
compiles kernels inside the calls).

    floor = launch_floor(folder, "llama-3.1-8b")          # LaunchFloor(seconds, eager steps, graph steps)
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calibration.serving_points import chunk_starts, recorded_deployment, traced_steps
from calibration.variants import probe_model
from planner.compile_keys import keys_at_start, step_compile_key
from planner.io import catalog
from planner.io.jsonl import read_jsonl
from planner.kernel_families import cudagraph_max_tokens
from planner.profile import Spread
from planner.specs import Deployment

#: runs whose engine was cold (compiles inside the calls): not used for the floor
WARM_UP_RUNS = ("warm",)


@dataclass(frozen=True)
class LaunchFloor:
    model_id: str
    seconds: float  # median eager execute_model call - median graph-step call
    eager_steps: int
    graph_steps: int
    eager_call_s: float
    graph_call_s: float
    source: str
    weight_dtype: str = "bf16"  # the engine's (its deploy record)


@dataclass(frozen=True)
class _Trace:
    """A traced serve_bench folder read once: its ``bench`` records, its traced steps, whether each step ran inside
    a non-warm-up run, and the largest CUDA-graph step of its recorded deployment."""

    benches: list[dict]
    steps: list[dict]
    in_run: list[bool]
    graph_max: int
    deployment: Deployment


def _trace(folder: Path, model_id: str | None = None) -> _Trace:
    """``folder`` read (``model_id``: the engine's catalog id, by default the ``deploy`` record's)."""
    recs, steps = _read(str(Path(folder).resolve()))
    deploy = next(r for r in recs if r.get("type") == "deploy")
    benches = [r for r in recs if r.get("type") == "bench" and "wall_start" in r]
    windows = [(r["wall_start"], r["wall_end"]) for r in benches if r.get("run") not in WARM_UP_RUNS]
    dep = recorded_deployment(deploy, model_id)
    graph_max = cudagraph_max_tokens(dep, probe_model(model_id or deploy["model"]))
    return _Trace(benches, steps, [any(a <= s["wall"] <= b for a, b in windows) for s in steps], graph_max, dep)


@functools.lru_cache(maxsize=32)
def _read(folder: str) -> tuple[list[dict], list[dict]]:
    """(``serve_bench.jsonl``'s records, the traced steps) of a committed folder, read once per process (refit and
    the benchmarks ask several readers of the same trace; callers do not modify them)."""
    return read_jsonl(Path(folder) / "serve_bench.jsonl"), traced_steps(Path(folder))


def launch_floor(folder: Path, model_id: str) -> LaunchFloor:
    """The engine's eager launch floor from the steps of its non-warm-up ``bench`` runs (module docstring)."""
    t = _trace(folder, model_id)
    eager, graph = [], []
    for s, inside in zip(t.steps, t.in_run):
        x = s.get("exec_s")
        if inside and x is not None and s["tok"] > 0:
            (eager if s["tok"] > t.graph_max else graph).append(float(x))
    if not eager or not graph:
        raise ValueError(f"{folder}: no traced eager or graph steps in its runs")
    e, g = float(np.median(eager)), float(np.median(graph))
    return LaunchFloor(model_id, e - g, len(eager), len(graph), e, g, str(folder), t.deployment.weight_dtype)


def graph_calls(folder: Path, model_id: str, limit: float = float("inf")) -> tuple[list, list, list]:
    """The ``execute_model`` calls of the traced steps inside the CUDA graphs, over the non-warm-up runs: (decode-only
    steps, prompt-carrying steps whose chunks are all up to ``limit`` tokens, those with a longer chunk)."""
    t, out = _trace(folder, model_id), ([], [], [])
    for s, inside in zip(t.steps, t.in_run):
        x = s.get("exec_s")
        if inside and x is not None and 0 < s["tok"] <= t.graph_max:
            out[0 if not s["chunks"] else 2 if max(s["chunks"]) > limit else 1].append(float(x))
    return out


def piecewise_launch_s(folder: Path, model_id: str) -> tuple[float, int, int]:
    """(s, prompt-carrying steps, decode-only steps): the CPU call of a step that carries prompt tokens inside the
    CUDA-graph range (vLLM 0.26 replays it as piecewise graphs, each layer's attention launched between them) beyond
    a decode-only step's (one full graph) = the difference of their median ``execute_model`` calls over the
    non-warm-up runs.  Traced on 2026-12-02: Llama-3.1-8B 7.42 ms (32 layers); held out Qwen2.5-7B 6.70 (28),
    Mixtral-8x7B 7.42 (32), gpt-oss-20b 5.66 (24), Qwen3-30B-A3B 14.1 ms (48); on 2026-12-03 Qwen2.5-32B 8.33 ms (64
    layers, a host 0.835x as fast per eager layer) and Llama-3.1-70B's 80 layers 18.26 ms (0.934x): per layer."""
    dec, mixed, _ = graph_calls(folder, model_id)
    if not mixed or not dec:
        raise ValueError(f"{folder}: no traced prompt-carrying or decode-only steps inside the CUDA graphs")
    return float(np.median(mixed)) - float(np.median(dec)), len(mixed), len(dec)


def range_period_s(folder: Path, model_id: str, lo: float, hi: float) -> tuple[float, int]:
    """(median engine-loop period, count) of the traced steps of ``lo`` < tokens < ``hi`` in the non-warm-up runs:
    the time from a step's ``schedule`` to the next (one loop pass; asynchronous scheduling overlaps a step's GPU
    work with the next launch, so a single period is its launch or its GPU work, whichever is longer)."""
    t = _trace(folder, model_id)
    per = [b["t0"] - a["t0"] for a, b, inside in zip(t.steps, t.steps[1:], t.in_run)
           if inside and lo < a["tok"] < hi and b["wall"] >= a["wall"]]
    return (float(np.median(per)) if per else float("nan")), len(per)


@dataclass(frozen=True)
class ShapeCompiles:
    model_id: str
    seconds: list[float]  # each new-key eager step's call less the median eager call of seen keys
    new_keys: int  # eager steps with a compile key no earlier step had
    compiled_steps: int  # eager steps with a key seen before
    stalled_compiled: int  # of those, calls longer than STALL_S (0 where the key rule holds)
    quiet_new: int  # new-key steps that did not stall (0 where it holds)
    weight_dtype: str = "bf16"  # the engine's (its deploy record)

    @property
    def median_s(self) -> float:
        return float(np.median(self.seconds)) if self.seconds else 0.0


def _compile_walk(t: _Trace, model_id: str):
    """(step, execute_model s, above the graphs, with a compile key no earlier step, start-up run or graph capture
    had: planner.compile_keys) of every timed step of the trace, in order."""
    model = probe_model(model_id)
    key = step_compile_key(model, t.deployment)
    seen = set(keys_at_start(t.deployment, model, key))
    for s in t.steps:
        if s.get("exec_s") is None or s["tok"] <= 0:
            continue
        eager = s["tok"] > t.graph_max
        new = eager and key is not None and key(s["tok"]) not in seen
        if new:
            seen.add(key(s["tok"]))
        yield s, float(s["exec_s"]), eager, new


def shape_compiles(folder: Path, model_id: str) -> ShapeCompiles:
    """The Triton MoE's JIT stalls of a traced engine, from its first step: an eager step whose token count has a
    compile key (planner.compile_keys) no earlier step, start-up run or graph capture had pays a compile.  Traced on
    2026-12-02 (STALL_S): every new key stalled but one of gpt-oss-20b's (k/), no seen key did but one per MLA engine
    (an early prompt chunk with context: :func:`context_stalls`); tests/test_compile_keys.py pins each engine."""
    new, old = [], []
    t = _trace(folder, model_id)
    for _, x, eager, is_new in _compile_walk(t, model_id):
        if eager:
            (new if is_new else old).append(x)
    if not new or not old:
        raise ValueError(f"{folder}: no traced eager steps with new and with compiled step-size keys")
    base = float(np.median(old))
    return ShapeCompiles(model_id, [x - base for x in new], len(new), len(old), sum(x > STALL_S for x in old),
                         sum(x <= STALL_S for x in new), t.deployment.weight_dtype)


def context_stalls(folder: Path, model_id: str) -> list[tuple[int, float]]:
    """(position among the steps with a context chunk, seconds over the median call of its kind) of each such step
    that stalled (> STALL_S) without a new MoE compile key: an MLA engine's chunked prefill with context runs a Triton
    kernel of its own.  Traced on 2026-12-02: Moonlight-16B-A3B the first such step (l/ 0.55 s, o/ 0.50 s), DeepSeek-
    V2-Lite the second (n/ 0.70 s), then none (5-22 later steps); planner.compile_keys.cold_start_note says so."""
    calls, context = {True: [], False: []}, []
    for s, x, eager, new in _compile_walk(_trace(folder, model_id), model_id):
        if any(chunk_starts(s)):
            context.append((len(context), x, eager, new))
        elif not new:
            calls[eager].append(x)
    return [(i, x - float(np.median(calls[eager]))) for i, x, eager, new in context if x > STALL_S and not new]


#: an ``execute_model`` call this long is a stall (a graph step takes 2-5 ms, an eager one 25-150 ms)
STALL_S = 0.3


def _run_indices(t: _Trace, bench: dict) -> list[int]:
    """The indices in ``t.steps`` of the traced steps scheduled within one ``bench`` run's wall-clock window."""
    return [i for i, s in enumerate(t.steps) if bench["wall_start"] <= s["wall"] <= bench["wall_end"]]


def _run_steps(t: _Trace, bench: dict) -> list[dict]:
    """The traced steps scheduled within one ``bench`` run's wall-clock window."""
    return [t.steps[i] for i in _run_indices(t, bench)]


def bench_steps(folder: Path) -> list[tuple[dict, list[dict]]]:
    """Each ``bench`` record of a traced serve_bench folder with the traced steps scheduled in its window."""
    t = _trace(folder)
    return [(r, _run_steps(t, r)) for r in t.benches]


def _spread(ratios: list[float]) -> Spread:
    p10, med, p90 = np.percentile(ratios, [10, 50, 90]).tolist()
    return Spread(n=len(ratios), p10=p10, median=med, p90=p90)


def stalls(folder: Path, threshold_s: float = STALL_S) -> dict[str, dict]:
    """Per ``bench`` run of the folder: its traced steps, the eager ones among them (above the largest CUDA
    graph), the steps whose ``execute_model`` call took longer than ``threshold_s`` and their seconds, and the
    run's wall time.  gpt-oss on vLLM 0.26 (Triton MXFP4 MoE) stalled 0.7-6 s on 15-40 % of its eager steps
    throughout 2,000 requests (calibration/data/h200-2026-12-02-serve-mxfp4); no other traced engine did."""
    t = _trace(folder)
    out = {}
    for r in t.benches:
        run = [s for s in _run_steps(t, r) if s.get("exec_s") is not None and s["tok"] > 0]
        slow = [float(s["exec_s"]) for s in run if s["exec_s"] > threshold_s]
        out[r["run"]] = {"steps": len(run), "eager_steps": sum(s["tok"] > t.graph_max for s in run),
                         "stalls": len(slow), "stall_s": float(sum(slow)), "wall_s": r["wall_end"] - r["wall_start"]}
    return out


@dataclass(frozen=True)
class ClientLag:
    """A traced run's requests from their client's send (``vllm bench serve``'s ``start_times``) to the engine step
    that scheduled them (the ``new`` requests of each traced ``schedule`` call), matched first-come first-served;
    both clocks are ``perf_counter`` on one machine."""

    run: str
    lags_s: list[float]
    waiting_decode_steps: int  # decode-only steps that found requests waiting in the engine's own queue
    decode_steps: int
    prompt_tokens: list[int] = ()  # each request's, in the same order as lags_s

    def pct_s(self, q: float) -> float:
        return float(np.percentile(self.lags_s, q))


def _requests_by_step(folder: Path, t: _Trace, bench: dict) -> tuple[dict, np.ndarray, list[int], list[dict]]:
    """One ``bench`` run's requests matched to the traced steps that scheduled them, first-come first-served: (its
    ``vllm bench serve`` JSON, the request indices in send order, the index in ``t.steps`` of the step that scheduled
    each, in the same order, and the run's steps)."""
    data = json.loads((Path(folder) / bench["file"]).read_text(encoding="utf-8"))
    order = np.argsort(np.asarray(data["start_times"], dtype=float), kind="stable")
    idx = _run_indices(t, bench)
    return data, order, [i for i in idx for _ in range(t.steps[i]["new"])], [t.steps[i] for i in idx]


def client_lags(folder: Path) -> list[ClientLag]:
    """:class:`ClientLag` of every ``bench`` run of a traced folder.  Traced on 2026-12-02 (calibration/data/README.md,
    'Requests held back before the engine'): at 3,600 streamed tokens per second the lag's p90 was 150-280 ms while the
    engine's own queue stayed empty; a second OpenAI server process took only 10-18 ms off it."""
    t = _trace(folder)
    out = []
    for r in t.benches:
        bench, order, steps, run = _requests_by_step(folder, t, r)
        sent = np.asarray(bench["start_times"], dtype=float)[order]
        scheduled = np.asarray([t.steps[k]["t0"] for k in steps], dtype=float)
        n = min(len(sent), len(scheduled))
        decode = [s for s in run if not s["chunks"] and s["tok"] > 0]
        out.append(ClientLag(r["run"], (scheduled[:n] - sent[:n]).tolist(), sum(s["wait"] > 0 for s in decode),
                             len(decode), [int(x) for x in np.asarray(bench["input_lens"])[order][:n]]))
    return out


#: requests of a run whose client lag is at most this percentile: those the engine took at its next step, not queued
UNQUEUED_PCT = 80


def frontend_token_slope(folders, min_requests: int = 20) -> tuple[float, int]:
    """(seconds per prompt token, runs): what the OpenAI server spends on each prompt token before the engine
    schedules the request (tokenising the text prompt; the engine's block hashes), from the client lags of the
    non-warm-up runs of ``folders`` (:func:`client_lags`): the least-squares slope of the lag over the prompt tokens
    within each run (each run its own intercept, so the load and the host cancel), over each run's requests at or
    below its :data:`UNQUEUED_PCT` th-percentile lag, pooled.  Runs with fewer such requests or one prompt length
    (a shared-prefix run) say nothing of it.  Traced on 2026-12-02..04 (calibration/data/README.md, 'The prompt's
    own time in the OpenAI server'): 1.50 us a token over the 13 runs of the floor traces, 1.45 the median of 74
    other runs."""
    sxy = sxx = 0.0
    runs = 0
    for folder in folders:
        for c in client_lags(folder):
            if c.run in WARM_UP_RUNS:
                continue
            lag, tokens = np.asarray(c.lags_s, dtype=float), np.asarray(c.prompt_tokens, dtype=float)
            if lag.size < min_requests:
                continue
            keep = lag <= np.percentile(lag, UNQUEUED_PCT)
            x, y = tokens[keep] - tokens[keep].mean(), lag[keep]
            if keep.sum() < min_requests or not np.ptp(x):
                continue
            sxy += float((x * (y - y.mean())).sum())
            sxx += float((x * x).sum())
            runs += 1
    if not runs:
        raise ValueError(f"no traced run with {min_requests} unqueued requests of different prompt lengths")
    return sxy / sxx, runs


@dataclass(frozen=True)
class Delivery:
    """A traced run's first tokens on their way out: per request (matched to the step that scheduled its prompt
    first-come first-served, as :func:`client_lags`), its first token's arrival at the client (send + TTFT, both
    ``perf_counter`` on one machine) less the start of the step two after that step, which the engine core schedules
    once it has taken that step's outputs (vLLM 0.26's asynchronous scheduling: step n's outputs are taken after step
    n+1's launch); with the requests running in the scheduling step.  What is left is the OpenAI server's output
    handling (detokenising and streaming every running request's token of each step) and the client's reading."""

    run: str
    running: list[int]
    delivery_s: list[float]

    @property
    def median_running(self) -> float:
        return float(np.median(self.running))

    @property
    def median_delivery_s(self) -> float:
        return float(np.median(self.delivery_s))


def first_token_deliveries(folder: Path) -> list[Delivery]:
    """:class:`Delivery` of every non-warm-up ``bench`` run of a traced folder.  Traced on 2026-12-02/03: the median
    grows with the requests running, about 0.1 ms each, on dense and MoE engines alike (2.7 ms at 10 running, 8 ms at
    78 on Llama-3.1-8B; 3.3 -> 11 ms at 11 -> 95 on Moonlight-16B-A3B); a second OpenAI server process took a third
    off it (calibration/data/README.md, 'First tokens wait behind the other streams')."""
    t = _trace(folder)
    out = []
    for r in t.benches:
        if r["run"] in WARM_UP_RUNS:
            continue
        bench, order, steps, _ = _requests_by_step(folder, t, r)
        first = (np.asarray(bench["start_times"], dtype=float) + np.asarray(bench["ttfts"], dtype=float))[order]
        running, delivery = [], []
        for k, f in zip(steps, first):  # a failed request's TTFT is NaN: left out
            if k + 2 < len(t.steps) and np.isfinite(f):
                running.append(int(t.steps[k]["run"]))
                delivery.append(float(f - t.steps[k + 2]["t0"]))
        if delivery:
            out.append(Delivery(r["run"], running, delivery))
    return out


def stream_output_slope(folders, min_runs: int = 2) -> tuple[float, float, int]:
    """(seconds per running request, intercept s, runs): :func:`delivery_line` over ``folders``' runs."""
    return delivery_line([d for f in folders for d in first_token_deliveries(f)], min_runs)


def delivery_line(deliveries: list[Delivery], min_runs: int = 2) -> tuple[float, float, int]:
    """(seconds per running request, intercept s, runs): the least-squares line through each run's (median running,
    median delivery) (at least ``min_runs`` runs at two loads)."""
    pts = [(d.median_running, d.median_delivery_s) for d in deliveries]
    if len(pts) < max(2, min_runs) or len({x for x, _ in pts}) < 2:
        raise ValueError(f"the first tokens' delivery needs {max(2, min_runs)} traced runs at different loads, "
                         f"got {len(pts)}")
    x, y = np.asarray(pts).T
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope), float(intercept), len(pts)


def run_eager_calls(folder: Path, min_steps: int = 10) -> dict[str, float]:
    """The median ``execute_model`` call of each non-warm-up ``bench`` run's eager steps (stalls left out; runs with at
    least ``min_steps`` of them): how far one engine's launch moves from run to run.  Traced on 2026-12-02 (38 runs of
    15 engines; calibration/data/h200-2026-12-02-asyncllm/COMMAND.md): 0.915-1.066 of the engine's median (p10-p90),
    0.75-1.19 in all; the simulator's TPOT error of a launch-bound run follows its run's call."""
    t = _trace(folder)
    out = {}
    for r in t.benches:
        if r["run"] in WARM_UP_RUNS:
            continue
        calls = [float(s["exec_s"]) for s in _run_steps(t, r)
                 if s.get("exec_s") is not None and s["tok"] > t.graph_max and s["exec_s"] <= STALL_S]
        if len(calls) >= min_steps:
            out[r["run"]] = float(np.median(calls))
    return out


def run_call_spread(folders) -> Spread:
    """How far a run's launch call moves from its engine's own: :class:`planner.profile.Spread` of each run's
    :func:`run_eager_calls` over the median of its engine's runs, over the engines of ``folders`` with two or more."""
    ratios = []
    for folder in folders:
        calls = run_eager_calls(folder)
        if len(calls) >= 2:
            median = float(np.median(list(calls.values())))
            ratios += [v / median for v in calls.values()]
    if not ratios:
        raise ValueError("no traced engine with two runs of eager steps")
    return _spread(ratios)


def launch_call_spread(folders, profile) -> Spread:
    """How far a served run's eager launch is from what ``profile`` predicts for its engine, host and run alike:
    :class:`planner.profile.Spread` of :func:`launch_call_ratios` over ``folders``."""
    ratios = launch_call_ratios(folders, profile)
    if not ratios:
        raise ValueError("no traced run of eager steps with a predicted launch floor")
    return _spread(ratios)


def launch_call_ratios(folders, profile) -> list[float]:
    """Each served run's launch floor (its :func:`run_eager_calls` less its engine's median CUDA-graph call) over the
    profile's floor of that engine (an eager step's CPU call less the dense per-layer eager overhead the in-process
    stages fit: its launch floor), over ``folders`` in order."""
    from planner.serving import StepCost

    ratios = []
    for folder in folders:
        calls = run_eager_calls(folder)
        if not calls:
            continue
        deploy = next(r for r in _read(str(Path(folder).resolve()))[0] if r.get("type") == "deploy")
        model = probe_model(deploy["model"])
        floor = launch_floor(folder, model.id)  # its graph_call_s: the engine's median CUDA-graph call
        dep = recorded_deployment(deploy)
        cost = StepCost.from_specs(model, catalog.gpu(deploy.get("gpu", "h200-sxm")), dep, profile)
        predicted = cost.cpu_s(cudagraph_max_tokens(dep, model) + 1, 1, True) \
            - model.num_layers * profile.eager_layer_overhead_s
        if predicted > 0:
            ratios += [(c - floor.graph_call_s) / predicted for c in calls.values()]
    return ratios
