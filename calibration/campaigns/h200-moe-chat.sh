#!/usr/bin/env bash
# MoE serving under chat-like variable lengths (issue #21): Qwen3-30B-A3B (128 experts, top-8, bf16) behind the
# `vllm serve` command planner deploy writes, at light / moderate / near-saturated load (the simulator's TPOT-50 ms
# knee for 1,024/128 is ~40 req/s).  Usage (on the device, repository root as cwd, vLLM + MoE add-on in
# /root/site): bash calibration/campaigns/h200-moe-chat.sh OUTDIR
set -u
D=$1
. "$(dirname "$0")/common.sh"

CHAT="input=1024,output=128,ratio=0.8"
job 0 285 m-chat python3 -m calibration.serve_bench --model qwen3-30b-a3b --max-model-len 4096 \
  --out "$D/serve-qwen3-30b-a3b-chat" --port 8001 --budget-s 270 \
  --run chat8:$CHAT,n=96,rate=8 --run chat20:$CHAT,n=240,rate=20 --run chat34:$CHAT,n=408,rate=34
echo "[$(date -u +%T)] done" | tee -a "$D/jobs.log"
