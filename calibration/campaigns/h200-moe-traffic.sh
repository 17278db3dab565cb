#!/usr/bin/env bash
# One lent H200, 2026-12-05 (issue #21).  Usage (device, repository root as cwd, vLLM + MoE add-on in /root/site):
#   bash calibration/campaigns/h200-moe-traffic.sh OUTDIR SECONDS PART...   (PART: a, or a1 then a2, b, c; in order,
#   sharing the SECONDS; GPU=h100-sxm in the environment names another GPU than the H200 for the records)
# The served traffic shapes no MoE or sliding-window engine had been checked on; every served step traced.
# a (= a1 a2): Qwen3-30B-A3B (128 experts, top 8): a shared 2,048-token prefix (256-token suffixes) at 8 and 16 req/s and 24
#    agentic multi-turn sessions with prefix caching on, then the same engine with caching off (a second server):
#    the prefix at 8 req/s and the sessions again.  Its bf16 compile keys warmed first, as in the earlier runs.
# b: Gemma-3-27B (5:1 sliding-window hybrid; held out of the hybrid stage's fit) served with a small KV pool
#    (--gpu-memory-utilization 0.5): prompts of 5,000-15,000 tokens at 0.6 req/s (chunked at 8,192: the sliding
#    groups' admission and the pool's limit), then chat at 4 req/s.
# c: gpt-oss-120b with 32 of its 128 experts (calibration.variants; held out of the MXFP4 compile law's k, one of
#    the two variants its offset is taken from in-process): long prompts at 2 req/s on a cold engine, then chat, to
#    check the law's per-expert compile stall served.
# Then, here (no GPU), after committing the folders: python -m calibration.boots --write (each engine's boot joins
# the lead time's table), the runs into benchmarks/serving_accuracy.py, python -m calibration.refit --write.
set -u
D=$1
END=$(( $(date +%s) + $2 ))
. "$(dirname "$0")/common.sh"
PREFIX="input=256,output=64,prefix=2048"
AGENT="sessions=24,turns=4,system=1024,user=128,output=96,think=1.0,session_rate=3"
KEYS=$QWEN3_BF16_KEYS
part() {
  case "$1" in
  a) part a1; part a2 ;;
  a1)
    t=$(budget qwen3-prefix-on 150 300) || return 0
    # shellcheck disable=SC2086
    job 0 "$t" qwen3-prefix-on python3 -m calibration.serve_bench --model qwen3-30b-a3b $G \
      --max-model-len 4096 --step-trace --out "$D/serve-qwen3-prefix-on" --port 8061 --budget-s $(( t - 30 )) \
      $KEYS --run prefix8:$PREFIX,n=160,rate=8 --run prefix16:$PREFIX,n=320,rate=16 --agentic "$AGENT" ;;
  a2)
    t=$(budget qwen3-prefix-off 150 230) || return 0
    # shellcheck disable=SC2086
    job 0 "$t" qwen3-prefix-off python3 -m calibration.serve_bench --model qwen3-30b-a3b $G \
      --max-model-len 4096 --no-prefix-caching --step-trace --out "$D/serve-qwen3-prefix-off" --port 8062 \
      --budget-s $(( t - 30 )) $KEYS --run prefix8off:$PREFIX,n=160,rate=8 --agentic "$AGENT" ;;
  b)
    t=$(budget gemma-long 200 420) || return 0
    # shellcheck disable=SC2086
    job 0 "$t" gemma-long python3 -m calibration.serve_bench --model gemma-3-27b $G \
      --max-model-len 16384 --gpu-memory-utilization 0.5 --step-trace --out "$D/serve-gemma-3-27b-long" \
      --port 8063 --budget-s $(( t - 30 )) --run long1:input=10000,output=128,ratio=0.5,n=50,rate=0.6 \
      --run chat4:$CHAT,n=120,rate=4 ;;
  c)
    t=$(budget oss-e32-long 150 330) || return 0
    # shellcheck disable=SC2086
    job 0 "$t" oss-e32-long python3 -m calibration.serve_bench --model gpt-oss-120b-e32 $G \
      --max-model-len 16384 --step-trace --out "$D/serve-oss120e32-long" --port 8064 --budget-s $(( t - 30 )) \
      --run long1:input=8000,output=32,ratio=0.9,n=40,rate=2 --run chat10:$CHAT,n=150,rate=10 ;;
  *) echo "unknown part $1 (a, a1, a2, b, c)" >&2; return 2 ;;
  esac
}
for P in "${@:3}"; do part "$P" || exit $?; done
[ $# -ge 3 ] || part a
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> "$D/nvidia-smi.csv" 2>&1
echo "[$(date -u +%T)] moe-traffic ${*:3} done" | tee -a "$D/jobs.log"
