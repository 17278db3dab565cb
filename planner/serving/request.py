"""Per-request state of the simulated engine (vLLM ``v1/request.py``'s role) and how a workload
table becomes requests.

KV blocks are numbered by their position in a request's token sequence.  A request's blocks are a
chain of *segments*, each owned by one token owner of the prefix cache (see
:mod:`planner.serving.block_pool`): a shared prefix group's blocks, then (for a conversation's next
turn) every earlier turn's own blocks, then the request's own blocks.
"""

from __future__ import annotations

from planner.serving.workloads import Requests

NAN = float("nan")

# request states
PENDING, WAITING, PREFILL, DECODE, DONE, REJECTED = range(6)

#: The end block of a request's own segment: unbounded (its own tokens extend as far as it runs).
OWN_SEGMENT_END = 1 << 40


class Request:
    """One request's progress, its KV blocks and its timings (seconds from the run's start)."""

    __slots__ = (
        "admit_seq",
        "arrival_s",
        "cache_refs",
        "cached_prompt_tokens",
        "context_offset",
        "finish_s",
        "first_token_s",
        "has_next_turn",
        "in_window",
        "index",
        "num_cached_blocks",
        "num_computed",
        "num_generated",
        "num_preemptions",
        "num_registered_blocks",
        "num_tokens",
        "num_uncached_blocks",
        "output_tokens",
        "owner_id",
        "prefix_queried",
        "prompt_tokens",
        "segments",
        "shared_prefix_blocks",
        "shared_segments",
        "state",
        "window_chunk_blocks",
    )

    def __init__(self, index: int, prompt_tokens: int, output_tokens: int, owner_id: int, shared_segments: tuple):
        self.index, self.prompt_tokens, self.output_tokens = index, prompt_tokens, output_tokens
        self.owner_id = owner_id  # prefix-cache owner of this request's own tokens
        self.shared_segments = shared_segments  # ((owner id, end block), ...) of the prefixes it shares
        # (owner id, end block) of consecutive block ranges, the request's own blocks last
        self.segments = shared_segments + ((owner_id, OWN_SEGMENT_END),)
        self.arrival_s = NAN
        self.num_generated = 0  # output tokens sampled so far
        self.num_computed = 0  # tokens whose KV is computed (decoders: at the time they joined the batch)
        self.num_tokens = prompt_tokens  # tokens to prefill: the prompt, plus the outputs after a preemption
        self.first_token_s = NAN
        self.finish_s = NAN
        self.cache_refs: list = []  # [run, end block] per prefix-cache run whose blocks this request references
        self.num_cached_blocks = 0  # blocks held through cache_refs
        self.num_uncached_blocks = 0  # blocks held outside the prefix cache
        self.window_chunk_blocks = 0  # sliding groups' blocks beyond its window while a prompt chunk computes
        self.num_registered_blocks = 0  # blocks [0, n) are referenced or were considered for caching
        self.admit_seq = -1  # admission order among running requests (preemption takes the latest)
        self.context_offset = 0  # while decoding: context = offset + the batch's tokens advanced
        self.state = PENDING
        self.cached_prompt_tokens = -1  # prefix-cache hit at first admission (-1: not admitted yet)
        self.num_preemptions = 0
        self.in_window = False  # sliding window: the decode context is still inside the window
        self.prefix_queried = False
        self.shared_prefix_blocks = shared_segments[-1][1] if shared_segments else 0  # blocks other requests share
        self.has_next_turn = False  # a later request (its next turn) starts with this request's tokens


def build_requests(reqs: Requests, block_size: int) -> tuple[list[Request], dict[int, list[int]]]:
    """The workload table as :class:`Request` objects, and each request's next turns (by index).

    Owner ids: request ``i``'s own tokens are owner ``i``; shared prefix group ``g`` is owner
    ``n + 1 + g``.  A next turn's segments are its parent's, then the parent's own full blocks."""
    n = len(reqs)
    out: list[Request] = []
    prompt = reqs.prompt_tokens.tolist()
    output = reqs.output_tokens.tolist()
    group = reqs.prefix_group.tolist()
    prefix = reqs.prefix_tokens.tolist()
    parent = reqs.parent.tolist()
    children: dict[int, list[int]] = {}
    for i in range(n):
        p = parent[i]
        if p >= 0:
            pr = out[p]
            segs = pr.shared_segments + ((pr.owner_id, (pr.prompt_tokens + pr.output_tokens) // block_size),)
            children.setdefault(p, []).append(i)
            pr.has_next_turn = True
        elif group[i] >= 0 and prefix[i] >= block_size:
            segs = ((n + 1 + group[i], prefix[i] // block_size),)
        else:
            segs = ()
        out.append(Request(i, prompt[i], output[i], i, segs))
    return out, children
