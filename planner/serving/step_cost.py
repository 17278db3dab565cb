"""The step formula (:func:`planner.roofline.step_parts`'s terms) on floats for the simulator (:class:`StepCost`),
and the closed-form sums the decode fast-forward uses (:func:`sum_max_linear`)."""

from __future__ import annotations

from planner.attention_sums import attended_prefill, prefill_kv_read
from planner.compile_keys import context_compile_s, keys_at_start, shape_compile_s, step_compile_key
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.roofline import (
    HwCoeffs,
    ModelCosts,
    attention_parts,
    hw_coeffs,
    linear_s,
    model_costs,
    step_total,
    token_parts,
)
from planner.specs import Deployment, GpuSpec, ModelSpec
from planner.units import SCALAR


def eager_cpu_s(mc: ModelCosts, hw: HwCoeffs, tokens: float, launch_s: float) -> float:
    """How long a step keeps the engine's CPU in its ``execute_model`` call beyond a full CUDA graph's: its launch
    floor (``launch_s``, :func:`planner.roofline.token_parts`: a piecewise prompt step's inside the graphs, 0 for a
    full graph) and, above the largest CUDA graph (eager), the per-layer eager costs the in-process stages fit
    additively (the overhead of token_parts: a stage fitted on in-process probes that keeps them; the committed H200
    profile's every MoE variant launches as a floor instead).  With
    async scheduling vLLM 0.26 schedules the next step when this call returns and sends the last step's tokens only
    after it (:meth:`planner.serving.engine.Engine.send_outputs`)."""
    if tokens <= mc.cudagraph_max_tokens:
        return launch_s
    return launch_s + mc.num_layers * hw.eager_layer_overhead_s + mc.num_moe_layers * hw.moe_eager_layer_overhead_s


class StepCost:
    """The one step formula (:func:`planner.roofline.token_parts` + :func:`~planner.roofline.attention_parts`)
    on floats, for one replica.

    The simulator evaluates ~10⁵ steps, so the formula runs with ``xp=SCALAR`` (numpy on a scalar costs ~50×
    more) and a step's token-only parts (GEMMs, all-reduces, overheads: a function of the step's tokens,
    sampled sequences and whether it prefills) are computed once per distinct step shape.  ``step_s`` equals
    :attr:`StepTime.total_s <planner.roofline.StepTime.total_s>` of the same step bit for bit (same terms, same
    order).  ``parts`` splits a step into (constant, attention-compute, attention-memory) seconds so a run of
    decode steps — where only the attention terms change, linearly with the context — sums in closed form.
    """

    __slots__ = ("attn_compute_s_per_decode_attended", "attn_memory_s_per_kv_read_token", "hw_coeffs",
                 "compile_key", "compile_keys_at_start", "context_compile_s", "model_costs", "num_full_layers",
                 "num_sliding_layers",
                 "request_overhead_s", "shape_compile_s",
                 "token_memo", "window_tokens")

    #: distinct step shapes kept (a 10,000-request run has a few thousand; a long sweep is bounded by this)
    MEMO_MAX = 1 << 16

    def __init__(self, mc: ModelCosts, hw: HwCoeffs):
        self.model_costs, self.hw_coeffs = mc, hw
        # what the engine's decode batch and scheduler read (layer counts, window, per-request overhead)
        self.num_full_layers, self.num_sliding_layers, self.window_tokens = mc.full_layers, mc.sliding_layers, \
            mc.window_tokens
        self.request_overhead_s = hw.request_overhead_s
        # the JIT stall of a step above the CUDA graphs with a new compile key (Triton MoE; 0: none), the key of a
        # step size (None: no such compile) and the keys a started engine has (planner.compile_keys)
        self.shape_compile_s, self.compile_key, self.compile_keys_at_start = 0.0, None, frozenset()
        # ... and an MLA engine's one compile of its chunked prefill with context (compile_keys.MLA_CONTEXT_KEY)
        self.context_compile_s = 0.0
        # (tokens, sampled, prefill) -> (linear, comm, overhead, constant, launch floor, eager CPU call) s
        self.token_memo: dict = {}
        # d(attention seconds)/d(context): the attention terms are linear in the attended context and the KV
        # read, so the formula at one context token (and no step tokens) is the slope the fast-forward sums
        self.attn_compute_s_per_decode_attended, self.attn_memory_s_per_kv_read_token, _, _ = attention_parts(
            mc, hw, 0.0, 0.0, 1.0, 1.0)

    @classmethod
    def from_specs(cls, model: ModelSpec, gpu: GpuSpec, deployment: Deployment,
                   profile: CalibrationProfile = IDEAL_PROFILE) -> StepCost:
        cost = cls(model_costs(model, deployment), hw_coeffs(gpu, deployment.weight_dtype, profile, model))
        cost.shape_compile_s = shape_compile_s(model, deployment.weight_dtype, profile)
        if cost.shape_compile_s:  # only a MoE model whose profile measured the stall pays compiles (Engine)
            cost.compile_key = step_compile_key(model, deployment)
            cost.compile_keys_at_start = keys_at_start(deployment, model, cost.compile_key)
        cost.context_compile_s = context_compile_s(model, profile)
        return cost

    @property
    def mode(self) -> str:
        return self.hw_coeffs.mode

    def _token_terms(self, tokens: float, sampled: float, prefill: bool, chunk: float = 0.0) -> tuple:
        """(linear s, comm s, overhead s, constant s, launch floor s, eager CPU call s) of a step shape (``chunk``: its
        longest prompt chunk, tokens), memoised."""
        long_chunk = chunk > self.model_costs.decode_path_max_tokens
        key = (tokens, sampled, prefill, long_chunk)
        terms = self.token_memo.get(key)
        if terms is None:
            p = token_parts(self.model_costs, self.hw_coeffs, tokens, sampled, prefill, SCALAR, long_chunk)
            linear = linear_s(p["linear_compute_s"], p["linear_memory_s"], p["dequant_s"], p["moe_compute_s"],
                              p["moe_memory_s"], max)
            terms = (linear, p["comm_s"], p["overhead_s"], step_total(linear, 0.0, 0.0, p["comm_s"], p["overhead_s"],
                                                                      max), p["launch_s"],
                     eager_cpu_s(self.model_costs, self.hw_coeffs, tokens, p["launch_s"]))
            if len(self.token_memo) >= self.MEMO_MAX:
                self.token_memo.clear()
            self.token_memo[key] = terms
        return terms

    def parts(self, tokens: float, sampled: float, att_prefill: float, att_decode: float, kv_read: float,
              chunk: float = 0.0):
        """(constant_s, attention_compute_s, attention_memory_s); the step takes
        constant + max(attention_compute, attention_memory) (summed in that order: within an ulp of
        ``step_s``) — for a step without a CUDA-graph launch floor (:meth:`launch_s` 0: the engine steps eager
        decode runs one by one).  ``kv_read`` = layer-weighted context tokens read from the cache (decode
        contexts + prefill chunks' prior context)."""
        if tokens <= 0:
            return 0.0, 0.0, 0.0
        const = self._token_terms(tokens, sampled, att_prefill > 0 or chunk > 0, chunk)[3]
        ac, am, _, _ = attention_parts(self.model_costs, self.hw_coeffs, tokens, att_prefill, att_decode, kv_read,
                                       sampled)
        return const, ac, am

    def step_s(self, tokens: float, sampled: float, att_prefill: float = 0.0, att_decode: float = 0.0,
               kv_read: float = 0.0, chunk: float = 0.0) -> float:
        """Seconds of one step: :attr:`planner.roofline.StepTime.total_s` of the same step, on floats (``chunk``: its
        longest prompt chunk, which picks MLA's attention pathway; > 0 makes it a prompt step whatever ``att_prefill``:
        an MLA chunk on the decode pathway brings its attended context in ``att_decode``)."""
        if tokens <= 0:
            return 0.0
        linear, comm, overhead, _, launch, _ = self._token_terms(tokens, sampled, att_prefill > 0 or chunk > 0, chunk)
        ac, am, _, _ = attention_parts(self.model_costs, self.hw_coeffs, tokens, att_prefill, att_decode, kv_read,
                                       sampled)
        return step_total(linear, ac, am, comm, overhead, max, launch)

    def launch_s(self, tokens: float, sampled: float, prefill: bool = False, chunk: float = 0.0) -> float:
        """The CPU launch floor of a step of this shape (> 0 above the largest CUDA graph, and for a prompt step
        inside them: piecewise)."""
        return self._token_terms(tokens, sampled, prefill, chunk)[4] if tokens > 0 else 0.0

    def cpu_s(self, tokens: float, sampled: float, prefill: bool = False, chunk: float = 0.0) -> float:
        """How long a step of this shape keeps the CPU in its launch call beyond a full CUDA-graph step
        (:func:`eager_cpu_s`: the eager or piecewise launch; 0 for a decode step inside the CUDA graphs)."""
        return self._token_terms(tokens, sampled, prefill, chunk)[5] if tokens > 0 else 0.0

    def chunk_sums(self, chunks, kv_read: float = 0.0) -> tuple[float, float, float, float]:
        """(attended context on the prefill pathway, on the decode pathway, ``kv_read`` + the cached tokens they
        read, longest chunk) of a step's prompt chunks, ``(start, tokens)`` pairs.  A chunk on MLA's decode pathway (up to
        ``model_costs.decode_path_max_tokens``) attends in the absorbed form: its sum goes with the decodes' (their
        FLOPs per context token), as :func:`planner.roofline.step_time` prices one chunk; a longer one also
        up-projects its cached context (``model_costs.context_upproj_tokens`` more attended tokens per context token
        read); other attention has one pathway (the sum stays the prefill one)."""
        mc = self.model_costs
        limit, long_sum, short_sum, kv, longest = mc.decode_path_max_tokens, 0.0, 0.0, kv_read, 0.0
        for start, new in chunks:
            read = self.prefill_kv_read(start)
            if new <= limit < float("inf"):
                short_sum += self.attended_prefill(start, new)
            else:
                long_sum += self.attended_prefill(start, new) + mc.context_upproj_tokens * read
            kv += read
            longest = max(longest, new)
        return long_sum, short_sum, kv, longest

    def attended_prefill(self, start: float, chunk: float) -> float:
        """:func:`planner.attention_sums.attended_prefill` on floats."""
        return attended_prefill(self.model_costs, start, chunk, SCALAR)

    def prefill_kv_read(self, start: float) -> float:
        """:func:`planner.attention_sums.prefill_kv_read` on floats."""
        return prefill_kv_read(self.model_costs, start, SCALAR)


def _line_sum(a: float, b: float, j0: int, j1: int) -> float:
    """Σ_{j=j0}^{j1−1} (a + b·j)."""
    m = j1 - j0
    return a * m + b * (j0 + j1 - 1) * m * 0.5 if m > 0 else 0.0


def sum_max_linear(a1: float, b1: float, a2: float, b2: float, n: int) -> float:
    """Σ_{j=0}^{n−1} max(a1 + b1·j, a2 + b2·j) in closed form (the lines cross at most once)."""
    if n <= 0:
        return 0.0
    d0, db = a1 - a2, b1 - b2
    if db == 0.0 or (d0 >= 0.0 and db > 0.0) or (d0 <= 0.0 and db < 0.0):
        if d0 > 0.0 or (d0 == 0.0 and db >= 0.0):
            return _line_sum(a1, b1, 0, n)
        return _line_sum(a2, b2, 0, n)
    m = min(n, int(-d0 / db) + 1)  # j < m keep the sign of d0
    if d0 > 0.0:
        return _line_sum(a1, b1, 0, m) + _line_sum(a2, b2, m, n)
    return _line_sum(a2, b2, 0, m) + _line_sum(a1, b1, m, n)
