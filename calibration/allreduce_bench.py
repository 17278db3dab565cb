"""NCCL all-reduce latency and bandwidth by message size, one process per GPU (torch only, no vLLM).

    python -m calibration.allreduce_bench OUT.jsonl [--gpus 2] [--gpu-id h200-sxm]

Spawns one process per GPU (``torch.multiprocessing``), runs bf16 ``all_reduce`` over message sizes
from 2 KiB to 256 MiB (warm-up, then ``iters`` timed calls between CUDA events, median of 5 such
batches) and appends one ``allreduce`` record to OUT.jsonl.  The fit of the tensor-parallel terms
(latency + bytes / link bandwidth, per message-size regime) reads these records beside the TP
engine probes.  NVLink multicast (NVLS) stays off: see :data:`calibration.probes.MULTICAST_OFF`.

What it measures is NCCL's ring/tree all-reduce.  vLLM uses its own custom all-reduce kernel for
small messages on NVLink (below ~8 MiB by default) and NCCL above; the engine probes at TP 2 measure
what vLLM really does, this benchmark gives the link's latency/bandwidth curve to compare with.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from calibration.probes import MULTICAST_OFF  # noqa: E402
from calibration.records import append_record  # noqa: E402
from planner.units import GB_PER_S, MS, US  # noqa: E402

SIZES_BYTES = [2**k for k in range(11, 29)]  # 2 KiB .. 256 MiB


def _worker(rank: int, world: int, port: int, queue, iters: int) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MULTICAST_OFF)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    rows = []
    for size in SIZES_BYTES:
        x = torch.randn(size // 2, device="cuda", dtype=torch.bfloat16)
        for _ in range(5):  # warm-up (first call builds the communicator's channels)
            dist.all_reduce(x)
        torch.cuda.synchronize()
        n = iters if size <= 2**22 else max(5, iters // 4)
        times = []
        for _ in range(5):
            dist.barrier()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(n):
                dist.all_reduce(x)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * MS / n)  # CUDA events report ms
        t = statistics.median(times)
        # bus bandwidth as nccl-tests defines it for all-reduce: bytes × 2(n−1)/n / time
        rows.append({"message_bytes": size, "time_s": t, "samples_s": times,
                     "bus_bandwidth_bytes_per_s": size * 2 * (world - 1) / world / t})
        del x
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def run(out: Path, gpus: int, gpu_id: str, iters: int = 50) -> dict:
    import torch
    import torch.multiprocessing as mp

    if torch.cuda.device_count() < gpus:
        raise SystemExit(f"error: --gpus: {gpus} requested, {torch.cuda.device_count()} visible")
    os.environ.update(MULTICAST_OFF)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = 29500 + os.getpid() % 1000
    procs = [ctx.Process(target=_worker, args=(r, gpus, port, queue, iters)) for r in range(gpus)]
    for p in procs:
        p.start()
    rows = queue.get(timeout=600)
    for p in procs:
        p.join(60)
    rec = {"type": "allreduce", "gpu": gpu_id, "device_name": torch.cuda.get_device_name(0), "world_size": gpus,
           "dtype": "bf16", "backend": "nccl", "nccl_version": ".".join(map(str, torch.cuda.nccl.version())),
           "env": dict(MULTICAST_OFF), "rows": rows,
           "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    append_record(out, rec)
    for r in rows:
        print(f"ALLREDUCE {r['message_bytes']:>10d} B: {r['time_s'] / US:9.1f} us  "
              f"bus {r['bus_bandwidth_bytes_per_s'] / GB_PER_S:7.1f} GB/s", flush=True)
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--gpu-id", default="h200-sxm")
    ap.add_argument("--iters", type=int, default=50)
    ns = ap.parse_args(argv)
    run(ns.out, ns.gpus, ns.gpu_id, ns.iters)
    return 0


if __name__ == "__main__":
    sys.exit(main())
