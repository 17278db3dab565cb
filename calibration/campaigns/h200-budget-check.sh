#!/usr/bin/env bash
# One lent H200, 2026-12-04 (issue #21).  Usage (device, repository root as cwd, vLLM + MoE add-on in /root/site):
#   bash calibration/campaigns/h200-budget-check.sh OUTDIR SECONDS a|b|c
# a: is the fused-MoE engine's 1.5x longer eager step under vllm serve (h200-2026-12-04-mode-check/) the step budget
#    vllm serve gives it (8,192 tokens) against the probes' LLM class's (16,384)?  Qwen3-30B-A3B's lone prompts in the
#    probes' mode with each budget, then served with the probes' budget (lone prompts, then chat at 10 req/s).
# b: the same served with vllm serve's budget (the mode-check's job again, this host), then Llama-3.1-8B served with
#    long prompts (800-15,200 tokens at 1 req/s: the OpenAI server's time per prompt token and long-prompt TTFT,
#    held out) and chat at 10 req/s beside it.  Every served step traced.
# c: Qwen3-30B-A3B served with the same long prompts (a fused MoE's 8,192-token chunks, its cold compile keys), then chat.
set -u
D=$1
END=$(( $(date +%s) + $2 ))
. "$(dirname "$0")/common.sh"
SWEEPS=(--size-sweep a:from=513,step=1,n=1,output=1 --size-sweep b:from=769,step=1,n=1,output=1
        --size-sweep c:from=1281,step=1,n=2,output=1 --size-sweep d:from=2048,step=1,n=2,output=1)
CHAT=chat10:input=1024,output=128,ratio=0.8,n=150,rate=10
qwen_served() {  # NAME BUDGET_TOKENS PORT
  t=$(budget "serve-$1" 150 220) || return 0
  job 0 "$t" "serve-$1" python3 -m calibration.serve_bench --model qwen3-30b-a3b --max-model-len 4096 --step-trace \
    --max-num-batched-tokens "$2" --out "$D/serve-$1" --port "$3" --budget-s $(( t - 35 )) "${SWEEPS[@]}" --run "$CHAT"
}
if [ "${3:-a}" = c ]; then  # c: Qwen3-30B-A3B with the long prompts (8,192-token chunks of a fused MoE), cold engine
  t=$(budget serve-qwen3-long 150 330) || true
  [ -n "${t:-}" ] && job 0 "$t" serve-qwen3-long python3 -m calibration.serve_bench --model qwen3-30b-a3b \
    --max-model-len 16384 --step-trace --out "$D/serve-qwen3-long" --port 8044 --budget-s $(( t - 35 )) \
    --run long1:input=8000,output=64,ratio=0.9,n=80,rate=1 --run "$CHAT"
elif [ "${3:-a}" = a ]; then
  for b in 8192 16384; do
    t=$(budget "et-$b" 90 120) || continue
    job 0 "$t" "et-$b" env VLLM_ENABLE_V1_MULTIPROCESSING=1 EAGER_TRACE_PROFILE=0 \
      EAGER_TRACE_ENGINE="{\"max_num_batched_tokens\": $b}" \
      python3 "$R/calibration/campaigns/eager_trace.py" qwen3-30b-a3b bf16 "$D/et-$b" 256,1023,1536,2048,3000
  done
  qwen_served qwen3-16384 16384 8041
else
  qwen_served qwen3-8192 8192 8042
  t=$(budget serve-llama-long 150 260) || true
  [ -n "${t:-}" ] && job 0 "$t" serve-llama-long python3 -m calibration.serve_bench --model llama-3.1-8b \
    --max-model-len 16384 --step-trace --out "$D/serve-llama-long" --port 8043 --budget-s $(( t - 35 )) \
    --run long1:input=8000,output=64,ratio=0.9,n=80,rate=1 --run "$CHAT"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> "$D/nvidia-smi.csv" 2>&1
echo "[$(date -u +%T)] budget-check ${3:-a} done" | tee -a "$D/jobs.log"
