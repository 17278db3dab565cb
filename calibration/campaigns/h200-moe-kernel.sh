#!/usr/bin/env bash
# vLLM 0.26's Triton fused MoE alone on one H200, 2026-12-03 (issue #21): calibration/moe_kernel_bench.py over the
# expert shapes of 14 published MoE layouts (bf16 and fp8 W8A8 per-tensor experts, the configuration vLLM picks,
# tokens 1..16,384, uniform random routing, CUDA-graph timed).  The engines' MoE prefill is fitted on one shape
# (Qwen3-30B-A3B) and misses Mixtral-8x7B's by +17 (bf16) and +26 % (fp8): how does the kernel's efficiency move with
# the expert shape?
# Usage (device, repository root as cwd, vLLM + MoE add-on in /root/site):
#   bash calibration/campaigns/h200-moe-kernel.sh OUTDIR SECONDS [BENCH [ARGS...]]
# BENCH: moe_kernel (default) or linear_kernel (h200-linear-kernel.sh), calibration/BENCH_bench.py; ARGS go to it.
set -u
D=$1
B=${3:-moe_kernel}
N=${B//_/-}
. "$(dirname "$0")/common.sh"
job 0 "$2" "$N" python3 -m "calibration.${B}_bench" --out "$D/$N.jsonl" --budget-s $(( $2 - 25 )) "${@:4}"
tail -3 "$D/$N.out"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> "$D/nvidia-smi.csv" 2>&1
echo "[$(date -u +%T)] stage done" | tee -a "$D/jobs.log"
