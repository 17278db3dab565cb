#!/usr/bin/env bash
# Engine steps under real `vllm serve` load (issue #21): the MoE chat TTFT is under-predicted by 41-47 % and the
# records cannot say whether the eager steps (> 512 tokens) of a served engine are longer than the same steps
# in-process.  One H200, vLLM 0.26.0 + MoE add-on, dummy weights.
#   a: in-process mixed steps of Qwen3-30B-A3B (128 experts, top-8) with the serving steps' shape: B decodes + a
#      1,024/2,048-token chunk split among 1, 2 or 4 new prompts (calibration/mixed_probe.py --prompts);
#   b: Qwen3-30B-A3B behind `vllm serve` with every engine step timed inside the engine core
#      (calibration/steptrace, serve_bench --step-trace): a warm-up, then chat at 20 and 34 req/s;
#   c: Llama-3.1-8B the same (dense control; the 513-1,023-token step dispute): chat 10/24/36 req/s, prefix 20;
#   d: Qwen3-30B-A3B chat20 again with the GIL hand-over interval at 0.5 ms (default 5 ms) in the server;
#   e: held out of the launch floor: Qwen2.5-7B (dense, 28 layers, 3,584 x 18,944) chat 10/24 req/s, traced;
#   f: held out: Mixtral-8x7B (MoE, 8 experts top-2, 32 layers) chat 2/4 req/s after a warm-up, traced.
#   g: MXFP4 MoE (2026-12-02, second round): gpt-oss-120b (128 experts top-4, 36 layers, Triton MXFP4 MoE) served,
#      traced: a 400-request warm-up, then chat 8 and 20 req/s (is a served MXFP4 step its CPU launch, as Qwen3's?);
#   h: held out: gpt-oss-20b (32 experts top-4, 24 layers) the same, a longer warm-up, chat 10 and 30 req/s, and
#      chat 30 again at the end (does the engine still compile new shapes after 1,400 requests?);
#   i: gpt-oss-20b as h with --max-num-batched-tokens 1024 (every step inside the CUDA graphs, up to 1,024 tokens
#      for gpt-oss): do the 1-2 s stalls of g and h (eager steps only) go away?
#   j: gpt-oss-20b as h (8,192 tokens per step) after a warm-up of every 32-token step size above the graphs:
#      one request at a time of 1,041, 1,073, ..., 8,177 prompt tokens (serve_bench --size-sweep), then chat 30 and
#      10 req/s: do the stalls of h go away, as the bucket rule (calibration/trace_points.shape_compiles) predicts?
#   k: the plan's full warm-up (planner.kernel_families.cold_start_note) at --max-num-batched-tokens 4096: both halves
#      of every compile key above the graphs, prompts of 32k + 17 and then 32k + 16 tokens for k = 32..127 (192
#      requests), then chat 30 and 10 req/s: the compile-key rule predicts no stall at all.
#   l: held out, served MLA + fine-grained MoE (2026-12-02, third round): Moonlight-16B-A3B (64 experts top-6, default
#      Triton fused-MoE configuration), cold, traced, chat 10, 30 and 20 req/s: the fused-MoE compile-key rule
#      (planner.compile_keys) predicts one stall, on the first step above the graphs whose size is not a multiple of 8;
#   m: Qwen3-30B-A3B cold, the plan's fused-MoE warm-up (one request each of 513, 769, 1,281 and 1,282 prompt tokens:
#      the four step-size keys a fresh engine has not compiled), then chat 20 and 34 req/s: no stall predicted.
#   n: DeepSeek-V2-Lite (the MLA family's fit model) served as l, traced: the MLA engines' served eager launch floor
#      is fitted on it (calibration/refit.py), held out on Moonlight (o);
#   o: Moonlight-16B-A3B again as l on the same machine as n (the served floor is the host's: deploy records now
#      carry calibration.records.host_info).
#   p: held out, Mixtral-8x7B cold with the plan's fused-MoE warm-up (planner.compile_keys.warm_up_sizes: one request
#      each of 513, 516, 1,793, 1,796, 1,800 tokens, the five keys its tuned E=8,N=14336 H200 configuration leaves a
#      fresh engine without), then chat 4 and 8 req/s: no stall predicted (f/, without the warm-up: 4 in 140 requests).
#   q, r, s (2026-12-02, fourth round; calibration/steptrace now also records each step's decoding requests' contexts,
#      dctx, for calibration/served_steps.py): held out, on a host no profile term came from:
#   q: Llama-3.1-8B chat 10/20/28 req/s (light, moderate, near its ~29 req/s capacity on the hosts seen), a shared
#      2,048-token prefix at 20 req/s (caching on), 24 agentic multi-turn sessions;
#   r: Qwen3-30B-A3B after the plan's fused-MoE warm-up (as m), chat 8/14/20 req/s;
#   s: Moonlight-16B-A3B (MLA + 64 experts, top-6), cold, chat 10/20/30 req/s.
#   t (2026-12-03): held out, a dense model twice as deep as every traced engine: Qwen2.5-32B (64 layers, bf16, one
#      H200), traced: a short warm-up, chat 2/4/7 req/s (light, moderate, near its ~8 req/s capacity) and a shared 2,048-token
#      prefix at 8 req/s (caching on; its prompt steps run inside the CUDA graphs, piecewise): do the eager launch
#      floor and the piecewise prompt-step call scale with the layers?
#   u (2026-12-03): Llama-3.1-70B's 80 layers with a quarter of its FFN width (probe variant llama-3.1-70b-i7168,
#      calibration/variants.py; 28 B parameters, one H200), traced: a warm-up, a shared 2,048-token prefix at 6 req/s
#      and chat at 3 req/s: the piecewise prompt steps' launch at the premium-chat preset's depth.
#   v (2026-12-03): held out, a fused-MoE model no term was fitted on: Qwen3-235B-A22B's layer 16 times (probe variant
#      qwen3-235b-a22b-l16: 4,096 wide, 128 experts of 1,536, top-8; 41 B parameters, one H200), cold, the plan's
#      warm-up (one 513-token request: the one compile key planner.compile_keys predicts), chat 8/16/24 req/s, traced:
#      the fused MoE's launch floor (the median of six Qwen3-30B-A3B hosts) and its latency under load on another model.
#   w (2026-12-03): the same model with fp8 weights (vLLM's online W8A8, the Triton fp8 fused MoE, default config; no
#      served fp8 MoE traced before): warm-up and chat as v, traced: the fp8 MoE family under load, held out.
#   x (2026-12-03): does fp8 (vLLM's online W8A8: a per-token activation quantisation before each scaled_mm) launch
#      longer than bf16 above the CUDA graphs?  On one machine, one after the other: Llama-3.1-8B bf16, the same with
#      fp8 weights, and Qwen3-30B-A3B with fp8 weights after its warm-up; chat 10 req/s each, traced.
#   y (2026-12-03): x's cut third job, and its bf16 twin, on one machine: Qwen3-30B-A3B with fp8 weights (the fp8 MoE
#      family's fit model) after the plan's warm-up (one 513-token request), then the same model in bf16 after its
#      four-request warm-up; chat 10 and 20 req/s each, traced: does the fp8 fused MoE launch longer per MoE layer
#      than the bf16 one on one host, and how long are its served decode steps?
#   z (2026-12-03): the same pair for Mixtral-8x7B (its router stays bf16 in fp8: planner.kernel_families
#      QUANTIZED_ROUTER_ARCHITECTURES): fp8 and then bf16 on one machine, each after the plan's warm-up, chat 4 req/s,
#      traced: does an fp8 fused MoE with a bf16 router launch as the bf16 kernel does (the profile's scoping of y's
#      extra launch)?
# Usage (device, repository root as cwd, vLLM + MoE add-on in /root/site):
#   bash calibration/campaigns/h200-serve-steps.sh a|b|c|...|s|t|u|v|w|x|y|z|fa|fb OUTDIR
set -u
D=$2
. "$(dirname "$0")/common.sh"
PREFIX="input=256,output=64,prefix=2048"
# CHAT and QWEN3_BF16_KEYS (the bf16 Qwen3-30B-A3B engine's compile keys above the CUDA graphs, 513, 769, 1,281-1,282
# tokens, as size sweeps before its runs: stages m, r, y, fb) come from common.sh
case $1 in
  a) job 0 270 x-moe-k python3 -m calibration.mixed_probe --model qwen3-30b-a3b --out "$D/mixed-k.jsonl" \
       --budget-s 250 --batches 0,64,128 --chunks 1024,2048 --prompts 1,2,4 --repeats 3 ;;
  b) job 0 320 m-trace python3 -m calibration.serve_bench --model qwen3-30b-a3b --max-model-len 4096 --step-trace \
       --out "$D/serve-qwen3-30b-a3b-trace" --port 8001 --budget-s 300 \
       --run warm:$CHAT,n=240,rate=20 --run chat20:$CHAT,n=240,rate=20 --run chat34:$CHAT,n=408,rate=34 ;;
  c) job 0 280 d-trace python3 -m calibration.serve_bench --model llama-3.1-8b --max-model-len 4096 --step-trace \
       --out "$D/serve-llama-trace" --port 8002 --budget-s 260 \
       --run chat10:$CHAT,n=200,rate=10 --run chat24:$CHAT,n=360,rate=24 --run chat36:$CHAT,n=432,rate=36 \
       --run prefix20:$PREFIX,n=300,rate=20 ;;
  d) job 0 250 m-gil python3 -m calibration.serve_bench --model qwen3-30b-a3b --max-model-len 4096 --step-trace \
       --switch-interval-s 0.0005 --out "$D/serve-qwen3-30b-a3b-gil" --port 8003 --budget-s 230 \
       --run warm:$CHAT,n=160,rate=20 --run chat20:$CHAT,n=240,rate=20 ;;
  e) job 0 230 q7-trace python3 -m calibration.serve_bench --model qwen2.5-7b --max-model-len 4096 --step-trace \
       --out "$D/serve-qwen2.5-7b-trace" --port 8004 --budget-s 215 \
       --run chat10:$CHAT,n=200,rate=10 --run chat24:$CHAT,n=360,rate=24 ;;
  f) job 0 260 mx-trace python3 -m calibration.serve_bench --model mixtral-8x7b --max-model-len 4096 --step-trace \
       --out "$D/serve-mixtral-8x7b-trace" --port 8005 --budget-s 245 \
       --run warm:$CHAT,n=20,rate=4 --run chat2:$CHAT,n=40,rate=2 --run chat4:$CHAT,n=80,rate=4 ;;
  g) job 0 470 oss120-trace python3 -m calibration.serve_bench --model gpt-oss-120b --weight-dtype mxfp4 \
       --max-model-len 4096 --step-trace --out "$D/serve-gpt-oss-120b-trace" --port 8006 --budget-s 450 \
       --run warm:$CHAT,n=400,rate=20 --run chat8:$CHAT,n=160,rate=8 --run chat20:$CHAT,n=400,rate=20 ;;
  h) job 0 560 oss20-trace python3 -m calibration.serve_bench --model gpt-oss-20b --weight-dtype mxfp4 \
       --max-model-len 4096 --step-trace --out "$D/serve-gpt-oss-20b-trace" --port 8007 --budget-s 540 \
       --run warm:$CHAT,n=600,rate=30 --run chat10:$CHAT,n=200,rate=10 --run chat30:$CHAT,n=600,rate=30 \
       --run chat30b:$CHAT,n=600,rate=30 ;;
  i) job 0 480 oss20-mnbt1024 python3 -m calibration.serve_bench --model gpt-oss-20b --weight-dtype mxfp4 \
       --max-model-len 4096 --max-num-batched-tokens 1024 --step-trace --out "$D/serve-gpt-oss-20b-mnbt1024" \
       --port 8008 --budget-s 460 --run warm:$CHAT,n=300,rate=30 --run chat10:$CHAT,n=200,rate=10 \
       --run chat30:$CHAT,n=600,rate=30 ;;
  j) job 0 520 oss20-sweep python3 -m calibration.serve_bench --model gpt-oss-20b --weight-dtype mxfp4 \
       --max-model-len 8448 --step-trace --out "$D/serve-gpt-oss-20b-sweep" --port 8009 --budget-s 500 \
       --size-sweep sweep:from=1041,step=32,n=224,output=1 --run chat30:$CHAT,n=600,rate=30 \
       --run chat10:$CHAT,n=200,rate=10 ;;
  k) job 0 520 oss20-warmed python3 -m calibration.serve_bench --model gpt-oss-20b --weight-dtype mxfp4 \
       --max-model-len 4352 --max-num-batched-tokens 4096 --step-trace --out "$D/serve-gpt-oss-20b-warmed" \
       --port 8010 --budget-s 500 --size-sweep odd:from=1041,step=32,n=96,output=1 \
       --size-sweep even:from=1040,step=32,n=96,output=1 --run chat30:$CHAT,n=600,rate=30 \
       --run chat10:$CHAT,n=200,rate=10 ;;
  l) job 0 480 moonlight-trace python3 -m calibration.serve_bench --model moonlight-16b-a3b --max-model-len 4096 \
       --step-trace --out "$D/serve-moonlight-16b-a3b-trace" --port 8011 --budget-s 460 \
       --run chat10:$CHAT,n=200,rate=10 --run chat30:$CHAT,n=600,rate=30 --run chat20:$CHAT,n=400,rate=20 ;;
  m) job 0 480 qwen3-warmed python3 -m calibration.serve_bench --model qwen3-30b-a3b --max-model-len 4096 \
       --step-trace --out "$D/serve-qwen3-30b-a3b-warmed" --port 8012 --budget-s 460 \
       $QWEN3_BF16_KEYS --run chat20:$CHAT,n=240,rate=20 \
       --run chat34:$CHAT,n=408,rate=34 ;;
  n) job 0 480 dsv2lite-trace python3 -m calibration.serve_bench --model deepseek-v2-lite --max-model-len 4096 \
       --step-trace --out "$D/serve-deepseek-v2-lite-trace" --port 8013 --budget-s 460 \
       --run chat10:$CHAT,n=200,rate=10 --run chat30:$CHAT,n=600,rate=30 --run chat20:$CHAT,n=400,rate=20 ;;
  o) job 0 480 moonlight-trace2 python3 -m calibration.serve_bench --model moonlight-16b-a3b --max-model-len 4096 \
       --step-trace --out "$D/serve-moonlight-16b-a3b-trace2" --port 8014 --budget-s 460 \
       --run chat10:$CHAT,n=200,rate=10 --run chat30:$CHAT,n=600,rate=30 --run chat20:$CHAT,n=400,rate=20 ;;
  p) job 0 235 mx-warmed python3 -m calibration.serve_bench --model mixtral-8x7b --max-model-len 4096 --step-trace \
       --out "$D/serve-mixtral-8x7b-warmed" --port 8015 --budget-s 220 \
       --size-sweep a:from=513,step=3,n=2,output=1 --size-sweep b:from=1793,step=3,n=2,output=1 \
       --size-sweep c:from=1800,step=1,n=1,output=1 --run chat4:$CHAT,n=80,rate=4 --run chat8:$CHAT,n=120,rate=8 ;;
  q) job 0 420 q-steps python3 -m calibration.serve_bench --model llama-3.1-8b --max-model-len 4096 --step-trace \
       --out "$D/serve-llama-steps" --port 8021 --budget-s 380 \
       --run chat10:$CHAT,n=200,rate=10 --run chat20:$CHAT,n=400,rate=20 --run chat28:$CHAT,n=560,rate=28 \
       --run prefix20:$PREFIX,n=300,rate=20 \
       --agentic sessions=24,turns=4,system=1024,user=128,output=96,think=1.0,session_rate=3 ;;
  r) job 0 420 r-steps python3 -m calibration.serve_bench --model qwen3-30b-a3b --max-model-len 4096 --step-trace \
       --out "$D/serve-qwen3-30b-a3b-steps" --port 8022 --budget-s 380 \
       $QWEN3_BF16_KEYS --run chat8:$CHAT,n=160,rate=8 \
       --run chat14:$CHAT,n=280,rate=14 --run chat20:$CHAT,n=400,rate=20 ;;
  s) job 0 420 s-steps python3 -m calibration.serve_bench --model moonlight-16b-a3b --max-model-len 4096 \
       --step-trace --out "$D/serve-moonlight-16b-a3b-steps" --port 8023 --budget-s 380 \
       --run chat10:$CHAT,n=200,rate=10 --run chat20:$CHAT,n=400,rate=20 --run chat30:$CHAT,n=600,rate=30 ;;
  t) job 0 500 t-steps python3 -m calibration.serve_bench --model qwen2.5-32b --max-model-len 4096 --step-trace \
       --out "$D/serve-qwen2.5-32b-steps" --port 8024 --budget-s 470 --run warm:$CHAT,n=20,rate=2 \
       --run chat2:$CHAT,n=60,rate=2 --run prefix8:$PREFIX,n=200,rate=8 --run chat4:$CHAT,n=120,rate=4 \
       --run chat7:$CHAT,n=168,rate=7 ;;
  u) job 0 450 u-steps python3 -m calibration.serve_bench --model llama-3.1-70b-i7168 --max-model-len 4096 \
       --step-trace --out "$D/serve-llama-3.1-70b-i7168-steps" --port 8025 --budget-s 420 \
       --run warm:$CHAT,n=20,rate=2 --run prefix6:$PREFIX,n=150,rate=6 --run chat3:$CHAT,n=90,rate=3 ;;
  v) job 0 470 v-steps python3 -m calibration.serve_bench --model qwen3-235b-a22b-l16 --max-model-len 4096 \
       --step-trace --out "$D/serve-qwen3-235b-a22b-l16-steps" --port 8026 --budget-s 440 \
       --size-sweep a:from=513,step=1,n=1,output=1 --run chat8:$CHAT,n=160,rate=8 \
       --run chat16:$CHAT,n=320,rate=16 --run chat24:$CHAT,n=480,rate=24 ;;
  w) job 0 470 w-steps python3 -m calibration.serve_bench --model qwen3-235b-a22b-l16 --weight-dtype fp8 \
       --max-model-len 4096 --step-trace --out "$D/serve-qwen3-235b-a22b-l16-fp8-steps" --port 8027 --budget-s 440 \
       --size-sweep a:from=513,step=1,n=1,output=1 --run chat8:$CHAT,n=160,rate=8 \
       --run chat16:$CHAT,n=320,rate=16 --run chat24:$CHAT,n=480,rate=24 ;;
  x) job 0 170 x-llama-bf16 python3 -m calibration.serve_bench --model llama-3.1-8b --max-model-len 4096 \
       --step-trace --out "$D/serve-llama-3.1-8b-bf16" --port 8028 --budget-s 150 --run chat10:$CHAT,n=150,rate=10
     job 0 170 x-llama-fp8 python3 -m calibration.serve_bench --model llama-3.1-8b --weight-dtype fp8 \
       --max-model-len 4096 --step-trace --out "$D/serve-llama-3.1-8b-fp8" --port 8029 --budget-s 150 \
       --run chat10:$CHAT,n=150,rate=10
     job 0 215 x-qwen3-fp8 python3 -m calibration.serve_bench --model qwen3-30b-a3b --weight-dtype fp8 \
       --max-model-len 4096 --step-trace --out "$D/serve-qwen3-30b-a3b-fp8" --port 8030 --budget-s 195 \
       --size-sweep a:from=513,step=1,n=1,output=1 --run chat10:$CHAT,n=150,rate=10 ;;
  y) job 0 255 y-qwen3-fp8 python3 -m calibration.serve_bench --model qwen3-30b-a3b --weight-dtype fp8 \
       --max-model-len 4096 --step-trace --out "$D/serve-qwen3-30b-a3b-fp8" --port 8031 --budget-s 235 \
       --size-sweep a:from=513,step=1,n=1,output=1 --run chat10:$CHAT,n=150,rate=10 \
       --run chat20:$CHAT,n=300,rate=20
     job 0 225 y-qwen3-bf16 python3 -m calibration.serve_bench --model qwen3-30b-a3b --max-model-len 4096 \
       --step-trace --out "$D/serve-qwen3-30b-a3b-bf16" --port 8032 --budget-s 205 \
       $QWEN3_BF16_KEYS --run chat10:$CHAT,n=150,rate=10 \
       --run chat20:$CHAT,n=300,rate=20 ;;
  z) job 0 270 z-mixtral-fp8 python3 -m calibration.serve_bench --model mixtral-8x7b --weight-dtype fp8 \
       --max-model-len 4096 --step-trace --out "$D/serve-mixtral-8x7b-fp8" --port 8033 --budget-s 250 \
       --size-sweep a:from=513,step=3,n=2,output=1 --size-sweep b:from=769,step=3,n=2,output=1 \
       --size-sweep c:from=776,step=1,n=1,output=1 --size-sweep d:from=1793,step=3,n=2,output=1 \
       --size-sweep e:from=1800,step=1,n=1,output=1 --size-sweep f:from=3585,step=3,n=2,output=1 \
       --run chat4:$CHAT,n=80,rate=4
     job 0 245 z-mixtral-bf16 python3 -m calibration.serve_bench --model mixtral-8x7b --max-model-len 4096 \
       --step-trace --out "$D/serve-mixtral-8x7b-bf16" --port 8034 --budget-s 225 \
       --size-sweep a:from=513,step=3,n=2,output=1 --size-sweep b:from=1793,step=3,n=2,output=1 \
       --size-sweep c:from=1800,step=1,n=1,output=1 --run chat4:$CHAT,n=80,rate=4 ;;
  # 2026-12-03 (fifth round): held out, the dense fp8 linear kernel law served: Qwen2.5-32B fp8 (CUTLASS's 17-64-token
  # configuration streams 1.2-1.3x slower than 1-16; chat 8 and 12 req/s keep ~15-30 sequences in a decode step)
  fa) job 0 360 fa-steps python3 -m calibration.serve_bench --model qwen2.5-32b --weight-dtype fp8 --max-model-len 4096 \
       --step-trace --out "$D/serve-qwen2.5-32b-fp8-steps" --port 8035 --budget-s 335 --run warm:$CHAT,n=20,rate=2 \
       --run chat8:$CHAT,n=160,rate=8 --run chat12:$CHAT,n=240,rate=12 ;;
  # 2026-12-04: the bf16 fused MoE's served launch floor at two depths on one host (Qwen3-30B-A3B's 48 layers and its
  # 24-layer variant, each after y's bf16 warm-up, chat 10 req/s, traced): a per-step part of the floor beside the
  # per-layer one (calibration/data/README.md, the eager-trace section)
  fb) job 0 215 fb-qwen3-l48 python3 -m calibration.serve_bench --model qwen3-30b-a3b --max-model-len 4096 \
       --step-trace --out "$D/serve-qwen3-30b-a3b-bf16" --port 8036 --budget-s 195 \
       $QWEN3_BF16_KEYS --run chat10:$CHAT,n=150,rate=10
     job 0 200 fb-qwen3-l24 python3 -m calibration.serve_bench --model qwen3-30b-a3b-l24 --max-model-len 4096 \
       --step-trace --out "$D/serve-qwen3-30b-a3b-l24-bf16" --port 8037 --budget-s 180 \
       $QWEN3_BF16_KEYS --run chat10:$CHAT,n=150,rate=10 ;;
esac
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> "$D/nvidia-smi.csv" 2>&1
echo "[$(date -u +%T)] stage $1 done" | tee -a "$D/jobs.log"
