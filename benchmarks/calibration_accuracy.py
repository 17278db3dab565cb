"""Accuracy of the calibrated planner against REAL H200 measurements it was not fitted on.

Prints, per metric, the median and p90 |error| of `planner validate` on calibration/data/h200-validation.csv
(held-out models Llama-3.1-8B and Qwen2.5-7B, and an fp8-KV grid), and of the serving simulator on
calibration/data/h200-serve.jsonl; exits 1 if any of the issues' targets is missed:
  prefill_s and decode_step_s: median <= 5 %, p90 <= 10 %; kv_cache_tokens: within 2 %;
  serving: output tokens/s within 5 %, p50 TTFT and TPOT within 10 % below saturation, p99 within 20 %.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner import catalog
from planner.serving import replay
from planner.validate import choose_profile, read_measurements, validate


def main() -> int:
    missed = []
    res = validate(read_measurements(ROOT / "calibration/data/h200-validation.csv"), choose_profile("auto"))
    ideal = validate(read_measurements(ROOT / "calibration/data/h200-validation.csv"), choose_profile("none"))
    print("held-out offline probes (planner validate, calibrated vs ideal roofline):")
    for metric, s in res["summary"].items():
        i = ideal["summary"][metric]
        print(f"  {metric:16s} n={s['n']:3d}  median {s['median_abs_error_pct']:5.1f}%  p90 {s['p90_abs_error_pct']:5.1f}%"
              f"   (ideal: median {i['median_abs_error_pct']:5.1f}%  p90 {i['p90_abs_error_pct']:5.1f}%)")
        if metric in ("prefill_s", "decode_step_s"):
            if s["median_abs_error_pct"] > 5 or s["p90_abs_error_pct"] > 10:
                missed.append(f"{metric}: median {s['median_abs_error_pct']:.1f}% / p90 {s['p90_abs_error_pct']:.1f}%")
        if metric == "kv_cache_tokens" and s["p90_abs_error_pct"] > 2:
            missed.append(f"kv_cache_tokens: {s['p90_abs_error_pct']:.1f}%")
    rep = replay(str(ROOT / "calibration/data/h200-serve.jsonl"), catalog.model("mistral-7b-v0.3"),
                 catalog.gpu("h200-sxm"), catalog.profile_for("h200-sxm", "0.26.0"))
    print("serving replay (simulator vs vLLM AsyncLLM, signed error):")
    for r in rep.rows:
        e = {k: r.error_pct(k) for k in ("output_tokens_per_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")}
        print(f"  {r.run:30s} " + "  ".join(f"{k.replace('_s', '')} {v:+6.1f}%" for k, v in e.items()))
        saturated = r.run.endswith("r80") or r.run == "shared-pc-off-s2048-u256-r32"
        if abs(e["output_tokens_per_s"]) > 5:
            missed.append(f"{r.run} output tokens/s {e['output_tokens_per_s']:+.1f}%")
        if not saturated:
            for k in ("ttft_p50_s", "tpot_p50_s"):
                if abs(e[k]) > 10:
                    missed.append(f"{r.run} {k} {e[k]:+.1f}%")
            for k in ("ttft_p99_s", "tpot_p99_s"):
                if abs(e[k]) > 20:
                    missed.append(f"{r.run} {k} {e[k]:+.1f}%")
    g = rep.prefix_caching_gain
    print(f"  prefix caching at 8 req/s: TTFT off/on measured {g['measured_ttft_mean_ratio_off_over_on']:.2f}x, "
          f"predicted {g['predicted_ttft_mean_ratio_off_over_on']:.2f}x; throughput on/off measured "
          f"{g['measured_throughput_ratio_on_over_off']:.3f}x, predicted {g['predicted_throughput_ratio_on_over_off']:.3f}x")
    for k in ("ttft_mean_ratio_off_over_on", "throughput_ratio_on_over_off"):
        m, p = g[f"measured_{k}"], g[f"predicted_{k}"]
        if abs(p / m - 1) > 0.15:
            missed.append(f"prefix-caching {k}: predicted {p:.2f} vs measured {m:.2f}")
    if missed:
        print(f"MISSED {len(missed)} target(s):\n  " + "\n  ".join(missed))
        return 1
    print("all accuracy targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
