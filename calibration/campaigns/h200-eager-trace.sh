#!/usr/bin/env bash
# Eager prompt steps traced, one H200, 2026-12-04 (issue #21; eager_trace.py says why).  Usage (device, repository
# root as cwd, vLLM + MoE add-on in /root/site):
#   JOBS="model:weights[:mp] ..." bash calibration/campaigns/h200-eager-trace.sh OUTDIR SECONDS
# (:mp: the engine core in its own process, as the probes run it; walls only, no trace)
set -u
D=$1
END=$(( $(date +%s) + $2 ))
. "$(dirname "$0")/common.sh"
for j in ${JOBS:-qwen3-30b-a3b-l24:bf16 qwen3-30b-a3b:bf16 gpt-oss-20b:mxfp4 llama-3.1-8b:bf16}; do
  t=$(budget "$j" 90 240) || continue
  IFS=: read -r m w mp <<< "$j"
  if [ "$mp" = mp ]; then
    job 0 "$t" "$m-mp" env VLLM_ENABLE_V1_MULTIPROCESSING=1 EAGER_TRACE_PROFILE=0 \
      python3 "$R/calibration/campaigns/eager_trace.py" "$m" "$w" "$D/mp"
  else
    job 0 "$t" "$m" python3 "$R/calibration/campaigns/eager_trace.py" "$m" "$w" "$D"
  fi
done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> "$D/nvidia-smi.csv" 2>&1
echo "[$(date -u +%T)] eager-trace done" | tee -a "$D/jobs.log"
