"""Disaggregated prefill/decode against a REAL 1P1D pair (issue #23), when one has been measured.

Reads the folder ``calibration/campaigns/h200x2-disagg.sh`` fills (default ``calibration/data/h200x2-disagg``,
or the folder given): ``pd-<model>/`` (the pair ``planner deploy --disaggregated`` writes, behind the proxy:
``pd_bench.jsonl`` + ``vllm bench serve`` files), ``colo-<model>/`` (the model co-located on one GPU at the same
rates) and ``colo-half-<model>/`` (at half of them).  Prints, per rate, predicted vs measured TTFT p50/p99,
TPOT p50/p99 and output throughput for both ways of serving (the 1P1D prediction:
:func:`planner.deploy.disagg_replay.predict_pd`; co-located: the serving simulator's replay), and the
"disaggregated wins / loses" verdict at equal GPUs (the pair at r against two co-located replicas at r ÷ 2),
predicted and measured, at the p99 targets given (``--ttft-p99-ms``, ``--tpot-p99-ms``).

Targets (as for serving): TTFT p50 within 10 %, TPOT p50 within 7 %, output throughput within 3 %, and the
verdict right.  Exit 1 on a miss.  Without a measurement (no folder, or the pair never booted: the reason is
printed, e.g. vLLM's ``RuntimeError: NIXL is not available``) it says so and exits 0: nothing was measured,
nothing can miss.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calibration.serving_points import replay_folder, serving_setup
from planner.deploy.disagg_replay import PdLink, replay_pd, verdict
from planner.io import catalog
from planner.io.jsonl import read_jsonl
from planner.memory import kv_bytes_per_token
from planner.serving.loadtests import read_vllm_bench

KEYS = ("output_tokens_per_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")
TARGETS = (("output_tokens_per_s", 3.0), ("tpot_p50_s", 7.0), ("ttft_p50_s", 10.0))
DEFAULT_DATA = ROOT / "calibration/data/h200x2-disagg"


def rate_of(c) -> float | None:
    m = re.search(r"(\d+(?:\.\d+)?)$", c.name)
    return float(m.group(1)) if m else None


def line(name: str, c) -> str:
    def f(k, d):
        v = d.get(k)
        return "   n/a " if v is None else (f"{v:7.0f}" if k == "output_tokens_per_s" else f"{v * 1e3:6.1f}ms")
    return (f"  {name:10s} " + "  ".join(f"{k.replace('_s', '').replace('output_tokens_per', 'thr')} "
                                         f"{f(k, c.measured)} vs {f(k, c.predicted)} ({c.error_pct(k):+.1f}%)"
                                         for k in KEYS))


def check(name: str, c, missed: list) -> None:
    for k, t in TARGETS:
        e = c.error_pct(k)
        if not abs(e) <= t:
            missed.append(f"{name}: {k} {e:+.1f}% (target {t:g} %)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--ttft-p99-ms", type=float, default=300.0)
    ap.add_argument("--tpot-p99-ms", type=float, default=12.0)
    ns = ap.parse_args(argv)
    pd_dir = ns.data / f"pd-{ns.model}"
    recs_path = pd_dir / "pd_bench.jsonl"
    if not recs_path.is_file():
        print(f"skip: no 1P1D measurement ({recs_path} is absent); run calibration/campaigns/h200x2-disagg.sh "
              "on an H200 x2 machine and commit its folder there")
        return 0
    recs = read_jsonl(recs_path)
    nixl = next((r for r in recs if r.get("type") == "nixl"), {})
    failed = [r for r in recs if r.get("type") == "boot_failed"]
    benches = [r for r in recs if r.get("type") == "bench"]
    print(f"NIXL on the GPU machine: {nixl}")
    if failed or not benches:
        why = "; ".join(f"{r.get('role')}: {r.get('error')}" for r in failed) or "no bench run recorded"
        print(f"skip: the 1P1D pair was not measured ({why})")
        return 0
    prof = catalog.profile_for("h200-sxm", "0.26.0")
    model = catalog.model(ns.model)
    deploy = next(r for r in recs if r.get("type") == "deploy" and r.get("role") == "decode")
    gpu = catalog.gpu(deploy.get("gpu", "h200-sxm"))
    argv_d = deploy["argv"]
    cost, cfg = serving_setup(pd_dir, ns.model, prof, records="pd_bench.jsonl", role="prefill")
    link = PdLink(kv_bytes_per_token(model), int(argv_d[argv_d.index("--block-size") + 1]),
                  gpu.interconnect_bandwidth_bytes_per_s)
    d_mns = int(argv_d[argv_d.index("--max-num-seqs") + 1])
    missed: list[str] = []
    print(f"1P1D ({pd_dir.name}), measured vs predicted (ms; output tokens/s):")
    pd = {}
    for r in benches:
        c, parts = replay_pd(read_vllm_bench(pd_dir / r["file"]), cost, cfg, d_mns, link)
        pd[rate_of(c)] = c
        print(line(c.name, c) + f"   [decode batch {parts['decode_operating_batch']:.1f}, "
                                f"decode side {parts['decode_side_p50_s'] * 1e3:.1f} ms]")
        check(c.name, c, missed)
    colo = {}
    for sub in (f"colo-{ns.model}", f"colo-half-{ns.model}"):
        if not (ns.data / sub / "serve_bench.jsonl").is_file():
            print(f"  (no {sub}: co-located comparison incomplete)")
            continue
        print(f"co-located ({sub}), measured vs predicted:")
        for c in replay_folder(ns.data / sub, ns.model, prof):
            colo.setdefault(rate_of(c), c)
            print(line(c.name, c))
            check(c.name, c, missed)
    t99, p99 = ns.ttft_p99_ms / 1e3, ns.tpot_p99_ms / 1e3
    print(f"verdict at equal GPUs (1P1D at r vs 2 co-located at r/2), targets TTFT p99 {ns.ttft_p99_ms:g} ms, "
          f"TPOT p99 {ns.tpot_p99_ms:g} ms:")
    for r, c in sorted(pd.items(), key=lambda x: x[0] or 0):
        half = colo.get(r / 2 if r else None)
        if half is None:
            print(f"  {r:g} req/s: no co-located run at {r / 2:g} req/s")
            missed.append(f"verdict at {r:g} req/s: no co-located run at half the rate")
            continue
        vm = verdict(c.measured, half.measured, t99, p99)
        vp = verdict(c.predicted, half.predicted, t99, p99)
        print(f"  {r:g} req/s: measured {vm}, predicted {vp}" + ("" if vm == vp else "   MISS"))
        if vm != vp:
            missed.append(f"verdict at {r:g} req/s: predicted {vp}, measured {vm}")
    if missed:
        print("MISSED:\n  " + "\n  ".join(missed))
        return 1
    print("all targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
