"""A served engine's eager-step terms, from engines whose steps were timed inside ``vllm serve`` (pure: no torch/vLLM).

The profile's stages fit on in-process probes (:mod:`calibration.probes`).  An eager step (above the largest CUDA
graph) is launched layer by layer from Python, so its floor is the host's CPU: Qwen3-30B-A3B's served eager step took
61 ms on one lent H200 and 81-92 ms on others, and on one host a served step cost about what an in-process one did
(82-85 against 78-79 ms; calibration/data/README.md).  :func:`served_terms` puts the floors of traced engines
(:func:`calibration.trace_points.launch_floor`) in place of the in-process stage's eager terms, and the Triton MoE's
compile of a new step-size key (:func:`calibration.trace_points.shape_compiles`); :func:`with_traces` adds the OpenAI
server's per-request, per-prompt-token and per-running-request times, host CPU work as well.

Used by :mod:`calibration.refit` (the committed H200 profile, from the traces it names) and by ``planner calibrate``
(``MODEL+serve`` jobs: the engine served and traced on the calibrating machine, so the floor is that host's).
"""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from calibration.family_fit import HELD_FROM_BF16
from calibration.mla_pathways import mla_piecewise_launch, mla_piecewise_terms
from calibration.records import append_record
from calibration.serving_points import fit_http_frontend
from calibration.trace_points import (
    LaunchFloor,
    ShapeCompiles,
    context_stalls,
    frontend_token_slope,
    launch_floor,
    piecewise_launch_s,
    range_period_s,
    shape_compiles,
    stream_output_slope,
)
from calibration.variants import probe_model
from planner.io.jsonl import read_jsonl
from planner.kernel_families import FUSED_MOE_VARIANTS, moe_coeffs, moe_variant
from planner.profile import CalibrationProfile

# the variants running the Triton fused MoE (planner.kernel_families.FUSED_MOE_VARIANTS) take the bf16 kernel's
# compile of a new step-size key where no trace of their own compiled (the MXFP4 kernel is another: its own trace)


def _moe_layers(model_id: str) -> int:
    m = probe_model(model_id)
    return m.num_layers - m.moe.num_dense_layers


def piecewise_terms(prof: CalibrationProfile, engines: Sequence[tuple[LaunchFloor, float]], per_layer_s: float) -> dict:
    """The piecewise prompt steps' launch (``piecewise_step_launch_s`` + layers × ``piecewise_layer_launch_s``) for a
    profile whose eager launch is ``per_layer_s`` a layer.  ``engines``: (the traced dense engine's launch floor, its
    :func:`calibration.trace_points.piecewise_launch_s`); each engine's call is brought to this host's speed (× the
    profile's eager launch per layer over the engine's) and a line fitted over the layer counts (closed form, slope
    >= 0, through the origin where its step term would be negative; one layer count: the profile's line scaled to
    the engines' call).  No engine: the terms scaled with the eager launch (a host launching faster does both faster).
    Traced, at the profile host's speed: Llama-3.1-8B (32 layers) 7.42 ms, Qwen2.5-32B (64) 9.98 ms, Llama-3.1-70B's
    80 layers (a quarter of its FFN width) 19.56 ms: 0.212 ms a layer."""
    if not engines:
        r = per_layer_s / prof.eager_layer_launch_s if prof.eager_layer_launch_s > 0 else 1.0
        return {"piecewise_step_launch_s": prof.piecewise_step_launch_s * r,
                "piecewise_layer_launch_s": prof.piecewise_layer_launch_s * r}
    pts = []
    for floor, call_s in engines:
        layers = probe_model(floor.model_id).num_layers
        if floor.seconds > 0:  # a floor of 0 tells no host speed
            pts.append((layers, call_s * per_layer_s * layers / floor.seconds))
    if not pts:
        return piecewise_terms(prof, (), per_layer_s)
    x, y = np.array([p[0] for p in pts], float), np.array([p[1] for p in pts], float)
    if np.ptp(x) == 0:  # one layer count: the profile's line, scaled to the engines' call
        step, slope = prof.piecewise_step_launch_s, prof.piecewise_layer_launch_s
        k = float(y.mean()) / (step + slope * x[0]) if step + slope * x[0] > 0 else 0.0
        return ({"piecewise_step_launch_s": step * k, "piecewise_layer_launch_s": slope * k} if k > 0
                else {"piecewise_step_launch_s": 0.0, "piecewise_layer_launch_s": float((y / x).mean())})
    slope = max(0.0, float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()))
    if (y - slope * x).mean() < 0:  # the line would start below 0: through the origin instead (per layer only)
        slope = float((x * y).sum() / (x * x).sum())
    return {"piecewise_step_launch_s": max(0.0, float((y - slope * x).mean())), "piecewise_layer_launch_s": slope}


def served_terms(prof: CalibrationProfile, floors: Sequence[LaunchFloor], compiles: Sequence[ShapeCompiles] = (),
                 *, piecewise: Sequence[tuple[LaunchFloor, float]] = (), log=print) -> CalibrationProfile:
    """``prof`` with the eager-step terms of traced engines (:func:`calibration.trace_points.launch_floor` and
    :func:`~calibration.trace_points.shape_compiles` of serve_bench ``--step-trace`` folders):

    * ``floors``: every layer's launch, per layer = the dense engines' floor / layers (median over engines);
      each MoE kernel's launch per MoE layer on top = (floor − layers × that) / MoE layers (median over its engines;
      the bf16 fused MoE's also goes to the variants that keep its terms, :data:`HELD_FROM_BF16`, each with its
      ``eager_layer_launch_extra_s`` (:func:`with_launch_extra`) on top); a MoE kernel with a
      traced floor loses its in-process additive eager cost.  A GEMM-shape correction is kept only where a traced
      dense engine of its shape shows it (the median engine-loop period of its token range beyond the launch plus
      half the correction);
    * ``compiles``: a MoE kernel's compile of a new step-size key per MoE layer (the median stall of its
      engine); the bf16 fused MoE's also goes to :data:`FUSED_MOE_VARIANTS` that have no trace of their own.

    * ``piecewise``: the piecewise prompt steps' launch (:func:`piecewise_terms`), fitted on these dense engines or,
      without any, scaled with the dense floors' eager launch.

    Terms no trace speaks for are left as fitted.  ``log`` gets one line per shape correction checked."""
    by_kernel: dict[str | None, list[LaunchFloor]] = {}
    for f in floors:
        by_kernel.setdefault(moe_variant(probe_model(f.model_id), f.weight_dtype), []).append(f)
    upd: dict = {}
    if dense := by_kernel.pop(None, []):
        upd["eager_layer_launch_s"] = float(np.median([f.seconds / probe_model(f.model_id).num_layers
                                                        for f in dense]))
        traced = {(m.hidden_size, m.intermediate_size): (f, m) for f, m in
                  ((f, probe_model(f.model_id)) for f in dense)}
        keep = []
        for c in prof.shape_corrections:
            if (c.hidden_size, c.intermediate_size) in traced:
                f, m = traced[(c.hidden_size, c.intermediate_size)]
                period, n = range_period_s(Path(f.source), m.id, c.tokens_lo, c.tokens_hi)
                cliff = c.extra_s_per_layer * m.num_layers
                shown = period > f.eager_call_s + cliff / 2
                log(f"  shape {c.hidden_size}x{c.intermediate_size}: traced {m.id} {n} steps of {c.tokens_lo:.0f}-"
                    f"{c.tokens_hi:.0f} tokens, median period {1e3 * period:.1f} ms vs launch "
                    f"{1e3 * f.eager_call_s:.1f} ms + half the cliff {0.5e3 * cliff:.1f} ms: "
                    f"{'kept' if shown else 'dropped'}")
                if not shown:
                    continue
            keep.append(c)
        upd["shape_corrections"] = keep
    per_layer = upd.get("eager_layer_launch_s", prof.eager_layer_launch_s)
    if dense or piecewise:
        upd.update(piecewise_terms(prof, piecewise, per_layer))
    launch = {v: max(0.0, float(np.median([(f.seconds - probe_model(f.model_id).num_layers * per_layer)
                                           / _moe_layers(f.model_id) for f in fs]))) for v, fs in by_kernel.items()}
    per_kernel: dict[str | None, list[float]] = {}
    for c in compiles:
        m = probe_model(c.model_id)
        coeffs = moe_coeffs(m, c.weight_dtype, prof)
        offset = coeffs.shape_compile_offset_experts if coeffs is not None else 0.0
        # per expert (+ the offset) where the profile's law for the kernel is per expert, else per MoE layer
        per_kernel.setdefault(moe_variant(m, c.weight_dtype), []).append(
            c.median_s / (offset + m.moe.num_experts) if offset else c.median_s / _moe_layers(c.model_id))
    compile_s = {v: float(np.median(x)) for v, x in per_kernel.items()}
    moe = prof.moe
    if moe is not None:
        moe = moe.model_copy(update={**({"eager_layer_launch_s": launch["default"], "eager_layer_overhead_s": 0.0}
                                        if "default" in launch else {}),
                                     **({"shape_compile_layer_s": compile_s["default"]} if "default" in compile_s
                                        else {})})
    variants = {}
    for v, coeffs in prof.moe_variants.items():
        held = HELD_FROM_BF16.get(v, ())
        src = launch.get(v)
        if src is None and "eager_layer_launch_s" in held and "default" in launch:  # the bf16 kernel's, + its extra
            src = launch["default"] + coeffs.eager_layer_launch_extra_s
        comp = compile_s.get(v, compile_s.get("default") if v in FUSED_MOE_VARIANTS else None)
        variants[v] = coeffs.model_copy(update={
            **({"eager_layer_launch_s": src} if src is not None else {}),
            # a variant's own trace is its whole launch: no extra on top of the bf16 kernel's is in it
            **({"eager_layer_overhead_s": 0.0, "eager_layer_launch_extra_s": 0.0} if v in launch else {}),
            **(({"shape_compile_expert_s": comp, "shape_compile_layer_s": 0.0} if coeffs.shape_compile_offset_experts
                else {"shape_compile_layer_s": comp}) if comp is not None else {})})
    return prof.model_copy(update={**upd, "moe": moe, "moe_variants": variants})


def expert_compile_offset(engines: Sequence[tuple[float, int]]) -> float:
    """The experts the compile of no expert is worth, for a kernel whose compile stall s grows with the layer's
    experts E and not its layers, s = k (offset + E): from two engines of one layout (stall, experts), the offset
    (s_lo E_hi - s_hi E_lo) / (s_hi - s_lo).  gpt-oss-120b's 18-layer (128 experts) and 32-expert (36 layers)
    variants, in-process cold samples of one host (2026-12-03): 1.753 and 1.003 s -> 96.2 experts."""
    (s_hi, e_hi), (s_lo, e_lo) = sorted(engines, key=lambda x: -x[1])
    if e_hi == e_lo or s_hi <= s_lo:
        raise ValueError(f"two engines with different experts and a larger stall for more experts needed: {engines}")
    return (s_lo * e_hi - s_hi * e_lo) / (s_hi - s_lo)


def with_launch_extra(prof: CalibrationProfile, variant: str, engines: tuple[LaunchFloor, LaunchFloor]
                      ) -> CalibrationProfile:
    """``prof`` with ``variant``'s ``eager_layer_launch_extra_s``: (its engine's floor − the bf16 engine's) per MoE
    layer (0 where it launched faster), one model traced with both weight formats on one host, one after the other
    (the host's CPU cancels).
    Traced: Qwen3-30B-A3B fp8 92.8 ms, bf16 68.1 ms: +0.515 ms per MoE layer (its 48).  Its eager launch takes effect
    through :func:`served_terms`."""
    quantized, bf16 = engines
    if quantized.model_id != bf16.model_id or (quantized.weight_dtype, bf16.weight_dtype) != (variant, "bf16"):
        raise ValueError(f"a launch pair is one model in {variant} and bf16: got {quantized.model_id} "
                         f"{quantized.weight_dtype}, {bf16.model_id} {bf16.weight_dtype}")
    extra = max(0.0, (quantized.seconds - bf16.seconds) / _moe_layers(bf16.model_id))
    coeffs = prof.moe_variants[variant].model_copy(update={"eager_layer_launch_extra_s": extra})
    return prof.model_copy(update={"moe_variants": {**prof.moe_variants, variant: coeffs}})


# ------------------------------------------------------------------------ planner calibrate's MODEL+serve jobs

#: the traced runs of a ``+serve`` job: chat-like lengths (prompts 1,024 ± 80 % tokens, so most prompt-carrying steps
#: are above the CUDA graphs) at 10 req/s; ``warm`` is the engine's first traffic (its Triton MoE compiles; not used
#: for the floor), ``chat`` gives the floor (Llama-3.1-8B: 155 eager and ~2,900 graph steps; Qwen3-30B-A3B: 130-137
#: and ~730; calibration/data/h200-2026-12-02-calibrate-serve)
SERVE_RUNS = ("warm:input=1024,output=128,ratio=0.8,n=60,rate=10", "chat:input=1024,output=128,ratio=0.8,n=200,rate=10")
#: seconds a ``+serve`` job may take: boot (60-150 s on an H200, first compile included) + the runs (~40 s)
SERVE_BUDGET_S = 300.0


def trace_folder(out_dir: Path, model_id: str, weight_dtype: str, tensor_parallel: int) -> Path:
    """Where a ``+serve`` job of ``planner calibrate`` keeps its serve_bench records and step traces."""
    wtag = "" if weight_dtype == "bf16" else f".w{weight_dtype}"
    tptag = "" if tensor_parallel == 1 else f".tp{tensor_parallel}"
    return Path(out_dir) / f"serve-{model_id}{wtag}{tptag}-trace"


def trace_command(python: str, folder: Path, model_id: str, *, gpu_id: str, weight_dtype: str, kv_cache_dtype: str,
                  tensor_parallel: int, port: int) -> list[str]:
    """The serve_bench argv of a ``+serve`` job: ``vllm serve`` as ``planner deploy`` writes it (dummy weights), every
    engine step timed (``--step-trace``), :data:`SERVE_RUNS` through ``vllm bench serve``."""
    cmd = [python, "-m", "calibration.serve_bench", "--model", model_id, "--gpu", gpu_id, "--tp", str(tensor_parallel),
           "--weight-dtype", weight_dtype, "--kv-dtype", "fp8" if kv_cache_dtype == "fp8" else "bf16",
           "--max-model-len", "4096", "--step-trace", "--out", str(folder), "--port", str(port),
           "--budget-s", str(SERVE_BUDGET_S - 30.0)]
    for run in SERVE_RUNS:
        cmd += ["--run", run]
    return cmd


def traced_engines(out_dir: Path, log=print) -> list[tuple[Path, str]]:
    """(folder, catalog id) of every ``+serve`` trace in ``out_dir`` that holds timed steps, in name order (one that
    cannot be read, or names a model the catalog lacks, is said in ``log`` and left out)."""
    out = []
    for path in sorted(Path(out_dir).glob("serve-*-trace/serve_bench.jsonl")):
        try:
            deploy = next((r for r in read_jsonl(path) if r.get("type") == "deploy"), None)
            if deploy and isinstance(deploy.get("model"), str) and any(path.parent.glob("steps.*.jsonl")):
                probe_model(deploy["model"])
                out.append((path.parent, deploy["model"]))
        except (OSError, ValueError) as err:
            log(f"  {path.parent.name}: left out ({err})")
    return out


def with_context_compile(prof: CalibrationProfile, traces: Sequence[tuple[Path, str]], log=print
                         ) -> CalibrationProfile:
    """``prof`` with ``mla_context_compile_s``, the median of the traced MLA engines' one stall on a step mixing a
    prompt chunk with context and a fresh prompt (:func:`calibration.trace_points.context_stalls`, each engine's
    first); unchanged where no traced MLA engine made such a step."""
    stalls = [s for folder, model_id in traces if probe_model(model_id).attention.kind == "mla"
              for _, s in context_stalls(folder, model_id)[:1]]
    if not stalls:
        return prof
    log(f"  MLA's chunked-prefill compile: {np.median(stalls):.3f} s ({len(stalls)} engines)")
    return prof.model_copy(update={"mla_context_compile_s": float(np.median(stalls))})


def with_traces(prof: CalibrationProfile, traces: Sequence[tuple[Path, str]], log=print) -> CalibrationProfile:
    """:func:`served_terms` of the traces that can give them: a floor where the runs hold eager and graph steps, a
    compile where a MoE engine's eager steps had new and compiled step-size keys (the others are said in ``log``);
    then the OpenAI server's output handling per running request (:func:`calibration.trace_points.stream_output_slope`,
    where the traces hold three runs at two loads or more), its time per prompt token
    (:func:`calibration.trace_points.frontend_token_slope`, where a run holds 20 unqueued requests of different
    lengths) and its per-request overhead
    (:func:`calibration.serving_points.fit_http_frontend`: the first
    token's delay beyond the simulated engine's at the TTFT median of the ``chat`` run), the median over the dense
    engines' traces: that is the host's CPU too (Llama-3.1-8B: 0 on the committed profile's host once fitted after its
    served floors, 6.0 ms before, and 0 on the two calibrate-serve hosts of 2026-12-02).  With the host's own
    floor fitted, the launch spread a plan shows is the run-to-run one (``launch_run_spread``)."""
    floors, compiles, piecewise, dense, mla = [], [], [], [], []
    for folder, model_id in traces:
        model = probe_model(model_id)
        moe = model.moe is not None
        try:
            floors.append(launch_floor(folder, model_id))
            if not moe:
                dense.append(floors[-1])
                piecewise.append((floors[-1], piecewise_launch_s(folder, model_id)[0]))
            if model.attention.kind == "mla":
                mla.append(mla_piecewise_launch(folder, model_id))
        except (ValueError, KeyError, StopIteration) as err:
            log(f"  {folder.name}: no served launch floor or piecewise launch ({err})")
        if moe:
            try:
                compiles.append(shape_compiles(folder, model_id))
            except (ValueError, KeyError, StopIteration) as err:
                log(f"  {folder.name}: no new-key compile measured ({err})")
    prof = with_context_compile(served_terms(prof, floors, compiles, piecewise=piecewise, log=log), traces, log)
    prof = prof.model_copy(update=mla_piecewise_terms(prof, mla, mla))  # this host's MLA engines, where traced
    if floors and prof.launch_run_spread is not None:  # the host's own floor: what is left is run to run
        prof = prof.model_copy(update={"launch_call_spread": prof.launch_run_spread})
    try:  # the OpenAI server's output handling on this host (its share of the first token's delay grows with the load)
        slope, _, runs = stream_output_slope([f for f, _ in traces], min_runs=3)
        prof = prof.model_copy(update={"stream_output_overhead_s": max(0.0, slope)})
        log(f"  the OpenAI server's output handling: {slope * 1e6:.0f} us per running request ({runs} runs)")
    except (OSError, ValueError, KeyError) as err:
        log(f"  the OpenAI server's output handling: the profile's kept ({err})")
    try:  # ... and its time per prompt token before the engine (tokenising: the host's CPU and the model's tokenizer)
        prof, per_token, runs = with_prompt_token_time(prof, [f for f, _ in traces])
        log(f"  the OpenAI server's time per prompt token: {per_token * 1e6:.2f} us ({runs} runs)")
    except (OSError, ValueError, KeyError) as err:
        log(f"  the OpenAI server's time per prompt token: the profile's kept ({err})")
    run = f"bench-{SERVE_RUNS[-1].split(':', 1)[0]}"
    fronts = []
    for f in dense:
        folder, model_id = Path(f.source), f.model_id
        if (folder / f"{run}.json").is_file():
            try:
                fronts.append(fit_http_frontend(folder, model_id, prof, run))
            except (OSError, ValueError, KeyError, StopIteration) as err:
                log(f"  {folder.name}: no HTTP server overhead ({err})")
    return prof.model_copy(update={"http_frontend_overhead_s": float(np.median(fronts))}) if fronts else prof


#: the most a prompt token may take in the OpenAI server before the engine (a fitted slope is held below it)
MAX_PROMPT_TOKEN_S = 1e-4


def with_prompt_token_time(prof: CalibrationProfile, folders) -> tuple[CalibrationProfile, float, int]:
    """(``prof`` with its ``http_frontend_token_s`` fitted on ``folders``' traced runs, held in [0,
    :data:`MAX_PROMPT_TOKEN_S`], the slope as fitted, the runs it came from):
    :func:`calibration.trace_points.frontend_token_slope`, which raises ValueError where no run can give it."""
    per_token, runs = frontend_token_slope(folders)
    clamped = min(MAX_PROMPT_TOKEN_S, max(0.0, per_token))
    return prof.model_copy(update={"http_frontend_token_s": clamped}), per_token, runs


def serve_trace(job: dict, out_dir: Path, raw: Path, *, gpu_id: str, tensor_parallel: int, run, env: dict) -> None:
    """A ``+serve`` job of ``planner calibrate`` (``job``: :func:`calibration.run.parse_job`'s): the model behind
    ``vllm serve`` with every step timed, into its :func:`trace_folder` (kept as it is when it already holds a
    finished ``chat`` run: ``--resume``); ``run(argv, log_path, env, timeout_s)`` runs the child.  A record of the
    job goes to ``raw``."""
    folder = trace_folder(out_dir, job["model"], job["weights"], tensor_parallel)
    done = folder / "serve_bench.jsonl"
    if done.is_file() and any(r.get("type") == "bench" and r.get("run") == "chat" for r in read_jsonl(done)):
        print(f"== {job['model']} served: already traced in {folder.name}", flush=True)
        return
    with contextlib.closing(socket.socket()) as s:  # a free port for its server
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    print(f"== {job['model']} served, every step timed ({folder.name})", flush=True)
    rc, _ = run(trace_command(sys.executable, folder, job["model"], gpu_id=gpu_id, weight_dtype=job["weights"],
                              kv_cache_dtype=job["kv"], tensor_parallel=tensor_parallel, port=port),
                Path(out_dir) / f"{Path(raw).stem}.{folder.name}.log", env, SERVE_BUDGET_S + 120)
    append_record(raw, {"type": "serve_trace", "model": job["model"], "weight_dtype": job["weights"],
                        "kv_cache_dtype": job["kv"], "folder": folder.name, "returncode": rc})
