#!/usr/bin/env bash
# Issue #23: the 1P1D pair `planner deploy --disaggregated` writes (Llama-3.1-8B, dummy weights, prefill engine on
# GPU 0 as kv_producer, decode engine on GPU 1 as kv_consumer, NixlConnector over NVLink) behind the prefill ->
# decode proxy, then the same model co-located: one engine per GPU, GPU 0 at the 1P1D rates (same load, half
# the GPUs), GPU 1 at half of them (two co-located replicas = the same two GPUs).  Chat-like lengths
# (1,024 / 128 tokens +- 80 %) at 10, 20 and 30 req/s; `vllm bench serve` with per-request timings.
# Usage (on the device, repository root as cwd, vLLM in /root/site, the NIXL wheels of stage_nixl.sh in
# /root/stage unless nixl is installed):
#   bash calibration/campaigns/h200x2-disagg.sh all OUTDIR    # pd, then colo (about 8 minutes)
#   bash calibration/campaigns/h200x2-disagg.sh pd OUTDIR     # the 1P1D pair only
#   bash calibration/campaigns/h200x2-disagg.sh colo OUTDIR   # the co-located engines only
# Device calls (kind nvidia-h200-x2; shared/device/README.md's pattern, back to back): build the vLLM pieces
# (PIECE_MIB=36 build_vllm_bundle.sh .stage: the tree is ~24 MiB of the 64 a call carries) and the NIXL pieces
# (stage_nixl.sh) here first, then
#   1. carry .stage/p00 (and p01 ... but the last): its "Call 1"
#   2. for each NIXL piece, carry .stage/nixl_pNN: mkdir -p /root/stage && mv -f .stage/nixl_pNN/* /root/stage/
#   3. carry the last vLLM piece: its "Last call", ending in
#        timeout 560 bash calibration/campaigns/h200x2-disagg.sh pd /root/res; tar czf $OUT/pd.tgz -C /root/res .
#   4. no carry, at once:     its "Another run" line, ending in
#        timeout 560 bash calibration/campaigns/h200x2-disagg.sh colo /root/res; tar czf $OUT/colo.tgz -C /root/res .
# ($OUT takes at most 8 files: hence one archive.)  Afterwards, here: unpack both into
# calibration/data/h200x2-disagg/ and run python benchmarks/disagg_accuracy.py.
set -u
D=$2
. "$(dirname "$0")/common.sh"
M=llama-3.1-8b
CHAT="input=1024,output=128,ratio=0.8"

nixl() {  # NIXL into /root/site from the pieces stage_nixl.sh made, when the machine's Python cannot import it
  if python3 -c "import nixl._api" > "$D/nixl-import.txt" 2>&1; then
    echo "[$(date -u +%T)] nixl importable" | tee -a "$D/jobs.log"; return
  fi
  local S=${NIXL_STAGE:-/root/stage} SITE=${NIXL_SITE:-/root/site}
  if [ -f "$S/NIXL_SHA256SUMS" ] && ls "$S"/nixl_wheels.tar.part[0-9][0-9] > /dev/null 2>&1; then
    (cd "$S" && cat nixl_wheels.tar.part[0-9][0-9] > nixl_wheels.tar && sha256sum -c NIXL_SHA256SUMS \
      && mkdir -p nixl && tar -xf nixl_wheels.tar -C nixl) >> "$D/jobs.log" 2>&1
    for w in "$S"/nixl/*.whl; do [ -f "$w" ] && python3 -m zipfile -e "$w" "$SITE" && echo "unpacked $w" >> "$D/jobs.log"; done
  else
    echo "no NIXL pieces in $S (stage_nixl.sh)" >> "$D/jobs.log"
  fi
  PYTHONPATH="$SITE:$PYTHONPATH" python3 -c "import nixl._api, importlib.metadata as m; print('nixl', m.version('nixl'))" \
    >> "$D/nixl-import.txt" 2>&1
  echo "[$(date -u +%T)] nixl: $(tail -1 "$D/nixl-import.txt")" | tee -a "$D/jobs.log"
}

pd() {
  nixl
  job 0,1 300 pd-serve python3 -m calibration.disagg_bench --model $M --max-model-len 4096 --out "$D/pd-$M" \
    --port 8000 --prefill-gpu 0 --decode-gpu 1 --budget-s 285 \
    --run pd10:$CHAT,n=150,rate=10 --run pd20:$CHAT,n=300,rate=20 --run pd30:$CHAT,n=450,rate=30
}

colo() {
  (
    job 0 250 colo-same python3 -m calibration.serve_bench --model $M --max-model-len 4096 --out "$D/colo-$M" \
      --port 8001 --budget-s 235 \
      --run chat10:$CHAT,n=150,rate=10 --run chat20:$CHAT,n=300,rate=20 --run chat30:$CHAT,n=450,rate=30
  ) &
  (
    job 1 250 colo-half python3 -m calibration.serve_bench --model $M --max-model-len 4096 --out "$D/colo-half-$M" \
      --port 8002 --budget-s 235 --run chat5:$CHAT,n=75,rate=5 --run chat15:$CHAT,n=225,rate=15
  ) &
  wait
}

all() { pd; colo; }

"$1"
echo "[$(date -u +%T)] $1 done" | tee -a "$D/jobs.log"
