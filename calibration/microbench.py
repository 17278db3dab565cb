"""GPU micro-benchmarks with torch: achievable GEMM FLOP/s (bf16, fp8 where supported) and HBM copy
bandwidth — the measured ceilings stored beside the datasheet ones.  Needs torch with CUDA; run it
in its own process (``python -m calibration.microbench OUT.jsonl``) so its CUDA context is gone
before vLLM starts."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from calibration.records import append_record
from planner.units import MS, TB_PER_S, TFLOPS, GiB

GEMM_SHAPES = [  # (M tokens, N, K): square, then decode-like skinny shapes of a 7B layer
    (8192, 8192, 8192),
    (4096, 4096, 4096),
    (16384, 14336, 4096),
    (256, 14336, 4096),
    (64, 14336, 4096),
    (16, 14336, 4096),
]


def _time_cuda(fn, iters: int) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * MS / iters  # CUDA events time in ms


def gemm_bench(dtype_name: str) -> list[dict]:
    import torch

    out = []
    for m, n, k in GEMM_SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        if dtype_name == "bf16":
            def fn():
                return a @ b.t()
        else:
            a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
            one = torch.ones((), device="cuda", dtype=torch.float32)

            def fn():
                return torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        flops = 2.0 * m * n * k
        iters = max(3, min(200, int(2e13 / flops)))
        t = _time_cuda(fn, iters)
        weight_bytes = n * k * (2 if dtype_name == "bf16" else 1)
        out.append({"dtype": dtype_name, "m": m, "n": n, "k": k, "time_s": t, "flops_per_s": flops / t,
                    "weight_bytes_per_s": weight_bytes / t})
        del a, b
    return out


def copy_bandwidth(num_bytes: int = 4 * GiB) -> dict:
    import torch

    src = torch.empty(num_bytes // 2, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    t = _time_cuda(lambda: dst.copy_(src), 20)
    return {"bytes": num_bytes, "time_s": t, "bandwidth_bytes_per_s": 2.0 * num_bytes / t,
            "note": "device-to-device copy: read + write counted"}


def run(out: Path, gpu_id: str) -> None:
    import torch

    t0 = time.perf_counter()
    props = torch.cuda.get_device_properties(0)
    rec = {"type": "microbench", "gpu": gpu_id, "device_name": props.name, "total_memory_bytes": props.total_memory,
           "gemm": gemm_bench("bf16"), "copy": copy_bandwidth()}
    try:
        rec["gemm"] += gemm_bench("fp8")
    except Exception as err:  # fp8 needs sm_89+
        rec["fp8_error"] = f"{type(err).__name__}: {err}"[:300]
    rec["peak_flops_per_s"] = {}
    for g in rec["gemm"]:
        rec["peak_flops_per_s"][g["dtype"]] = max(rec["peak_flops_per_s"].get(g["dtype"], 0.0), g["flops_per_s"])
    rec["hbm_bandwidth_bytes_per_s"] = rec["copy"]["bandwidth_bytes_per_s"]
    rec["elapsed_s"] = time.perf_counter() - t0
    append_record(out, rec)
    for g in rec["gemm"]:
        print(f"GEMM {g['dtype']} {g['m']}x{g['n']}x{g['k']}: {g['flops_per_s'] / TFLOPS:.0f} TFLOP/s")
    print(f"HBM copy: {rec['hbm_bandwidth_bytes_per_s'] / TB_PER_S:.2f} TB/s")


if __name__ == "__main__":
    run(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "unknown")
