#!/usr/bin/env bash
# Where do requests wait on their way in? (issue #21; written 2026-12-05, not yet run: no GPU was lent that session.)
# At ~3,600 streamed tokens/s the committed traces put requests 150-280 ms (p90) between their client's send and the
# step that scheduled them while the engine's own queue stayed empty, and a second OpenAI server process took only
# 10-18 ms off that (calibration/data/README.md, 'Requests held back before the engine').  The step trace now stamps
# each request in the server (InputProcessor.process_inputs), in the engine core's input thread
# (preprocess_add_request) and in its busy loop (Scheduler.add_request); calibration.intake splits the wait into
# server / transport / preprocess / queued / schedule.  The simulator's intake bursts (the fused-MoE and MLA TPOT
# misses near 30 req/s with vLLM's default graphs) are modelled once this says where the wait is.
# Usage (device, repository root as cwd, vLLM + MoE add-on in /root/site):
#   bash calibration/campaigns/h200-intake.sh OUTDIR SECONDS PART...   (in order, sharing the SECONDS)
# m: Moonlight-16B-A3B, vLLM's default graphs, chat at 10, 20 and 30 req/s (the runs whose p90 wait was 88 / 276 ms);
# l: Llama-3.1-8B, chat at 10, 24 and 36 req/s (p90 23 / 40 / 150 ms);
# c: no engine: this host's CPU launch cost pinned to each CPU (calibration.launch_bench; about a minute), its CPU
#    and GPU topology beside it: does the launch floor depend on where the engine process lands?
# Then, here (no GPU): python -m calibration.intake OUTDIR/serve-*; the runs into benchmarks/serving_accuracy.py;
# calibration.launch_bench.summarise(OUTDIR/launch.jsonl).
set -u
D=$1 END=$(( $(date +%s) + $2 ))  # common.sh makes D; budget reads END
. "$(dirname "$0")/common.sh"
part() {
  # shellcheck disable=SC2086
  case "$1" in
  m) serve moonlight-intake moonlight-16b-a3b 8081 150 400 $MRUNS ;;
  l) serve llama-intake llama-3.1-8b 8082 150 330 --run chat10:$CHAT,n=200,rate=10 --run chat24:$CHAT,n=480,rate=24 \
       --run chat36:$CHAT,n=720,rate=36 ;;
  c) lscpu > "$D/lscpu.txt" 2>&1; nvidia-smi topo -m > "$D/topo.txt" 2>&1
     job 0 240 launch python3 -m calibration.launch_bench "$D/launch.jsonl" --repeats 3 ;;
  *) echo "unknown part $1 (m, l, c)" >&2; return 2 ;;
  esac
}
for P in "${@:3}"; do part "$P" || exit $?; done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> "$D/nvidia-smi.csv" 2>&1
echo "[$(date -u +%T)] intake ${*:3} done" | tee -a "$D/jobs.log"
