"""The running decoders as aggregates (:class:`DecodeBatch`), so a step costs O(1), not O(batch).

Every decoder's context is ``context_offset + tokens_advanced``: the batch advances all contexts at
once by bumping ``tokens_advanced`` (one token per step, or the expected accepted tokens with
speculative decoding).  What a step needs — the attended context, the KV blocks the next tokens
need — is kept as sums and counts (Σ offsets, decoders per block phase, decoders still inside a
sliding window), never recomputed per request.  Two heaps give the next event: the next decoder to
finish, and the next to leave the sliding window.
"""

from __future__ import annotations

import heapq
import math

from planner.serving.request import DECODE, Request


class DecodeBatch:
    """Decoding requests by admission order, and their aggregates."""

    __slots__ = (
        "block_size",
        "by_seq",
        "count_by_block_phase",
        "finish_heap",
        "num_decode_steps",
        "num_full_layers",
        "num_in_window",
        "num_running_seqs",
        "num_sliding_layers",
        "num_spec_tokens",
        "sum_context_offsets",
        "sum_offsets_in_window",
        "tokens_advanced",
        "tokens_per_step",
        "window_heap",
        "window_tokens",
    )

    def __init__(self, block_size: int, num_full_layers: int, num_sliding_layers: int, window_tokens: float,
                 num_spec_tokens: int, tokens_per_step: float):
        self.block_size = block_size
        self.num_full_layers, self.num_sliding_layers, self.window_tokens = (num_full_layers, num_sliding_layers,
                                                                             window_tokens)
        self.num_spec_tokens = num_spec_tokens  # k draft tokens verified per step (0: no speculative decoding)
        self.tokens_per_step = tokens_per_step  # expected tokens a step adds to each context
        self.by_seq: dict[int, Request] = {}  # admission sequence number -> request, in admission order
        self.num_running_seqs = 0
        self.sum_context_offsets = 0
        self.count_by_block_phase = [0] * block_size  # decoders by context_offset mod block_size
        self.finish_heap: list = []  # (tokens_advanced at which it finishes, seq, request); stale entries skipped
        self.num_in_window = 0  # sliding window: decoders whose context is still inside the window
        self.sum_offsets_in_window = 0
        self.window_heap: list = []  # (tokens_advanced at which it leaves the window, seq, request)
        self.num_decode_steps = 0  # decode steps so far
        self.tokens_advanced = 0  # tokens each decoder advanced so far (= steps without speculative decoding)

    # ------------------------------------------------------------------------------ progress

    def tokens_after(self, steps: int) -> int:
        """Tokens advanced after ``steps`` decode steps (speculative: the expected accepted tokens)."""
        if self.num_spec_tokens == 0:
            return steps
        return math.floor(steps * self.tokens_per_step + 1e-9)

    def steps_until_tokens(self, target: int) -> int:
        """Smallest n >= 1 with tokens_after(num_decode_steps + n) >= target."""
        if self.num_spec_tokens == 0:
            return max(1, target - self.num_decode_steps)
        steps = max(self.num_decode_steps + 1, math.ceil((target - 1e-9) / self.tokens_per_step) - 1)
        while self.tokens_after(steps) < target:
            steps += 1
        return max(1, steps - self.num_decode_steps)

    def advance(self, steps: int) -> None:
        """``steps`` decode steps ran."""
        self.num_decode_steps += steps
        self.tokens_advanced = self.tokens_after(self.num_decode_steps)

    def blocks_needed(self, advance: int) -> int:
        """New blocks the decoders need to advance ``advance`` tokens from the current position.

        A decoder at c = 16m + r tokens holds ceil(c/16) blocks and needs
        ceil((c + a)/16) − ceil(c/16) = q + [r = 0 and rem > 0] + [r > 16 − rem] more (a = 16q + rem);
        decoders are counted by r, so this is a few list sums, not a loop over requests."""
        bs, tokens, counts = self.block_size, self.tokens_advanced, self.count_by_block_phase
        if advance == 1 and bs > 1:  # the common case (one decode step): q = 0, rem = 1
            return counts[(-tokens) % bs]
        q, rem = divmod(advance, bs)
        total = q * self.num_running_seqs
        if rem:
            total += counts[(-tokens) % bs]
            if rem > 1:  # r in [bs − rem + 1, bs − 1]
                lo = (bs - rem + 1 - tokens) % bs
                hi = lo + rem - 1
                total += sum(counts[lo:hi]) if hi <= bs else sum(counts[lo:]) + sum(counts[:hi - bs])
        return total

    # ------------------------------------------------------------------------------ membership

    def join(self, req: Request) -> None:
        """req finished its prefill: it decodes from now on."""
        tokens = self.tokens_advanced
        offset = req.num_computed - tokens
        req.context_offset = offset
        req.state = DECODE
        self.by_seq[req.admit_seq] = req
        self.num_running_seqs += 1
        self.sum_context_offsets += offset
        self.count_by_block_phase[offset % self.block_size] += 1
        heapq.heappush(self.finish_heap, (tokens + req.output_tokens - req.num_generated, req.admit_seq, req))
        if self.num_sliding_layers:
            t_cross = int(self.window_tokens) - 1 - offset
            if tokens < t_cross:
                req.in_window = True
                self.num_in_window += 1
                self.sum_offsets_in_window += offset
                heapq.heappush(self.window_heap, (t_cross, req.admit_seq, req))
            else:
                req.in_window = False

    def leave(self, req: Request) -> int:
        """Remove req from the aggregates (finished or preempted); returns its computed tokens."""
        del self.by_seq[req.admit_seq]
        offset = req.context_offset
        self.num_running_seqs -= 1
        self.sum_context_offsets -= offset
        self.count_by_block_phase[offset % self.block_size] -= 1
        if req.in_window:
            self.num_in_window -= 1
            self.sum_offsets_in_window -= offset
            req.in_window = False
        computed = offset + self.tokens_advanced
        generated = req.num_generated + computed - req.num_computed  # req.num_computed: at join
        req.num_generated = min(req.output_tokens, generated)
        req.num_computed = computed
        return computed

    def latest(self) -> Request:
        """The most recently admitted decoder (the one vLLM preempts first)."""
        return self.by_seq[next(reversed(self.by_seq))]

    def pop_finished(self) -> Request | None:
        """A decoder whose last token is out, or None."""
        heap, tokens = self.finish_heap, self.tokens_advanced
        while heap and heap[0][0] <= tokens:
            _, seq, req = heapq.heappop(heap)
            if req.state == DECODE and req.admit_seq == seq:
                return req
            # stale: preempted since
        return None

    def next_finish(self) -> int | None:
        """tokens_advanced at which the next decoder finishes (None: no decoder)."""
        heap = self.finish_heap
        while heap and (heap[0][2].state != DECODE or heap[0][2].admit_seq != heap[0][1]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def update_window(self) -> None:
        """Decoders whose context reached the sliding window attend a full window from now on."""
        heap, tokens = self.window_heap, self.tokens_advanced
        while heap and heap[0][0] <= tokens:
            _, seq, req = heapq.heappop(heap)
            if req.state != DECODE or req.admit_seq != seq or not req.in_window:
                continue
            req.in_window = False
            self.num_in_window -= 1
            self.sum_offsets_in_window -= req.context_offset

    def next_window_exit(self) -> int | None:
        """tokens_advanced at which the next decoder leaves the sliding window (None: none will)."""
        heap = self.window_heap
        while heap and (heap[0][2].state != DECODE or heap[0][2].admit_seq != heap[0][1] or not heap[0][2].in_window):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    # ------------------------------------------------------------------------------ load

    def attended(self, tokens: int) -> float:
        """Layer-weighted context tokens the decoders attend once each has advanced ``tokens``."""
        a = self.num_full_layers * (self.sum_context_offsets + self.num_running_seqs * (tokens + 1))
        if self.num_sliding_layers:
            a += self.num_sliding_layers * (self.sum_offsets_in_window + self.num_in_window * (tokens + 1)
                                            + self.window_tokens * (self.num_running_seqs - self.num_in_window))
        return a

    def attended_growth(self) -> float:
        """d(attended)/d(tokens advanced): every full layer of every decoder, sliding layers inside the window."""
        return self.num_full_layers * self.num_running_seqs + (
            self.num_sliding_layers * self.num_in_window if self.num_sliding_layers else 0.0)

    def load(self, tokens: int):
        """(tokens, sampled, decode-attended flops context, kv read) of a step of the decoders at ``tokens``."""
        seqs = self.num_running_seqs
        attended = self.attended(tokens)
        if self.num_spec_tokens:
            k1 = self.num_spec_tokens + 1
            return seqs * k1, seqs * k1, k1 * attended + self.num_full_layers * seqs * self.num_spec_tokens * k1 / 2.0, \
                attended
        return seqs, seqs, attended, attended
