#!/usr/bin/env bash
# Dense 513-1,023-token steps (issue #21): is the fitted "GEMM shape" cliff (probes of 2026-11-29: in-process LLM
# engines at 16,384 batched tokens) real under `vllm serve` (8,192)?  Llama-3.1-8B bf16, one H200, dummy weights.
#  1. serve-idle: `vllm serve` as planner deploy writes it; lone requests of 256-2,048 prompt tokens and one output
#     token at 2 req/s (an idle engine: TTFT = one prefill step + the server's per-request overhead).
#  2. inproc-16k: the same lone prefills (and with 32 decodes beside) in-process at the LLM class's 16,384 batched
#     tokens (calibration/mixed_probe.py), to compare with the 8,192 cells of h200-2026-12-01-moe-mixed.
# Usage (device, repository root as cwd, vLLM in /root/site): bash calibration/campaigns/h200-dense-steps.sh OUTDIR
set -u
D=$1
. "$(dirname "$0")/common.sh"
job 0 210 serve-idle python3 -m calibration.serve_bench --model llama-3.1-8b --max-model-len 4096 \
  --out "$D/serve-llama-idle" --port 8003 --budget-s 195 \
  --run p256:input=256,output=1,n=24,rate=2 --run p512:input=512,output=1,n=24,rate=2 \
  --run p640:input=640,output=1,n=24,rate=2 --run p768:input=768,output=1,n=24,rate=2 \
  --run p1024:input=1024,output=1,n=24,rate=2 --run p2048:input=2048,output=1,n=24,rate=2
job 0 170 inproc-16k python3 -m calibration.mixed_probe --model llama-3.1-8b --out "$D/mixed16k.jsonl" \
  --budget-s 150 --batches 0,32 --chunks 512,640,768,1024,2048 --repeats 2 --max-num-batched-tokens 16384
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> "$D/nvidia-smi.csv" 2>&1
echo "[$(date -u +%T)] done" | tee -a "$D/jobs.log"
