"""Storage dtypes: the names the specs accept and how many bits or bytes one stored number takes."""

from __future__ import annotations

from typing import Literal

WeightDtype = Literal["bf16", "fp16", "fp8", "int8", "int4", "nf4", "mxfp4"]
KvDtype = Literal["bf16", "fp16", "fp8"]
ComputeDtype = Literal["bf16", "fp16", "fp8", "int8", "fp4"]

#: Effective bits per quantised weight, scale overhead included.
#: int4: group-wise (GPTQ/AWQ) with one 16-bit scale per 128 weights = 4 + 16/128 = 4.125 bits.
#: nf4: bitsandbytes, 64-weight blocks, 8-bit absmax + fp32 second-level scale per 256 blocks
#:      = 4 + 8/64 + 32/(64*256) ≈ 4.127 bits.
#: mxfp4: OCP microscaling, 32-element blocks sharing one 8-bit E8M0 scale = 4 + 8/32 = 4.25 bits.
#: fp8 / int8: per-channel scales, negligible (< 0.01 bit) at these sizes.
WEIGHT_BITS: dict[str, float] = {
    "bf16": 16.0,
    "fp16": 16.0,
    "fp8": 8.0,
    "int8": 8.0,
    "int4": 4.0 + 16.0 / 128.0,
    "nf4": 4.0 + 8.0 / 64.0 + 32.0 / (64.0 * 256.0),
    "mxfp4": 4.0 + 8.0 / 32.0,
}
KV_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}

#: Which tensor-core rate a weight format runs its matmuls at, in preference order: W8A8 fp8/int8
#: use the 8-bit rate where the GPU has it; weight-only 4-bit formats dequantise to 16 bits
#: (Marlin-style W4A16) except MXFP4 on GPUs with native FP4.
WEIGHT_COMPUTE_DTYPES: dict[str, tuple[str, ...]] = {
    "bf16": ("bf16",),
    "fp16": ("fp16", "bf16"),
    "fp8": ("fp8", "bf16"),
    "int8": ("int8", "bf16"),
    "int4": ("bf16",),
    "nf4": ("bf16",),
    "mxfp4": ("fp4", "bf16"),
}
