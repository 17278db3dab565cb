#!/usr/bin/env bash
# `planner verify` again after the synthetic tokenizer's fix (a quarter of the first run's requests were refused
# by vLLM's prompt-text length check, see calibration/tokenizer.py), then the TP 2 serving runs of the
# 2026-11-30 campaign (Qwen2.5-32B), whose smoke request had stopped them with an HTTP 400 of unknown reason
# (now recorded with the server's message, and no longer fatal), on an H200 ×2 host.
# Usage (on the device, repository root as cwd, vLLM in /root/site): bash calibration/campaigns/h200x2-verify.sh OUTDIR
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
# planner verify; python -m calibration.verify (same flags) where the machine's Python lacks typer
V=planner.cli; python3 -c "import typer" 2>/dev/null || V=calibration.verify
job 0 250 v-verify python3 -m $V verify --model llama-3.1-8b --gpu h200-sxm --ttft-slo-ms 500 \
  --tpot-slo-ms 50 --prompt-tokens 1024 --output-tokens 128 --duration-s 20 --out "$D/verify-llama" \
  --port 8003 --json
job 0,1 230 v-tp2-serve python3 -m calibration.serve_bench --model qwen2.5-32b --tp 2 --max-model-len 4096 \
  --out "$D/serve-qwen32b-tp2" --port 8002 --budget-s 215 \
  --run c1:input=1024,output=64,n=8,concurrency=1 --run c16:$FIXED,n=64,concurrency=16 \
  --run p8:$FIXED,n=144,rate=8 --run c64:$FIXED,n=192,concurrency=64
echo "[$(date -u +%T)] done" | tee -a "$D/jobs.log"
