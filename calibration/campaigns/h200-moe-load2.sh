#!/usr/bin/env bash
# MoE under load, second round (issue #21), one H200, vLLM 0.26.0 + MoE add-on, dummy weights.
# Stage A: the fp8-weight MoE decode grid (Qwen3-30B-A3B, W8A8 fp8; its engine start did not fit the 150 s job of
#          2026-12-01's families campaign), then Qwen3-30B-A3B chat at 8 req/s again on a WARM engine (the first
#          chat8 ran on a cold one: Triton fused-MoE compiles, TTFT p99 1.8 s), a warm-up run first.
# Stage B: a held-out MoE under load never used in any fit: gpt-oss-20b (MXFP4, 32 experts top-4) behind the
#          `vllm serve` command planner deploy writes, chat-like lengths at light / moderate / heavy load, after a
#          warm-up run (the cold MXFP4 engine served 1-2 s TTFT for minutes while Triton compiled new shapes).
# Usage (device, repository root as cwd, vLLM + MoE add-on in /root/site):
#   bash calibration/campaigns/h200-moe-load2.sh a|b OUTDIR
set -u
D=$2
. "$(dirname "$0")/common.sh"
CHAT="input=1024,output=128,ratio=0.8"
case $1 in
  a)
    job 0 280 qwen3moe-fp8-fit python3 "$R/calibration/campaigns/families.py" qwen3moe-fp8-fit "$D" 110
    job 0 220 q-chat8-warm python3 -m calibration.serve_bench --model qwen3-30b-a3b --max-model-len 4096 \
      --out "$D/serve-qwen3-30b-a3b-chat-warm" --port 8001 --budget-s 200 \
      --run warm:$CHAT,n=240,rate=20 --run chat8:$CHAT,n=96,rate=8 ;;
  b)
    job 0 330 oss-chat python3 -m calibration.serve_bench --model gpt-oss-20b --weight-dtype mxfp4 \
      --max-model-len 4096 --out "$D/serve-gpt-oss-20b-chat" --port 8002 --budget-s 310 \
      --run warm:$CHAT,n=360,rate=30 --run chat10:$CHAT,n=120,rate=10 --run chat30:$CHAT,n=360,rate=30 \
      --run chat60:$CHAT,n=720,rate=60 ;;
esac
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> "$D/nvidia-smi.csv" 2>&1
echo "[$(date -u +%T)] stage $1 done" | tee -a "$D/jobs.log"
