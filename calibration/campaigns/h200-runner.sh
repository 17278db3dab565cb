#!/usr/bin/env bash
# The model runner's own step cost, one H200, 2026-12-03 (issue #21): Llama-3.1-8B (dense: V2 runner by default) and
# DeepSeek-V2-Lite (MoE on the V2 runner by default), then Moonlight-16B-A3B (V1 by default; the MLA family's held-out
# engine, its validation points), each on both of vLLM 0.26's GPU model runners, forced with
# VLLM_USE_V2_MODEL_RUNNER, the same in-process probes (families.py RUNNER) on both.  Each engine writes into
# OUTDIR/<v1|v2>/ (one probe log per model and role per folder).
# Usage (device, repository root as cwd, vLLM + MoE add-on in /root/site):
#   bash calibration/campaigns/h200-runner.sh STAGE OUTDIR SECONDS      STAGE: llama | dsv2lite | moonlight | oss |
#                                                                      layers (JOBS="...")
set -u
D=$2
END=$(( $(date +%s) + $3 ))
. "$(dirname "$0")/common.sh"
F="$R/calibration/campaigns/families.py"

run() {  # run JOB RUNNER LIMIT_S MINIMUM_S PROBE_BUDGET_S
  local left=$(( END - $(date +%s) ))
  if [ "$left" -lt "$4" ]; then echo "[$(date -u +%T)] SKIP $1-$2: ${left}s left < $4" | tee -a "$D/jobs.log"; return; fi
  local t=$3 b=$5 v=0
  if [ "$left" -lt "$t" ]; then b=$(( b - (t - left) )); t=$left; fi
  [ "$b" -lt 20 ] && b=20
  [ "$2" = v2 ] && v=1
  job 0 "$t" "$1-$2" env VLLM_USE_V2_MODEL_RUNNER=$v python3 "$F" "$1-$2" "$D/$2" "$b"
}

variants() {  # variants SUBDIR MINIMUM_S LIMIT_S JOB...: probe-variant jobs in turn (their own runner), one folder
  local sub=$1 min=$2 lim=$3 j t; shift 3
  for j in "$@"; do t=$(budget "$j" "$min" "$lim") || continue; job 0 "$t" "$j" python3 "$F" "$j" "$D/$sub" 60; done
}

case $1 in
  llama) run llama-runner v2 170 110 50; run llama-runner v1 170 110 50 ;;
  dsv2lite) run dsv2lite-runner v2 220 140 50; run dsv2lite-runner v1 220 140 50 ;;
  moonlight) run moonlight-runner v2 200 130 45; run moonlight-runner v1 200 130 45 ;;
  # gpt-oss-120b's probe variants (families.py VARIANT; their own runner, no VLLM_USE_V2_MODEL_RUNNER), one output folder
  oss) variants oss 150 280 ${JOBS:-oss120-l18 oss120-e32 oss120-ref} ;;
  # the dense and fused-MoE fit models' layer-count variants and each itself (families.py mistral-*, qwen3moe-*)
  layers) variants layers 100 240 ${JOBS:-mistral-l16 mistral-l64 mistral-ref} ;;
esac
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> "$D/nvidia-smi.csv" 2>&1
echo "[$(date -u +%T)] $1 done" | tee -a "$D/jobs.log"
