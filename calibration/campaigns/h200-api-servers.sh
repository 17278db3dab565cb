#!/usr/bin/env bash
# Is it the OpenAI server? (issue #21; calibration/data/README.md, 'Requests held back before the engine'): at ~3,700
# streamed tokens/s Llama-3.1-8B's requests reached the scheduler 150 ms (p90) after they were sent while the engine's
# own queue stayed empty.  The same chat runs with one and with two API server processes in front of the engine, every
# engine step traced; calibration.trace_points.client_lags reads both.  One H200, dummy weights, vLLM 0.26.0.
# Usage (device, repository root as cwd, vLLM in /root/site): bash calibration/campaigns/h200-api-servers.sh 1|2 OUT
set -u
D=$2
. "$(dirname "$0")/common.sh"
CHAT="input=1024,output=128,ratio=0.8"
job 0 290 "api$1" python3 -m calibration.serve_bench --model llama-3.1-8b --max-model-len 4096 --step-trace \
  --api-server-count "$1" --out "$D/serve-llama-api$1" --port "801$1" --budget-s 270 \
  --run chat24:$CHAT,n=360,rate=24 --run chat36:$CHAT,n=432,rate=36 --run chat40:$CHAT,n=480,rate=40
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> "$D/nvidia-smi.csv" 2>&1
echo "[$(date -u +%T)] done $1" | tee -a "$D/jobs.log"
