"""The paged KV block pool and its prefix cache (vLLM ``v1/core/kv_cache_manager.py`` and
``block_pool.py``'s role).

vLLM identifies a full block by the hash of all tokens up to its end; a newly admitted request
reuses the cached blocks of its longest cached prefix (at most all but its last token).  Here the
cache is keyed by *token owner* instead (a shared prefix group, or one request's own tokens, which
its next turn starts with): every request that uses an owner's blocks uses a prefix of them, and
vLLM frees a request's blocks tail first, so each owner's cached blocks stay one contiguous run —
a run-length representation replaces per-block hash tables.

Blocks are registered in the cache as soon as they are allocated (so requests admitted later in the
same step hit them); unreferenced cached blocks stay in the pool and are evicted least-recently-freed
first when blocks are needed.  Approximation: blocks that were never cached are reused before cached
ones.
"""

from __future__ import annotations

from collections import deque

from planner.serving.request import Request
from planner.units import cdiv


class CachedRun:
    """Cached blocks of one token owner: blocks [base, cached_end) of the token sequence.

    ``refs_by_end[end]`` counts the requests referencing [base, end); blocks
    [referenced_end, cached_end), above the longest reference, are cached but unreferenced
    (evictable)."""

    __slots__ = ("base", "cached_end", "referenced_end", "refs_by_end")

    def __init__(self, base: int):
        self.base = self.cached_end = self.referenced_end = base
        self.refs_by_end: dict[int, int] = {}


class BlockPool:
    """``num_blocks`` KV blocks of ``block_size`` tokens: free uncached blocks, cached runs (their
    referenced and evictable blocks) and the blocks requests hold outside the cache.  A request's tokens take a block
    per ``block_size`` (its full-attention group's); besides them, from :meth:`admit` to :meth:`release` and never
    cached, its :meth:`side_blocks`: ``state_blocks`` for its recurrent state (linear-attention / Mamba layers: vLLM's
    hybrid allocator gives every state layer group a page of the pool per running request) and, in each of
    ``window_groups`` sliding-window groups, the blocks of its last window (at most ``window_blocks``; fewer for a
    request whose last token comes before: vLLM frees a sliding group's blocks once they leave the window)."""

    __slots__ = ("block_size", "eviction_queue", "num_blocks", "num_evictable", "num_free_uncached",
                 "prefix_caching", "runs", "state_blocks", "window_admission_blocks", "window_blocks", "window_groups")

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool, state_blocks: int = 0,
                 window_groups: int = 0, window_blocks: int = 0, window_admission_blocks: int = 0):
        self.block_size = block_size
        self.state_blocks = state_blocks
        self.window_groups, self.window_blocks = window_groups, window_blocks
        self.window_admission_blocks = max(window_admission_blocks, window_blocks)
        self.num_blocks = num_blocks
        self.prefix_caching = prefix_caching
        self.num_free_uncached = num_blocks
        self.runs: dict[int, CachedRun] = {}  # by owner id
        self.eviction_queue: deque = deque()  # [run, lo, hi]: blocks that became unreferenced, oldest first
        self.num_evictable = 0  # cached, unreferenced blocks (free for allocation)

    def num_free(self) -> int:
        return self.num_free_uncached + self.num_evictable

    def last_blocks(self, req: Request) -> int:
        """Blocks of ``req``'s tokens at its last token (prompt + output)."""
        return cdiv(req.prompt_tokens + req.output_tokens, self.block_size)

    def side_blocks(self, req: Request) -> int:
        """Blocks ``req`` holds besides its tokens' while it runs (see the class): its state's, and its sliding groups'
        at its last token (prompt + output), which it reaches by then."""
        if not self.window_groups:
            return self.state_blocks
        return self.state_blocks + self.window_groups * min(self.last_blocks(req), self.window_blocks)

    def admission_blocks(self, req: Request, hit_blocks: int, tokens: int) -> int:
        """The free blocks vLLM 0.26 asks before it admits ``req`` (waiting, or preempted), its cached prefix of
        ``hit_blocks`` blocks found, to compute up to ``tokens`` tokens in this step (scheduler_reserve_full_isl, on by
        default: KVCacheManager.allocate_slots(full_sequence_must_fit)): its whole sequence so far (the prompt, and a
        preempted request's outputs) in the full-attention group, in each sliding group at most
        ``window_admission_blocks``, and its state's; never fewer than what it takes now (:meth:`admit`).
        Before 0.26 only the first chunk was asked for."""
        n = req.num_tokens
        ask = self.blocks_for(req, n, hit_blocks) + self.state_blocks + self.window_groups * min(
            cdiv(n, self.block_size), self.window_admission_blocks)
        start = hit_blocks * self.block_size
        return max(ask, self.blocks_for(req, tokens, hit_blocks) + self.side_blocks(req)
                   + self.chunk_window_blocks(req, start, tokens - start))

    def chunk_window_blocks(self, req: Request, start: int, new: int) -> int:
        """The blocks a prompt chunk of ``new`` tokens from ``start`` holds in the sliding groups beyond
        :meth:`side_blocks` while it computes: vLLM 0.26 allocates every token of the chunk there and frees what left
        the window at the request's next allocation (SlidingWindowManager.remove_skipped_blocks), so a group holds the
        window before the chunk and the chunk (Gemma-3-27B, an 8,192-token chunk from 8,192: blocks 448-1,023, 576
        where its side blocks are 65: 511 more in each of its 6 sliding groups)."""
        if not self.window_groups:
            return 0
        bs = self.block_size
        lo = max(0, start - (self.window_blocks - 1) * bs + 1) // bs
        held = min(self.last_blocks(req), self.window_blocks)  # each sliding group's share of side_blocks
        return self.window_groups * max(0, cdiv(start + new, bs) - lo - held)

    def end_chunk(self, req: Request) -> None:
        """After its chunk's step: req's sliding groups keep only its window (:meth:`chunk_window_blocks`)."""
        self.num_free_uncached += req.window_chunk_blocks
        req.window_chunk_blocks = 0

    def most_blocks(self, req: Request) -> int:
        """The most blocks ``req`` asks free or holds, alone in the engine: at its last token (:meth:`side_blocks`,
        :meth:`admission_blocks` of a request preempted then); more than the pool: it can never run."""
        last = self.last_blocks(req)
        return last + self.state_blocks + self.window_groups * min(last, self.window_admission_blocks)

    def num_used(self) -> int:
        return self.num_blocks - self.num_free_uncached - self.num_evictable

    def take(self, m: int) -> None:
        """Allocate m blocks: uncached free blocks first, then evict cached unreferenced blocks,
        least recently freed first (each run's blocks from its last block down)."""
        if m <= self.num_free_uncached:  # the common case: no eviction
            self.num_free_uncached -= m
            return
        t = min(self.num_free_uncached, m)
        self.num_free_uncached -= t
        m -= t
        queue = self.eviction_queue
        while m > 0:
            entry = queue[0]
            run = entry[0]
            top = min(run.cached_end, entry[2])
            bottom = max(run.referenced_end, entry[1])
            k = top - bottom
            if k <= 0:
                queue.popleft()
                continue
            k = min(k, m)
            run.cached_end -= k
            self.num_evictable -= k
            m -= k

    def _reference(self, req: Request, run: CachedRun, seg_lo: int, end: int) -> None:
        """Make req reference run's blocks [base, end) (replacing a shorter reference it may hold)."""
        before = run.cached_end - run.referenced_end if run.cached_end > run.referenced_end else 0
        ends = run.refs_by_end
        refs = req.cache_refs
        for ref in (refs[-1:] if refs and refs[-1][0] is run else refs):
            if ref[0] is run:
                old = ref[1]
                n = ends[old] - 1
                if n:
                    ends[old] = n
                else:
                    del ends[old]
                ref[1] = end
                req.num_cached_blocks += end - old
                break
        else:
            req.cache_refs.append([run, end])
            req.num_cached_blocks += end - seg_lo
        ends[end] = ends.get(end, 0) + 1
        run.referenced_end = max(run.referenced_end, end)
        after = run.cached_end - run.referenced_end if run.cached_end > run.referenced_end else 0
        self.num_evictable += after - before

    def register(self, req: Request, a: int, b: int) -> None:
        """Blocks [a, b) of req are full and computed: cache them (req held them as uncached blocks).
        Blocks already cached by an earlier request are shared instead (req's copies are freed)."""
        runs = self.runs
        lo = 0
        for owner, upto in req.segments:
            if lo >= b:
                break
            x = max(lo, a)
            y = min(upto, b)
            if y > x:
                run = runs.get(owner)
                if run is None:
                    run = runs[owner] = CachedRun(lo)
                cached_end = run.cached_end
                if cached_end >= x:  # contiguous with what is cached
                    if cached_end < y:  # extend; the new blocks count as evictable until req references them
                        ref_end = run.referenced_end
                        before = cached_end - ref_end if cached_end > ref_end else 0
                        run.cached_end = y
                        self.num_evictable += (y - ref_end if y > ref_end else 0) - before
                    duplicates = (min(y, cached_end)) - x
                    self.num_free_uncached += duplicates
                    req.num_uncached_blocks -= y - x
                    self._reference(req, run, lo, y)
            lo = upto

    def release(self, req: Request, computed: int, recompute: bool = False) -> None:
        """Free req's blocks holding ``computed`` tokens; full blocks stay cached (evictable).

        Blocks of req's own tokens are cached only if some request can still hit them (req's
        recompute after a preemption, or req's next turn); otherwise they are returned uncached —
        vLLM would cache them too, but nothing can hit them, and skipping them keeps the simulator
        fast."""
        bs = self.block_size
        req.num_uncached_blocks = cdiv(computed, bs) - req.num_cached_blocks
        if self.prefix_caching:
            full = computed // bs
            if not (recompute or req.has_next_turn) and full > req.shared_prefix_blocks:
                full = req.shared_prefix_blocks
            if full > req.num_registered_blocks:
                self.register(req, req.num_registered_blocks, full)
            queue = self.eviction_queue
            for run, end in reversed(req.cache_refs):  # the tail first, as vLLM frees
                before = run.cached_end - run.referenced_end if run.cached_end > run.referenced_end else 0
                ends = run.refs_by_end
                n = ends[end] - 1
                old_ref_end = run.referenced_end
                if n:
                    ends[end] = n
                else:
                    del ends[end]
                    if end == old_ref_end:
                        run.referenced_end = max(ends) if ends else run.base
                after = run.cached_end - run.referenced_end if run.cached_end > run.referenced_end else 0
                self.num_evictable += after - before
                if run.referenced_end < old_ref_end:
                    hi = min(run.cached_end, old_ref_end)
                    if hi > run.referenced_end:
                        queue.append([run, run.referenced_end, hi])
        self.num_free_uncached += req.num_uncached_blocks + self.side_blocks(req) + req.window_chunk_blocks
        req.window_chunk_blocks = 0
        req.cache_refs = []
        req.num_cached_blocks = 0
        req.num_uncached_blocks = 0
        req.num_registered_blocks = 0

    def lookup(self, req: Request) -> tuple[int, int]:
        """(cached blocks of req's longest cached prefix, how many of them are unreferenced).
        At most all but the last token can hit (vLLM recomputes the last one for its logits)."""
        max_blocks = (req.num_tokens - 1) // self.block_size
        runs = self.runs
        if max_blocks <= 0 or not runs:
            return 0, 0
        lo = evictable = 0
        for owner, upto in req.segments:
            if upto <= lo:
                continue  # an owner with no full block of its own (a turn shorter than a block)
            if max_blocks <= lo:
                break
            end = min(max_blocks, upto)
            run = runs.get(owner)
            if run is None or run.cached_end <= lo:
                break
            hit = min(end, run.cached_end)
            if hit > run.referenced_end:
                evictable += hit - run.referenced_end
            lo = hit
            if hit < end:
                break
        return lo, evictable

    def reference_hits(self, req: Request, hit_blocks: int) -> None:
        """Make req reference the first ``hit_blocks`` blocks of its prefix (found by :meth:`lookup`)."""
        runs = self.runs
        lo = 0
        for owner, upto in req.segments:
            if lo >= hit_blocks:
                break
            if upto <= lo:
                continue
            end = min(hit_blocks, upto)
            self._reference(req, runs[owner], lo, end)
            lo = end

    def blocks_for(self, req: Request, tokens: int, hit_blocks: int = 0) -> int:
        """New blocks req must take to hold its first ``tokens`` tokens: beyond the blocks it holds and the
        ``hit_blocks`` cached blocks of its prefix it is about to reference (:meth:`admit`)."""
        return cdiv(tokens, self.block_size) - req.num_cached_blocks - req.num_uncached_blocks - hit_blocks

    def admit(self, req: Request, hit_blocks: int, new_tokens: int) -> None:
        """req (holding no blocks: new, or released when preempted) starts at its cached prefix of ``hit_blocks``
        blocks (:meth:`lookup`), computed up to there, and takes its state's blocks and those of its first
        ``new_tokens`` tokens beyond it."""
        if side := self.side_blocks(req):
            self.take(side)
        req.num_computed = hit_blocks * self.block_size
        req.cache_refs = []
        req.num_cached_blocks = 0
        req.num_uncached_blocks = 0
        if hit_blocks:
            self.reference_hits(req, hit_blocks)
        req.num_registered_blocks = hit_blocks
        self.allocate_chunk(req, new_tokens)

    def allocate_chunk(self, req: Request, new_tokens: int) -> None:
        """Allocate blocks for req's next ``new_tokens`` prompt tokens and cache its full blocks."""
        end = req.num_computed + new_tokens
        need = self.blocks_for(req, end)
        if need > 0:
            self.take(need)
            req.num_uncached_blocks += need
        if self.window_groups and (extra := self.chunk_window_blocks(req, req.num_computed, new_tokens)):
            self.take(extra)
            req.window_chunk_blocks += extra
        if self.prefix_caching:
            full = end // self.block_size
            if full > req.shared_prefix_blocks and not req.has_next_turn:
                full = req.shared_prefix_blocks  # req's own blocks are cached when freed (see release)
            if full > req.num_registered_blocks:
                self.register(req, req.num_registered_blocks, full)
                req.num_registered_blocks = full

    def check(self) -> tuple[int, int]:
        """Re-count the cache from scratch; returns (referenced cached blocks, used blocks)."""
        runs = self.runs.values()
        referenced = sum(run.referenced_end - run.base for run in runs)
        evictable = sum(run.cached_end - run.referenced_end for run in runs)
        assert all(run.base <= run.referenced_end <= run.cached_end for run in runs), "run range"
        assert evictable == self.num_evictable, ("evictable", evictable, self.num_evictable)
        used = self.num_used()
        assert 0 <= self.num_free_uncached <= self.num_blocks and used >= 0, "pool bounds"
        return referenced, used
