"""Step time of one engine step, reduced to float arithmetic (:class:`StepCost`), and the closed-form
sums the decode fast-forward uses (:func:`sum_max_linear`)."""

from __future__ import annotations

from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.kernel_families import experts_touched
from planner.roofline import HwCoeffs, ModelCosts, hw_coeffs, model_costs
from planner.specs import Deployment, GpuSpec, ModelSpec


class StepCost:
    """:func:`planner.roofline.step_time` for one step, reduced to float arithmetic.

    The simulator evaluates ~10⁵ steps; numpy on scalars would cost ~50× more than these few
    multiplications.  ``parts`` returns (constant, attention-compute, attention-memory) seconds so a
    run of decode steps — where only the attention terms change, linearly with the context — can be
    summed in closed form.  The result equals ``step_time(...).total_s`` (tests check it).

    Every per-GPU quantity is per pipeline stage; ``pipeline_parallel`` multiplies the stage time.
    """

    __slots__ = (
        "allreduce_custom_max_tokens",
        "allreduce_latency_s",
        "allreduce_s_per_token",
        "allreduces_per_step",
        "attn_compute_s_per_decode_attended",
        "attn_flops_per_context_token_decode",
        "attn_flops_per_context_token_prefill",
        "attn_flops_per_s",
        "attn_memory_s_per_kv_read_token",
        "cudagraph_max_tokens",
        "dense_weight_bytes",
        "dequant_s_per_token",
        "eager_overhead_s",
        "expert_weight_bytes",
        "experts_per_token",
        "hw_coeffs",
        "kv_bandwidth_bytes_per_s",
        "kv_bytes_per_context_token_layer",
        "linear_flops_per_token",
        "linear_peak_flops_per_s",
        "lm_head_flops_per_seq",
        "matmul_efficiency_max",
        "matmul_half_tokens",
        "model_costs",
        "moe_bandwidth_bytes_per_s",
        "moe_eager_overhead_s",
        "moe_flops_per_token",
        "moe_layer_overhead_s",
        "moe_prefill_overhead_s",
        "moe_matmul_efficiency_max",
        "moe_matmul_half_tokens",
        "moe_touch_fraction",
        "nccl_latency_s",
        "nccl_s_per_token",
        "num_attn_layers",
        "num_experts",
        "num_full_layers",
        "num_moe_layers",
        "num_sliding_layers",
        "per_seq_overhead_s",
        "per_token_overhead_s",
        "pipeline_parallel",
        "prefill_overhead_s",
        "request_overhead_s",
        "shape_extra_s",
        "shape_tokens_hi",
        "shape_tokens_lo",
        "step_overhead_s",
        "weight_bandwidth_bytes_per_s",
        "window_tokens",
    )

    def __init__(self, mc: ModelCosts, hw: HwCoeffs):
        self.model_costs, self.hw_coeffs = mc, hw
        self.pipeline_parallel = float(mc.pipeline_parallel)
        self.linear_flops_per_token = mc.linear_flops_per_token
        self.lm_head_flops_per_seq = mc.lm_head_flops_per_seq / mc.pipeline_parallel  # per pipeline stage
        self.dense_weight_bytes = mc.dense_weight_bytes
        self.num_moe_layers = mc.num_moe_layers
        self.num_experts = mc.num_experts
        self.experts_per_token = mc.experts_per_token
        self.expert_weight_bytes = mc.expert_weight_bytes
        self.matmul_efficiency_max, self.matmul_half_tokens = hw.matmul_efficiency_max, hw.matmul_half_tokens
        self.linear_peak_flops_per_s = hw.linear_peak_flops_per_s
        self.weight_bandwidth_bytes_per_s = hw.hbm_bandwidth_bytes_per_s * hw.weight_bandwidth_efficiency
        self.attn_flops_per_context_token_prefill = mc.attn_flops_per_ctx_prefill
        self.attn_flops_per_context_token_decode = mc.attn_flops_per_ctx_decode
        self.attn_flops_per_s = hw.attn_peak_flops_per_s * hw.attention_compute_efficiency
        self.kv_bytes_per_context_token_layer = mc.kv_bytes_per_ctx_layer
        kv_eff = hw.kv_bandwidth_efficiency_fp8 if mc.kv_cache_dtype == "fp8" else hw.kv_bandwidth_efficiency
        self.kv_bandwidth_bytes_per_s = hw.hbm_bandwidth_bytes_per_s * kv_eff
        self.num_full_layers, self.num_sliding_layers = mc.full_layers, mc.sliding_layers
        self.num_attn_layers = mc.full_layers + mc.sliding_layers
        self.window_tokens = mc.window_tokens
        self.allreduces_per_step = mc.allreduces_per_step
        self.allreduce_latency_s = hw.allreduce_latency_s
        n = mc.tensor_parallel
        ring_bytes_per_token = 2.0 * (n - 1) / n * mc.allreduce_bytes_per_token if n > 1 else 0.0
        self.allreduce_s_per_token = ring_bytes_per_token / hw.link_bandwidth_bytes_per_s
        self.nccl_latency_s = hw.nccl_latency_s
        self.nccl_s_per_token = ring_bytes_per_token / hw.nccl_bandwidth_bytes_per_s
        # above this many tokens a step's all-reduce message exceeds vLLM's custom all-reduce: NCCL
        self.allreduce_custom_max_tokens = (hw.allreduce_custom_max_bytes / mc.allreduce_bytes_per_token
                                            if mc.allreduce_bytes_per_token else float("inf"))
        self.dequant_s_per_token = hw.dequant_s_per_token_param * mc.quantized_params_per_token
        self.moe_flops_per_token = mc.moe_flops_per_token
        self.moe_matmul_efficiency_max = hw.moe_matmul_efficiency_max
        self.moe_matmul_half_tokens = hw.moe_matmul_half_tokens
        self.moe_bandwidth_bytes_per_s = hw.hbm_bandwidth_bytes_per_s * hw.moe_weight_bandwidth_efficiency
        self.moe_layer_overhead_s = mc.num_moe_layers * hw.moe_layer_overhead_s
        self.moe_eager_overhead_s = mc.num_moe_layers * hw.moe_eager_layer_overhead_s
        self.moe_prefill_overhead_s = mc.num_moe_layers * hw.moe_prefill_layer_overhead_s
        self.shape_extra_s = mc.num_layers * hw.shape_extra_s_per_layer
        self.shape_tokens_lo, self.shape_tokens_hi = hw.shape_tokens_lo, hw.shape_tokens_hi
        self.step_overhead_s = hw.step_overhead_s + hw.hybrid_step_overhead_s
        self.moe_touch_fraction = hw.moe_touch_fraction
        self.per_seq_overhead_s = hw.per_seq_overhead_s + mc.num_layers * hw.moe_seq_layer_overhead_s
        self.per_token_overhead_s = hw.per_token_overhead_s
        self.request_overhead_s = hw.request_overhead_s
        # per-layer launch costs: above the largest CUDA graph (eager), or a prefill step (PIECEWISE)
        self.cudagraph_max_tokens = mc.cudagraph_max_tokens
        self.eager_overhead_s = mc.num_layers * hw.eager_layer_overhead_s
        self.prefill_overhead_s = mc.num_layers * hw.prefill_layer_overhead_s
        # d(attention seconds)/d(decode-attended context): for closed-form runs of decode steps
        self.attn_compute_s_per_decode_attended = (self.pipeline_parallel * self.attn_flops_per_context_token_decode
                                                   / self.attn_flops_per_s)
        self.attn_memory_s_per_kv_read_token = (self.pipeline_parallel * self.kv_bytes_per_context_token_layer
                                                / self.kv_bandwidth_bytes_per_s)

    @classmethod
    def from_specs(cls, model: ModelSpec, gpu: GpuSpec, deployment: Deployment,
                   profile: CalibrationProfile = IDEAL_PROFILE) -> StepCost:
        return cls(model_costs(model, deployment), hw_coeffs(gpu, deployment.weight_dtype, profile, model))

    @property
    def mode(self) -> str:
        return self.hw_coeffs.mode

    def parts(self, tokens: float, sampled: float, att_prefill: float, att_decode: float, kv_read: float):
        """(constant_s, attention_compute_s, attention_memory_s); the step takes
        constant + max(attention_compute, attention_memory).  ``kv_read`` = layer-weighted context
        tokens read from the cache (decode contexts + prefill chunks' prior context)."""
        if tokens <= 0:
            return 0.0, 0.0, 0.0
        lin_flops = self.linear_flops_per_token * tokens + self.lm_head_flops_per_seq * sampled
        eff = self.matmul_efficiency_max * tokens / (tokens + self.matmul_half_tokens + 1e-30)
        lin_compute = lin_flops / (self.linear_peak_flops_per_s * max(eff, 1e-9))
        lin_memory = self.dense_weight_bytes / self.weight_bandwidth_bytes_per_s
        linear = max(lin_memory + self.dequant_s_per_token * tokens, lin_compute)
        if self.num_experts:
            # expected distinct experts a batch of `tokens` touches, per MoE layer
            moe_bytes = self.num_moe_layers * float(experts_touched(
                self.num_experts, self.experts_per_token, tokens, self.moe_touch_fraction)) * self.expert_weight_bytes
            moe_eff = self.moe_matmul_efficiency_max * tokens / (tokens + self.moe_matmul_half_tokens + 1e-30)
            linear += max(moe_bytes / self.moe_bandwidth_bytes_per_s,
                          self.moe_flops_per_token * tokens / (self.linear_peak_flops_per_s * max(moe_eff, 1e-9)))
        att_compute = (self.attn_flops_per_context_token_prefill * att_prefill
                       + self.attn_flops_per_context_token_decode * att_decode) / self.attn_flops_per_s
        att_memory = self.kv_bytes_per_context_token_layer * (kv_read + tokens * self.num_attn_layers) \
            / self.kv_bandwidth_bytes_per_s
        if not self.allreduces_per_step:
            comm = 0.0
        elif tokens <= self.allreduce_custom_max_tokens:
            comm = self.allreduces_per_step * (self.allreduce_latency_s + self.allreduce_s_per_token * tokens)
        else:
            comm = self.allreduces_per_step * (self.nccl_latency_s + self.nccl_s_per_token * tokens)
        pp = self.pipeline_parallel
        const = (linear + comm) * pp + self.step_overhead_s + self.per_seq_overhead_s * sampled \
            + self.per_token_overhead_s * tokens + self.moe_layer_overhead_s
        if tokens > self.cudagraph_max_tokens:
            const += self.eager_overhead_s + self.moe_eager_overhead_s
        elif att_prefill > 0:
            const += self.prefill_overhead_s + self.moe_prefill_overhead_s
        if self.shape_tokens_lo < tokens < self.shape_tokens_hi:
            const += self.shape_extra_s
        return const, att_compute * pp, att_memory * pp

    def step_s(self, tokens: float, sampled: float, att_prefill: float = 0.0, att_decode: float = 0.0,
               kv_read: float = 0.0) -> float:
        c, ac, am = self.parts(tokens, sampled, att_prefill, att_decode, kv_read)
        return c + (max(am, ac))

    def attended_prefill(self, start: float, chunk: float) -> float:
        """Scalar :func:`planner.roofline.attended_prefill`."""
        a = self.num_full_layers * (chunk * start + chunk * (chunk + 1) / 2.0)
        if self.num_sliding_layers:
            w = self.window_tokens
            lo, hi = min(start, w), min(start + chunk, w)
            below = (hi * (hi + 1) - lo * (lo + 1)) / 2.0
            above = max(start + chunk - max(start, w), 0.0) * w
            a += self.num_sliding_layers * (below + above)
        return a

    def prefill_kv_read(self, start: float) -> float:
        """Layer-weighted cached tokens a prefill chunk starting at ``start`` reads."""
        if self.num_sliding_layers:
            return self.num_full_layers * start + self.num_sliding_layers * min(start, self.window_tokens)
        return self.num_full_layers * start


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
