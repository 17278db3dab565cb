# Sourced by the campaign scripts beside it, after they set D (the output folder): the device environment
# (vLLM from /root/site, offline, NVLink multicast off) and `job`, which runs one job under `timeout` and
# waits for its GPUs' memory to be released before the next.
R=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$D"
export PYTHONPATH=/root/site:$R VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  HF_DATASETS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 \
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# planner verify's entry point: python -m calibration.verify takes the same flags where the machine's Python
# lacks typer
VERIFY=planner.cli.app; python3 -c "import typer" 2>/dev/null || VERIFY=calibration.verify

job() {  # job GPUS LIMIT_S NAME command...
  local g=$1 t=$2 n=$3
  shift 3
  echo "[$(date -u +%T)] START $n gpus=$g limit=${t}s: $*" | tee -a "$D/jobs.log"
  local t0
  t0=$(date +%s)
  CUDA_VISIBLE_DEVICES=$g timeout -k 10 "$t" "$@" > "$D/$n.out" 2>&1
  echo "[$(date -u +%T)] END $n rc=$? after $(( $(date +%s) - t0 )) s" | tee -a "$D/jobs.log"
  python3 "$R/calibration/campaigns/gpu_free.py" "$g" 40 >> "$D/jobs.log" 2>&1
}

budget() {  # budget NAME MINIMUM_S LIMIT_S: prints the job's limit, LIMIT_S or what is left of END if less; below
  # MINIMUM_S left it logs a SKIP line (to stderr and jobs.log) and returns 1.  Needs END (epoch seconds).
  local left=$(( END - $(date +%s) ))
  if [ "$left" -lt "$2" ]; then echo "[$(date -u +%T)] SKIP $1: ${left}s left" | tee -a "$D/jobs.log" >&2; return 1; fi
  echo $(( left < $3 ? left : $3 ))
}

# Shared by the campaigns: chat-like lengths (1,024 in, 128 out, each +-80 %), the plan's warm-up of Qwen3-30B-A3B
# bf16 at vllm serve's 8,192 tokens a step (planner.compile_keys.warm_up_sizes: 513, 769, 1,281 twice), and GPU=
# in the environment naming another GPU than the H200 for serve_bench's records.
CHAT="input=1024,output=128,ratio=0.8"
QWEN3_BF16_KEYS="--size-sweep a:from=513,step=1,n=1,output=1 --size-sweep b:from=769,step=1,n=1,output=1"
QWEN3_BF16_KEYS="$QWEN3_BF16_KEYS --size-sweep c:from=1281,step=1,n=2,output=1"
G=${GPU:+--gpu $GPU}
# Moonlight's and DeepSeek-V2-Lite's chat loads (h200-capture.sh, h200-mla-graphs.sh)
MRUNS="--run chat10:$CHAT,n=200,rate=10 --run chat20:$CHAT,n=400,rate=20 --run chat30:$CHAT,n=600,rate=30"

serve() {  # serve NAME MODEL PORT MINIMUM_S LIMIT_S serve_bench-args...: one engine served at --max-model-len 4096,
  # every step traced, its boot given the job's time (needs END, as budget does)
  local t
  t=$(budget "$1" "$4" "$5") || return 0
  # shellcheck disable=SC2086
  job 0 "$t" "$1" python3 -m calibration.serve_bench --model "$2" $G --max-model-len 4096 --step-trace \
    --out "$D/serve-$1" --port "$3" --boot-timeout-s $(( t - 60 )) --budget-s $(( t - 30 )) "${@:6}"
}
