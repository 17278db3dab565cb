#!/usr/bin/env bash
# Serving runs the 2026-11-30 campaign's time limit cut (chat-like lengths, a 2,048-token shared prefix with
# prefix caching on and off) and `planner verify`, on an H200 ×2 host, one queue per GPU.
# Usage (on the device, repository root as cwd, vLLM in /root/site): bash calibration/campaigns/h200x2-chat.sh OUTDIR
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

CHAT="input=1024,output=128,ratio=0.8"
PREFIX="input=256,output=64,prefix=2048"
(
  job 0 340 c-chat python3 -m calibration.serve_bench --model llama-3.1-8b --max-model-len 4096 \
    --out "$D/serve-llama-chat" --port 8001 --budget-s 310 \
    --run chat10:$CHAT,n=200,rate=10 --run chat24:$CHAT,n=360,rate=24 --run prefix20:$PREFIX,n=300,rate=20 \
    --run prefix8:$PREFIX,n=120,rate=8 --run chat36:$CHAT,n=432,rate=36
) &
(
  job 1 190 c-nocache python3 -m calibration.serve_bench --model llama-3.1-8b --max-model-len 4096 \
    --no-prefix-caching --out "$D/serve-llama-nocache" --port 8002 --budget-s 170 \
    --run prefix20off:$PREFIX,n=300,rate=20
  # planner verify; python -m calibration.verify (same flags) where the machine's Python lacks typer
  V=planner.cli; python3 -c "import typer" 2>/dev/null || V=calibration.verify
  job 1 260 c-verify python3 -m $V verify --model llama-3.1-8b --gpu h200-sxm --ttft-slo-ms 500 \
    --tpot-slo-ms 50 --prompt-tokens 1024 --output-tokens 128 --duration-s 20 --out "$D/verify-llama" \
    --port 8003 --json
) &
wait
echo "[$(date -u +%T)] done" | tee -a "$D/jobs.log"
