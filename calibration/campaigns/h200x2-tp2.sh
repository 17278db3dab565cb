#!/usr/bin/env bash
# The TP 2 serving runs of Qwen2.5-32B once more, after the synthetic tokenizer moved to its own folder (the
# h200x2-verify.sh run showed transformers 5 reading it as a Qwen2Tokenizer: prompts of 0-2 tokens, 83 % refused).
# Usage (on the device, repository root as cwd, vLLM in /root/site): bash calibration/campaigns/h200x2-tp2.sh OUTDIR
set -u
R=$(cd "$(dirname "$0")/../.." && pwd)
D=$1
mkdir -p "$D"
export PYTHONPATH=/root/site:$R VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  HF_DATASETS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 \
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

job() {  # job GPUS LIMIT_S NAME command...
  local g=$1 t=$2 n=$3
  shift 3
  echo "[$(date -u +%T)] START $n gpus=$g limit=${t}s: $*" | tee -a "$D/jobs.log"
  local t0
  t0=$(date +%s)
  CUDA_VISIBLE_DEVICES=$g timeout -k 10 "$t" "$@" > "$D/$n.out" 2>&1
  echo "[$(date -u +%T)] END $n rc=$? after $(( $(date +%s) - t0 )) s" | tee -a "$D/jobs.log"
  python3 "$R/calibration/campaigns/gpu_free.py" "$g" 40 >> "$D/jobs.log" 2>&1
}

FIXED="input=1024,output=128"
job 0,1 300 t-tp2-serve python3 -m calibration.serve_bench --model qwen2.5-32b --tp 2 --max-model-len 4096 \
  --out "$D/serve-qwen32b-tp2" --port 8002 --budget-s 285 \
  --run c1:input=1024,output=64,n=8,concurrency=1 --run c16:$FIXED,n=64,concurrency=16 \
  --run p8:$FIXED,n=144,rate=8 --run c64:$FIXED,n=192,concurrency=64 --run p14:$FIXED,n=210,rate=14
echo "[$(date -u +%T)] done" | tee -a "$D/jobs.log"
