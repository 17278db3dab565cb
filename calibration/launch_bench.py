"""How fast this host's CPU launches CUDA kernels from Python, pinned to one CPU at a time (torch only: no vLLM).

An eager vLLM step (above the largest CUDA graph) is launched op by op from Python, so its floor is the host's CPU:
the served floors of one engine ranged 0.54-1.2x of the profile's across lent machines, and one engine's moved 49 ->
71 ms between two runs on one machine (calibration/data/README.md); vLLM does not pin its engine process.  This times
what such a step repeats, a bare kernel launch (``torch.add`` into a 1 KiB tensor) and a small eager layer
(RMSNorm-like ops and two 1-token linears), as microseconds of CPU per call, with the process pinned to each CPU in
turn (``os.sched_setaffinity``): a machine whose launch cost depends on where the engine process lands (its NUMA
node against the GPU's, a busy core) shows it as a spread between CPUs (:func:`summarise`).  Part c of
calibration/campaigns/h200-intake.sh (written 2026-12-05, not yet run).

    python -m calibration.launch_bench OUT.jsonl [--cpus 0,4,8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calibration.records import append_record
from planner.io.jsonl import read_jsonl


def _launch_us(fn, calls: int) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    cpu_s = time.perf_counter() - t
    torch.cuda.synchronize()
    return 1e6 * cpu_s / calls


def bench(out: Path, cpus: list[int], repeats: int, calls: int) -> None:
    """``repeats`` timings of both calls on each CPU of ``cpus``, one ``launch`` record each into ``out``."""
    import torch

    x = torch.zeros(256, device="cuda")
    y = torch.empty_like(x)
    h = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    w1 = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)
    w2 = torch.randn(1024, 4096, device="cuda", dtype=torch.bfloat16)

    def add():
        torch.add(x, 1.0, out=y)

    def layer():
        v = h.float().pow(2).mean(-1, keepdim=True)
        n = (h * torch.rsqrt(v + 1e-6)).to(torch.bfloat16)
        return torch.nn.functional.silu(n @ w1) @ w2 + h

    for cpu in cpus:
        os.sched_setaffinity(0, {cpu})
        for r in range(repeats):
            rec = {"type": "launch", "cpu": cpu, "repeat": r, "add_us": _launch_us(add, calls),
                   "layer_us": _launch_us(layer, max(1, calls // 8))}
            append_record(out, rec)
            print(f"cpu {cpu:3d} repeat {r}: add {rec['add_us']:.2f} us, layer {rec['layer_us']:.2f} us", flush=True)


@dataclass(frozen=True)
class LaunchSpread:
    """Per CPU, the median of its repeats (us); ``spread``: the slowest CPU's over the fastest's."""

    add_us: dict[int, float]
    layer_us: dict[int, float]

    @property
    def spread(self) -> dict[str, float]:
        return {k: max(v.values()) / min(v.values()) for k, v in (("add_us", self.add_us), ("layer_us", self.layer_us))}


def summarise(path: Path) -> LaunchSpread:
    """The ``launch`` records of a :func:`bench` file, per CPU."""
    recs = [r for r in read_jsonl(Path(path)) if r.get("type") == "launch"]
    if not recs:
        raise ValueError(f"{path}: no launch records")
    cpus = sorted({int(r["cpu"]) for r in recs})

    def med(key: str) -> dict[int, float]:
        return {c: float(np.median([r[key] for r in recs if int(r["cpu"]) == c])) for c in cpus}

    return LaunchSpread(med("add_us"), med("layer_us"))


def _cpu_list(text: str) -> list[int]:
    try:
        cpus = [int(c) for c in text.split(",") if c.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated CPU ids, got {text[:40]!r}") from None
    if any(c < 0 for c in cpus):
        raise argparse.ArgumentTypeError(f"CPU ids are >= 0, got {text[:40]!r}")
    return cpus


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text[:40]!r}")
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--cpus", type=_cpu_list, default=[],
                    help="comma-separated CPU ids (default: every CPU this process may use)")
    ap.add_argument("--repeats", type=_positive, default=3)
    ap.add_argument("--calls", type=_positive, default=20000)
    a = ap.parse_args(argv)
    allowed = os.sched_getaffinity(0)
    if not set(a.cpus) <= allowed:
        ap.error(f"--cpus: {sorted(set(a.cpus) - allowed)} not among this process's CPUs {sorted(allowed)}")
    cpus = a.cpus or sorted(allowed)
    bench(a.out, cpus, a.repeats, a.calls)
    s = summarise(a.out)
    print(f"slowest CPU over fastest: add {s.spread['add_us']:.2f}x, layer {s.spread['layer_us']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
