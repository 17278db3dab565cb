"""Held-out measurements from a serving run (``calibration/serve_bench.py``'s folder): the engine's KV pool
from its boot record, and from ``vllm bench serve`` runs at concurrency 1 the idle-engine prefill (TTFT
median) and the batch-1 decode step (median of each request's mean inter-token latency).

These go through the OpenAI HTTP frontend, so TTFT includes tokenisation and the HTTP round trip and each
inter-token gap the server's streaming of one token: the measurements say ``source`` = the run's file."""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import numpy as np

from calibration.hfconfig_families import loaded_weight_dtype
from calibration.variants import probe_model
from planner.compile_keys import MLA_CONTEXT_KEY, mixed_context
from planner.io import catalog
from planner.io.jsonl import read_jsonl
from planner.specs import Deployment
from planner.validate import KV_ALIASES, Measurement


def serving_points(folder: Path, model_id: str) -> list[Measurement]:
    folder = Path(folder)
    recs = read_jsonl(folder / "serve_bench.jsonl")
    deploy = next((r for r in recs if r.get("type") == "deploy"), None)
    if deploy is None:
        return []
    argv = deploy.get("argv", [])

    def flag(name: str, default: str) -> str:
        return argv[argv.index(name) + 1] if name in argv else default

    gpu = catalog.gpu(deploy.get("gpu", "h200-sxm"))
    model = probe_model(model_id)
    tp = int(deploy.get("tensor_parallel", 1))
    dep = Deployment.for_gpu(gpu, num_gpus=tp, tensor_parallel=tp, weight_dtype=deploy.get("weight_dtype", "bf16"),
                     kv_cache_dtype=KV_ALIASES.get(deploy.get("kv_cache_dtype", "bf16"), "bf16"),
                     gpu_memory_utilization=float(flag("--gpu-memory-utilization",
                                                       str(Deployment.default("gpu_memory_utilization")))),
                     max_num_batched_tokens=int(flag("--max-num-batched-tokens",
                                                     str(Deployment.default("max_num_batched_tokens")))),
                     max_num_seqs=int(flag("--max-num-seqs", str(Deployment.default("max_num_seqs")))))
    source = f"{folder.name}/serve_bench.jsonl"
    out = []
    boot = next((r for r in recs if r.get("type") == "boot"), None)
    if boot and boot.get("kv_cache_tokens_metrics"):
        out.append(Measurement(model, dep, "kv_cache_tokens", 0, 0, 0, float(boot["kv_cache_tokens_metrics"]), "0.26.0",
                               source, "validate"))
    for r in recs:
        if r.get("type") != "bench" or int(r.get("spec", {}).get("concurrency", 0) or 0) != 1:
            continue
        d = json.loads((folder / r["file"]).read_text())
        ttft = np.asarray(d["ttfts"], dtype=float)
        itl = [np.mean(x) for x in d["itls"] if len(x)]
        inp, outp = int(np.median(d["input_lens"])), int(np.median(d["output_lens"]))
        src = f"{folder.name}/{r['file']} (HTTP frontend included)"
        out.append(Measurement(model, dep, "prefill_s", 1, inp, 1, float(np.median(ttft)), "0.26.0", src, "validate"))
        if itl:
            out.append(Measurement(model, dep, "decode_step_s", 1, inp, outp, float(np.median(itl)), "0.26.0", src,
                                   "validate"))
    return out


def recorded_deployment(deploy: dict, model_id: str | None = None) -> Deployment:
    """The Deployment a serve_bench ``deploy`` record started: its GPU, TP, dtypes and the scheduler limits of its
    ``vllm serve`` argv, its --gpu-memory-utilization where given (``model_id``: the engine's catalog id, by default
    the record's) and its --max-cudagraph-capture-size where given."""
    argv = deploy["argv"]
    util = {"gpu_memory_utilization": float(argv[argv.index("--gpu-memory-utilization") + 1])} \
        if "--gpu-memory-utilization" in argv else {}
    if "--max-cudagraph-capture-size" in argv:
        util["max_cudagraph_capture_tokens"] = int(argv[argv.index("--max-cudagraph-capture-size") + 1])
    tp = int(deploy.get("tensor_parallel", 1))
    weights = deploy.get("weight_dtype", "bf16")
    if model_id := model_id or deploy.get("model"):  # the weights it loaded (a bf16-asked MXFP4 MoE ran MXFP4)
        weights = loaded_weight_dtype(probe_model(model_id), weights)
    return Deployment.for_gpu(catalog.gpu(deploy.get("gpu", "h200-sxm")), num_gpus=tp, tensor_parallel=tp,
                              weight_dtype=weights,
                              kv_cache_dtype=KV_ALIASES.get(deploy.get("kv_cache_dtype", "bf16"), "bf16"),
                              max_num_batched_tokens=int(argv[argv.index("--max-num-batched-tokens") + 1]),
                              max_num_seqs=int(argv[argv.index("--max-num-seqs") + 1]), **util)


def chunk_starts(step: dict) -> list[int]:
    """The computed tokens before each prompt chunk of a traced step: the trace reads the contexts after vLLM's
    Scheduler.schedule, which has advanced each request's computed tokens by what it scheduled
    (_update_after_schedule), so a chunk ends at its context (a fresh prompt's starts at 0)."""
    return [max(0, n - c) for n, c in zip(step["ctx"], step["chunks"])]


def traced_steps(folder: Path) -> list[dict]:
    """Every ``schedule`` record of the folder's ``steps.*.jsonl`` files in time order, each with the
    ``execute_model`` call time of its own step (``exec_s``: carried by the next record of its process); read once
    per process (the replays and calibration/trace_points.py's readers ask for the same traces; callers do not
    modify the list)."""
    return _traced_steps(str(Path(folder).resolve()))


def trace_files(folder: Path) -> list[list[dict]]:
    """The records of each ``steps.*.jsonl`` file of a traced folder (one file per traced process), in path order:
    the step trace's one reader (calibration/steptrace/sitecustomize.py writes them)."""
    return [[json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            for path in sorted(Path(folder).glob("steps.*.jsonl"))]


@functools.lru_cache(maxsize=32)
def _traced_steps(folder: str) -> list[dict]:
    out = []
    for recs in trace_files(Path(folder)):
        recs = [r for r in recs if r.get("k") == "s"]
        recs.sort(key=lambda r: r["t0"])
        for r, nxt in pairwise(recs):
            out.append({**r, "exec_s": nxt.get("x")})
    out.sort(key=lambda r: r["wall"])
    return out


def serving_setup(folder: Path, model_id: str, profile, frontend_overhead_s: float | None = None,
                  records: str = "serve_bench.jsonl", role: str | None = None):
    """(StepCost, EngineConfig) of a recorded serve_bench run: its deployment from the ``deploy`` record, its
    KV pool from the ``boot`` record (vLLM's block count less the null block), the profile's HTTP frontend
    overhead unless ``frontend_overhead_s`` is given.  ``records``/``role``: another record file
    (``pd_bench.jsonl`` of calibration/disagg_bench.py) and the engine of that role ('prefill', 'decode')."""
    from planner.serving import EngineConfig, StepCost
    from planner.serving.config import http_terms, pool_terms

    recs = read_jsonl(Path(folder) / records)
    deploy = next(r for r in recs if r.get("type") == "deploy" and r.get("role") == role)
    boot = next(r for r in recs if r.get("type") == "boot" and r.get("role") == role)
    argv = deploy["argv"]
    dep = recorded_deployment(deploy, model_id)  # the engine the record started, its GPU with it
    gpu, model = catalog.gpu(dep.gpu_id), probe_model(model_id)
    bs = int(boot.get("block_size", Deployment.default("block_size_tokens")))
    http = http_terms(profile)
    if frontend_overhead_s is not None:
        http["frontend_overhead_s"] = frontend_overhead_s
    # the pool as vLLM laid it out (block 0 is its null block); a sliding-window model's requests also hold their
    # window's blocks in each sliding group (planner.serving.config.pool_terms)
    caching = "--enable-prefix-caching" in argv
    cfg = EngineConfig((int(boot["num_gpu_blocks"]) - 1) * bs, dep.max_num_seqs, dep.max_num_batched_tokens,
                       enable_prefix_caching=caching, cold_step_shapes=True, **http,
                       **pool_terms(model, dep.replace(block_size_tokens=bs), caching))
    return StepCost.from_specs(model, gpu, dep, profile), cfg


def replay_folder(folder: Path, model_id: str, profile, frontend_overhead_s: float | None = None) -> list:
    """Every recorded load test of a serve_bench folder (vllm bench serve runs, the multi-turn run, GuideLLM
    reports) replayed through the simulator: a list of LoadTestComparison."""
    from planner.serving.loadtests import (
        engine_hints,
        read_guidellm,
        read_multiturn,
        read_vllm_bench,
        replay_load_test,
        with_shared_prefix,
    )

    folder = Path(folder)
    cost, cfg = serving_setup(folder, model_id, profile, frontend_overhead_s)
    recs = read_jsonl(folder / "serve_bench.jsonl")
    tests = [(with_shared_prefix(read_vllm_bench(folder / r["file"]),  # the prefix as `planner replay` reads it
                                 engine_hints(folder / r["file"]).get("shared_prefix_tokens")), r.get("wall_start"))
             for r in recs if r.get("type") == "bench"]
    if any(r.get("type") == "request" and "parent" in r for r in recs):
        tests.append((read_multiturn(folder / "serve_bench.jsonl"), None))
    tests += [(t, None) for r in recs if r.get("type") == "guidellm" for t in read_guidellm(folder / r["file"])]
    # a run starts with the compile keys the engine had compiled before it: where its steps were traced, those of every
    # step above the graphs before the run (the engine's real state); else those the replays of the runs before it
    # (in the order they ran) compiled, and a size sweep's before it (serve_bench --size-sweep: one prompt per step)
    sweeps = [r for r in recs if r.get("type") == "size_sweep"]
    steps, graph_max = traced_steps(folder), cost.model_costs.cudagraph_max_tokens
    out, ran = [], frozenset()
    for t, start in tests:
        done = ran
        if (cost.compile_key or cost.context_compile_s) and start is not None and steps:
            before = [s for s in steps if s["wall"] < start]
            done = frozenset({cost.compile_key(s["tok"]) for s in before if cost.compile_key and s["tok"] > graph_max}
                             | ({MLA_CONTEXT_KEY} if cost.context_compile_s and any(
                                 mixed_context(chunk_starts(s), s["chunks"], cost.model_costs.decode_path_max_tokens)
                                 for s in before) else set()))
        elif cost.compile_key and start is not None:
            done = ran | {cost.compile_key(p) for r in sweeps if r["wall_end"] <= start
                          for p, s in zip(r["prompt_tokens"], r["latency_s"]) if s is not None}
        out.append(replay_load_test(t, cost, replace(cfg, compiled_step_keys=frozenset(done))))
        ran = out[-1].compiled_step_keys
    return out


def fit_http_frontend(folder: Path, model_id: str, profile, run: str) -> float:
    """The OpenAI server's per-request overhead: how much later the first token reached the client than the
    simulated engine put it, at the TTFT median of a light-load run (``run``), never below 0."""
    comp = next(c for c in replay_folder(folder, model_id, profile, frontend_overhead_s=0.0) if c.name == run)
    return max(0.0, comp.measured["ttft_p50_s"] - comp.predicted["ttft_p50_s"])


def served_engines(data: Path):
    """(folder, ``deploy`` record, ``boot`` record) of every served engine under ``data`` (a serve_bench.jsonl with
    both), in path order."""
    for f in sorted(Path(data).rglob("serve_bench.jsonl")):
        recs = read_jsonl(f)
        deploy = next((r for r in recs if r.get("type") == "deploy" and not r.get("role")), None)
        boot = next((r for r in recs if r.get("type") == "boot" and not r.get("role")), None)
        if deploy is not None and boot is not None:
            yield f.parent, deploy, boot


def served_kv_pools(data: Path) -> list[tuple[str, float, float, float]]:
    """(folder, vLLM's logged KV pool bytes, the planner's today (planner.memory.memory_budget on the boot's recorded
    deployment and its GPU's profile), error %) of every served engine under ``data`` whose boot logged its pool."""
    from planner.memory import memory_budget

    out = []
    for folder, deploy, boot in served_engines(data):
        if not boot.get("kv_available_bytes"):
            continue
        dep = recorded_deployment(deploy)
        gpu, model = catalog.gpu(dep.gpu_id), probe_model(deploy["model"])
        pool = memory_budget(model, gpu, dep, catalog.profile_for(gpu.id, transfer=True))
        logged = float(boot["kv_available_bytes"])
        out.append((str(folder.relative_to(data)), logged, pool.kv_pool_bytes, 100.0 * (pool.kv_pool_bytes - logged)
                    / logged))
    return out
