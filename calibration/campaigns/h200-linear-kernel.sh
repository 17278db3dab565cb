#!/usr/bin/env bash
# vLLM 0.26's dense linear layers alone on one H200, 2026-12-03 (issue #21): calibration/linear_kernel_bench.py over
# the qkv/o/gate_up/down GEMMs of Llama-3.1-8B/70B and Qwen2.5-7B/32B, fp8 (per-token dynamic activation quant +
# CUTLASS scaled_mm, vLLM's online fp8), the fp8 GEMM alone and bf16 (cuBLAS), tokens 1..8,192, CUDA-graph timed.
# Qwen2.5-32B fp8's decode at batch 24 came out 18-21 % too fast with batch 2 within 2 %: how does the fp8 kernel's
# bandwidth move with the token count and the shape?  (h200-moe-kernel.sh's job with this bench.)
# Usage (device, repository root as cwd, vLLM in /root/site):
#   bash calibration/campaigns/h200-linear-kernel.sh OUTDIR SECONDS
exec bash "$(dirname "$0")/h200-moe-kernel.sh" "$1" "$2" linear_kernel
