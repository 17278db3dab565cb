"""vLLM 0.26's Triton fused MoE timed alone, over the expert shapes of published MoE models (issue #21).

A MoE engine's prefill is fitted on one model (Qwen3-30B-A3B: 128 experts of 768, hidden 2,048) and held out on
another whose GEMMs are 20x bigger (Mixtral-8x7B: 8 experts of 14,336, hidden 4,096); the engine probes cannot tell
how the kernel's efficiency moves with the expert shape, because each engine has one.  This times the kernel vLLM
runs in those engines (``fused_experts``: the expert alignment, both grouped GEMMs, the activation and the top-k sum;
for fp8 the dynamic per-tensor activation quantisation, as vLLM's online W8A8 runs it) on one layer of each shape,
with the configuration vLLM itself picks (its tuned file for the shape and GPU, else its default), for tokens
1..16,384, routed uniformly at random (top-k of random logits: what real traffic's router spreads, not the collapse
dummy weights cause).  Each point is timed as CUDA-graph replays (the GPU's time, without Python's launch), after a
warm call that compiles the Triton kernel.

    python -m calibration.moe_kernel_bench --out OUT.jsonl --budget-s 420 [--dtypes bf16,fp8] [--shapes a,b]

One JSON line per (shape, dtype, tokens); a re-run skips the points already in OUT (a cut run resumes).  Needs torch
with CUDA and vLLM 0.26 (the device bundle); planner/ never imports this.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from calibration.records import append_record, host_info, read_records

#: (name, experts E, expert FFN width N, hidden K, top-k): every MoE of the catalog (models/*.yaml) first, then other
#: published MoE layouts (their config.json values), so a shape law can be fitted on some and checked on the others
SHAPES = (
    ("qwen3-30b-a3b", 128, 768, 2048, 8),
    ("mixtral-8x7b", 8, 14336, 4096, 2),
    ("qwen3-235b-a22b", 128, 1536, 4096, 8),
    ("deepseek-v2-lite", 64, 1408, 2048, 6),
    ("deepseek-v3", 256, 2048, 7168, 8),
    ("olmoe-1b-7b", 64, 1024, 2048, 8),
    ("phi-3.5-moe", 16, 6400, 4096, 2),
    ("mixtral-8x22b", 8, 16384, 6144, 2),
    ("dbrx", 16, 10752, 6144, 4),
    ("qwen1.5-moe-a2.7b", 60, 1408, 2048, 4),
    ("glm-4.5-air", 128, 1408, 4096, 8),
    ("llama-4-scout", 16, 8192, 5120, 1),
    ("qwen3-next-80b-a3b", 512, 512, 2048, 10),
    ("minimax-m2", 256, 1536, 3072, 8),
)
#: MXFP4 checkpoints' layouts (gpt-oss), timed in MXFP4 before the shapes above
MXFP4_SHAPES = (
    ("gpt-oss-120b", 128, 2880, 2880, 4),
    ("gpt-oss-20b", 32, 2880, 2880, 4),
)
TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
#: bytes a weight of each dtype takes (MXFP4: 4 bits + one 8-bit scale per 32)
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "mxfp4": 0.5 + 1.0 / 32.0}
#: GPU seconds of work one timed replay should hold at least (fewer calls per graph for the long ones)
REPLAY_MIN_S = 0.004


def flops(tokens: int, n: int, k: int, top_k: int) -> float:
    """FLOPs of one fused-MoE call: the gate/up GEMM (2N outputs) and the down GEMM (K outputs) per routed token."""
    return 2.0 * tokens * top_k * 3.0 * n * k


def _time_graph(fn, calls: int, replays: int = 5) -> float:
    """Seconds of GPU time per call of ``fn``: ``calls`` calls captured in one CUDA graph, replayed, median."""
    import torch

    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e-3 / calls)
    del g
    return sorted(times)[len(times) // 2]


class Layer:
    """One MoE layer's expert weights on the GPU (random values, the shapes and dtype vLLM stores)."""

    def __init__(self, e: int, n: int, k: int, dtype: str):
        import torch
        from vllm.model_executor.layers.fused_moe.config import fp8_w8a8_moe_quant_config

        self.e, self.n, self.k, self.dtype = e, n, k, dtype
        if dtype == "mxfp4":
            self._mxfp4()
            return
        w1 = torch.randn(e, 2 * n, k, device="cuda", dtype=torch.bfloat16) * 0.02
        w2 = torch.randn(e, k, n, device="cuda", dtype=torch.bfloat16) * 0.02
        self.quant = None
        if dtype == "fp8":
            w1, w2 = w1.to(torch.float8_e4m3fn), w2.to(torch.float8_e4m3fn)
            ones = torch.ones(e, device="cuda", dtype=torch.float32)
            self.quant = fp8_w8a8_moe_quant_config(w1_scale=ones, w2_scale=ones.clone(), a1_scale=None,
                                                   a2_scale=None, per_act_token_quant=False)
        self.w1, self.w2 = w1, w2

    def _mxfp4(self) -> None:
        """gpt-oss's layout as vLLM 0.26 loads it for its Triton MXFP4 experts (Mxfp4MoeBackend.TRITON): packed
        4-bit weights and 8-bit block scales (127: x1), swizzled by vLLM's own _swizzle_mxfp4, fp32 biases, the
        SwiGLU constants gpt-oss uses (quantization/mxfp4.py)."""
        import torch
        from vllm.model_executor.layers.fused_moe.config import mxfp4_w4a16_moe_quant_config
        from vllm.model_executor.layers.quantization.utils.mxfp4_utils import _swizzle_mxfp4
        from vllm.utils.import_utils import has_triton_kernels

        if not has_triton_kernels():  # also puts vLLM's bundled triton_kernels on the import path
            raise RuntimeError("no triton_kernels: vLLM's MXFP4 experts cannot run here")
        from triton_kernels.matmul_ogs import FlexCtx, PrecisionConfig
        e, n, k = self.e, self.n, self.k

        def packed(rows: int, cols: int):
            w = torch.randint(0, 256, (e, rows, cols // 2), device="cuda", dtype=torch.uint8)
            scale = torch.full((e, rows, cols // 32), 127, device="cuda", dtype=torch.uint8)
            w, flex, scale = _swizzle_mxfp4(w, scale)
            return w, PrecisionConfig(weight_scale=scale, flex_ctx=FlexCtx(rhs_data=flex))

        (self.w1, p1), (self.w2, p2) = packed(2 * n, k), packed(k, n)
        b1 = torch.zeros(e, 2 * n, device="cuda", dtype=torch.float32)
        b2 = torch.zeros(e, k, device="cuda", dtype=torch.float32)
        self.quant = mxfp4_w4a16_moe_quant_config(w1_scale=p1, w2_scale=p2, w1_bias=b1, w2_bias=b2,
                                                  gemm1_alpha=1.702, gemm1_beta=1.0, gemm1_clamp_limit=7.0)

    def config(self, tokens: int, top_k: int) -> tuple[dict, bool]:
        """(the kernel configuration vLLM picks for a ``tokens``-token call, whether it came from a tuned file)."""
        from vllm.model_executor.layers.fused_moe.fused_moe import get_moe_configs, try_get_optimal_moe_config

        if self.dtype == "mxfp4":  # matmul_ogs picks its tiles itself (opt_flags), no configuration file
            return {}, False
        name = "fp8_w8a8" if self.dtype == "fp8" else None
        tuned = get_moe_configs(self.e, self.n, name) is not None
        return dict(try_get_optimal_moe_config(tuple(self.w1.shape), tuple(self.w2.shape), top_k, name,
                                               tokens)), tuned

    def call(self, tokens: int, top_k: int):
        """A function running the layer's experts on ``tokens`` tokens routed uniformly at random, and the number
        of distinct experts they touch."""
        import torch
        from vllm.model_executor.layers.fused_moe.fused_moe import fused_experts

        x = torch.randn(tokens, self.k, device="cuda", dtype=torch.bfloat16)
        logits = torch.randn(tokens, self.e, device="cuda", dtype=torch.float32)
        if self.dtype == "mxfp4":  # the monolithic expert runs its own top-k routing on the router logits
            from vllm.model_executor.layers.fused_moe.experts.gpt_oss_triton_kernels_moe import (
                triton_kernel_moe_forward,
            )

            gating = logits.to(torch.bfloat16)
            touched = int(torch.unique(torch.topk(gating.float(), top_k, dim=-1).indices).numel())
            return (lambda: triton_kernel_moe_forward(x, self.w1, self.w2, gating, top_k, renormalize=True,
                                                      quant_config=self.quant, global_num_experts=self.e)), touched
        weights, ids = torch.topk(torch.softmax(logits, dim=-1), top_k, dim=-1)
        weights, ids = weights.contiguous(), ids.to(torch.int32).contiguous()

        def fn():
            return fused_experts(x, self.w1, self.w2, weights, ids, quant_config=self.quant)

        return fn, int(torch.unique(ids).numel())


def record_point(out: Path, label: str, failed: dict, bench, note=lambda rec: "") -> dict:
    """One timing into ``out`` (``bench()`` -> its record) and a line of output; a failing point (out of memory, ...)
    is recorded as ``failed`` + its error and does not end the run."""
    try:
        rec = bench()
    except Exception as err:  # noqa: BLE001
        rec = {**failed, "error": f"{type(err).__name__}: {err}"[:400]}
    append_record(out, rec)
    if "time_s" in rec:
        print(f"{label} {rec['time_s'] * 1e6:10.1f} us {rec['flops_per_s'] / 1e12:7.1f} TFLOP/s "
              f"{rec['weight_bytes_per_s'] / 1e12:6.2f} TB/s{note(rec)}", flush=True)
    else:
        print(f"{label}: {rec['error']}", flush=True)
    return rec


def time_call(fn) -> tuple[float, float, int, float]:
    """(the first call's wall seconds (a Triton kernel compiles in it), one eager call's GPU seconds, the calls per
    CUDA graph, the GPU seconds per call replayed)."""
    import torch

    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    first_s = time.perf_counter() - t0
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn()
    b.record()
    torch.cuda.synchronize()
    eager_s = a.elapsed_time(b) * 1e-3
    calls = max(1, min(64, math.ceil(REPLAY_MIN_S / max(eager_s, 1e-6))))
    return first_s, eager_s, calls, _time_graph(fn, calls)


def bench_point(layer: Layer, name: str, tokens: int, top_k: int) -> dict:
    fn, touched = layer.call(tokens, top_k)
    first_s, eager_s, calls, time_s = time_call(fn)
    cfg, tuned = layer.config(tokens, top_k)
    f = flops(tokens, layer.n, layer.k, top_k)
    w_bytes = touched * 3.0 * layer.n * layer.k * WEIGHT_BYTES[layer.dtype]
    return {"type": "moe_kernel", "shape": name, "experts": layer.e, "expert_width": layer.n, "hidden": layer.k,
            "top_k": top_k, "dtype": layer.dtype, "tokens": tokens, "touched_experts": touched, "time_s": time_s,
            "calls_per_graph": calls, "eager_call_s": eager_s, "first_call_s": first_s, "flops": f,
            "flops_per_s": f / time_s, "weight_bytes": w_bytes, "weight_bytes_per_s": w_bytes / time_s,
            "config": cfg, "tuned_config": tuned}


def bench_cli(argv, doc: str, kind: str, key, dtypes: str, dtypes_help: str, tokens=TOKENS) -> tuple:
    """A kernel bench's command line (--out, --budget-s, --dtypes, --shapes, --tokens), its host line appended to OUT
    and the points OUT already holds (``key`` of each ``kind`` record): (args, wanted shape names, tokens, done)."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=420.0)
    ap.add_argument("--dtypes", default=dtypes, help=dtypes_help)
    ap.add_argument("--shapes", default="", help="comma-separated shape (model) names (default: all, in order)")
    ap.add_argument("--tokens", default=",".join(map(str, tokens)))
    a = ap.parse_args(argv)
    import torch

    done = {key(r) for r in read_records(a.out) if r.get("type") == kind} if a.out.exists() else set()
    append_record(a.out, {"type": f"{kind}_host", **host_info(), "device_name": torch.cuda.get_device_name(0),
                          "torch": torch.__version__})
    return a, [s for s in a.shapes.split(",") if s], [int(t) for t in a.tokens.split(",") if t], done


def main(argv: list[str] | None = None) -> int:
    start = time.perf_counter()
    a, wanted, tokens, done = bench_cli(argv, __doc__, "moe_kernel", lambda r: (r["shape"], r["dtype"], r["tokens"]),
                                        "bf16,fp8", "bf16, fp8 (Triton fused MoE), mxfp4 (Triton MXFP4 experts, "
                                        "gpt-oss's layouts first)")
    all_shapes = (MXFP4_SHAPES if "mxfp4" in a.dtypes.split(",") else ()) + SHAPES

    def group(name, e, n, k, top_k, dtype):
        return (f"{name} {dtype}", lambda: Layer(e, n, k, dtype),
                [(f"{name:20s} {dtype:5s} M={t:6d}", {"type": "moe_kernel_error", "shape": name, "dtype": dtype,
                                                       "tokens": t},
                  lambda layer, t=t: bench_point(layer, name, t, top_k)) for t in tokens if (name, dtype, t) not in done])

    return run_groups(a, start, (group(*s, dtype) for s in all_shapes if not wanted or s[0] in wanted
                                 for dtype in a.dtypes.split(",")),
                      lambda r: f" touched {r['touched_experts']:3d} tuned={r['tuned_config']}")


def run_groups(a, start: float, groups, note=lambda rec: "") -> int:
    """Time the groups' points into OUT (``a.out``) within ``a.budget_s`` of ``start``: a group is (what, a function
    building its layer, [(label, its failure record, bench(layer)), ...]); its layer is built once and freed after."""
    import torch

    for what, make, points in groups:
        if not points:
            continue
        if time.perf_counter() - start > a.budget_s:
            print(f"budget spent: stopped before {what}", flush=True)
            return 0
        layer = make()
        for label, failed, bench in points:
            if time.perf_counter() - start > a.budget_s:
                break
            record_point(a.out, label, failed, lambda: bench(layer), note)  # noqa: B023  called at once
        layer = None  # its weights go before the next group's
        torch.cuda.empty_cache()
    print(f"done in {time.perf_counter() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
