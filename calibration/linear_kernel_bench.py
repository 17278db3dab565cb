"""vLLM 0.26's dense linear layers timed alone, bf16 and fp8, over the GEMM shapes of published dense models (#21).

A dense fp8 engine (``--quantization fp8``: fp8 weights with per-tensor scales, activations quantised per token on
the fly, vLLM's CutlassFP8ScaledMMLinearKernel) is fitted on Llama-3.1-8B and held out on Qwen2.5-32B, whose decode
at batch 24 came out 18-21 % too fast while batch 2 was within 2 %: CUTLASS picks its tile configuration by the
token count (vLLM's sm90 fp8 dispatch), and a step's weight streaming runs at the bandwidth that configuration
reaches on the layer's shape.  This times what the engine runs for one linear layer of each shape: for fp8 the
activation quantisation (``scaled_fp8_quant``, dynamic per token: vLLM's choice where CUTLASS runs) and
``cutlass_scaled_mm`` into bf16, and (``fp8mm``) the GEMM alone on an input quantised beforehand; for bf16
``torch.nn.functional.linear`` (cuBLAS), for 1..8,192 tokens, as CUDA-graph replays (the GPU's time).

    python -m calibration.linear_kernel_bench --out OUT.jsonl --budget-s 420 [--dtypes fp8,fp8mm,bf16] [--shapes a,b]

One JSON line per (shape, dtype, tokens); a re-run skips the points already in OUT (a cut run resumes).  Needs torch
with CUDA and vLLM 0.26 (the device bundle); planner/ never imports this.
"""

from __future__ import annotations

import sys
import time

from calibration.moe_kernel_bench import WEIGHT_BYTES, bench_cli, run_groups, time_call

#: (model, layer, N outputs, K inputs) as vLLM stores each layer's merged weights (qkv, o, gate_up, down; config.json
#: values); the Llama models are the fit shapes, the Qwen2.5 ones held out
SHAPES = tuple((m, layer, n, k) for m, dims in (
    ("llama-3.1-8b", ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336))),
    ("llama-3.1-70b", ((10240, 8192), (8192, 8192), (57344, 8192), (8192, 28672))),
    ("qwen2.5-32b", ((7168, 5120), (5120, 5120), (55296, 5120), (5120, 27648))),
    ("qwen2.5-7b", ((4608, 3584), (3584, 3584), (37888, 3584), (3584, 18944))),
) for layer, (n, k) in zip(("qkv", "o", "gate_up", "down"), dims))
TOKENS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 384, 512, 1024, 2048, 4096, 8192)
#: what a run times by default: fp8 as the engine calls it, the fp8 GEMM alone, bf16
DTYPES = ("fp8", "fp8mm", "bf16")


def weight_dtype(dtype: str) -> str:
    """The weights' dtype of a bench dtype (``fp8mm`` is fp8 weights)."""
    return "fp8" if dtype.startswith("fp8") else dtype


class Linear:
    """One linear layer's weight on the GPU (random values, the layout vLLM's kernel takes)."""

    def __init__(self, n: int, k: int, dtype: str):
        import torch

        self.n, self.k, self.dtype = n, k, dtype
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
        if weight_dtype(dtype) == "fp8":  # CUTLASS takes B as [K, N] column-major: the [N, K] weight transposed
            self.w = w.to(torch.float8_e4m3fn).t()
            self.w_scale = torch.ones(1, device="cuda", dtype=torch.float32)
        else:
            self.w = w

    def call(self, tokens: int):
        import torch

        x = torch.randn(tokens, self.k, device="cuda", dtype=torch.bfloat16)
        if self.dtype == "bf16":
            return lambda: torch.nn.functional.linear(x, self.w)
        from vllm import _custom_ops as ops

        def mm(xq, x_scale):
            return ops.cutlass_scaled_mm(xq, self.w, scale_a=x_scale, scale_b=self.w_scale, out_dtype=torch.bfloat16)

        if self.dtype == "fp8mm":  # the GEMM alone, on an input quantised beforehand
            xq, x_scale = ops.scaled_fp8_quant(x, None, use_per_token_if_dynamic=True)
            return lambda: mm(xq, x_scale)
        return lambda: mm(*ops.scaled_fp8_quant(x, None, use_per_token_if_dynamic=True))


def bench_point(layer: Linear, model: str, name: str, tokens: int) -> dict:
    _, eager_s, calls, time_s = time_call(layer.call(tokens))
    f = 2.0 * tokens * layer.n * layer.k
    w_bytes = layer.n * layer.k * WEIGHT_BYTES[weight_dtype(layer.dtype)]
    return {"type": "linear_kernel", "model": model, "layer": name, "n": layer.n, "k": layer.k, "dtype": layer.dtype,
            "tokens": tokens, "time_s": time_s, "calls_per_graph": calls, "eager_call_s": eager_s, "flops": f,
            "flops_per_s": f / time_s, "weight_bytes": w_bytes, "weight_bytes_per_s": w_bytes / time_s}


def main(argv: list[str] | None = None) -> int:
    start = time.perf_counter()
    a, wanted, tokens, done = bench_cli(
        argv, __doc__, "linear_kernel", lambda r: (r["model"], r["layer"], r["dtype"], r["tokens"]), ",".join(DTYPES),
        "fp8: the per-token activation quantisation and the GEMM, as the engine calls them; fp8mm: the GEMM; bf16",
        TOKENS)

    def group(model, name, n, k, dtype):
        failed = {"type": "linear_kernel_error", "model": model, "layer": name, "dtype": dtype}
        return (f"{model} {name} {dtype}", lambda: Linear(n, k, dtype),
                [(f"{model:14s} {name:8s} {dtype:5s} M={t:5d}", {**failed, "tokens": t},
                  lambda layer, t=t: bench_point(layer, model, name, t))
                 for t in tokens if (model, name, dtype, t) not in done])

    return run_groups(a, start, (group(*s, dtype) for dtype in a.dtypes.split(",") for s in SHAPES
                                 if not wanted or s[0] in wanted))


if __name__ == "__main__":
    sys.exit(main())
