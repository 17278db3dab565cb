#!/usr/bin/env bash
# Serving runs the 2026-11-30 campaign's time limit cut (chat-like lengths, a 2,048-token shared prefix with
# prefix caching on and off) and `planner verify`, on an H200 ×2 host, one queue per GPU.
# Usage (on the device, repository root as cwd, vLLM in /root/site): bash calibration/campaigns/h200x2-chat.sh OUTDIR
set -u
D=$1
. "$(dirname "$0")/common.sh"

CHAT="input=1024,output=128,ratio=0.8"
PREFIX="input=256,output=64,prefix=2048"
(
  job 0 340 c-chat python3 -m calibration.serve_bench --model llama-3.1-8b --max-model-len 4096 \
    --out "$D/serve-llama-chat" --port 8001 --budget-s 310 \
    --run chat10:$CHAT,n=200,rate=10 --run chat24:$CHAT,n=360,rate=24 --run prefix20:$PREFIX,n=300,rate=20 \
    --run prefix8:$PREFIX,n=120,rate=8 --run chat36:$CHAT,n=432,rate=36
) &
(
  job 1 190 c-nocache python3 -m calibration.serve_bench --model llama-3.1-8b --max-model-len 4096 \
    --no-prefix-caching --out "$D/serve-llama-nocache" --port 8002 --budget-s 170 \
    --run prefix20off:$PREFIX,n=300,rate=20
  job 1 260 c-verify python3 -m $VERIFY verify --model llama-3.1-8b --gpu h200-sxm --ttft-slo-ms 500 \
    --tpot-slo-ms 50 --prompt-tokens 1024 --output-tokens 128 --duration-s 20 --out "$D/verify-llama" \
    --port 8003 --json
) &
wait
echo "[$(date -u +%T)] done" | tee -a "$D/jobs.log"
