#!/usr/bin/env bash
# The H200 campaign of 2026-12-01 (issue #21: MXFP4 MoE, MLA + fine-grained MoE, fp8 MoE, sliding-window
# hybrid; vLLM 0.26.0, dummy weights): the exact jobs behind calibration/data/h200-2026-12-01/.
# Usage (device, repository root as cwd, vLLM + MoE add-on in /root/site):
#   bash calibration/campaigns/h200-families.sh STAGE OUTDIR SECONDS
# STAGE: mxfp4 | mla | swa | fp8moe | lawq | lawm (2026-12-03: the fused-MoE kernel law held out on engines,
# h200-2026-12-03-moe-kernel/kb, kc) | fp8dense (2026-12-03: dense fp8 decode across the CUTLASS token-count
# configurations, h200-2026-12-03-linear-kernel/).  A job starts only if its minimum is left of SECONDS; its limit shrinks to what is
# left (the whole process group is killed at the limit) and the GPU is checked free before the next one.
set -u
D=$2
END=$(( $(date +%s) + $3 ))
. "$(dirname "$0")/common.sh"
F="$R/calibration/campaigns/families.py"

run() {  # run NAME LIMIT_S MINIMUM_S PROBE_BUDGET_S
  local left=$(( END - $(date +%s) ))
  if [ "$left" -lt "$3" ]; then echo "[$(date -u +%T)] SKIP $1: ${left}s left < $3" | tee -a "$D/jobs.log"; return; fi
  local t=$2 b=$4
  if [ "$left" -lt "$t" ]; then b=$(( b - (t - left) )); t=$left; fi
  [ "$b" -lt 20 ] && b=20
  job 0 "$t" "$1" python3 "$F" "$1" "$D" "$b"
}

case $1 in
  mxfp4) run oss120-fit 310 200 100; run oss20-val 200 130 55 ;;
  mla) run dsv2lite-fit 230 160 80; run moonlight-val 170 120 45; run qwen3moe-fp8-fit 150 110 35 ;;
  swa) run gemma12-fit 190 140 60; run gemma27-val 170 130 45 ;;
  fp8moe) run mixtral-fp8-val 240 150 45 ;;  # 2026-12-02: the fp8 MoE held out (h200-2026-12-02-fp8moe/)
  # 2026-12-03: the fused-MoE kernel law held out on engines (h200-2026-12-03-moe-kernel/kb, kc)
  lawq) run q235l16-bf16-val 280 170 50; run q235l16-fp8-val 280 170 45 ;;
  lawm) run mixtral-bf16-val 280 170 45 ;;
  fp8dense) run qwen32-fp8-val 300 170 60; run qwen7-fp8-val 230 140 50 ;;
esac
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> "$D/nvidia-smi.csv" 2>&1
echo "[$(date -u +%T)] $1 done" | tee -a "$D/jobs.log"
