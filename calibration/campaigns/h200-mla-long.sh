#!/usr/bin/env bash
# One lent H200, 2026-12-04 (issue #21).  Usage (device, repository root as cwd, vLLM + MoE add-on in /root/site):
#   bash calibration/campaigns/h200-mla-long.sh OUTDIR SECONDS a|b
# The MLA + fine-grained MoE engines' long eager prompt steps, served: the profile's MLA stage now launches its eager
# MoE layers as a floor the GPU work runs under (calibration.family_fit.FLOOR_VARIANTS) where it added them to the
# GEMMs; no served run had prompts longer than ~3,000 tokens.  Every served step traced.
# a: Moonlight-16B-A3B (held out: the MLA stage is fitted on DeepSeek-V2-Lite's in-process probes), prompts of ~400-7,600
#    tokens (its 8,192-token context) at 2 req/s, then chat at 10 req/s.
# b: DeepSeek-V2-Lite (the fit model, served: its served floor is in no fit either) with 800-15,200-token prompts at
#    1 req/s (budget-check's long1), then chat at 10 req/s.
set -u
D=$1
END=$(( $(date +%s) + $2 ))
. "$(dirname "$0")/common.sh"
CHAT=chat10:input=1024,output=128,ratio=0.8,n=150,rate=10
if [ "${3:-a}" = a ]; then
  t=$(budget serve-moonlight-long 150 480) || true
  [ -n "${t:-}" ] && job 0 "$t" serve-moonlight-long python3 -m calibration.serve_bench --model moonlight-16b-a3b \
    --max-model-len 8192 --step-trace --out "$D/serve-moonlight-long" --port 8051 --budget-s $(( t - 35 )) \
    --run long2:input=4000,output=64,ratio=0.9,n=100,rate=2 --run "$CHAT"
else
  t=$(budget serve-dsv2lite-long 150 480) || true
  [ -n "${t:-}" ] && job 0 "$t" serve-dsv2lite-long python3 -m calibration.serve_bench --model deepseek-v2-lite \
    --max-model-len 16384 --step-trace --out "$D/serve-dsv2lite-long" --port 8052 --budget-s $(( t - 35 )) \
    --run long1:input=8000,output=64,ratio=0.9,n=80,rate=1 --run "$CHAT"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> "$D/nvidia-smi.csv" 2>&1
echo "[$(date -u +%T)] mla-long ${3:-a} done" | tee -a "$D/jobs.log"
