#!/usr/bin/env bash
# The AsyncLLM serving runs of 2026-11-29 again (issue #21): calibration/data/h200-serve.jsonl's Mistral-7B runs at
# 16 and 40 req/s (512 prompt + 128 output tokens) come out 25-32 % slower per output token than the simulator says,
# and that day's in-process probes timed lone 640-768-token prefills at 42-53 ms where the served Llama-3.1-8B steps of
# 2026-12-01/02 took 21-29 ms.  The host, the harness (in-process AsyncLLM vs vllm serve) or the model?  One H200,
# dummy weights, vLLM 0.26.0 (no MoE add-on needed).
#   a: the 2026-11-29 serve_probe command unchanged (AsyncLLM in-process, engines with prefix caching on and off),
#      with every engine step timed (calibration/steptrace in the engine core's process);
#   b: Mistral-7B behind `vllm serve`, the same fixed 512/128 lengths at 4, 16 and 40 req/s, traced;
#   c: the 2026-11-29 in-process prefill grid of h200-fit3.jsonl's bf16-KV engine (calibration.run, same flags).
# Usage (device, repository root as cwd, vLLM in /root/site):
#   bash calibration/campaigns/h200-asyncllm-recheck.sh a|b|c OUT
set -u
D=$2
. "$(dirname "$0")/common.sh"
FIXED="input=512,output=128"
case $1 in
  a) mkdir -p "$D/asyncllm"
     job 0 380 asyncllm env PYTHONPATH="$R/calibration/steptrace:$PYTHONPATH" PLANNER_STEP_TRACE="$D/asyncllm/steps" \
       python3 -m calibration.serve_probe --out "$D/asyncllm/h200-serve.jsonl" --budget-s 330 --max-run-s 30 ;;
  b) job 0 300 serve-fixed python3 -m calibration.serve_bench --model mistral-7b-v0.3 --max-model-len 4096 \
       --step-trace --out "$D/serve-mistral-fixed" --port 8011 --budget-s 280 \
       --run r4:$FIXED,n=120,rate=4 --run r16:$FIXED,n=200,rate=16 --run r40:$FIXED,n=200,rate=40 ;;
  c) job 0 260 probe python3 -m calibration.run --gpu h200-sxm --model mistral-7b-v0.3:auto --out "$D/probe" \
       --raw-name h200-fit3-fresh.jsonl --no-fit --no-microbench --time-budget-s 160 ;;
esac
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> "$D/nvidia-smi.csv" 2>&1
echo "[$(date -u +%T)] done $1" | tee -a "$D/jobs.log"
