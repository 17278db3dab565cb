#!/usr/bin/env bash
# One lent H200 (issue #21; written 2026-12-05, run the same day on a lent H100 with GPU=h100-sxm:
# calibration/data/h100-2026-12-05-capture/COMMAND.md).  Usage (device, repository root as cwd, vLLM + MoE add-on
# in /root/site):
#   bash calibration/campaigns/h200-capture.sh OUTDIR SECONDS PART...   (in order, sharing the SECONDS; GPU=h100-sxm
#   in the environment names another GPU than the H200 for the records)
# Does raising vLLM's largest CUDA graph (--max-cudagraph-capture-size, default 512) take a launch-bound MoE engine's
# prompt-carrying steps off the eager launch floor (60-90 ms of CPU a step on these hosts) and onto the GPU, as the
# simulator predicts?  The same chat traffic as the 2026-12-02 served-steps campaign (r/, s/), every step traced:
# a: Qwen3-30B-A3B (128 experts, top 8, bf16) served with --max-cudagraph-capture-size 8192 (every step a graph),
#    chat at 8, 14 and 20 req/s; no warm-up sweep (the captures compile every step size's MoE kernel at boot);
# b: the same engine with vLLM's default graphs (512) on the same host, its compile keys warmed first as in r/: the
#    control;
# c: Moonlight-16B-A3B (MLA, 64 experts) with 8192, chat at 10, 20 and 30 req/s;
# d: Moonlight with the default graphs: its control.
# Then, here (no GPU): python -m calibration.boots --write, the runs into benchmarks/serving_accuracy.py.
set -u
D=$1 END=$(( $(date +%s) + $2 ))  # common.sh makes D; budget reads END
. "$(dirname "$0")/common.sh"
QRUNS="--run chat8:$CHAT,n=160,rate=8 --run chat14:$CHAT,n=280,rate=14 --run chat20:$CHAT,n=400,rate=20"
part() {
  # shellcheck disable=SC2086
  case "$1" in
  a) serve qwen3-cg8192 qwen3-30b-a3b 8071 200 560 --max-cudagraph-capture-size 8192 $QRUNS ;;
  b) serve qwen3-default qwen3-30b-a3b 8072 150 400 $QWEN3_BF16_KEYS $QRUNS ;;
  c) serve moonlight-cg8192 moonlight-16b-a3b 8073 200 560 --max-cudagraph-capture-size 8192 $MRUNS ;;
  d) serve moonlight-default moonlight-16b-a3b 8074 150 400 $MRUNS ;;
  *) echo "unknown part $1 (a, b, c, d)" >&2; return 2 ;;
  esac
}
for P in "${@:3}"; do part "$P" || exit $?; done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> "$D/nvidia-smi.csv" 2>&1
echo "[$(date -u +%T)] capture ${*:3} done" | tee -a "$D/jobs.log"
