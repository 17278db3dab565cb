#!/usr/bin/env bash
# One lent GPU (issue #21; written 2026-12-05).  Usage (device, repository root as cwd, vLLM + MoE add-on in
# /root/site):
#   bash calibration/campaigns/h200-mla-graphs.sh OUTDIR SECONDS PART...   (in order, sharing the SECONDS; GPU=h100-sxm
#   in the environment names another GPU than the H200 for the records)
# vLLM 0.26's FLASH_ATTN_MLA backend sends a prompt chunk of up to 512 query tokens down MLA's decode pathway
# (FlashAttnMLAMetadataBuilder.reorder_batch_threshold) and a longer one down its prefill pathway.  Inside 8,192-token
# CUDA graphs Moonlight-16B-A3B's prompt steps with a chunk above 512 kept the CPU 27 ms in their launch call where
# those with chunks up to 512 took 15 (one H100, 2026-12-05 capture campaign): the prefill pathway's eager attention
# launches about twice the decode pathway's per layer.  The simulator's terms for both are fitted on Moonlight; this
# campaign holds DeepSeek-V2-Lite out (the same chat traffic, every step traced):
# e: DeepSeek-V2-Lite (MLA, 64 experts, top 6) with --max-cudagraph-capture-size 8192, chat at 10, 20 and 30 req/s;
# f: the same engine with vLLM's default graphs on the same host (its eager floor: the host's launch speed);
# g: Moonlight-16B-A3B with 8192 on this host (the fitted engine on the checked GPU where that is an H200).
# Then, here (no GPU): python -m calibration.boots --write, the runs into benchmarks/serving_accuracy.py.
set -u
D=$1 END=$(( $(date +%s) + $2 ))  # common.sh makes D; budget reads END
. "$(dirname "$0")/common.sh"
part() {
  # shellcheck disable=SC2086
  case "$1" in
  e) serve dsv2lite-cg8192 deepseek-v2-lite 8075 200 560 --max-cudagraph-capture-size 8192 $MRUNS ;;
  f) serve dsv2lite-default deepseek-v2-lite 8076 150 400 $MRUNS ;;
  g) serve moonlight-cg8192 moonlight-16b-a3b 8073 200 560 --max-cudagraph-capture-size 8192 $MRUNS ;;
  *) echo "unknown part $1 (e, f, g)" >&2; return 2 ;;
  esac
}
for P in "${@:3}"; do part "$P" || exit $?; done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> "$D/nvidia-smi.csv" 2>&1
echo "[$(date -u +%T)] mla-graphs ${*:3} done" | tee -a "$D/jobs.log"
