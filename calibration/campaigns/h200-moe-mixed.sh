#!/usr/bin/env bash
# MoE mixed engine steps (issue #21): what a step of B decodes + one new prompt of C tokens costs on the engine loop,
# Qwen3-30B-A3B bf16 (128 experts, top-8; the MoE chat runs of 2026-12-01 ran ~25 ms more per prefill-carrying step
# than the simulator and than the lone prefills say), and the dense control Llama-3.1-8B on the same grid.
# In-process engine core (VLLM_ENABLE_V1_MULTIPROCESSING=0), vllm serve's scheduler defaults (8,192 batched tokens,
# async scheduling, graphs to 512), dummy weights.  Usage (device, repository root as cwd, vLLM + MoE add-on in
# /root/site): bash calibration/campaigns/h200-moe-mixed.sh OUTDIR     (~430 s wall on one H200)
set -u
D=$1
. "$(dirname "$0")/common.sh"

job 0 270 x-moe python3 -m calibration.mixed_probe --model qwen3-30b-a3b --out "$D/mixed.jsonl" --budget-s 250 \
  --batches 0,8,32,64,128 --chunks 256,768,1024,2048 --repeats 2
job 0 150 x-dense python3 -m calibration.mixed_probe --model llama-3.1-8b --out "$D/mixed.jsonl" --budget-s 135 \
  --batches 0,32,128 --chunks 768,2048 --repeats 2
echo "[$(date -u +%T)] done" | tee -a "$D/jobs.log"
