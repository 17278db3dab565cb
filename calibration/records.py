"""Raw calibration records: an append-only JSONL file, one JSON object per line, written as each
measurement is taken (a crash or an OOM loses nothing) and read back tolerantly (a torn last line
from a killed process, or any other bad line, is skipped and counted with its line number, not fatal).
An append after a torn line starts on a fresh line, so the new record is never glued to the fragment.
Pure Python."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from planner.io.jsonl import read_jsonl
from planner.units import GiB as GIB

#: What an id may be when it becomes part of a file name (the catalog's id pattern): no '/', no '..'.
SAFE_ID = re.compile(r"^[a-z0-9][a-z0-9.\-]{0,99}$")
#: An engine version in a file name: '0.26.0', '0.26.0+cu129', '0.7.3.dev12'.
SAFE_VERSION = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+_\-]{0,63}$")


def safe_name_part(value, field: str, pattern: re.Pattern = SAFE_ID) -> str:
    """``value`` if it may be part of a file name (``pattern``: no separators, no leading dot); a ValueError
    naming ``field`` otherwise -- output paths are built from validated ids only (a record's ``gpu`` of
    '../../x' must not write outside the profiles folder)."""
    if not (isinstance(value, str) and pattern.match(value) and ".." not in value):
        raise ValueError(f"{field}: {str(value)[:60]!r} cannot name a file (expected {pattern.pattern})")
    return value


def append_record(path: Path, record: dict) -> None:
    """Append one record as one line and flush it to disk before returning.  A file that does not end with a
    newline (its last line torn by a killed process) gets one first: the new record starts a fresh line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, sort_keys=True, default=float).encode("utf-8") + b"\n"
    with open(path, "ab+") as f:  # appends go to the end whatever the read position
        size = f.seek(0, os.SEEK_END)
        if size:
            f.seek(size - 1)
            if f.read(1) != b"\n":
                line = b"\n" + line
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def read_records(path: Path, skipped: list[tuple[int, str]] | None = None) -> list[dict]:
    """All complete records of a JSONL file, each a :class:`planner.io.jsonl.Record` knowing its line; a torn,
    non-UTF-8 or non-JSON line is skipped and, with ``skipped``, listed as (line number, reason)."""
    return read_jsonl(path, skipped)


def _int(rec: dict, key: str, default: int) -> int:
    v = rec.get(key)
    v = default if v is None else v
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")) \
            or int(v) != v:
        raise ValueError(f"{key}: expected a whole number, got {str(v)[:40]!r}")
    return int(v)


def probe_key(rec: dict) -> tuple | None:
    """Identity of a probe point, for --resume: the same key is not measured twice (the GPU, the engine's
    dtypes, TP and role are part of it: a validation point is not a fit point).  None for a record whose
    numbers are not whole numbers (a damaged line cannot say which point it measured)."""
    try:
        key = (
            rec.get("gpu"), rec.get("model"), rec.get("weight_dtype", "bf16"), rec.get("kv_cache_dtype", "auto"),
            _int(rec, "tensor_parallel", 1), rec.get("role", "fit"), rec.get("metric"),
            _int(rec, "batch_size", 0), _int(rec, "prompt_tokens", 0), _int(rec, "output_tokens", 0),
            _int(rec, "chunk_tokens", 0),
        )
        hash(key)
        return key
    except (ValueError, TypeError, OverflowError):
        return None


def done_keys(records: list[dict]) -> set[tuple]:
    """Probe points already measured successfully (damaged records count as not measured)."""
    keys = {probe_key(r) for r in records if r.get("type") == "probe" and r.get("status") == "ok"}
    keys.discard(None)
    return keys


def first_of_each_point(records: list[dict]) -> tuple[list[dict], list[str]]:
    """``records`` with each probe point measured once: a later successful probe of a point already measured
    (the same :func:`probe_key`, in any of the files read) is left out and listed as
    ``'file:line: point already measured at file:line'`` -- two runs on one --out, or a resume that measured a
    point again, never count it twice in the fit."""
    kept: list[dict] = []
    dropped: list[str] = []
    first: dict[tuple, str] = {}
    for r in records:
        key = probe_key(r) if r.get("type") == "probe" and r.get("status") == "ok" else None
        if key is not None:
            here = r.where() if hasattr(r, "where") else ""
            if key in first:
                dropped.append(f"{here or 'record'}: point already measured at {first[key] or 'an earlier record'}")
                continue
            first[key] = here
        kept.append(r)
    return kept, dropped


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------- vLLM start-up log

_GIB = r"([0-9]+(?:\.[0-9]+)?)\s*GiB"
_LOG_PATTERNS = {
    "weights_gib": re.compile(r"Model loading took " + _GIB),
    "kv_available_gib": re.compile(r"Available KV cache memory:\s*" + _GIB),
    "kv_cache_tokens": re.compile(r"GPU KV cache size:\s*([0-9,]+)\s*tokens"),
    "graph_capture_gib": re.compile(r"Graph capturing finished in [0-9.]+ secs?, took (-?[0-9.]+) GiB"),
    "init_engine_s": re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([0-9.]+) s"),
    "total_gib": re.compile(r"Free memory on device \(([0-9.]+)/([0-9.]+) GiB\)"),
    "usage": re.compile(
        r"Actual usage is " + _GIB + r" for weight, " + _GIB + r" for peak activation, " + _GIB
        + r" for non-torch memory, and " + _GIB + r" for CUDAGraph memory"
    ),
    "requested": re.compile(r"Desired GPU memory utilization is \(([0-9.]+), " + _GIB + r"\)"),
    "max_concurrency": re.compile(r"Maximum concurrency for ([0-9,]+) tokens per request: ([0-9.]+)x"),
    "cudagraph_estimate_gib": re.compile(r"Estimated CUDA graph memory:\s*" + _GIB + r" total"),
    "cudagraph_graphs": re.compile(r"Profiling CUDA graph memory: (.*)"),
    "graph_capture_s": re.compile(r"Graph capturing finished in ([0-9.]+) secs?"),
}


def parse_engine_log(text: str) -> dict:
    """The memory terms vLLM prints at start-up, in bytes (GiB values × 2**30) and tokens.

    Unknown or missing lines are simply absent from the result; the last occurrence wins.
    """
    out: dict = {}
    for key, pat in _LOG_PATTERNS.items():
        matches = pat.findall(text)
        if not matches:
            continue
        m = matches[-1]
        if key == "weights_gib":
            out["weights_bytes"] = float(m) * GIB
        elif key == "kv_available_gib":
            out["kv_available_bytes"] = float(m) * GIB
        elif key == "kv_cache_tokens":
            out["kv_cache_tokens"] = int(m.replace(",", ""))
        elif key == "graph_capture_gib":
            out["graph_capture_bytes"] = float(m) * GIB
        elif key == "init_engine_s":
            out["init_engine_s"] = float(m)
        elif key == "total_gib":
            out["free_at_start_bytes"] = float(m[0]) * GIB
            out["total_memory_bytes"] = float(m[1]) * GIB
        elif key == "usage":
            out["weights_bytes_profiled"] = float(m[0]) * GIB
            out["peak_activation_bytes"] = float(m[1]) * GIB
            out["non_torch_bytes"] = float(m[2]) * GIB
            out["cudagraph_bytes"] = float(m[3]) * GIB
        elif key == "requested":
            out["gpu_memory_utilization"] = float(m[0])
            out["requested_bytes"] = float(m[1]) * GIB
        elif key == "cudagraph_estimate_gib":  # V1 runner: subtracted from the KV pool at start-up
            out["cudagraph_estimate_bytes"] = float(m) * GIB
        elif key == "cudagraph_graphs":  # "PIECEWISE=531 (largest=8192), FULL=83 (largest=1024)": 614 graphs
            out["cudagraph_graphs"] = sum(int(n) for n in re.findall(r"[A-Z_]+=([0-9]+)", m))
        elif key == "graph_capture_s":
            out["graph_capture_s"] = float(m)
        elif key == "max_concurrency":
            out["max_model_len"] = int(m[0].replace(",", ""))
            out["max_concurrency"] = float(m[1])
    return out

_METRIC = re.compile(r'^(vllm:[a-z_]+)(\{[^}]*\})?\s+([0-9.eE+-]+)$')


def scrape(metrics_text: str) -> dict:
    """Prometheus text -> {'vllm:name': value} (counters/gauges summed over labels) plus the labels of
    ``vllm:cache_config_info`` (num_gpu_blocks, block_size, ...)."""
    out: dict = {}
    for line in metrics_text.splitlines():
        m = _METRIC.match(line.strip())
        if not m:
            continue
        name, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
        if name == "vllm:cache_config_info":
            out["cache_config"] = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        out[name] = out.get(name, 0.0) + value
    return out


#: pure-Python loop iterations of the host speed probe (:func:`host_info`): ~0.1 s on a 2024 server core
HOST_PROBE_LOOPS = 2_000_000


def host_info() -> dict:
    """What a record needs to say about the machine a served engine ran on, beyond its GPU: the CPU model, the
    logical CPUs, and the median of 5 timings of a fixed pure-Python loop (``python_loop_s``).  An eager engine step
    is launched from Python layer by layer, so its floor is the host's single-thread speed (Qwen3-30B-A3B's eager
    call: 61 ms on one lent H200 host, 81-92 ms on another; calibration/data/README.md)."""
    import platform
    import time

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or "unknown"
    times = []
    for _ in range(5):
        t, acc = time.perf_counter(), 0
        for i in range(HOST_PROBE_LOOPS):
            acc += i & 7
        times.append(time.perf_counter() - t)
    return {"cpu": cpu, "logical_cpus": os.cpu_count(), "python": platform.python_version(),
            "python_loop_s": sorted(times)[2]}


def lock_holder(f, wait_s: float = 1.0) -> str:
    """Who holds a ``planner calibrate`` lock file (open as ``f``): the line its holder writes right after it takes the
    lock, read again for up to ``wait_s`` while it is still empty (two runs started together: the loser read the file
    between the winner's lock and its write), else "another process"."""
    import time

    deadline = time.monotonic() + wait_s
    while True:
        f.seek(0)
        holder = f.read().strip()
        if holder or time.monotonic() >= deadline:
            return holder or "another process"
        time.sleep(0.01)
