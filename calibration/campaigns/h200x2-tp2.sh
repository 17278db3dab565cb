#!/usr/bin/env bash
# The TP 2 serving runs of Qwen2.5-32B once more, after the synthetic tokenizer moved to its own folder (the
# h200x2-verify.sh run showed transformers 5 reading it as a Qwen2Tokenizer: prompts of 0-2 tokens, 83 % refused).
# Usage (on the device, repository root as cwd, vLLM in /root/site): bash calibration/campaigns/h200x2-tp2.sh OUTDIR
set -u
D=$1
. "$(dirname "$0")/common.sh"

FIXED="input=1024,output=128"
job 0,1 300 t-tp2-serve python3 -m calibration.serve_bench --model qwen2.5-32b --tp 2 --max-model-len 4096 \
  --out "$D/serve-qwen32b-tp2" --port 8002 --budget-s 285 \
  --run c1:input=1024,output=64,n=8,concurrency=1 --run c16:$FIXED,n=64,concurrency=16 \
  --run p8:$FIXED,n=144,rate=8 --run c64:$FIXED,n=192,concurrency=64 --run p14:$FIXED,n=210,rate=14
echo "[$(date -u +%T)] done" | tee -a "$D/jobs.log"
