"""Predict, then verify on the GPU: ``planner verify``.

1. The planner predicts the replica's knee for the workload and targets (``planner.serving.max_rate_under_slo``
   on the calibrated or transferred profile).
2. :mod:`calibration.serve_bench` boots the ``vllm serve`` command ``planner deploy`` writes (dummy weights
   unless a model directory is given), checks its KV pool against the prediction, and drives ``vllm bench
   serve`` at 50 % of the predicted knee and at the knee (Poisson arrivals, fixed lengths).
3. Each run is replayed through the simulator with its recorded arrivals; the report gives predicted vs
   measured per percentile, and whether the knee held the targets in reality.

Needs vLLM and a GPU (the calibrate extra); CI runs it against a stand-in server (tests/fake_vllm).
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from pathlib import Path

from calibration import serve_bench
from calibration.serving_points import replay_folder


def verify(model_id: str, gpu_id: str, *, ttft_p99_s: float, tpot_p99_s: float, out: Path, tp: int = 1,
           weight_dtype: str = "bf16", kv_dtype: str = "bf16", prompt_tokens: int = 1024, output_tokens: int = 128,
           duration_s: float = 30.0, port: int = 8000, boot_timeout_s: float = 420.0) -> dict:
    from planner.io import catalog
    from planner.serving import workloads as wl
    from planner.serving import engine_setup, max_rate_under_slo
    from planner.specs import Deployment

    m, g = catalog.model(model_id), catalog.gpu(gpu_id)
    prof, mode_line = catalog.resolve_profile("auto", g.id)
    dep = Deployment.for_gpu(g, num_gpus=tp, tensor_parallel=tp, weight_dtype=weight_dtype, kv_cache_dtype=kv_dtype)
    cost, cfg = engine_setup(m, g, dep, prof)

    def make(rate=None, num_requests=500):
        return wl.synthetic(num_requests, prompt_tokens, output_tokens, rate_per_s=rate, seed=0)

    knee = max_rate_under_slo(make, cost, cfg, ttft_p99_s, tpot_p99_s)
    if knee.max_rate_per_s <= 0:
        raise ValueError("--ttft-slo-ms/--tpot-slo-ms: the plan meets the targets at no rate; nothing to verify")
    rates = {"half-knee": 0.5 * knee.max_rate_per_s, "knee": knee.max_rate_per_s}
    runs = [f"{name}:input={prompt_tokens},output={output_tokens},n={max(20, math.ceil(r * duration_s))},rate={r:.4g}"
            for name, r in rates.items()]
    out = Path(out)
    argv = ["--model", m.id, "--gpu", g.id, "--tp", str(tp), "--weight-dtype", weight_dtype, "--kv-dtype", kv_dtype,
            "--max-model-len", str(prompt_tokens + output_tokens + 64), "--out", str(out), "--port", str(port),
            "--boot-timeout-s", str(boot_timeout_s)]
    for r in runs:
        argv += ["--run", r]
    with contextlib.redirect_stdout(sys.stderr):  # progress lines; stdout stays the command's own output
        serve_bench.main(argv)
    comps = {c.name: c for c in replay_folder(out, m.id, prof)}
    summary = {"model": m.id, "gpu": g.id, "calibration": mode_line, "ttft_p99_target_s": ttft_p99_s,
               "tpot_p99_target_s": tpot_p99_s, "predicted_knee_per_s": knee.max_rate_per_s,
               "predicted_saturation_per_s": knee.saturation_rate_per_s, "confidence": knee.confidence, "runs": {}}
    for name, rate in rates.items():
        c = comps.get(f"bench-{name}")
        if c is None:
            summary["runs"][name] = {"rate_per_s": rate, "error": "the run did not complete (see serve_bench.jsonl)"}
            continue
        meets = (c.measured.get("ttft_p99_s") or math.inf) <= ttft_p99_s and \
                (c.measured.get("tpot_p99_s") or math.inf) <= tpot_p99_s
        summary["runs"][name] = {"rate_per_s": rate, "meets_targets_measured": meets, **c.as_dict()}
    (out / "verify.json").write_text(json.dumps(summary, indent=2, default=str))
    return summary


def main(argv: list[str] | None = None) -> int:
    """``python -m calibration.verify``: ``planner verify`` with the same flags, for a GPU machine whose Python
    has vLLM but not the planner's CLI dependencies (typer). Prints verify.json's summary."""
    import argparse

    from planner.units import MS

    ap = argparse.ArgumentParser(prog="python -m calibration.verify", description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--ttft-slo-ms", type=float, required=True)
    ap.add_argument("--tpot-slo-ms", type=float, required=True)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--weight-dtype", default="bf16")
    ap.add_argument("--kv-dtype", default="bf16")
    ap.add_argument("--prompt-tokens", type=int, default=1024)
    ap.add_argument("--output-tokens", type=int, default=128)
    ap.add_argument("--duration-s", type=float, default=30.0)
    ap.add_argument("--out", type=Path, default=Path("verify-out"))
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--json", action="store_true", help="accepted for parity with planner verify (always JSON)")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["verify"]:  # the campaign scripts call both entry points as `... verify --model ...`
        argv = argv[1:]
    ns = ap.parse_args(argv)
    for flag, v in (("--ttft-slo-ms", ns.ttft_slo_ms), ("--tpot-slo-ms", ns.tpot_slo_ms),
                    ("--duration-s", ns.duration_s)):
        if not (math.isfinite(v) and v > 0):
            ap.error(f"{flag}: must be a finite number > 0, got {v}")
    summary = verify(ns.model, ns.gpu, ttft_p99_s=ns.ttft_slo_ms * MS, tpot_p99_s=ns.tpot_slo_ms * MS, out=ns.out,
                     tp=ns.tp, weight_dtype=ns.weight_dtype, kv_dtype=ns.kv_dtype, prompt_tokens=ns.prompt_tokens,
                     output_tokens=ns.output_tokens, duration_s=ns.duration_s, port=ns.port)
    print(json.dumps(summary, indent=2, default=str))
    return 0


if __name__ == "__main__":  # pragma: no cover - needs vLLM and a GPU
    sys.exit(main())
