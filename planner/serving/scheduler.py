"""One vLLM V1 scheduling pass per step (vLLM ``v1/core/sched/scheduler.py``'s role): arrivals,
admission, the chunked-prefill token budget, recompute preemption, and the request lifecycle
(finish, reject, release of the next turn or the next closed-loop request).

Every step schedules the running requests first (a decode token each, or the next chunk of a prompt
still being prefilled), then admits waiting requests FCFS while the step's token budget
(``max_num_batched_tokens``) and ``max_num_seqs`` allow and the pool has its whole prompt's blocks free (vLLM 0.26's
scheduler_reserve_full_isl: :meth:`BlockPool.admission_blocks`); a prompt larger than the remaining budget is
split (chunked prefill).  If the KV pool cannot hold a step's tokens, the *last* admitted running
request is preempted (its blocks freed, its progress recomputed later, like vLLM's RECOMPUTE mode),
and no new request is admitted in that step.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import NamedTuple

import numpy as np

from planner.serving.block_pool import BlockPool
from planner.serving.config import EngineConfig
from planner.serving.decode_batch import DecodeBatch
from planner.serving.request import DONE, NAN, PREFILL, REJECTED, WAITING, Request

INF = float("inf")


class Chunk(NamedTuple):
    """One request's prompt tokens computed in a step: positions [start, start + tokens)."""

    req: Request
    start: int
    tokens: int


class StepPlan:
    """What one scheduling pass hands the engine (vLLM's ``SchedulerOutput``): the prefill chunks to compute
    beside the running decoders, whether a request was preempted to make room (the engine then steps once,
    without fast-forward), and the blocks already taken for the decoders' next tokens."""

    __slots__ = ("chunks", "decode_blocks", "preempted")

    def __init__(self, chunks: list[Chunk] | tuple, preempted: bool, decode_blocks: int):
        self.chunks, self.preempted, self.decode_blocks = chunks, preempted, decode_blocks


class Scheduler:
    """Waiting and prefilling queues, arrivals, and the decisions of each step."""

    def __init__(self, config: EngineConfig, pool: BlockPool, batch: DecodeBatch, requests: list[Request],
                 next_turns: dict[int, list[int]], think_s: list[float], arrival_s: np.ndarray, closed_loop: int,
                 request_overhead_s: float):
        self.pool, self.batch = pool, batch
        self.max_num_seqs = config.max_num_seqs
        self.max_num_batched_tokens = config.max_num_batched_tokens
        self.prefix_caching = config.enable_prefix_caching
        # (a token budget below one block could never reach a boundary: such an engine is left unaligned)
        self.state_aligned_chunks = config.state_aligned_chunks and config.max_num_batched_tokens >= config.block_size
        self.async_scheduling = config.async_scheduling
        self.stream_output_overhead_s = config.stream_output_overhead_s
        # requests whose first or last token the step that just ended produced: sent to their clients when the next
        # step's launch call returns (Engine.send_outputs)
        self.emitted: list[Request] = []
        self.tokens_per_seq_step = batch.num_spec_tokens + 1  # a decoder's tokens in one step's budget
        self.request_overhead_s = request_overhead_s
        self.requests = requests
        self.next_turns = next_turns  # request index -> indices of its conversation's next turns
        self.think_s = think_s
        # arrivals: a sorted list of the workload's times, and a heap of requests released by finishes
        n = len(requests)
        self.closed_loop = closed_loop
        if closed_loop:
            self.timed_arrivals: list = []
            self.released_arrivals: list = [(0.0, i) for i in range(min(closed_loop, n))]
            self.next_closed_loop = min(closed_loop, n)
        else:
            idx = np.flatnonzero(~np.isnan(arrival_s))
            idx = idx[np.argsort(arrival_s[idx], kind="stable")]
            self.timed_arrivals = list(zip(arrival_s[idx].tolist(), idx.tolist()))  # (float, int) pairs
            self.released_arrivals = []
            self.next_closed_loop = n
        self.next_timed = 0  # index of the next timed arrival
        # queues
        self.waiting: deque = deque()
        self.prefilling: list[Request] = []  # in admission order
        self.next_admit_seq = 0
        # counters
        self.num_preemptions = 0
        self.prefix_cache_queries_tokens = 0
        self.prefix_cache_hits_tokens = 0

    def num_running(self) -> int:
        return self.batch.num_running_seqs + len(self.prefilling)

    # ------------------------------------------------------------------------------ arrivals

    def next_arrival_s(self) -> float:
        timed, released = self.timed_arrivals, self.released_arrivals
        t = timed[self.next_timed][0] if self.next_timed < len(timed) else INF
        if released and released[0][0] < t:
            t = released[0][0]
        return t

    def admit_arrivals(self, now: float, scheduled_s: float) -> None:
        """Queue the requests that arrived by the time the next step is scheduled: ``now``, or with async scheduling
        while the engine is busy, ``scheduled_s``: when the launch call of the step that just ended returned (vLLM
        0.26 schedules the next step then, while the GPU still runs the last one: a CUDA-graph step's start, an eager
        step's start + its CPU launch call)."""
        cutoff = now
        if self.async_scheduling and (self.batch.num_running_seqs or self.prefilling or self.waiting):
            cutoff = scheduled_s
        timed, released, i = self.timed_arrivals, self.released_arrivals, self.next_timed
        if i < len(timed) and timed[i][0] <= cutoff:
            num_timed = len(timed)
            while i < num_timed and timed[i][0] <= cutoff:
                self.arrive(timed[i], now)
                i += 1
            self.next_timed = i
        while released and released[0][0] <= cutoff:
            self.arrive(heapq.heappop(released), now)

    def arrive(self, item: tuple[float, int], now: float) -> None:
        t, i = item
        req = self.requests[i]
        req.arrival_s = t
        pool = self.pool
        if pool.most_blocks(req) > pool.num_blocks:
            self.reject(req, now)  # can never fit: vLLM rejects it
            return
        req.state = WAITING
        self.waiting.append(req)

    # ------------------------------------------------------------------------------ lifecycle

    def reject(self, req: Request, now: float) -> None:
        req.state = REJECTED
        req.finish_s = NAN
        self.release_dependents(req, now)

    def reject_waiting_head(self, now: float) -> None:
        """Nothing runs and the head of the queue cannot be placed even in an empty engine."""
        self.reject(self.waiting.popleft(), now)

    def finish(self, req: Request, computed: int, now: float) -> None:
        """The request's last token is computed: its blocks are free now; its client hears of it (and sends what
        depends on it) when the step's outputs are sent (:meth:`send_outputs`)."""
        req.state = DONE
        req.finish_s = now
        self.pool.release(req, computed)
        emitted = self.emitted
        if not emitted or emitted[-1] is not req:
            emitted.append(req)

    def send_outputs(self, done_s: float, sent_s: float) -> None:
        """The outputs of the step that ended at ``done_s`` leave the engine at ``sent_s`` and reach their clients
        after the OpenAI server has streamed the running requests' tokens (``stream_output_overhead_s`` each): first
        and last tokens move there, and a finished request's client sends its next request (closed loop, next turn)
        from then."""
        emitted = self.emitted
        if not emitted:
            return
        if self.stream_output_overhead_s:  # the step's requests: those still running and those it finished
            served = self.batch.num_running_seqs + len(self.prefilling) + sum(r.state == DONE for r in emitted)
            sent_s += self.stream_output_overhead_s * served
        for req in emitted:
            if req.first_token_s == done_s:
                req.first_token_s = sent_s
            if req.state == DONE and req.finish_s == done_s:
                req.finish_s = sent_s
                self.release_dependents(req, sent_s)
        emitted.clear()

    def release_dependents(self, req: Request, now: float) -> None:
        """The request left (finished or rejected): its client sends the next closed-loop request,
        and its conversation's next turn arrives after the think time."""
        t = now + self.request_overhead_s
        released = self.released_arrivals
        if self.closed_loop and self.next_closed_loop < len(self.requests):
            heapq.heappush(released, (t, self.next_closed_loop))
            self.next_closed_loop += 1
        for i in self.next_turns.get(req.index, ()):
            heapq.heappush(released, (t + self.think_s[i], i))

    def finish_decoded(self, now: float) -> None:
        """Finish every decoder whose last token is out."""
        batch = self.batch
        heap = batch.finish_heap
        if not heap or heap[0][0] > batch.tokens_advanced:
            return  # the common case, checked inline (hot path)
        while (req := batch.pop_finished()) is not None:
            computed = batch.leave(req)
            req.num_generated = req.output_tokens
            self.finish(req, computed, now)

    def update_prefills(self, chunks: list[Chunk], now: float) -> None:
        """After a step: the chunks' tokens are computed; a finished prompt samples its first token
        and joins the decoders (or finishes, with one output token)."""
        prefilling, pool = self.prefilling, self.pool
        for req, start, new in chunks:
            if req.window_chunk_blocks:
                pool.end_chunk(req)
            computed = req.num_computed = start + new
            if computed >= req.num_tokens:
                prefilling.remove(req)
                generated = req.num_generated = req.num_generated + 1
                if req.first_token_s != req.first_token_s:  # NaN: the first token
                    req.first_token_s = now
                    self.emitted.append(req)
                if generated >= req.output_tokens:
                    self.finish(req, computed, now)
                else:
                    self.batch.join(req)

    def preempt_latest(self) -> Request:
        """Preempt the most recently admitted running request (vLLM: running.pop()); it recomputes
        its prompt and its outputs so far when it is admitted again."""
        if self.prefilling:
            req = self.prefilling.pop()
            computed = req.num_computed
        else:
            req = self.batch.latest()
            computed = self.batch.leave(req)
        self.pool.release(req, computed, recompute=True)
        req.num_computed = 0
        req.num_tokens = req.prompt_tokens + req.num_generated
        req.state = WAITING
        req.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(req)
        return req

    # ------------------------------------------------------------------------------ scheduling

    def aligned_chunk(self, req: Request, start: int, new: int) -> int:
        """The tokens of ``req``'s prompt chunk from ``start`` under vLLM 0.26's Mamba 'align' cache mode
        (``Scheduler._mamba_block_aligned_split``): before the prompt's last block boundary a chunk ends on a boundary
        (0 if the budget reaches none: the request waits), and it stops at that last boundary, where the state is
        cached; past it, as asked."""
        bs, total = self.pool.block_size, req.num_tokens
        if start >= total - 1:
            return new
        last = total - total % bs
        end = start + new
        if end < last:
            end = end // bs * bs
        nxt = (start // bs + 1) * bs
        for stop in (nxt if start % bs and nxt <= last else 0, last):
            if start < stop < end:
                end = stop
        return max(end - start, 0)

    def schedule(self) -> StepPlan:
        """One scheduling pass: the decoders' next tokens first, then running prefills, then waiting
        requests (FCFS), within the token budget and the pool."""
        batch, pool = self.batch, self.pool
        advance = 0
        if batch.num_running_seqs:
            advance = batch.tokens_after(batch.num_decode_steps + 1) - batch.tokens_advanced
            if not self.prefilling and not self.waiting:  # the common case: decodes only
                need = batch.blocks_needed(advance)
                if need <= pool.num_free_uncached + pool.num_evictable:
                    if need:
                        pool.take(need)
                    return StepPlan((), False, need)
        preempted = False
        need = batch.blocks_needed(advance) if batch.num_running_seqs else 0
        while batch.num_running_seqs and need > pool.num_free():
            self.preempt_latest()
            preempted = True
            need = batch.blocks_needed(advance) if batch.num_running_seqs else 0
        if not batch.num_running_seqs:
            need = 0
        if need:
            pool.take(need)
        budget = self.max_num_batched_tokens - batch.num_running_seqs * self.tokens_per_seq_step
        chunks = []
        # running prefills, in admission order
        prefilling = self.prefilling
        i = 0
        while i < len(prefilling) and budget > 0:
            req = prefilling[i]
            new = min(req.num_tokens - req.num_computed, budget)
            if self.state_aligned_chunks and not (new := self.aligned_chunk(req, req.num_computed, new)):
                i += 1  # no block boundary within the budget: it waits a step
                continue
            blocks = pool.blocks_for(req, req.num_computed + new) + pool.chunk_window_blocks(req, req.num_computed, new)
            victim = None
            while blocks > pool.num_free() and victim is not req:
                victim = self.preempt_latest()
                preempted = True
            if victim is req:
                break
            pool.allocate_chunk(req, new)
            chunks.append(Chunk(req, req.num_computed, new))
            budget -= new
            i += 1
        # waiting requests (FCFS), only if nothing was preempted in this step
        if not preempted:
            self.admit_waiting(chunks, budget)
        return StepPlan(chunks, preempted, need)

    def admit_waiting(self, chunks: list, budget: int) -> None:
        """Admit waiting requests FCFS while the token budget, max_num_seqs and the pool allow."""
        pool, batch, waiting, prefilling = self.pool, self.batch, self.waiting, self.prefilling
        bs, prefix_caching = pool.block_size, self.prefix_caching
        # free sequence slots (admissions join the prefills; the decoders do not change here)
        slots = self.max_num_seqs - batch.num_running_seqs - len(prefilling)
        queries = hits = 0
        while waiting and budget > 0 and slots > 0:
            req = waiting[0]
            hit = evictable = 0
            if prefix_caching and req.num_computed == 0 and pool.runs:  # (no runs: lookup finds nothing)
                hit, evictable = pool.lookup(req)
            start = hit * bs
            num_tokens = req.num_tokens
            new = min(num_tokens - start, budget)
            if self.state_aligned_chunks and not (new := self.aligned_chunk(req, start, new)):
                break
            if pool.admission_blocks(req, hit, start + new) + evictable > pool.num_free():
                break
            waiting.popleft()
            if not req.prefix_queried:  # prefix-cache hit statistics: first admission only
                req.prefix_queried = True
                req.cached_prompt_tokens = start
            queries += num_tokens
            hits += start
            pool.admit(req, hit, new)
            req.state = PREFILL
            req.admit_seq = self.next_admit_seq
            self.next_admit_seq += 1
            prefilling.append(req)
            chunks.append(Chunk(req, start, new))
            budget -= new
            slots -= 1
        self.prefix_cache_queries_tokens += queries
        self.prefix_cache_hits_tokens += hits
