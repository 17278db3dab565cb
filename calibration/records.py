"""Raw calibration records: an append-only JSONL file, one JSON object per line, written as each
measurement is taken (a crash or an OOM loses nothing) and read back tolerantly (a torn last line
from a killed process is skipped, not fatal).  Pure Python."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from planner.jsonl import read_jsonl
from planner.units import GiB as GIB



def append_record(path: Path, record: dict) -> None:
    """Append one record and flush it to disk before returning."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, sort_keys=True, default=float)
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_records(path: Path) -> list[dict]:
    """All complete records of a JSONL file (a torn or non-JSON line is skipped)."""
    return read_jsonl(path)


def probe_key(rec: dict) -> tuple:
    """Identity of a probe point, for --resume: the same key is not measured twice (the GPU, the engine's
    dtypes, TP and role are part of it: a validation point is not a fit point)."""
    return (
        rec.get("gpu"), rec.get("model"), rec.get("weight_dtype", "bf16"), rec.get("kv_cache_dtype", "auto"),
        int(rec.get("tensor_parallel", 1)), rec.get("role", "fit"), rec.get("metric"),
        int(rec.get("batch_size", 0)), int(rec.get("prompt_tokens", 0)), int(rec.get("output_tokens", 0)),
        int(rec.get("chunk_tokens", 0)),
    )


def done_keys(records: list[dict]) -> set[tuple]:
    """Probe points already measured successfully."""
    return {probe_key(r) for r in records if r.get("type") == "probe" and r.get("status") == "ok"}


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
        elif key == "max_concurrency":
            out["max_model_len"] = int(m[0].replace(",", ""))
            out["max_concurrency"] = float(m[1])
    return out
