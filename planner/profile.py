"""Calibration profiles: the efficiencies and overheads that turn the ideal roofline into a measured one.

``IDEAL_PROFILE`` is the one spelling of "no profile" (the speed-of-light roofline); every function takes
``profile: CalibrationProfile = IDEAL_PROFILE`` and callers pass a resolved profile
(:func:`planner.io.catalog.resolve_profile`), never None.
"""

from __future__ import annotations

import datetime as _dt
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from planner.specs import FrozenSpec, ModelSpec, NonNegInt


class Residuals(FrozenSpec):
    """Prediction error of a fitted profile on one regime (percent, signed median and absolute p90)."""

    n: NonNegInt
    median_abs_error_pct: float
    p90_abs_error_pct: float
    median_signed_error_pct: float = 0.0


#: The smallest efficiency a profile may hold: 1 % of a datasheet roof (the fit's own lower bounds are 2-30 %).
#: Below it a step would take over 100x the roofline -- a broken profile, not a slow GPU -- and 1e-300 would
#: overflow every latency into "feasible with a TTFT of 3e297 s".
MIN_EFFICIENCY = 0.01
#: The largest fixed cost (per step, layer, sequence, token or request) a profile may hold, s.
MAX_OVERHEAD_S = 10.0
Efficiency = Annotated[float, Field(ge=MIN_EFFICIENCY, le=1.5)]
Overhead = Annotated[float, Field(ge=0, le=MAX_OVERHEAD_S)]
#: Tokens per step at which a GEMM reaches half its peak efficiency: beyond 10 million no step is ever efficient.
HalfTokens = Annotated[float, Field(ge=0, le=1e7)]


class WeightFormatCoeffs(FrozenSpec):
    """Dense GEMM coefficients of one weight format: the kernel family vLLM runs for it (fp8 W8A8 through
    CUTLASS scaled_mm with per-token activation scales; weight-only int4/int8 through Machete/Marlin)."""

    kernel: str = Field("", description="what vLLM ran, from its start-up log")
    weight_bandwidth_efficiency: Efficiency = Field(description="fraction of datasheet HBM bandwidth streaming weights")
    matmul_efficiency_max: Efficiency = Field(description="compute efficiency at large batches, eff(T) = max·T/(T+half)")
    matmul_half_tokens: HalfTokens = 0.0
    dequant_s_per_token_param: Annotated[float, Field(ge=0, le=1e-6)] = Field(
        0.0, description="seconds per (token × linear parameter) added to the weight-streaming time: quantise/"
        "dequantise work and small-M tile waste that grow with the batch while decode is memory-bound (hidden once "
        "the GEMM is compute-bound)")
    fitted_on: list[str] = Field(default_factory=list, description="models this format was fitted on")


class MoeCoeffs(FrozenSpec):
    """The fused/grouped MoE GEMM (vLLM's Triton fused_moe): its own roofline efficiencies over the experts a
    step touches (E·(1 − (1 − k/E)^T) per layer) and its fixed per-layer cost (routing, token sort/align)."""

    kernel: str = ""
    weight_bandwidth_efficiency: Efficiency
    matmul_efficiency_max: Efficiency
    matmul_half_tokens: HalfTokens = 0.0
    layer_overhead_s: Overhead = Field(0.0, description="per MoE layer per step (routing, align, scatter)")
    eager_layer_overhead_s: Overhead = Field(0.0, description="per MoE layer for steps above the CUDA-graph size")
    eager_layer_launch_s: Overhead = Field(
        0.0, description="CPU launch time per MoE layer of a step above the CUDA-graph size, on top of the dense "
        "per-layer launch: the step's CPU floor (it takes max(GPU work, floor) + overheads)")
    eager_layer_launch_extra_s: Overhead = Field(
        0.0, description="the part of eager_layer_launch_s a variant that keeps the bf16 fused MoE's launch adds on "
        "top of it (already in eager_layer_launch_s): the fp8 W8A8 fused MoE's extra launches per MoE layer, one "
        "model's fp8 and bf16 engines traced on one host (calibration/refit.py FP8_LAUNCH_PAIR); kept apart so a "
        "host's own bf16 trace rebuilds the variant's launch (calibration.serve_floor.served_terms)")
    seq_layer_overhead_s: Overhead = Field(0.0, description="per decoding sequence per layer per step (the MoE "
                                           "families' decode cost that grows with the batch beyond the weights)")
    expert_touch_fraction: Annotated[float, Field(gt=0, le=1)] = Field(
        1.0, description="share of the experts a batch's routing spreads over (1 = uniform over all experts)")
    prefill_layer_overhead_s: Overhead = Field(
        0.0, description="per MoE layer for steps with prompt tokens inside the CUDA-graph size (PIECEWISE graphs)")
    prefill_expert_overhead_s: Overhead = Field(
        0.0, description="per expert the step touches, per MoE layer, for the same steps (the kernel's per-expert "
        "tiles): what the family stages fit instead of the per-layer term, so a model with fewer experts pays less "
        "(calibration/family_fit.py)")
    shape_compile_layer_s: Overhead = Field(
        0.0, description="per MoE layer, the JIT compile a step above the CUDA graphs pays the first time its token "
        "count has a new compile key (vLLM 0.26's Triton MoE kernels, planner.compile_keys), traced under vllm serve "
        "(calibration/trace_points.shape_compiles)")
    shape_compile_expert_s: Overhead = Field(
        0.0, description="... or per expert, for a kernel whose compile grows with the expert count and not the layers "
        "(the Triton MXFP4 MoE): the stall is this × (shape_compile_offset_experts + the layer's experts)")
    shape_compile_offset_experts: Annotated[float, Field(ge=0, le=4096)] = Field(
        0.0, description="the experts the part of that compile that does not grow with them is worth (fitted on two "
        "engines of one layout with different expert counts: calibration.serve_floor.expert_compile_offset)")
    fitted_on: list[str] = Field(default_factory=list)


class MoeKernelDtype(FrozenSpec):
    """vLLM's Triton fused MoE alone (one layer's ``fused_experts``), for one expert weight dtype: its GEMM time is
    rows x 2·N·K x [2·(1 + c/K) + (1 + c/N)] / (peak x efficiency), rows = T·k + touched experts x pad, with N the
    expert width per GPU, K the hidden size, c the inner-dimension overhead (a per-tile cost along each GEMM's inner
    dimension: hidden for gate/up, the expert width for down) and pad the tokens each touched expert's tiles round
    up to (:func:`planner.kernel_families.moe_kernel_flops`)."""

    efficiency: Efficiency = Field(description="fraction of the dtype's datasheet peak on the law's work")
    pad_tokens_per_expert: Annotated[float, Field(ge=0, le=4096)] = 0.0
    inner_overhead_dim: Annotated[float, Field(ge=0, le=1e5)] = 0.0
    kernel_bandwidth_efficiency: Efficiency = Field(
        1.0, description="the kernel timings' own expert-weight bandwidth share (reported; the step formula takes "
        "its MoE stage's)")
    kernel_call_s: Overhead = Field(0.0, description="the kernel timings' fixed cost per call (reported, as above)")


class MoeKernelLaw(FrozenSpec):
    """The fused-MoE kernel's time over expert shapes (experts, width, hidden, top-k), fitted on kernel timings of
    several published MoE layouts and held out on others (calibration/moe_kernel_fit.py).  With it, a MoE
    stage's ``matmul_efficiency_max`` is the engine's share of the law's speed, so a stage fitted on one model's
    engine carries to another model's expert shape by the kernel's own measurements."""

    kernel: str = ""
    dtypes: dict[str, MoeKernelDtype] = Field(default_factory=dict, description="per expert weight dtype (bf16, fp8)")
    fitted_on: list[str] = Field(default_factory=list, description="expert shapes (model layouts) fitted on")
    held_out: list[str] = Field(default_factory=list, description="expert shapes held out of the fit")
    residuals: dict[str, Residuals] = Field(default_factory=dict, description="'<fit|held out>/<dtype>' time errors")
    source: str = ""


class LinearKernelDtype(FrozenSpec):
    """One weight dtype's dense linear kernel over the step's token count: a layer's time over its time at 1-16
    tokens, at knots (``tokens`` ascending); between knots of one dispatch bucket it is interpolated, across a bucket
    edge it jumps (:func:`planner.kernel_families.linear_kernel_factor`)."""

    tokens: list[Annotated[float, Field(gt=0)]] = Field(min_length=2)
    factor: list[Annotated[float, Field(gt=0, le=100)]] = Field(min_length=2)

    @model_validator(mode="after")
    def _knots(self):
        if len(self.tokens) != len(self.factor):
            raise ValueError(f"tokens and factor: {len(self.tokens)} knots against {len(self.factor)}")
        if any(b <= a for a, b in zip(self.tokens, self.tokens[1:])):
            raise ValueError("tokens: knots must be strictly ascending")
        return self


class LinearKernelLaw(FrozenSpec):
    """The dense linear layers' weight streaming over the step's token count, measured on the kernel vLLM runs for
    them (calibration/linear_kernel_fit.py): vLLM's CUTLASS fp8 GEMM picks its tile configuration by the token count
    (buckets up to 16, 64, 128 and above), and a decode step of 24-32 or 160-256 sequences streams the weights
    1.2-1.8x slower than one of 1-16.  The step formula multiplies the quantised linear weights' streaming time by
    the factor, on the GPUs that run this dispatch."""

    kernel: str = ""
    dtypes: dict[str, LinearKernelDtype] = Field(default_factory=dict, description="per weight dtype (fp8)")
    gpu_ids: list[str] = Field(default_factory=list, description="GPUs whose vLLM runs this kernel dispatch")
    bucket_edges_tokens: list[Annotated[float, Field(gt=0)]] = Field(
        default_factory=list, description="token counts where the kernel's configuration changes (a bucket is "
        "(edge, next edge]); the factor jumps there")
    fitted_on: list[str] = Field(default_factory=list, description="models whose layer shapes the knots average")
    held_out: list[str] = Field(default_factory=list, description="models whose layer shapes check them")
    residuals: dict[str, Residuals] = Field(default_factory=dict, description="'<fit|held out>/<dtype>' layer time "
                                            "errors at 1-512 tokens")
    source: str = ""


class AllreduceCoeffs(FrozenSpec):
    """Tensor-parallel all-reduce: vLLM's custom all-reduce below ``custom_max_bytes`` (fitted on TP engine
    probes), NCCL above it (an NCCL micro-benchmark).  Bandwidths are fractions of the GPU's datasheet link
    bandwidth so they transfer to other GPUs; latencies are absolute."""

    custom_latency_s: Overhead
    custom_bandwidth_efficiency: Efficiency
    custom_max_bytes: float = Field(8 * 2**20, gt=0, description="vLLM's custom all-reduce size limit (8 MiB)")
    nccl_latency_s: Overhead
    nccl_bandwidth_efficiency: Efficiency
    source: str = ""


class ShapeCorrection(FrozenSpec):
    """A GEMM-shape cliff the probes measured: steps of ``tokens_lo < T < tokens_hi`` tokens of every model
    whose dense layers have this (hidden, intermediate) shape cost ``extra_s_per_layer`` more per layer.
    Keyed by the GEMM shape, not the model: on the H200 (vLLM 0.26) Mistral-7B and Llama-3.1-8B (4,096 ×
    14,336) took 35-53 ms for 640-768-token steps where 1,024 tokens took 32 ms; Qwen shapes showed none."""

    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    tokens_lo: float = Field(ge=0)
    tokens_hi: float = Field(gt=0)
    extra_s_per_layer: Overhead
    fitted_on: list[str] = Field(default_factory=list)


class Spread(FrozenSpec):
    """A quantity measured once per engine start: how it varied across starts."""

    n: NonNegInt
    p10: float
    median: float
    p90: float


class ErrorBand(FrozenSpec):
    """The expected error of one prediction family and regime: p90 of |predicted − measured| / measured on the
    points named by ``basis`` (held-out models where there are some)."""

    pct: float = Field(ge=0, description="p90 absolute error, percent (shown as ±pct)")
    median_pct: float = Field(ge=0)
    n: NonNegInt
    basis: str = Field(description="'held-out: <models>', 'fit residuals: <models>' or 'public: <sources>'")


class FitReport(FrozenSpec):
    """How a profile's latency coefficients were solved (calibration/solve.py), so that a refit elsewhere can be
    compared by what it optimises and predicts rather than by coefficients that the data may not pin down."""

    method: str = Field("", description="the least-squares procedure, in one line")
    objective: dict[str, float] = Field(
        default_factory=dict, description="per stage (kernel family): the robust (soft-L1) cost ½·Σ ρ((log "
        "predicted/measured)²) of the profile's coefficients on that stage's fit points, with the hard roofline max")
    points: dict[str, int] = Field(default_factory=dict, description="per stage: the fit points it was solved on")
    fixed: dict[str, str] = Field(
        default_factory=dict, description="coefficient path -> the value it was fixed at and why: the stage's points "
        "could not identify it (it ended on a bound, or moving it over its whole range changes no prediction)")
    toolchain: dict[str, str] = Field(
        default_factory=dict, description="python, numpy, scipy, BLAS and platform the fit ran on (threads pinned)")


class CalibrationProfile(FrozenSpec):
    """Efficiencies and overheads of the roofline model for one GPU and engine version.

    The defaults are the ideal roofline ("speed of light"): every efficiency 1, every overhead 0,
    memory terms from first principles.  ``mode`` says which one a result used.
    """

    mode: Literal["ideal", "calibrated", "transferred"] = Field(
        "ideal", description="ideal roofline; calibrated on this GPU; or transferred: the efficiencies and "
        "overheads measured on another GPU of the same vendor, applied to this GPU's datasheet roofs"
    )
    transferred_from: str = Field("", description="GPU id whose calibration a transferred profile reuses")
    gpu_id: str | None = None
    engine: str = ""
    engine_version: str = ""
    created: str = ""
    # --- compute: matmul efficiency rises with the tokens per step, eff(T) = max * T / (T + half)
    matmul_efficiency_max: Efficiency = 1.0
    matmul_half_tokens: HalfTokens = 0.0
    attention_compute_efficiency: Efficiency = 1.0
    # --- memory: fraction of the datasheet bandwidth reached streaming weights and KV
    weight_bandwidth_efficiency: Efficiency = 1.0
    kv_bandwidth_efficiency: Efficiency = 1.0
    kv_bandwidth_efficiency_fp8: Efficiency | None = Field(
        None, description="KV streaming efficiency with an fp8 KV cache, if fitted (else the bf16 one)"
    )
    # --- fixed costs
    step_overhead_s: Overhead = 0.0
    layer_overhead_s: Overhead = Field(0.0, description=(
        "per layer of every step, graphs or not (the gaps between a layer's kernels): fitted on one dense model built "
        "with 16, 32 and 64 layers, so a deeper model's step grows by it and the per-step term keeps what is paid once"))
    prefill_layer_overhead_s: Overhead = Field(
        0.0, description="extra per layer for a step with prompt tokens that fits a CUDA graph (vLLM runs "
        "such steps as PIECEWISE graphs: attention is launched outside the graph, layer by layer)"
    )
    eager_layer_overhead_s: Overhead = Field(
        0.0, description="extra per layer for a step above the largest CUDA-graph size (no graphs: every "
        "kernel is launched from the CPU)"
    )
    eager_layer_launch_s: Overhead = Field(
        0.0, description="CPU launch time per layer of a step above the largest CUDA-graph size: the step's CPU "
        "floor, which the GPU work hides under (the step takes max(GPU work, floor) + overheads)"
    )
    piecewise_step_launch_s: Overhead = Field(0.0, description=(
        "CPU launch time of a step with prompt tokens inside the CUDA-graph range, per step: vLLM 0.26 replays it as "
        "piecewise graphs and launches each layer's attention from the CPU between them, so the step takes max(GPU "
        "work, this + layers x piecewise_layer_launch_s) + overheads and its launch call keeps the CPU that long "
        "(fitted on served engines' traced steps: calibration.trace_points.piecewise_launch_s; at the profile host's "
        "speed 7.4, 10.0 and 19.6 ms on engines of 32, 64 and 80 layers)"))
    piecewise_layer_launch_s: Overhead = Field(0.0, description="... and per layer")
    mla_piecewise_layer_launch_s: Overhead = Field(0.0, description=(
        "an MLA engine's piecewise prompt step whose chunks all take MLA's decode pathway (up to "
        "planner.kernel_families.MLA_DECODE_PATH_MAX_QUERY_TOKENS query tokens): its launch per layer, in place of "
        "piecewise_layer_launch_s (the absorbed attention launches more kernels a layer; the median of the MLA "
        "engines traced under vllm serve, calibration.mla_pathways.mla_piecewise_launch); 0: the dense one"))
    mla_prefill_layer_launch_s: Overhead = Field(0.0, description=(
        "... and of a step holding a longer chunk (MLA's prefill pathway: its up-projection and attention launched "
        "beside the decode pathway's): per layer; 0: as the decode pathway's"))
    per_seq_overhead_s: Overhead = 0.0
    per_token_overhead_s: Overhead = 0.0
    mla_context_compile_s: Overhead = Field(0.0, description=(
        "the one-time stall of an MLA engine the first time a step holds a prompt chunk with computed context on MLA's "
        "prefill pathway beside a fresh prompt's (a Triton kernel of MLA's chunked prefill compiles; planner.compile_keys.mixed_context), "
        "traced under vllm serve (calibration.trace_points.context_stalls); 0: not measured"))
    request_overhead_s: Overhead = 0.0
    http_frontend_overhead_s: Overhead = Field(
        0.0, description="what vLLM's OpenAI server adds per request on top of the engine (tokenise, HTTP, stream "
        "the first token), fitted on light-load serving runs")
    http_frontend_token_s: Annotated[float, Field(ge=0, le=1e-3)] = Field(0.0, description=(
        "... and per prompt token: vLLM's OpenAI server tokenises the text prompt (and the engine hashes its blocks) "
        "before the engine schedules the request (calibration.trace_points.frontend_token_slope on served traces)"))
    stream_output_overhead_s: Overhead = Field(0.0, description=(
        "vLLM's OpenAI server streams every running request's token of a step: a first or last token reaches its "
        "client this much later per request running (calibration.trace_points.stream_output_slope on served traces)"))
    # --- interconnect (tensor parallel)
    allreduce_latency_s: Overhead | None = None
    allreduce_bandwidth_efficiency: Efficiency = 1.0
    allreduce: AllreduceCoeffs | None = Field(None, description="custom all-reduce vs NCCL by message size")
    # --- kernel families beyond dense bf16 (the top-level coefficients above are dense 16-bit GEMMs)
    weight_formats: dict[str, WeightFormatCoeffs] = Field(
        default_factory=dict, description="dense GEMM coefficients per weight format (fp8, int4, ...)")
    moe: MoeCoeffs | None = Field(None, description="fused-MoE GEMM coefficients, if fitted")
    moe_kernel: MoeKernelLaw | None = Field(
        None, description="the Triton fused MoE's time over expert shapes (kernel timings); the MoE stages' GEMM "
        "efficiencies are shares of it when present")
    linear_kernel: LinearKernelLaw | None = Field(
        None, description="the dense linear kernel's weight streaming over the token count (kernel timings): "
        "multiplies the quantised linear weights' streaming time")
    moe_variants: dict[str, MoeCoeffs] = Field(
        default_factory=dict, description="MoE kernel families of their own: 'mxfp4' (Triton MXFP4), 'mla' (MLA + "
        "fine-grained MoE); planner.kernel_families.moe_variant picks one, else `moe` applies")
    hybrid_step_overhead_s: Annotated[float, Field(ge=0)] = Field(
        0.0, description="per-step cost of dense sliding-window hybrids (Gemma-3 5:1) beyond the dense terms")
    hybrid_fitted_on: list[str] = Field(default_factory=list)
    shape_corrections: list[ShapeCorrection] = Field(
        default_factory=list, description="GEMM-shape cliffs measured by the probes (keyed by shape, not model)")
    # --- how much engine starts differ, and the expected error per family and regime
    step_overhead_spread: Spread | None = Field(None, description="per-step CPU overhead across engine starts, s")
    request_overhead_spread: Spread | None = Field(None, description="per-request overhead across engine starts, s")
    launch_call_spread: Spread | None = Field(
        None, description="a served run's launch floor over the one this profile predicts for its engine (a ratio): "
        "how far the CPU launch of the steps above the CUDA graphs is from the profile's on other hosts and runs "
        "(calibration.trace_points.launch_call_spread of the traced vllm serve runs the profile's raw_data lists)")
    launch_run_spread: Spread | None = Field(
        None, description="a served run's median eager launch call over its engine's median over its runs: the part of "
        "launch_call_spread that stays once a host's own floor is fitted (planner calibrate +serve makes it that "
        "profile's launch_call_spread; calibration.trace_points.run_call_spread)")
    error_bands: dict[str, ErrorBand] = Field(
        default_factory=dict, description="'<family>/<regime>' -> expected error (see planner.bands)")
    transfer_error_bands: dict[str, ErrorBand] = Field(
        default_factory=dict, description="'<gpu_id>/<regime>' -> error of this profile transferred to another GPU, "
        "from published measurements (calibration/data/public); regime: decode, prefill or throughput")
    # --- memory budget terms (vLLM start-up accounting)
    non_torch_bytes: Annotated[float, Field(ge=0)] = 0.0
    cudagraph_bytes: Annotated[float, Field(ge=0)] = 0.0
    activation_bytes_per_batched_token_per_width: Annotated[float, Field(ge=0)] = 0.0
    weight_bytes_factor: Annotated[float, Field(gt=0)] = 1.0
    v1_sampler_logits_copies: Annotated[float, Field(ge=0)] = Field(
        0.0, description="fp32 copies of the max_num_seqs × vocabulary logits live at the profiling-pass peak of "
        "MoE engines on vLLM's V1 runner (the dummy sampler run; the fused-MoE workspace comes on top, "
        "planner.kernel_families.fused_moe_workspace_bytes); 0: one copy")
    head_peak_bytes_per_weight: Annotated[float, Field(ge=0)] = Field(
        0.0, description="bytes per lm_head weight (vocabulary × hidden size, per GPU) live at the profiling-pass "
        "peak of engines on vLLM's V2 runner: a transient the size of that weight, the peak where it exceeds the "
        "forward's activations (Gemma-3-27B at 8,192 tokens: 2.79 GiB, its forward's 1.27); 0: not modelled")
    mxfp4_expert_bytes_factor: Annotated[float, Field(gt=0)] = Field(
        1.0, description="measured ÷ counted bytes of MXFP4 experts (4.25 bits) as vLLM's Triton MXFP4 layout "
        "loads them")
    v1_cudagraph_estimate_bytes: Annotated[float, Field(ge=0)] = Field(
        0.0, description="CUDA-graph memory the V1 runner subtracts from the KV pool at start-up with vLLM's default "
        "graphs, bytes")
    # each CUDA graph more than vLLM's default (--max-cudagraph-capture-size): the bytes it adds to the V1 runner's
    # estimate (planner.compile_keys.v1_graph_estimate_bytes) and the seconds of engine start its capture takes; 0: not
    # modelled
    v1_cudagraph_bytes_per_graph: Annotated[float, Field(ge=0)] = 0.0
    cudagraph_capture_s_per_graph: Annotated[float, Field(ge=0)] = 0.0
    device_memory_bytes: Annotated[float, Field(gt=0)] | None = Field(
        None, description="total device memory as CUDA reports it to vLLM (what utilization multiplies)"
    )
    device_memory_fraction: Annotated[float, Field(gt=0.5, le=1.0)] = Field(
        1.0, description="CUDA's total ÷ the catalog's (nvidia-smi) total, measured; a transferred profile "
        "applies it to a GPU whose own CUDA total was never read (H200: 0.9957)"
    )
    # --- measured ceilings (micro-benchmarks), informational
    measured_peak_flops_per_s: dict[str, float] = Field(default_factory=dict)
    measured_hbm_bandwidth_bytes_per_s: float | None = None
    # --- provenance and error
    models_used: list[str] = Field(default_factory=list)
    raw_data: list[str] = Field(default_factory=list)
    raw_data_sha256: list[str] = Field(default_factory=list)
    command: str = ""
    residuals: dict[str, Residuals] = Field(default_factory=dict)
    validation: dict[str, Residuals] = Field(default_factory=dict)
    fit: FitReport | None = Field(None, description="how the latency fit was solved: objective, fixed terms, toolchain")
    excluded_records: list[str] = Field(
        default_factory=list, description="raw lines and records left out of the fit, 'file:line: why' (unreadable, "
        "a non-finite or non-positive measurement, unknown model, an exact duplicate)")

    @field_validator("created")
    @classmethod
    def _iso_created(cls, v: str) -> str:
        """'' or an ISO 8601 date/time (``2026-11-29T10:40:08+00:00``): a date like 2024-13-45 is named here."""
        if v:
            try:
                _dt.datetime.fromisoformat(v)
            except ValueError as err:
                raise ValueError(f"'{v[:40]}' is not an ISO 8601 date/time ({err})") from None
        return v

    @property
    def is_ideal(self) -> bool:
        return self.mode == "ideal"

    def transferred_to(self, gpu_id: str) -> CalibrationProfile:
        """This calibration applied to another GPU: the efficiencies (fractions of datasheet roofs),
        overheads and vLLM memory terms carry over; the device memory and measured ceilings do not."""
        return self.model_copy(update={
            "mode": "transferred", "gpu_id": gpu_id, "transferred_from": self.gpu_id or "",
            "device_memory_bytes": None, "measured_peak_flops_per_s": {},
            "measured_hbm_bandwidth_bytes_per_s": None,
        })

    def with_launch_scaled(self, factor: float) -> CalibrationProfile:
        """This profile with every CPU launch term × ``factor`` (the per-layer launch floor and eager overheads of the
        steps above the CUDA graphs, dense and of each MoE kernel, and the piecewise prompt steps' launch inside them):
        the same host launching slower or faster, as :attr:`launch_call_spread` measured it."""
        def scaled(c, *names):
            return c.model_copy(update={n: getattr(c, n) * factor
                                        for n in ("eager_layer_launch_s", "eager_layer_overhead_s", *names)})
        return scaled(self, "piecewise_step_launch_s", "piecewise_layer_launch_s", "mla_piecewise_layer_launch_s",
                      "mla_prefill_layer_launch_s").model_copy(update={
            "moe": scaled(self.moe) if self.moe is not None else None,
            "moe_variants": {k: scaled(v, "eager_layer_launch_extra_s") for k, v in self.moe_variants.items()}})

    def matmul_efficiency(self, tokens: float) -> float:
        if tokens <= 0:
            return self.matmul_efficiency_max
        return self.matmul_efficiency_max * tokens / (tokens + self.matmul_half_tokens)


IDEAL_PROFILE = CalibrationProfile()


#: Weight formats whose GEMMs have no coefficients of their own fall back to a measured relative: weight-only
#: 8-bit and 4-bit formats dequantise on the fly like int4 (Machete/Marlin); fp16 runs the bf16 kernels.
FORMAT_FALLBACKS: dict[str, tuple[str, ...]] = {
    "fp16": ("bf16",), "int8": ("int4",), "nf4": ("int4",), "mxfp4": ("int4",), "fp8": (), "int4": (), "bf16": (),
}


def format_coeffs(profile: CalibrationProfile, weight_dtype: str):
    """(the format whose GEMM coefficients apply, its WeightFormatCoeffs or None for the dense bf16 ones)."""
    for f in (weight_dtype, *FORMAT_FALLBACKS.get(weight_dtype, ())):
        if f in profile.weight_formats:
            return f, profile.weight_formats[f]
    return "bf16", None


def shape_correction(profile: CalibrationProfile, model: ModelSpec | None):
    """The profile's GEMM-shape cliff for ``model``'s dense (hidden, intermediate) shape, or None."""
    if model is None or model.moe is not None:
        return None
    return next((c for c in profile.shape_corrections
                 if (c.hidden_size, c.intermediate_size) == (model.hidden_size, model.intermediate_size)), None)
