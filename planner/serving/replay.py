"""Replay of recorded vLLM serving measurements (``calibration/serve_probe.py``) through the
simulator: same arrivals, lengths and engine configuration; measured vs predicted throughput, TTFT and
TPOT percentiles, and the prefix-caching gains."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from planner.io.jsonl import read_jsonl
from planner.memory import memory_budget
from planner.serving.config import EngineConfig, pool_blocks, pool_terms, prefix_caching_for
from planner.serving.engine import simulate
from planner.serving.result import MeasuredVsPredicted, in_system_quarters, percentiles
from planner.serving.step_cost import StepCost
from planner.profile import CalibrationProfile, IDEAL_PROFILE
from planner.specs import Deployment, GpuSpec, ModelSpec
from planner.serving.workloads import make_requests

NAN = float("nan")

#: Record schema written by ``calibration/serve_probe.py`` (one JSON object per line):
#:   {"type": "engine", "engine_id", "max_num_seqs", "max_num_batched_tokens", "block_size",
#:    "num_gpu_blocks", "kv_cache_tokens", "enable_prefix_caching", "max_model_len", "vllm_version", "gpu_name", ...}
#:   {"type": "run", "run", "engine_id", "rate_per_s", "num_requests", "prompt_tokens", "output_tokens",
#:    "shared_prefix_tokens", "seed", ...}
#:   {"type": "request", "run", "index", "arrival_offset_s", "prompt_tokens", "output_tokens",
#:    "shared_prefix_tokens", "ttft_s", "tpot_s", "e2e_s", "num_output_tokens", ...}
#:   {"type": "run_end", "run", "duration_s", "ok", ...}
RECORD_TYPES = ("engine", "run", "request", "run_end", "error")


def load_records(paths) -> list[dict]:
    """Read JSON-lines record files (a path or a list of paths); broken trailing lines are skipped."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise FileNotFoundError(2, "no such record file", missing[0])
    return [rec for p in paths for rec in read_jsonl(p)]


@dataclass(frozen=True)
class ReplayRow(MeasuredVsPredicted):
    """Measured vs predicted for one recorded run."""

    run: str
    engine_id: str
    rate_per_s: float | None
    num_requests: int
    prefix_caching: bool
    shared_prefix_tokens: int
    measured: dict
    predicted: dict

    def as_dict(self) -> dict:
        keys = ("output_tokens_per_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "e2e_p50_s")
        return {"run": self.run, "engine_id": self.engine_id, "rate_per_s": self.rate_per_s,
                "num_requests": self.num_requests, "prefix_caching": self.prefix_caching,
                "shared_prefix_tokens": self.shared_prefix_tokens, "measured": self.measured,
                "predicted": self.predicted, "error_pct": {k: self.error_pct(k) for k in keys}}


def _stats(arrival, ttft, tpot, e2e, output) -> dict:
    arrival, ttft, tpot, e2e, output = (np.asarray(x, dtype=float) for x in (arrival, ttft, tpot, e2e, output))
    ok = np.isfinite(e2e)
    fin = arrival[ok] + e2e[ok]
    dur = float(fin.max() - arrival.min()) if ok.any() else 0.0
    t, p, e = percentiles(ttft[ok]), percentiles(tpot[ok]), percentiles(e2e[ok])
    return {"output_tokens_per_s": float(output[ok].sum() / dur) if dur > 0 else None,
            "requests_per_s": float(ok.sum() / dur) if dur > 0 else None,
            "ttft_mean_s": t["mean"], "ttft_p50_s": t["p50"], "ttft_p99_s": t["p99"],
            "tpot_mean_s": p["mean"], "tpot_p50_s": p["p50"], "tpot_p99_s": p["p99"],
            "e2e_p50_s": e["p50"], "e2e_p99_s": e["p99"], "completed": int(ok.sum()),
            **in_system_quarters(arrival, e2e)}


@dataclass(frozen=True)
class ReplayReport:
    rows: list
    prefix_caching_gain: dict  # measured vs predicted TTFT and throughput ratios (on ÷ off), if recorded

    def as_dict(self) -> dict:
        return {"runs": [r.as_dict() for r in self.rows], "prefix_caching_gain": self.prefix_caching_gain}


def replay(records, model: ModelSpec, gpu: GpuSpec, profile: CalibrationProfile = IDEAL_PROFILE, *,
           weight_dtype: str = "bf16", kv_cache_dtype: str = "bf16", tensor_parallel: int = 1) -> ReplayReport:
    """Re-run recorded serving measurements through the simulator with the same arrivals, lengths
    and engine configuration (KV pool = the engine's num_gpu_blocks × block_size, less vLLM's null
    block), and compare output tokens/s, TTFT and TPOT percentiles and the prefix-caching gains.

    ``records``: a path, a list of paths, or already-loaded record dicts.
    """
    if not (isinstance(records, list) and (not records or isinstance(records[0], dict))):
        records = load_records(records)
    engines = {r["engine_id"]: r for r in records if r.get("type") == "engine"}
    runs = {r["run"]: r for r in records if r.get("type") == "run"}
    by_run: dict[str, list[dict]] = {}
    for r in records:
        if r.get("type") == "request":
            by_run.setdefault(r["run"], []).append(r)
    rows = []
    for name, run in runs.items():
        reqs = sorted(by_run.get(name, []), key=lambda x: x["arrival_offset_s"])
        eng = engines.get(run.get("engine_id"))
        if not reqs or eng is None or run.get("warmup"):
            continue
        bs = int(eng.get("block_size", Deployment.default("block_size_tokens")))
        dep = Deployment.for_gpu(gpu, num_gpus=tensor_parallel, tensor_parallel=tensor_parallel,
                         weight_dtype=weight_dtype, kv_cache_dtype=kv_cache_dtype,
                         max_num_batched_tokens=int(eng["max_num_batched_tokens"]),
                         max_num_seqs=int(eng["max_num_seqs"]), block_size_tokens=bs,
                         gpu_memory_utilization=float(eng.get("gpu_memory_utilization",
                                                              Deployment.default("gpu_memory_utilization"))))
        caching = prefix_caching_for(model, eng.get("enable_prefix_caching"))
        terms = pool_terms(model, dep, caching)
        if eng.get("num_gpu_blocks"):
            blocks = int(eng["num_gpu_blocks"]) - 1  # block 0 is vLLM's null block
        elif eng.get("kv_cache_tokens"):  # (the probes' record: num_gpu_blocks x block_size)
            blocks = int(eng["kv_cache_tokens"]) // bs - 1
        else:  # not recorded: the memory model's pool, in vLLM's blocks (1 + its sliding groups per block of tokens)
            blocks = pool_blocks(memory_budget(model, gpu, dep, profile).kv_capacity_tokens, terms)
        cost = StepCost.from_specs(model, gpu, dep, profile)
        cfg = EngineConfig(blocks * bs, dep.max_num_seqs, dep.max_num_batched_tokens, cold_step_shapes=True,
                           enable_prefix_caching=caching, **terms)
        arr = np.array([x["arrival_offset_s"] for x in reqs], dtype=float)
        prompt = np.array([x["prompt_tokens"] for x in reqs])
        out = np.array([x["output_tokens"] for x in reqs])
        shared = np.array([x.get("shared_prefix_tokens", 0) or 0 for x in reqs])
        group = np.where(shared > 0, np.array([x.get("prefix_group", 0) or 0 for x in reqs]), -1)
        wl = make_requests(prompt, out, arr - 0.0, prefix_group=group, prefix_tokens=shared, name=name)
        res = simulate(wl, cost, cfg)
        measured = _stats(arr, [x.get("ttft_s", NAN) if x.get("ttft_s") is not None else NAN for x in reqs],
                          [x.get("tpot_s") if x.get("tpot_s") is not None else NAN for x in reqs],
                          [x.get("e2e_s") if x.get("e2e_s") is not None else NAN for x in reqs],
                          [x.get("num_output_tokens", x["output_tokens"]) for x in reqs])
        predicted = _stats(res.arrival_s, res.ttft_s, res.tpot_s, res.e2e_s, res.output_tokens)
        predicted["prefix_cache_hit_rate"] = res.prefix_cache_hit_rate
        predicted["preemptions"] = res.num_preemptions
        rows.append(ReplayRow(name, str(run.get("engine_id")), run.get("rate_per_s"), len(reqs),
                              cfg.enable_prefix_caching, int(shared.max()) if shared.size else 0, measured, predicted))
    return ReplayReport(rows, _prefix_caching_gain(rows))


def _prefix_caching_gain(rows: list[ReplayRow]) -> dict:
    """Measured and predicted TTFT and throughput ratios of the first shared-prefix run with prefix
    caching on and the first with it off ({} unless both were recorded)."""
    shared_rows = [r for r in rows if r.shared_prefix_tokens > 0]
    on = [r for r in shared_rows if r.prefix_caching]
    off = [r for r in shared_rows if not r.prefix_caching]
    if not (on and off):
        return {}
    a, b = on[0], off[0]

    def ratio(x, y, key):
        u, v = x.get(key), y.get(key)
        return (u / v) if (u and v) else None

    return {
        "on_run": a.run, "off_run": b.run,
        "measured_ttft_mean_ratio_off_over_on": ratio(b.measured, a.measured, "ttft_mean_s"),
        "predicted_ttft_mean_ratio_off_over_on": ratio(b.predicted, a.predicted, "ttft_mean_s"),
        "measured_throughput_ratio_on_over_off": ratio(a.measured, b.measured, "output_tokens_per_s"),
        "predicted_throughput_ratio_on_over_off": ratio(a.predicted, b.predicted, "output_tokens_per_s"),
    }
