"""Refit the committed H200 profile and rebuild the validation CSV from the committed raw records.

    python -m calibration.refit                 # refit and print the summary; writes nothing
    python -m calibration.refit --out DIR       # ... and write the profile, validation CSV and comparison CSV to DIR
    python -m calibration.refit --write         # ... and overwrite the committed files (what made them)

(what produced calibration/profiles/h200-sxm-vllm-0.26.0.yaml, calibration/data/h200-validation.csv and
calibration/data/public/comparison.csv, whose per-GPU errors become the profile's transfer_error_bands;
the device commands that produced the raw files are in calibration/data/README.md).

Which engines are fitted and which are held out, per family (the held-out ones give the error bands):

| family | fitted on | held out |
| --- | --- | --- |
| dense bf16 | Mistral-7B (3 engine starts), Qwen2.5-32B | Llama-3.1-8B, Qwen2.5-7B |
| fp8 KV cache | Mistral-7B | Mistral-7B (another start, other grid), Llama-3.1-8B |
| fp8 weights (W8A8) | Llama-3.1-8B | Qwen2.5-32B |
| int4 weights (W4A16) | Llama-3.1-8B | none measured (see the README: published numbers) |
| MoE | Qwen3-30B-A3B (128 experts, top-8; probes + mixed steps) | Mixtral-8x7B (8 experts, top-2), from its serving runs |
| mixed steps, vllm serve's settings | Qwen3-30B-A3B (in-process: the MoE stage) | Llama-3.1-8B (dense) |
| served launch floor (TRACES, set last) | Llama-3.1-8B per layer | Qwen2.5-7B and other dense models |
| ... per fused-MoE layer (FUSED_FLOOR_FIT) | Qwen3-30B-A3B, 6 hosts' median | Mixtral; each Qwen3 host vs 5 others |
| ... of prompt steps inside the graphs (PIECEWISE_FIT) | Llama-3.1-8B, Qwen2.5-32B, Llama-3.1-70B (80 layers) | Qwen2.5-7B, Mixtral, gpt-oss-20b |
| ... of the MXFP4 MoE layers (VARIANT_FLOOR_FIT) | gpt-oss-120b | gpt-oss-20b |
| ... of the MLA + MoE layers (MLA_FLOOR_FIT) | Moonlight (6 hosts), DeepSeek-V2-Lite (2): median | each vs 7 others |
| ... MLA prompt steps inside the graphs, two pathways (MLA_PATHWAY_FIT) | that median; Moonlight, 8,192 graphs | DeepSeek-V2-Lite |
| ... fp8 fused MoE's beyond bf16 (FP8_LAUNCH_PAIR) | Qwen3-30B-A3B fp8 + bf16, one host | Qwen3-235B-A22B-l16 fp8 |
| new step-size key compile | gpt-oss-120b (MXFP4), Qwen3-30B-A3B (fused MoE) | gpt-oss-20b; Mixtral, Moonlight |
| ... MXFP4 compile's expert offset (MXFP4_COMPILE_VARIANTS) | gpt-oss-120b-l18, -e32 (in-process) | gpt-oss-20b |
| MLA chunked-context compile (CONTEXT_COMPILE_FIT) | Moonlight, DeepSeek-V2-Lite, 2026-12-02 | the same, 2026-12-05 |
| TP 2 | Llama-3.1-8B | none: the Qwen2.5-32B TP 2 boot's requests failed (HTTP 400) |
| MXFP4 MoE, MLA + fine-grained MoE, sliding-window hybrid, V1-runner MoE memory | see calibration/family_fit.py | |
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from calibration.family_fit import cold_stalls, fit_new_families, load_points
from calibration.fit import fit_profile, measurement_rows, points_from_records, profile_to_yaml, with_residuals
from calibration.linear_kernel_fit import LINEAR_KERNEL_DATA
from calibration.mixed_points import mixed_points
from calibration.mla_pathways import mla_piecewise_launch, mla_piecewise_terms
from calibration.moe_kernel_fit import KERNEL_DATA
from calibration.public_check import OUT_PATH as PUBLIC_OUT
from calibration.public_check import check as public_check
from calibration.records import read_records, sha256_file
from calibration.serve_floor import (
    expert_compile_offset,
    served_terms,
    with_context_compile,
    with_launch_extra,
    with_prompt_token_time,
)
from calibration.serving_points import fit_http_frontend, serving_points
from calibration.trace_points import (
    launch_call_spread,
    launch_floor,
    piecewise_launch_s,
    run_call_spread,
    shape_compiles,
    stream_output_slope,
)
from calibration.variants import probe_model
from planner.io import catalog
from planner.validate import write_measurements

DATA = Path(__file__).resolve().parent / "data"
PROFILES = Path(__file__).resolve().parent / "profiles"
CAMPAIGN = "h200x2-2026-11-30"
#: raw probe files and the role their engines play here (None: the role recorded at measurement time)
RAW: dict[str, str | None] = {
    "h200-fit.jsonl": None, "h200-fit2.jsonl": None, "h200-fit3.jsonl": None, "h200-validate.jsonl": None,
    f"{CAMPAIGN}/h200x2-moe-fit.jsonl": None,
    f"{CAMPAIGN}/h200x2-fp8-fit.jsonl": None,
    f"{CAMPAIGN}/h200x2-fp8-val.jsonl": None,
    f"{CAMPAIGN}/h200x2-int4-fit.jsonl": None,
    f"{CAMPAIGN}/h200x2-tp2-fit.jsonl": None,
    f"{CAMPAIGN}/h200x2-fp8kv-fit.jsonl": "validate",  # measured with the fit grid, held out of the fp8-KV fit
    f"{CAMPAIGN}/h200x2-allreduce.jsonl": None,
    KERNEL_DATA: None,  # the fused-MoE kernel timings (calibration/moe_kernel_fit.py): no engine points
    LINEAR_KERNEL_DATA: None,  # the dense linear kernel timings (calibration/linear_kernel_fit.py): no engine points
    "h200-2026-12-03-linear-kernel/lc/h200-families.jsonl": None,  # dense fp8 engines held out (Qwen2.5-32B/7B)
    # Mistral-7B with 16, 32 and 64 layers and Qwen3-30B-A3B with 24 and 48, one host: per step vs per layer
    "h200-2026-12-03-layers/layers/h200-families.jsonl": None,
    # held out: Llama-3.1-8B with 16, 32 and 64 layers and Llama-3.1-70B-i7168 (80), one host, 2026-12-04
    "h200-2026-12-04-layers-val/layers/h200-families.jsonl": None,
}
#: mixed engine steps (calibration/mixed_probe.py, vllm serve's scheduler settings) and each model's role: the MoE
#: eager launch floor is fitted on Qwen3-30B-A3B's cells; Llama-3.1-8B's (dense) are held out
MIXED = {"h200-2026-12-01-moe-mixed/mixed.jsonl": {"qwen3-30b-a3b": "fit", "llama-3.1-8b": "validate"}}
#: engines whose steps were timed inside vllm serve (calibration/trace_points.py): their eager launch floors are fixed
#: before the latency stages (dense per layer from Llama-3.1-8B, the fused-MoE layers' part from Qwen3-30B-A3B: the
#: median over FUSED_FLOOR_FIT)
TRACES = {"h200-2026-12-02-serve-steps/c/serve-llama-trace": "llama-3.1-8b"}
#: the six Qwen3-30B-A3B engines traced inside vllm serve, each on its own machine: the bf16 Triton fused MoE's launch
#: per MoE layer is their median (serve_floor.served_terms).  One host's alone (b/, until 2026-12-03) was the slowest of
#: the six (1.08 ms a MoE layer; the others 0.46-0.91) and the same engine's floor moved 49 -> 71 ms between two runs on
#: one host (timeline/m), so no single trace stands for the next host.  Mixtral-8x7B (f/, p/: the same kernel) holds
#: it out; benchmarks/serving_accuracy.py checks each of these runs against the median of the other five
FUSED_FLOOR_FIT = tuple((f"h200-2026-12-02-{f}", "qwen3-30b-a3b") for f in (
    "serve-steps/b/serve-qwen3-30b-a3b-trace", "serve-fusedmoe/m/serve-qwen3-30b-a3b-warmed",
    "calibrate-serve/qwen3/serve-qwen3-30b-a3b-trace", "calibrate-serve/qwen3b/serve-qwen3-30b-a3b-trace",
    "timeline/m/serve-qwen3-30b-a3b-warmed", "served-steps/r/serve-qwen3-30b-a3b-steps"))
#: dense engines traced inside vllm serve whose prompt steps inside the CUDA graphs (piecewise) give that launch's step
#: and per-layer terms (serve_floor.piecewise_terms): 32, 64 and 80 layers; Qwen2.5-7B (28), Mixtral-8x7B, gpt-oss-20b
#: and the other Llama hosts hold out
PIECEWISE_FIT = {"h200-2026-12-02-serve-steps/c/serve-llama-trace": "llama-3.1-8b",
                 "h200-2026-12-03-deep/t/serve-qwen2.5-32b-steps": "qwen2.5-32b",
                 "h200-2026-12-03-deep/u/serve-llama-3.1-70b-i7168-steps": "llama-3.1-70b-i7168"}
#: the traced engine the Triton MXFP4 MoE's served terms are fitted on (gpt-oss-20b's traces h/, j/, k/ hold them out):
#: the compile of a new step-size key, and the eager launch floor of its MoE layers
SHAPE_COMPILE_FIT = ("h200-2026-12-02-serve-mxfp4/g/serve-gpt-oss-120b-trace", "gpt-oss-120b")
#: the traced engine each MoE variant's served eager launch floor is fitted on, beyond the dense layers' (the bf16
#: default's is in TRACES, the fp8 one keeps it; MLA's is MLA_FLOOR_FIT's median)
VARIANT_FLOOR_FIT = {"mxfp4": SHAPE_COMPILE_FIT}
#: the eight MLA + fine-grained MoE engines traced inside vllm serve (Moonlight-16B-A3B six times, DeepSeek-V2-Lite
#: twice, each on its own machine, 2026-12-02..05): MLA's launch per MoE layer is their median, as the fused MoE's is
#: FUSED_FLOOR_FIT's.  Its in-process stage's floor (68.0 ms for a 27-layer engine, one host of 2026-12-01) sat below
#: six of them (61.4-98.9 ms served, median 78.8); one engine's alone (n/, 88.7 ms) had put Moonlight's other hosts at
#: +17..+34 % (calibration/data/README.md).  benchmarks/serving_accuracy.py checks each against the median of the other
#: seven
MLA_FLOOR_FIT = tuple((f"h200-2026-12-{f}", m) for f, m in (
    ("02-serve-fusedmoe/l/serve-moonlight-16b-a3b-trace", "moonlight-16b-a3b"),
    ("02-serve-fusedmoe/n/serve-deepseek-v2-lite-trace", "deepseek-v2-lite"),
    ("02-serve-fusedmoe/o/serve-moonlight-16b-a3b-trace2", "moonlight-16b-a3b"),
    ("02-timeline/o/serve-moonlight-16b-a3b-trace2", "moonlight-16b-a3b"),
    ("02-served-steps/s/serve-moonlight-16b-a3b-steps", "moonlight-16b-a3b"),
    ("04-stream-check/s/serve-moonlight-16b-a3b-steps", "moonlight-16b-a3b"),
    ("05-mla-long/a/serve-moonlight-long", "moonlight-16b-a3b"),
    ("05-mla-long/b/serve-dsv2lite-long", "deepseek-v2-lite")))
#: the MLA engines traced with prompt chunks above MLA's decode pathway inside their CUDA graphs (8,192-token graphs):
#: the prefill pathway's piecewise launch over the decode pathway's is their median ratio (serve_floor.
#: mla_piecewise_terms; the decode pathway's is MLA_FLOOR_FIT's median): Moonlight on an H100 (1.909) and on an H200
#: (1.768); DeepSeek-V2-Lite (h200-2026-12-05-mla-graphs/e: 1.747) holds it out
MLA_PATHWAY_FIT = (("h100-2026-12-05-capture/c/serve-moonlight-cg8192", "moonlight-16b-a3b"),
                   ("h200-2026-12-05-mla-graphs/g/serve-moonlight-cg8192", "moonlight-16b-a3b"))
#: the fp8 W8A8 fused MoE's launch beyond the bf16 kernel's (its eager_layer_launch_extra_s): the fp8 family's fit model
#: served in fp8 and then bf16 on one host (Qwen3-30B-A3B's floors 92.8 and 68.1 ms); held out on Qwen3-235B-A22B-l16
#: fp8 (heldout-moe/w/, another host)
FP8_LAUNCH_PAIR = tuple(f"h200-2026-12-03-fp8-moe-launch/y/serve-qwen3-30b-a3b-{w}" for w in ("fp8", "bf16"))
#: ... and the bf16 Triton fused MoE's compile of a new step-size key (Mixtral-8x7B f/, Moonlight-16B-A3B l/ hold it
#: out), which the variants running the same kernel (planner.kernel_families.FUSED_MOE_VARIANTS) take: no served trace
#: of theirs compiled.  Per MoE layer, as the MXFP4 one: held out on Mixtral (32 layers) -25 %, Moonlight (26) -9 %; a constant
#: per stall would give +12 % and +68 % (calibration/data/README.md)
FUSED_COMPILE_FIT = ("h200-2026-12-02-serve-steps/b/serve-qwen3-30b-a3b-trace", "qwen3-30b-a3b")
#: the Triton MXFP4 MoE's compile of a new step-size key grows with the experts, not the layers: gpt-oss-120b's
#: 18-layer variant stalled as long as gpt-oss-120b, its 32-expert variant ~0.57x (in-process cold samples of one host,
#: 2026-12-03): their offset (calibration.serve_floor.expert_compile_offset) shapes the law, the served
#: SHAPE_COMPILE_FIT trace scales it; held out on gpt-oss-20b's served traces (24 layers, 32 experts)
MXFP4_COMPILE_VARIANTS = ("h200-2026-12-03-variants/oss/h200-families.jsonl", ("gpt-oss-120b-l18", "gpt-oss-120b-e32"))
#: the traced MLA engines the one-time compile of MLA's chunked prefill with context is fitted on (the median of their
#: stalls, calibration.trace_points.context_stalls: 0.553, 0.702, 0.504 s); held out: calibration/data/
#: h200-2026-12-05-mla-long a/ (Moonlight) and b/ (DeepSeek-V2-Lite), served three days later on another host
CONTEXT_COMPILE_FIT = {f"h200-2026-12-02-serve-fusedmoe/{f}": m for f, m in (
    ("l/serve-moonlight-16b-a3b-trace", "moonlight-16b-a3b"), ("n/serve-deepseek-v2-lite-trace", "deepseek-v2-lite"),
    ("o/serve-moonlight-16b-a3b-trace2", "moonlight-16b-a3b"))}
#: the traced engines the OpenAI server's output handling per running request is fitted on (the first tokens' delivery
#: after the engine took them, calibration.trace_points.stream_output_slope): the floor traces above, one Llama-3.1-8B
#: and six Qwen3-30B-A3B engines, 13 runs at 10-191 running; every other traced run holds it out
#: (benchmarks/serving_accuracy.py prints both)
STREAM_OUTPUT_FIT = (*TRACES, *(f for f, _ in FUSED_FLOOR_FIT))
#: serving runs whose idle-engine requests give held-out points (serve_bench records + vllm bench serve JSON)
SERVING = {f"{CAMPAIGN}/serve-mixtral-8x7b": "mixtral-8x7b"}
#: the light-load HTTP run the OpenAI server's per-request overhead is fitted on (the other runs validate it)
FRONTEND_FIT = (f"{CAMPAIGN}/serve-llama-3.1-8b", "llama-3.1-8b", "bench-r12")
#: every traced vllm serve engine of 2026-12-02 with its runs' eager launch calls: how far the hosts' and runs' launch
#: floors are from the profile's (calibration.trace_points.launch_call_spread; d/, the GIL-interval experiment, left
#: out)
SPREAD_TRACES = tuple(f"h200-2026-12-02-{f}" for f in (
    "asyncllm/b/serve-mistral-fixed", "calibrate-serve/llama/serve-llama-3.1-8b-trace",
    "calibrate-serve/llama2/serve-llama-3.1-8b-trace", "calibrate-serve/qwen3/serve-qwen3-30b-a3b-trace",
    "calibrate-serve/qwen3b/serve-qwen3-30b-a3b-trace", "serve-fusedmoe/l/serve-moonlight-16b-a3b-trace",
    "serve-fusedmoe/m/serve-qwen3-30b-a3b-warmed", "serve-fusedmoe/n/serve-deepseek-v2-lite-trace",
    "serve-fusedmoe/o/serve-moonlight-16b-a3b-trace2", "serve-fusedmoe/p/serve-mixtral-8x7b-warmed",
    "serve-mxfp4/g/serve-gpt-oss-120b-trace", "serve-mxfp4/h/serve-gpt-oss-20b-trace",
    "serve-mxfp4/i/serve-gpt-oss-20b-mnbt1024", "serve-mxfp4/j/serve-gpt-oss-20b-sweep",
    "serve-mxfp4/k/serve-gpt-oss-20b-warmed", "serve-steps/b/serve-qwen3-30b-a3b-trace",
    "serve-steps/c/serve-llama-trace",
    "serve-steps/e/serve-qwen2.5-7b-trace", "serve-steps/f/serve-mixtral-8x7b-trace", "timeline/c/serve-llama-trace",
    "timeline/m/serve-qwen3-30b-a3b-warmed", "timeline/o/serve-moonlight-16b-a3b-trace2",
    "api-servers/x1/serve-llama-api1", "api-servers/x2/serve-llama-api2"))
COMMAND = "python -m calibration.refit --write  # see calibration/refit.py for which engines are fitted and held out"


def inputs(excluded: list[str] | None = None) -> tuple[list[dict], list, list]:
    """(every raw record, their measurements with this refit's roles, the serving runs' held-out points);
    unreadable lines and records left out of the fit are added to ``excluded`` ('file:line: why')."""
    records, points = [], []
    for name, role in RAW.items():
        path = DATA / name
        skipped: list[tuple[int, str]] = []
        recs = read_records(path, skipped)
        if excluded is not None:
            excluded += [f"{path.name}:{k}: {why}" for k, why in skipped]
        records += recs
        points += points_from_records(recs, f"calibration/data/{name}", role=role, excluded=excluded)
    for name, roles in MIXED.items():
        points += mixed_points(DATA / name, roles, f"calibration/data/{name}", excluded)
    extra = [p for folder, model in SERVING.items() for p in serving_points(DATA / folder, model)]
    return records, points, extra


def with_serve_floors(prof, points: list, extra: list, family_points: list):
    """``prof`` with the eager-step terms of the engines traced inside vllm serve (:func:`calibration.serve_floor.
    served_terms` of :data:`TRACES`, :data:`FUSED_FLOOR_FIT`, :data:`VARIANT_FLOOR_FIT` and :data:`MLA_FLOOR_FIT`, the
    fp8 fused MoE's extra
    launch of :data:`FP8_LAUNCH_PAIR`; the compiles of
    :data:`FUSED_COMPILE_FIT` and :data:`SHAPE_COMPILE_FIT`) in place of the in-process stages' ones, and its latency
    residuals, held-out rows and bands recomputed on every point (the memory rows of the V1 runner's terms, which
    calibration/family_fit.py added after fit_profile took them, included). The stages fit on in-process probes of other
    days and hosts than the traces (Qwen3-30B-A3B's in-process eager steps 42-80 ms on 2026-12-01, served 92 ms on
    2026-12-02; on one host the two cost about the same: calibration/data/README.md), so the served floors go in last:
    the product predicts vllm serve."""
    floors = [launch_floor(DATA / folder, model) for folder, model in (*TRACES.items(), *FUSED_FLOOR_FIT,
                                                                       *VARIANT_FLOOR_FIT.values(), *MLA_FLOOR_FIT)]
    prof = with_launch_extra(prof, "fp8", tuple(launch_floor(DATA / f, "qwen3-30b-a3b") for f in FP8_LAUNCH_PAIR))
    piecewise = [(launch_floor(DATA / folder, model), piecewise_launch_s(DATA / folder, model)[0])
                 for folder, model in PIECEWISE_FIT.items()]
    name, variants = MXFP4_COMPILE_VARIANTS
    offset = expert_compile_offset([(float(np.median(cold_stalls(DATA / name, m))), probe_model(m).moe.num_experts)
                                    for m in variants])
    prof = prof.model_copy(update={"moe_variants": {**prof.moe_variants, "mxfp4": prof.moe_variants["mxfp4"].model_copy(
        update={"shape_compile_offset_experts": offset})}})
    prof = served_terms(prof, floors, [shape_compiles(DATA / folder, model) for folder, model in (FUSED_COMPILE_FIT,
                                                                                                SHAPE_COMPILE_FIT)],
                        piecewise=piecewise)
    prof = with_context_compile(prof, [(DATA / f, m) for f, m in CONTEXT_COMPILE_FIT.items()], log=lambda _: None)
    prof = prof.model_copy(update=mla_piecewise_terms(prof, [mla_piecewise_launch(DATA / f, m) for f, m in MLA_FLOOR_FIT],
                                                      [mla_piecewise_launch(DATA / f, m) for f, m in MLA_PATHWAY_FIT]))
    return with_residuals(prof, [p for p in points + family_points if p.role == "fit"],
                          [p for p in points + family_points if p.role != "fit"] + list(extra))


def with_families(prof, points: list, extra: list, family_points: list):
    """``prof`` (the stages of :func:`calibration.fit.fit_profile`) with issue #21's family stages
    (:func:`calibration.family_fit.fit_new_families`) and the served eager-step terms (:func:`with_serve_floors`).
    The family stages see the served dense launch floor (:data:`TRACES`) they will be simulated with: a variant
    fitting its eager MoE launch on in-process probes (MLA, :data:`calibration.family_fit.FLOOR_VARIANTS`) fits the
    floor above the dense layers' launch, not in place of it."""
    dense = served_terms(prof, [launch_floor(DATA / folder, model) for folder, model in TRACES.items()],
                         log=lambda _: None)
    return with_serve_floors(fit_new_families(dense, family_points), points, extra, family_points)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m calibration.refit", description="Refit the committed H200 profile from the committed raw "
        "records (calibration/data) and print its residuals, held-out errors and bands.  Writes nothing unless "
        "--out or --write is given.")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, metavar="DIR", help="write the profile YAML, h200-validation.csv and "
                       "comparison.csv into DIR (created if missing; never the committed files)")
    where.add_argument("--write", action="store_true", help="overwrite the committed files: calibration/profiles/"
                       "<gpu>-vllm-<version>.yaml, calibration/data/h200-validation.csv, calibration/data/public/"
                       "comparison.csv")
    return ap.parse_args(argv)


def refit(comparison_out: Path | None = None):
    """(the refitted profile with its HTTP, transfer and provenance fields; the points; the held-out rows);
    the public comparison CSV is written to ``comparison_out`` when given."""
    paths = {**{DATA / name: role for name, role in RAW.items()}, **{DATA / name: None for name in MIXED}}
    excluded: list[str] = []
    records, points, extra = inputs(excluded)
    prof, points = fit_profile(records, points=points, extra_validation=extra, excluded=excluded)
    # issue #21's families (MXFP4 MoE, MLA + fine-grained MoE, sliding-window hybrids, the V1 runner's memory
    # terms) on top, each from its own engine of the 2026-12-01 campaign: calibration/family_fit.py
    family_points = load_points(excluded)
    prof = with_families(prof, points, extra, family_points)
    # the OpenAI server's output handling per running request (the first tokens' delivery in the floor traces), then
    slope, _, _ = stream_output_slope([DATA / f for f in STREAM_OUTPUT_FIT])
    prof = prof.model_copy(update={"stream_output_overhead_s": max(0.0, slope)})
    # ... its time per prompt token before the engine (tokenising), from the same runs' client lags, then
    prof, _, _ = with_prompt_token_time(prof, [DATA / f for f in STREAM_OUTPUT_FIT])
    # its per-request overhead: what the first token takes beyond the simulated engine, so it is
    # fitted on the engine as finally simulated: with the served launch floors above (fitted before them, it took
    # 5.97 ms where the final engine leaves -3.3 ms on the same run: clamped at 0)
    folder, model_id, run = FRONTEND_FIT
    prof = prof.model_copy(update={"http_frontend_overhead_s": fit_http_frontend(DATA / folder, model_id, prof, run)})
    # the fit transferred to every GPU of calibration/data/public
    comparisons, transfer = public_check(base=prof, out=comparison_out)
    prof = prof.model_copy(update={
        "transfer_error_bands": transfer,
        "launch_call_spread": launch_call_spread([DATA / f for f in SPREAD_TRACES], prof),
        "launch_run_spread": run_call_spread([DATA / f for f in SPREAD_TRACES]),
        "raw_data": list(dict.fromkeys([str(p.relative_to(DATA)) for p in paths] + list(SERVING) + [FRONTEND_FIT[0]]
                                       + list(TRACES) + [f for f, _ in FUSED_FLOOR_FIT] + list(PIECEWISE_FIT)
                                       + [f for f, _ in VARIANT_FLOOR_FIT.values()] + [f for f, _ in MLA_FLOOR_FIT]
                                       + list(FP8_LAUNCH_PAIR)
                                       + [FUSED_COMPILE_FIT[0]] + list(SPREAD_TRACES) + [MXFP4_COMPILE_VARIANTS[0]]
                                       + list(CONTEXT_COMPILE_FIT) + [f for f, _ in MLA_PATHWAY_FIT])),
        "raw_data_sha256": [sha256_file(p) for p in paths],
        "command": COMMAND,
    })
    # the validation CSV is for `planner validate`, which knows the catalog's models, not calibration's probe variants
    rows = measurement_rows([x for x in points if x.role != "fit" and x.model.id in catalog.models()] + extra)
    return prof, comparisons, excluded, rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.write:
        profiles, validation, comparison = PROFILES, DATA / "h200-validation.csv", PUBLIC_OUT
    elif args.out is not None:
        if args.out.resolve() in {PROFILES.resolve(), DATA.resolve(), PUBLIC_OUT.parent.resolve()}:
            print(f"error: --out: {args.out} holds committed files; use --write to overwrite them", file=sys.stderr)
            return 2
        args.out.mkdir(parents=True, exist_ok=True)
        profiles, validation, comparison = args.out, args.out / "h200-validation.csv", args.out / "comparison.csv"
    else:
        profiles = validation = comparison = None
    prof, comparisons, excluded, rows = refit(comparison)
    if profiles is not None:
        out = profiles / f"{prof.gpu_id}-vllm-{prof.engine_version}.yaml"
        out.write_text(profile_to_yaml(prof))
        write_measurements(rows, validation)
        print(f"wrote {out} (fitted on {', '.join(prof.models_used)}), {validation} ({len(rows)} rows), {comparison}")
    else:
        print(f"refitted on {', '.join(prof.models_used)}; nothing written (--out DIR or --write to write)")
    fit = prof.fit
    if fit is not None:
        print("  objective " + ", ".join(f"{k} {v:.6g} (n={fit.points.get(k, 0)})" for k, v in fit.objective.items()))
        for k, why in fit.fixed.items():
            print(f"  fixed {k} = {why}")
    for k, v in {**prof.residuals, **prof.validation}.items():
        print(f"  {k:55s} n={v.n:3d}  median |err| {v.median_abs_error_pct:5.1f}%  p90 {v.p90_abs_error_pct:5.1f}%")
    for k, b in {**prof.error_bands, **prof.transfer_error_bands}.items():
        print(f"  band {k:30s} ±{b.pct:5.1f}% (median {b.median_pct:4.1f}%, n={b.n}, {b.basis})")
    print(f"  public check: {sum(c.comparable for c in comparisons)} of {len(comparisons)} published rows compared")
    print(f"  {len(excluded)} raw line(s)/record(s) left out of the fit" + "".join(f"\n    {x}" for x in excluded))
    return 0


if __name__ == "__main__":
    sys.exit(main())
