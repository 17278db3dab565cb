"""The engine loop (vLLM ``v1/engine/core.py``'s role): schedule, time the step, update, repeat —
with the closed-form fast-forward over runs of pure decode steps.

The steps between events (an arrival that can be admitted, a finish, a sliding-window crossing, a KV
block shortage) are pure decode steps whose contexts all grow by the same tokens per step, so their
step times are linear in the step index up to a max(compute, memory): the engine sums a whole run in
closed form (:func:`planner.serving.step_cost.sum_max_linear`) and advances it in one go.  10,000
chat requests take well under a second (``benchmarks/simulate_speed.py``).
"""

from __future__ import annotations

import contextlib
import gc
import math
import time
from operator import attrgetter

import numpy as np

from planner.compile_keys import MLA_CONTEXT_KEY, mixed_context
from planner.serving.block_pool import BlockPool
from planner.serving.config import EngineConfig
from planner.serving.decode_batch import DecodeBatch
from planner.serving.request import DONE, NAN, build_requests
from planner.serving.result import SimResult
from planner.serving.scheduler import Chunk, Scheduler
from planner.serving.step_cost import StepCost, sum_max_linear
from planner.serving.workloads import Requests
from planner.units import cdiv

INF = math.inf


class Engine:
    """One simulation run (:func:`simulate` is the API)."""

    def __init__(self, reqs: Requests, cost: StepCost, config: EngineConfig, fast_forward: bool = True):
        self.cost, self.config = cost, config
        self.fast_forward = fast_forward
        spec = config.spec
        # the draft model's work per verify step, in target decode steps at the same batch (c × k)
        self.draft_cost_steps = spec.draft_cost_ratio * spec.num_speculative_tokens if spec else 0.0
        self.pool = BlockPool(config.num_blocks, config.block_size, config.enable_prefix_caching, config.state_blocks,
                              config.window_groups, config.window_blocks, config.window_admission_blocks)
        self.batch = DecodeBatch(config.block_size, cost.num_full_layers, cost.num_sliding_layers, cost.window_tokens,
                                 spec.num_speculative_tokens if spec else 0,
                                 spec.expected_tokens_per_step if spec else 1.0)
        self.requests, next_turns = build_requests(reqs, config.block_size)
        self.scheduler = Scheduler(config, self.pool, self.batch, self.requests, next_turns, reqs.think_s.tolist(),
                                   reqs.arrival_s, reqs.closed_loop,
                                   cost.request_overhead_s + config.frontend_overhead_s)
        # clock and counters
        self.now = 0.0
        # when the step starting now was scheduled: with async scheduling, once the launch call of the step that just
        # ended returned (its start + its eager CPU call; a CUDA-graph step's start)
        self.next_scheduled_s = -INF
        self.num_steps = 0
        self.num_events = 0
        self.prefill_tokens_computed = 0
        # step-size compile keys the engine has compiled (cold_step_shapes: the start-up run's and graph captures',
        # and any earlier traffic's); None: it pays no compiles
        self.compiled_keys = ({*cost.compile_keys_at_start, *config.compiled_step_keys} if config.cold_step_shapes and (
            (cost.shape_compile_s and cost.compile_key) or cost.context_compile_s) else None)
        self.num_compile_stalls = 0
        self.series_t_s: list = []
        self.series_blocks_used: list = []
        self.series_waiting: list = []
        self.series_running: list = []

    # ------------------------------------------------------------------------------ step times

    def draft_s(self, attended: float) -> float:
        """Seconds the draft model spends proposing this step's tokens."""
        seqs = self.batch.num_running_seqs
        return self.draft_cost_steps * self.cost.step_s(seqs, seqs, 0.0, attended, attended) \
            if self.draft_cost_steps and seqs else 0.0

    def decode_step_s(self) -> float:
        """Seconds of one step of the decoders alone (draft included)."""
        load = self.batch.load(self.batch.tokens_advanced)
        return self.cost.step_s(load[0], load[1], 0.0, load[2], load[3]) + self.draft_s(load[3])

    def decode_run_time_fn(self):
        """(S, first step's seconds, growth per step): S(n) = seconds of the next n pure-decode steps,
        in closed form (the attention terms grow linearly with the contexts)."""
        cost, batch = self.cost, self.batch
        tokens_per_step = batch.tokens_per_step
        load = batch.load(batch.tokens_advanced)
        c0, ac0, am0 = cost.parts(load[0], load[1], 0.0, load[2], load[3])
        # d(attended)/d(tokens advanced) = full layers × decoders + sliding layers × decoders in the window
        growth = batch.attended_growth()
        acs = cost.attn_compute_s_per_decode_attended * (batch.num_spec_tokens + 1) * growth * tokens_per_step
        ams = cost.attn_memory_s_per_kv_read_token * growth * tokens_per_step
        if self.draft_cost_steps:
            seqs, attended = batch.num_running_seqs, load[3]
            d0, dac0, dam0 = cost.parts(seqs, seqs, 0.0, attended, attended)
            dacs = cost.attn_compute_s_per_decode_attended * growth * tokens_per_step
            dams = cost.attn_memory_s_per_kv_read_token * growth * tokens_per_step
            f = self.draft_cost_steps

            def run_s(n: int) -> float:
                return (n * c0 + sum_max_linear(ac0, acs, am0, ams, n)
                        + f * (n * d0 + sum_max_linear(dac0, dacs, dam0, dams, n)))
        else:
            def run_s(n: int) -> float:
                return n * c0 + sum_max_linear(ac0, acs, am0, ams, n)
        return run_s, c0 + max(ac0, am0), max(acs, ams)

    # ------------------------------------------------------------------------------ stepping

    def step_mixed(self, chunks: list[Chunk]) -> None:
        """One step with prefill chunks (and the decoders, if any)."""
        cost, batch = self.cost, self.batch
        tokens = sampled = att_decode = kv_read = 0.0
        draft_s = 0.0
        if batch.num_running_seqs:
            tokens, sampled, att_decode, kv_read = batch.load(batch.tokens_advanced)
            if self.draft_cost_steps:
                draft_s = self.draft_s(kv_read)
        att_prefill, att_short, kv_read, longest = cost.chunk_sums([(start, new) for _, start, new in chunks], kv_read)
        for _, _, new in chunks:
            tokens += new
            sampled += 1
            self.prefill_tokens_computed += new
        att_decode += att_short  # MLA's decode pathway (StepCost.chunk_sums)
        cpu = cost.cpu_s(tokens, sampled, True, longest)
        self.send_outputs(cpu)
        self.next_scheduled_s = self.now + cpu
        self.now += cost.step_s(tokens, sampled, att_prefill, att_decode, kv_read, longest) + draft_s
        if self.compiled_keys is not None:
            self.compile_stalls(tokens, chunks)
        self.num_steps += 1
        if batch.num_running_seqs:
            batch.advance(1)
            self.scheduler.finish_decoded(self.now)
        self.scheduler.update_prefills(chunks, self.now)

    def fast_forward_limit(self, first_need: int) -> tuple[int, object]:
        """How many pure-decode steps can run before anything but a context increment happens — a decoder
        finishes, one leaves the sliding window, the decoders' next blocks no longer fit the free pool, or an
        arrival could be admitted (:func:`steps_to_reach`) — and the run-time function if it was needed.  Only
        for CUDA-graph decode steps (:meth:`step_decode` runs eager ones, with a CPU launch call, one by one)."""
        batch, scheduler = self.batch, self.scheduler
        if not self.fast_forward:
            return 1, None
        finish_at = batch.next_finish()
        n = batch.steps_until_tokens(finish_at) if finish_at is not None else 1
        if batch.num_sliding_layers:
            window_exit_at = batch.next_window_exit()
            if window_exit_at is not None:
                n = min(n, batch.steps_until_tokens(window_exit_at))
        # KV: keep the decoders' block needs within the free pool (plus what step 1 already took)
        if n > 1:
            avail = self.pool.num_free() + first_need
            steps0, tokens0 = batch.num_decode_steps, batch.tokens_advanced
            advance = batch.tokens_after(steps0 + n) - tokens0
            if batch.num_running_seqs * (advance // batch.block_size + 1) > avail:
                lo, hi = 1, n  # blocks_needed(after lo steps) <= avail holds for lo = 1
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    if batch.blocks_needed(batch.tokens_after(steps0 + mid) - tokens0) <= avail:
                        lo = mid
                    else:
                        hi = mid
                if batch.blocks_needed(batch.tokens_after(steps0 + hi) - tokens0) > avail:
                    n = lo
                else:
                    n = hi
        run_s = None
        # arrivals end the run if they could be admitted (nothing waits, a sequence slot is free)
        if n > 1 and not scheduler.waiting and batch.num_running_seqs + len(scheduler.prefilling) < scheduler.max_num_seqs:
            t_arrival = scheduler.next_arrival_s()
            if t_arrival < INF:
                run_s, d0, d1 = self.decode_run_time_fn()
                target = t_arrival - self.now
                if run_s(n) > target:
                    n = steps_to_reach(run_s, d0, d1, target, n)
        return n, run_s

    def compile_stalls(self, tokens: int, chunks: list[Chunk]) -> None:
        """The JIT compiles the step pays on first use (planner.compile_keys): a step above the CUDA graphs whose
        size has a new MoE compile key, and an MLA engine's first step mixing a chunk with context and a fresh
        prompt."""
        cost = self.cost
        keys = [(cost.compile_key(tokens), cost.shape_compile_s)] if (
            cost.compile_key and tokens > cost.model_costs.cudagraph_max_tokens) else []
        if cost.context_compile_s and mixed_context([start for _, start, _ in chunks], [new for _, _, new in chunks],
                                                    cost.model_costs.decode_path_max_tokens):
            keys.append((MLA_CONTEXT_KEY, cost.context_compile_s))
        for key, stall_s in keys:
            if key not in self.compiled_keys:
                self.compiled_keys.add(key)
                self.num_compile_stalls += 1
                self.now += stall_s

    def step_decode(self, first_need: int, fast_forward: bool = True) -> None:
        """One pure-decode step, or a run of them (``first_need``: blocks the schedule took for step 1)."""
        batch = self.batch
        cpu = self.cost.cpu_s(*batch.load(batch.tokens_advanced)[:2])  # > 0: eager decode (batch above the graphs)
        self.send_outputs(cpu)
        n, run_s = self.fast_forward_limit(first_need) if fast_forward and not cpu else (1, None)
        if n == 1:
            dt = self.decode_step_s()
            self.next_scheduled_s = self.now + cpu
        else:  # a run of CUDA-graph steps (fast_forward_limit): each scheduled when the one before it started
            if run_s is None:
                run_s = self.decode_run_time_fn()[0]
            dt = run_s(n)
            self.next_scheduled_s = self.now + run_s(n - 1)
            tokens_end = batch.tokens_after(batch.num_decode_steps + n)
            extra = batch.blocks_needed(tokens_end - batch.tokens_advanced) - first_need
            if extra > 0:
                self.pool.take(extra)
        self.now += dt
        self.num_steps += n
        batch.advance(n)
        self.scheduler.finish_decoded(self.now)

    def send_outputs(self, cpu_s: float) -> None:
        """The step starting now keeps the CPU in its launch call for ``cpu_s`` (0 inside the CUDA graphs).  With async
        scheduling vLLM 0.26's engine core processes and sends the outputs of the step that just ended only after this
        call returns (it launches step N+1 before it waits for step N's), so the first and last tokens that step
        produced reach their clients ``cpu_s`` later.  Traced on 2026-12-02 (calibration/data/README.md): a client
        got its first token 5-9 ms after the next step's call returned, whether that step was a CUDA graph (1-4 ms)
        or an eager step launching for 18-90 ms."""
        self.scheduler.send_outputs(self.now, self.now + cpu_s if self.scheduler.async_scheduling else self.now)

    # ------------------------------------------------------------------------------ the loop

    def record(self) -> None:
        """Sample the time series (inline arithmetic: called at every event)."""
        pool, scheduler = self.pool, self.scheduler
        self.series_t_s.append(self.now)
        self.series_blocks_used.append(pool.num_blocks - pool.num_free_uncached - pool.num_evictable)
        self.series_waiting.append(len(scheduler.waiting))
        self.series_running.append(self.batch.num_running_seqs + len(scheduler.prefilling))

    def check_invariants(self) -> None:
        """Block accounting from scratch (tests run it after every event): physical blocks in use =
        referenced cached blocks + every running request's uncached blocks."""
        pool, batch, scheduler = self.pool, self.batch, self.scheduler
        bs, tokens = pool.block_size, batch.tokens_advanced
        referenced, used = pool.check()
        uncached = sum(r.num_uncached_blocks + r.window_chunk_blocks for r in scheduler.prefilling)
        uncached += sum(cdiv(r.context_offset + tokens, bs) - r.num_cached_blocks for r in batch.by_seq.values())
        uncached += sum(map(pool.side_blocks, [*scheduler.prefilling, *batch.by_seq.values()]))
        assert used == referenced + uncached, ("used", used, referenced, uncached)
        assert batch.num_running_seqs == len(batch.by_seq), "decoder count"
        assert sum(batch.count_by_block_phase) == batch.num_running_seqs, "phase buckets"
        for r in scheduler.prefilling:
            assert r.num_cached_blocks + r.num_uncached_blocks == cdiv(r.num_computed, bs), ("prefill blocks", r.index)
        for r in batch.by_seq.values():
            assert r.num_cached_blocks <= cdiv(r.context_offset + tokens, bs), ("decode blocks", r.index)

    def run(self, debug: bool = False) -> None:
        scheduler, batch = self.scheduler, self.batch
        # hot loop: bound methods in locals
        admit_arrivals, schedule, record = scheduler.admit_arrivals, scheduler.schedule, self.record
        step_mixed, step_decode = self.step_mixed, self.step_decode
        waiting, prefilling = scheduler.waiting, scheduler.prefilling  # (the scheduler keeps these objects)
        sliding = batch.num_sliding_layers
        while True:
            admit_arrivals(self.now, self.next_scheduled_s)
            if not (batch.num_running_seqs or prefilling or waiting):
                scheduler.send_outputs(self.now, self.now)  # an idle engine sends the last step's outputs at once
                t = scheduler.next_arrival_s()
                if t == INF:
                    break
                self.record()
                self.now = t
                continue
            if sliding:
                batch.update_window()
            self.num_events += 1
            plan = schedule()
            record()
            if plan.chunks:
                step_mixed(plan.chunks)
            elif batch.num_running_seqs:
                step_decode(plan.decode_blocks, not plan.preempted)
            elif not plan.preempted:  # nothing runnable: the waiting head cannot be placed even in an empty engine
                scheduler.reject_waiting_head(self.now)
            if debug:
                self.check_invariants()
        self.record()
        if debug:
            self.check_invariants()
            assert self.pool.num_free() == self.pool.num_blocks, "blocks leaked"

    def result(self, mode: str, sequential: bool, wall_s: float) -> SimResult:
        rs = self.requests
        f = np.fromiter
        n = len(rs)
        scheduler, pool = self.scheduler, self.pool
        done = f((r.state == DONE for r in rs), bool, n)
        return SimResult(
            arrival_s=f(map(attrgetter("arrival_s"), rs), float, n),
            first_token_s=np.where(done, f(map(attrgetter("first_token_s"), rs), float, n), NAN),
            finish_s=np.where(done, f(map(attrgetter("finish_s"), rs), float, n), NAN),
            prompt_tokens=f(map(attrgetter("prompt_tokens"), rs), np.int64, n),
            output_tokens=f(map(attrgetter("output_tokens"), rs), np.int64, n),
            cached_prompt_tokens=np.maximum(f(map(attrgetter("cached_prompt_tokens"), rs), np.int64, n), 0),
            preemptions_per_request=f(map(attrgetter("num_preemptions"), rs), np.int64, n),
            request_overhead_s=self.scheduler.request_overhead_s,
            series_t_s=np.asarray(self.series_t_s, dtype=float),
            series_kv_usage=np.asarray(self.series_blocks_used, dtype=float) / max(pool.num_blocks, 1),
            series_waiting=np.asarray(self.series_waiting, dtype=np.int64),
            series_running=np.asarray(self.series_running, dtype=np.int64),
            num_steps=self.num_steps, num_events=self.num_events, num_preemptions=scheduler.num_preemptions,
            prefill_tokens_computed=self.prefill_tokens_computed,
            prefix_cache_queries_tokens=scheduler.prefix_cache_queries_tokens,
            prefix_cache_hits_tokens=scheduler.prefix_cache_hits_tokens,
            kv_capacity_tokens=self.config.pool_tokens, config=self.config,
            mode=mode, sequential=sequential, wall_s=wall_s, num_compile_stalls=self.num_compile_stalls,
            compiled_step_keys=frozenset(self.compiled_keys or ()),
            request_overhead_per_prompt_token_s=self.config.frontend_token_overhead_s,
        )


def steps_to_reach(run_s, d0: float, d1: float, target: float, n: int) -> int:
    """The smallest m in [1, n] with ``run_s(m) >= target`` (``run_s(n) > target``): the decode step during
    which an arrival at ``target`` seconds from now happens.

    ``run_s(m)`` (seconds of the next m decode steps) is increasing, and step j (from 0) takes at most
    d0 + d1·j: d0 = the first step's seconds, d1 = the larger of the attention terms' growth per step (the
    other terms are constant over the run).  So run_s(m) ≤ Σ_{j<m} (d0 + d1·j) = d0·m + d1·m(m − 1)/2, and
    the root of (d1/2)·m² + (d0 − d1/2)·m − target = 0,

        m* = (−(d0 − d1/2) + √((d0 − d1/2)² + 2·d1·target)) / d1      (m* = target / d0 when d1 = 0),

    has run_s(m*) ≤ target: the answer is at or just above ⌊m*⌋.  Starting there, the first walk takes a step
    or two instead of a bisection's log2(n) evaluations of ``run_s``; the second steps back where the bound
    does not hold (a draft model's steps, which ``run_s`` adds and d0, d1 leave out)."""
    if d1 > 0:
        m = int((-(d0 - d1 / 2) + math.sqrt((d0 - d1 / 2) ** 2 + 2 * d1 * target)) / d1)
    else:
        m = int(target / d0) if d0 > 0 else 1
    m = min(max(m, 1), n)
    while m < n and run_s(m) < target:
        m += 1
    while m > 1 and run_s(m - 1) >= target:
        m -= 1
    return m


@contextlib.contextmanager
def gc_paused():
    """The cyclic garbage collector off while a run builds and drops its ~10⁵ objects (requests, heap entries,
    step plans): its passes over them cost ~7% of a run and find nothing — a run's objects form no reference
    cycles, so reference counting frees them all.  Restored afterwards (left off if it was off)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def simulate(requests: Requests, cost: StepCost, config: EngineConfig, *, debug: bool = False,
             fast_forward: bool = True) -> SimResult:
    """Simulate ``requests`` on one replica with step costs ``cost`` and engine knobs ``config``.

    ``debug`` re-checks the block accounting from scratch after every event; ``fast_forward=False``
    simulates every decode step one by one (both for tests: same results, much slower)."""
    t0 = time.perf_counter()
    with gc_paused():
        eng = Engine(requests.validate(), cost, config, fast_forward)
        eng.run(debug)
        res = eng.result(cost.mode, False, time.perf_counter() - t0)
        del eng  # freed before the collector is back (else its first pass walks every object of the run)
    return res


def simulate_sequential(requests: Requests, cost: StepCost) -> SimResult:
    """The seeds' naive baseline: one request at a time, FCFS, no batching and no prefix caching;
    each prompt in one forward pass and then one decode step per token, as Hugging Face
    ``generate`` serves (same step-time model; its KV memory is one request's)."""
    t0 = time.perf_counter()
    longest = int((requests.prompt_tokens + requests.output_tokens).max())
    cfg = EngineConfig(kv_capacity_tokens=longest + 16, max_num_seqs=1,
                       max_num_batched_tokens=int(requests.prompt_tokens.max()) + int(requests.output_tokens.max()),
                       enable_prefix_caching=False, spec=None)
    with gc_paused():
        eng = Engine(requests.validate(), cost, cfg)
        eng.run()
        res = eng.result(cost.mode, True, time.perf_counter() - t0)
        del eng
    return res
