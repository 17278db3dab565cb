"""The H200 campaign of 2026-12-01 for issue #21 (the 2026 families): one vLLM engine per job, each in a child
process of :func:`calibration.run.run_model` (the same probes, records and start-up log parsing as
``planner calibrate``), with point lists of its own per family.  Usage (device, repository root on PYTHONPATH):

    python3 calibration/campaigns/families.py JOB OUTDIR [PROBE_BUDGET_S]

(``h200-families.sh`` runs the jobs under ``timeout`` in priority order).  Fit engines use the fit grid below,
held-out engines the validation grid (other lengths and batch sizes)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from calibration.records import append_record  # noqa: E402
from calibration.run import environment, run_model  # noqa: E402


def _prefill(lens, batched=()):
    pts = [{"metric": "prefill_s", "batch_size": 1, "prompt_tokens": p, "output_tokens": 1, "repeats": 3} for p in lens]
    return pts + [{"metric": "prefill_s", "batch_size": b, "prompt_tokens": p, "output_tokens": 1, "repeats": 2}
                  for b, p in batched]


def _decode(grid):
    return [{"metric": "decode_step_s", "batch_size": b, "prompt_tokens": c, "output_tokens": 64, "repeats": 1}
            for c, bs in grid for b in bs]


def _mixed(ctx, grid):
    return [{"metric": "mixed_step_s", "batch_size": b, "prompt_tokens": ctx, "chunk_tokens": c, "output_tokens": 1,
             "repeats": 3} for b, c in grid]


# fit: the 480-1,023-token steps around vLLM's largest CUDA-graph size (512), the small-batch expert-touch
# regime (1-64) and mixed steps (a prefill chunk plus B decodes)
FIT = (_prefill([128, 256, 480, 512, 544, 640, 768, 1023, 1536, 2048, 4096, 8192, 16384], [(16, 512), (4, 2048)])
       + _decode([(512, [1, 2, 4, 8, 16, 32, 64, 128, 256]), (2048, [1, 16, 64, 256])])
       + _mixed(1024, [(32, 1024), (128, 256), (64, 2048)]))
VALIDATE = (_prefill([300, 700, 1500, 3000, 6000, 12000], [(8, 1000)])
            + _decode([(1024, [1, 2, 8, 24, 96, 192]), (3000, [1, 24, 96])])
            + _mixed(2000, [(64, 700)]))
# Gemma-3: the sliding layers keep up to the window (1,024) per request, so the largest batches would not fit
# the KV pool (a queued batch is not a decode step of that size): batches up to 128 (fit) / 96 (held out)
SWA_FIT = [p for p in FIT if not (p["metric"] == "decode_step_s" and p["batch_size"] > 128)
           and not (p["metric"] == "mixed_step_s" and p["batch_size"] > 64)]
SWA_VALIDATE = [p for p in VALIDATE if not (p["metric"] == "decode_step_s" and p["batch_size"] > 96)
                and not (p["metric"] == "decode_step_s" and p["prompt_tokens"] > 2000 and p["batch_size"] > 24)]
SHORT_VALIDATE = [p for p in VALIDATE if p["prompt_tokens"] + 400 <= 8192]  # Moonlight: 8,192-token context
FP8_DECODE = _prefill([512, 2048, 8192]) + _decode([(512, [1, 8, 16, 32, 64, 128, 256]), (2048, [16, 64])])
COLD = [700, 733, 1000, 1500, 2100, 3000, 4500]
# the fp8 MoE held out (2026-12-02): other lengths and batches than FP8_DECODE, on another fp8 MoE (Mixtral-8x7B)
FP8_VALIDATE = _prefill([700, 1500, 3000, 6000]) + _decode([(1024, [1, 2, 8, 24, 96, 192]), (3000, [1, 24])])
# the model runner's own step cost (2026-12-03): one dense and one MoE engine, each on vLLM's V1 and V2 GPU model runners
# (h200-runner.sh sets VLLM_USE_V2_MODEL_RUNNER from the job's suffix), the same points on both
RUNNER = (_prefill([256, 512, 1024, 2048, 4096])
          + _decode([(512, [1, 2, 4, 8, 16, 32, 64, 128, 256]), (2048, [1, 16, 64, 256])]))

# gpt-oss-120b with half its layers and with a quarter of its experts (calibration/variants.py), 2026-12-03: on one
# model a per-step cost, a per-layer one and one per expert of a layer move together; these tell them apart (the
# MXFP4 stage's held-out gpt-oss-20b: 24 layers, 32 experts).  gpt-oss-120b itself again beside them, on one host
VARIANT = (_prefill([256, 1023, 4096, 8192])
           + _decode([(512, [1, 2, 4, 8, 16, 32, 64, 128, 256]), (2048, [1, 16, 64, 256])]))
# the dense fp8 GEMM held out across CUTLASS's token-count configurations (2026-12-03, h200-2026-12-03-linear-kernel/):
# decode at every CUDA-graph batch from 1 to 256 (the kernel bench's fp8 layer time: x1.15-1.20 at 24-32 tokens and
# 96-128, x1.4-1.7 at 160-256, against 1-16 and 48-64), two prompts
FP8_DENSE = _prefill([700, 3000]) + _decode([(1024, [1, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256])])

# job name: (model, weights, role, probe budget s, extra); the limits and order are in h200-families.sh
JOBS = {
    "oss120-fit": ("gpt-oss-120b", "mxfp4", "fit", 100, {"points": FIT, "cold_prefill_lens": COLD}),
    "oss20-val": ("gpt-oss-20b", "mxfp4", "validate", 55, {"points": VALIDATE, "cold_prefill_lens": COLD}),
    "dsv2lite-fit": ("deepseek-v2-lite", "bf16", "fit", 80, {"points": FIT}),
    "moonlight-val": ("moonlight-16b-a3b", "bf16", "validate", 45, {"points": SHORT_VALIDATE, "max_model_len": 8192}),
    "qwen3moe-fp8-fit": ("qwen3-30b-a3b", "fp8", "fit", 35, {"points": FP8_DECODE}),
    "mixtral-fp8-val": ("mixtral-8x7b", "fp8", "validate", 45, {"points": FP8_VALIDATE}),
    **{f"llama-runner-{r}": ("llama-3.1-8b", "bf16", "fit", 50, {"points": RUNNER}) for r in ("v1", "v2")},
    **{f"moonlight-runner-{r}": ("moonlight-16b-a3b", "bf16", "validate", 45,
                                 {"points": SHORT_VALIDATE, "max_model_len": 8192}) for r in ("v1", "v2")},
    **{f"dsv2lite-runner-{r}": ("deepseek-v2-lite", "bf16", "validate", 50, {"points": RUNNER}) for r in ("v1", "v2")},
    "oss120-l18": ("gpt-oss-120b-l18", "mxfp4", "fit", 60, {"points": VARIANT}),
    "oss120-e32": ("gpt-oss-120b-e32", "mxfp4", "fit", 60, {"points": VARIANT}),
    "oss120-ref": ("gpt-oss-120b", "mxfp4", "fit", 60, {"points": VARIANT}),
    # the fused-MoE kernel law held out on engines (2026-12-03, h200-2026-12-03-moe-kernel/): an expert shape no MoE
    # stage was fitted on (Qwen3-235B-A22B's layer 16 times: 128 experts of 1,536, hidden 4,096) in bf16 and fp8, and
    # Mixtral-8x7B in bf16 (its one in-process engine so far was fp8), FP8_VALIDATE's lengths and batches
    "q235l16-bf16-val": ("qwen3-235b-a22b-l16", "bf16", "validate", 50, {"points": FP8_VALIDATE}),
    "q235l16-fp8-val": ("qwen3-235b-a22b-l16", "fp8", "validate", 45, {"points": FP8_VALIDATE}),
    "mixtral-bf16-val": ("mixtral-8x7b", "bf16", "validate", 45, {"points": FP8_VALIDATE}),
    "qwen32-fp8-val": ("qwen2.5-32b", "fp8", "validate", 60, {"points": FP8_DENSE}),
    "qwen7-fp8-val": ("qwen2.5-7b", "fp8", "validate", 50, {"points": FP8_DENSE}),
    # the dense and fused-MoE fit models with fewer and more layers, and each itself, on one host (2026-12-03,
    # h200-2026-12-03-layers/): a step's cost per step against per layer (VARIANT's points)
    **{f"mistral-{v}": (f"mistral-7b-v0.3{s}", "bf16", "fit", 50, {"points": VARIANT})
       for v, s in (("l16", "-l16"), ("l64", "-l64"), ("ref", ""))},
    **{f"qwen3moe-{v}": (f"qwen3-30b-a3b{s}", "bf16", "fit", 60, {"points": VARIANT})
       for v, s in (("l24", "-l24"), ("ref", ""))},
    # held out of that fit: Llama-3.1-8B with 16, 32 and 64 layers and Llama-3.1-70B-i7168 (80), one host
    # (2026-12-04, h200-2026-12-04-layers-val/)
    **{f"llama-{v}-val": (f"llama-3.1-8b{s}", "bf16", "validate", 50, {"points": VARIANT})
       for v, s in (("l16", "-l16"), ("l64", "-l64"), ("ref", ""))},
    "llama70-i7168-val": ("llama-3.1-70b-i7168", "bf16", "validate", 60, {"points": VARIANT}),
    "gemma12-fit": ("gemma-3-12b", "bf16", "fit", 60, {"points": SWA_FIT}),
    "gemma27-val": ("gemma-3-27b", "bf16", "validate", 45, {"points": SWA_VALIDATE}),
}


def main() -> int:
    """families.py JOB OUTDIR [BUDGET_S]: one engine, records appended to OUTDIR/h200-families.jsonl."""
    name, out = sys.argv[1], Path(sys.argv[2])
    model, weights, role, budget, extra = JOBS[name]
    if len(sys.argv) > 3:
        budget = min(budget, float(sys.argv[3]))
    out.mkdir(parents=True, exist_ok=True)
    raw = out / "h200-families.jsonl"
    env = environment("h200-sxm")
    env["command"] = " ".join(sys.argv)
    append_record(raw, env)
    t0 = time.perf_counter()
    rec = run_model(model, raw, gpu_id="h200-sxm", role=role, quick=False, resume=False, time_budget_s=budget,
                    weight_dtype=weights, extra=dict(extra, job=name))
    append_record(raw, {"type": "job_time", "job": name, "model": model, "role": role, "weight_dtype": weights,
                        "kv_cache_dtype": "auto", "elapsed_s": time.perf_counter() - t0})
    print(json.dumps({k: rec.get(k) for k in ("returncode", "weights_bytes", "kv_cache_tokens", "elapsed_s")}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
