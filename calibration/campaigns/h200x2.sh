#!/usr/bin/env bash
# The H200 ×2 measurement campaign of 2026-11-30 (vLLM 0.26.0, dummy weights): the exact jobs behind
# calibration/data/h200x2-*.  Usage (on the device, repository root as cwd, vLLM in /root/site):
#   bash calibration/campaigns/h200x2.sh stage1 OUTDIR   # single-GPU jobs, one queue per GPU
#   bash calibration/campaigns/h200x2.sh stage2 OUTDIR   # tensor parallel 2 over both GPUs
# Every job runs under `timeout` (the whole process group is killed at its limit) and the GPU is
# checked free before the next one; a failed job is logged and the queue goes on.
set -u
D=$2
. "$(dirname "$0")/common.sh"
export GUIDELLM_SITE=/tmp/site
G=h200-sxm
COMMON="--gpu $G --out $D --no-fit --no-microbench --quick"

FIXED="input=1024,output=128"
stage1() {
  (
    job 0 180 s1-moe-fit python3 -m calibration.run $COMMON --model qwen3-30b-a3b+mixed \
      --raw-name h200x2-moe-fit.jsonl --time-budget-s 75
    job 0 250 s1-mixtral-serve python3 -m calibration.serve_bench --model mixtral-8x7b --max-model-len 4096 \
      --out "$D/serve-mixtral" --port 8000 --budget-s 235 \
      --run c1:input=1024,output=64,n=8,concurrency=1 --run c32:$FIXED,n=96,concurrency=32 \
      --run p6:$FIXED,n=108,rate=6 --run p14:$FIXED,n=252,rate=14
  ) &
  (
    job 1 150 s1-fp8-fit python3 -m calibration.run $COMMON --model llama-3.1-8b@fp8+mixed \
      --raw-name h200x2-fp8-fit.jsonl --time-budget-s 65
    job 1 165 s1-fp8-val python3 -m calibration.run $COMMON --model none --validate-model qwen2.5-32b@fp8 \
      --raw-name h200x2-fp8-val.jsonl --time-budget-s 45
    job 1 195 s1-llama-serve python3 -m calibration.serve_bench --model llama-3.1-8b --max-model-len 4096 \
      --out "$D/serve-llama" --port 8001 --budget-s 185 \
      --run r12:$FIXED,n=216,rate=12 --run r26:$FIXED,n=468,rate=26 \
      --run chat:$FIXED,ratio=0.8,n=360,rate=20 --run prefix:input=256,output=64,prefix=2048,n=360,rate=20 \
      --agentic sessions=24,turns=4,system=1024,user=128,output=96,think=1.0,session_rate=3 \
      --guidellm rate=10,n=80,input=512,output=128
  ) &
  wait
}

stage2() {
  job 0,1 170 s2-tp2-fit python3 -m calibration.run $COMMON --model llama-3.1-8b+mixed --tensor-parallel 2 \
    --raw-name h200x2-tp2-fit.jsonl --time-budget-s 65
  job 0,1 225 s2-tp2-serve python3 -m calibration.serve_bench --model qwen2.5-32b --tp 2 --max-model-len 4096 \
    --out "$D/serve-qwen32b-tp2" --port 8002 --budget-s 210 \
    --run c1:input=1024,output=64,n=8,concurrency=1 --run c16:$FIXED,n=64,concurrency=16 \
    --run c64:$FIXED,n=192,concurrency=64 --run p8:$FIXED,n=144,rate=8
}

"$1"
echo "[$(date -u +%T)] $1 done" | tee -a "$D/jobs.log"
