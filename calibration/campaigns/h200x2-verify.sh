#!/usr/bin/env bash
# `planner verify` again after the synthetic tokenizer's fix (a quarter of the first run's requests were refused
# by vLLM's prompt-text length check, see calibration/tokenizer.py), then the TP 2 serving runs of the
# 2026-11-30 campaign (Qwen2.5-32B), whose smoke request had stopped them with an HTTP 400 of unknown reason
# (now recorded with the server's message, and no longer fatal), on an H200 ×2 host.
# Usage (on the device, repository root as cwd, vLLM in /root/site): bash calibration/campaigns/h200x2-verify.sh OUTDIR
set -u
D=$1
. "$(dirname "$0")/common.sh"

FIXED="input=1024,output=128"
job 0 250 v-verify python3 -m $VERIFY verify --model llama-3.1-8b --gpu h200-sxm --ttft-slo-ms 500 \
  --tpot-slo-ms 50 --prompt-tokens 1024 --output-tokens 128 --duration-s 20 --out "$D/verify-llama" \
  --port 8003 --json
job 0,1 230 v-tp2-serve python3 -m calibration.serve_bench --model qwen2.5-32b --tp 2 --max-model-len 4096 \
  --out "$D/serve-qwen32b-tp2" --port 8002 --budget-s 215 \
  --run c1:input=1024,output=64,n=8,concurrency=1 --run c16:$FIXED,n=64,concurrency=16 \
  --run p8:$FIXED,n=144,rate=8 --run c64:$FIXED,n=192,concurrency=64
echo "[$(date -u +%T)] done" | tee -a "$D/jobs.log"
