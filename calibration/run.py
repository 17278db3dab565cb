"""``planner calibrate``: checks, micro-benchmarks, one vLLM engine per model (each in a child
process), raw records appended to a JSONL file as they are taken, then the fit.

Entry points: :func:`calibrate` (used by the CLI) and ``python -m calibration.run`` (argparse, for
machines where the CLI's extras are not installed)."""

from __future__ import annotations

import argparse
import datetime as dt
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from calibration.kernel_benches import kernel_benches
from calibration.probes import MULTICAST_OFF
from calibration.records import (
    SAFE_VERSION,
    append_record,
    first_of_each_point,
    lock_holder,
    parse_engine_log,
    read_records,
    safe_name_part,
    sha256_file,
)

REPO = Path(__file__).resolve().parent.parent
#: The lock file one ``planner calibrate`` holds on its --out folder while it writes there.
LOCK_NAME = ".calibrate.lock"


class CalibrationError(RuntimeError):
    """A check failed before any measurement (no CUDA, wrong GPU, no vLLM)."""


def gpu_matches(spec_id: str, device_name: str) -> bool:
    """Does the CUDA device name fit the catalog id?  The id's first token must appear in the name
    ('h200-sxm' ~ 'NVIDIA H200'; 'a100-sxm-80gb' ~ 'NVIDIA A100-SXM4-80GB'); PCIe parts must say PCIe."""
    name = device_name.lower().replace(" ", "").replace("-", "")
    tokens = spec_id.lower().split("-")
    if tokens[0] not in name:
        return False
    if "pcie" in tokens and "pcie" not in name:
        return False
    return True


def environment(gpu_id: str, force: bool = False) -> dict:
    """Check CUDA, the device name and vllm; return the environment record."""
    from planner.io import catalog

    spec = catalog.gpu(gpu_id)
    try:
        import torch
    except ImportError as err:
        raise CalibrationError("torch is not installed: pip install '.[calibrate]'") from err
    if not torch.cuda.is_available():
        raise CalibrationError("CUDA is not available: calibrate needs an NVIDIA GPU")
    props = torch.cuda.get_device_properties(0)
    if not gpu_matches(gpu_id, props.name) and not force:
        raise CalibrationError(
            f"--gpu {gpu_id} ({spec.name}) does not match the device '{props.name}'; use --force to override"
        )
    try:
        import vllm
    except ImportError as err:
        raise CalibrationError(f"vllm is not importable ({err}): pip install '.[calibrate]'") from err
    driver = ""
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:
        pass
    return {
        "type": "env", "gpu": gpu_id, "device_name": props.name, "total_memory_bytes": props.total_memory,
        "compute_capability": f"{props.major}.{props.minor}", "driver": driver, "cuda": torch.version.cuda,
        "torch": torch.__version__, "vllm_version": vllm.__version__, "python": sys.version.split()[0],
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "forced": bool(force),
        "command": " ".join(sys.argv),
    }


def _stream(cmd: list[str], log_path: Path, env: dict, timeout_s: float) -> tuple[int, str]:
    """Run ``cmd``, echo its progress lines, keep the whole output in ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    text = []
    with open(log_path, "a", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                cwd=str(REPO), bufsize=1)
        t_end = time.time() + timeout_s
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            text.append(line)
            if line.startswith(("[", "ENGINE_READY", "GEMM", "HBM")) or "GPU KV cache size" in line \
                    or "Error" in line or "error" in line[:80]:
                print(line.rstrip()[:240], flush=True)
            if time.time() > t_end:
                proc.kill()
                print("child process killed: time limit", flush=True)
                break
        rc = proc.wait()
    return rc, "".join(text)


#: ``planner calibrate``'s default plan: one engine per kernel family a user plans for (dense bf16, MoE,
#: fp8 W8A8 weights, weight-only int4, an fp8 KV cache), each a quick grid.  Measured on an H200 (vLLM
#: 0.26): see calibration/data/README.md for the minutes each part took.
DEFAULT_PLAN: tuple[str, ...] = (
    "mistral-7b-v0.3+mixed+serve",  # dense bf16 GEMM + attention, mixed steps; served: this host's launch floor
    "qwen3-30b-a3b+serve",          # MoE: fused Triton MoE, 128 experts top-8; served: its floor and JIT compile
    "llama-3.1-8b@fp8",        # fp8 W8A8 weights (CUTLASS scaled_mm)
    "llama-3.1-8b@int4",       # weight-only int4 (GPTQ layout, Machete/Marlin kernels)
    "mistral-7b-v0.3:fp8",     # fp8 KV cache
)


def parse_job(entry: str, default_kvs: tuple[str, ...] = ("auto",)) -> list[dict]:
    """``MODEL[:KV][@WEIGHTS][+mixed][+serve]`` -> one job per KV dtype: {'model', 'kv', 'weights', 'mixed',
    'serve'}.

    ``llama-3.1-8b@fp8`` = fp8 weights; ``mistral-7b-v0.3:fp8`` = fp8 KV cache; ``+mixed`` adds the
    mixed prefill/decode step probes; ``+serve`` then serves the model with every engine step timed
    (:mod:`calibration.serve_floor`: the served eager launch floor of this host)."""
    from planner.dtypes import WEIGHT_BITS

    text, *flags = entry.split("+")
    if any(f not in ("mixed", "serve") for f in flags):
        raise CalibrationError(f"--model: expected MODEL[:KV][@WEIGHTS][+mixed][+serve], got {entry!r}")
    mixed, serve = "mixed" in flags, "serve" in flags
    text, _, weights = text.partition("@")
    model, _, kv = text.partition(":")
    weights = weights or "bf16"
    if not model:
        raise CalibrationError(f"--model: expected MODEL[:KV][@WEIGHTS][+mixed], got {entry!r}")
    try:  # the id becomes part of log file names: a catalog id, never a path
        safe_name_part(model, "--model")
    except ValueError as err:
        raise CalibrationError(str(err)) from None
    if weights not in WEIGHT_BITS or weights in ("nf4", "fp16"):
        raise CalibrationError(f"--model: weights '{weights}' in {entry!r} cannot be probed; "
                               "use bf16, fp8, int8, int4 or mxfp4 (a model published in MXFP4)")
    if kv and kv not in ("auto", "bf16", "fp8"):
        raise CalibrationError(f"--model: KV dtype '{kv}' in {entry!r}: use auto or fp8")
    return [{"model": model, "kv": k, "weights": weights, "mixed": mixed, "serve": serve}
            for k in ((kv,) if kv else default_kvs)]


def run_model(model_id: str, raw: Path, *, gpu_id: str, role: str, quick: bool, resume: bool,
              kv_cache_dtype: str = "auto", time_budget_s: float = 1e9, extra: dict | None = None,
              weight_dtype: str = "bf16", mixed: bool = False) -> dict:
    """One engine in a child process; its start-up log parsed into an 'engine_log' record."""
    raw = Path(raw).resolve()  # the child runs from the repository root: every path it gets is absolute
    work_dir = tempfile.mkdtemp(prefix="planner-cal-")
    try:
        return _run_model_in(work_dir, model_id, raw, gpu_id=gpu_id, role=role, quick=quick, resume=resume,
                             kv_cache_dtype=kv_cache_dtype, time_budget_s=time_budget_s, extra=extra,
                             weight_dtype=weight_dtype, mixed=mixed)
    finally:  # the generated config.json and args.json: nothing left in /tmp, whatever happened
        shutil.rmtree(work_dir, ignore_errors=True)


def _child_env() -> dict:
    """An engine child's environment (probes, ``+serve``): this repo first on the path, multicast off, unbuffered."""
    env = dict(os.environ)
    env.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
    env.update(MULTICAST_OFF)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def _run_model_in(work_dir: str, model_id: str, raw: Path, *, gpu_id: str, role: str, quick: bool, resume: bool,
                  kv_cache_dtype: str, time_budget_s: float, extra: dict | None, weight_dtype: str,
                  mixed: bool) -> dict:
    args = {"out": str(raw), "model": model_id, "gpu": gpu_id, "role": role, "quick": quick, "resume": resume,
            "kv_cache_dtype": kv_cache_dtype, "time_budget_s": time_budget_s, "weight_dtype": weight_dtype,
            "mixed": mixed, "work_dir": work_dir}
    args.update(extra or {})
    args_path = Path(work_dir) / "args.json"
    args_path.write_text(json.dumps(args))
    env = _child_env()
    wtag = "" if weight_dtype == "bf16" else f".w{weight_dtype}"
    tptag = "" if int((extra or {}).get("tensor_parallel") or 1) == 1 else f".tp{(extra or {})['tensor_parallel']}"
    log_path = raw.with_suffix("").parent / f"{raw.stem}.{model_id}{wtag}.{kv_cache_dtype}{tptag}.{role}.log"
    t0 = time.perf_counter()
    rc, text = _stream([sys.executable, "-m", "calibration.probes", str(args_path)], log_path, env,
                       timeout_s=time_budget_s + 400)
    terms = parse_engine_log(text)
    rec = {"type": "engine_log", "model": model_id, "gpu": gpu_id, "kv_cache_dtype": kv_cache_dtype,
           "weight_dtype": weight_dtype, "tensor_parallel": int((extra or {}).get("tensor_parallel") or 1),
           "role": role, "returncode": rc, "elapsed_s": time.perf_counter() - t0, "log_file": log_path.name,
           **terms}
    append_record(raw, rec)
    return rec


def remaining_points(records: list[dict], model_id: str, kv: str, role: str, quick: bool, tp: int = 1,
                     weight_dtype: str = "bf16", mixed: bool = False) -> int:
    """Planned probe points of one engine not yet measured (for --resume); -1 if it never started."""
    from calibration.probes import PROBE_MAX_MODEL_LEN, PROBE_MAX_NUM_BATCHED_TOKENS, plan_points, size_limits
    from calibration.records import done_keys, probe_key
    from calibration.variants import probe_model
    from planner.specs import Deployment

    def whole(r, key, default):
        v = r.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else default

    eng = [r for r in records if r.get("type") == "engine" and r.get("model") == model_id
           and r.get("kv_cache_dtype") == kv and r.get("role") == role and whole(r, "tensor_parallel", 1) == tp
           and r.get("weight_dtype", "bf16") == weight_dtype]
    if not eng:
        return -1
    e = eng[-1]  # a damaged number in the engine record falls back to the probe plan's defaults
    cap = whole(e, "num_gpu_blocks", 0) * whole(e, "block_size", Deployment.default("block_size_tokens")) or None
    done = done_keys(records)
    pts = plan_points(quick=quick, kv_capacity_tokens=cap, role=role, mixed=mixed,
                      max_model_len=whole(e, "max_model_len", PROBE_MAX_MODEL_LEN),
                      max_num_batched_tokens=whole(e, "max_num_batched_tokens", PROBE_MAX_NUM_BATCHED_TOKENS),
                      **size_limits(probe_model(model_id)))
    base = {"gpu": e.get("gpu"), "model": model_id, "kv_cache_dtype": kv, "tensor_parallel": tp, "role": role,
            "weight_dtype": weight_dtype}
    return sum(1 for p in pts if probe_key(dict(base, **p)) not in done)


@contextlib.contextmanager
def out_lock(out_dir: Path):
    """One ``planner calibrate`` writer per --out folder: an exclusive ``flock`` on ``out_dir/.calibrate.lock``
    for the whole run (the kernel releases it when the process ends, so a killed run leaves no stale lock).
    A second writer gets a CalibrationError naming the holder at once, before it measures anything."""
    import fcntl

    f = open(out_dir / LOCK_NAME, "a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = lock_holder(f)
            raise CalibrationError(f"--out: another planner calibrate ({holder}) is writing {out_dir}; wait for it "
                                   "to finish or give another --out") from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}, since {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}\n")
        f.flush()
        yield
    finally:
        f.close()


def campaign_files(out_dir: Path, gpu_id: str, vllm_version: str, raw_name: str | None = None) -> list[Path]:
    """The raw files of one campaign in ``out_dir``: ``<gpu>-vllm<version>-<day>.jsonl`` of every day (and
    ``raw_name``), oldest first."""
    files = sorted(out_dir.glob(f"{gpu_id}-vllm{vllm_version}-*.jsonl"))
    if raw_name and (out_dir / raw_name).is_file() and out_dir / raw_name not in files:
        files.append(out_dir / raw_name)
    return files


def _campaign_records(files: list[Path]) -> list[dict]:
    return [r for f in files for r in read_records(f)]


def fit_campaign(files: list[Path], dest: Path, *, command: str = "", overwrite: bool = False):
    """Fit on every raw file of the campaign, each probe point once (:func:`first_of_each_point`; the
    repeats are listed in the profile's ``excluded_records``), and write the profile to ``dest``: a new
    file, or the existing one only with ``overwrite``.  Returns (path, profile)."""
    from calibration.fit import fit_profile, profile_to_yaml, read_raw, with_residuals
    from calibration.serve_floor import traced_engines, with_traces

    records, unreadable = read_raw(files)
    records, repeated = first_of_each_point(records)
    prof, points = fit_profile(records, source=",".join(p.name for p in files), excluded=unreadable + repeated)
    traces = traced_engines(dest.parent)  # +serve jobs: the served eager terms of this host, in last
    if traces:
        prof = with_residuals(with_traces(prof, traces), [p for p in points if p.role == "fit"],
                              [p for p in points if p.role != "fit"])
    files = list(files) + [folder / "serve_bench.jsonl" for folder, _ in traces]
    provenance = {"raw_data": [str(p.relative_to(dest.parent)) if p.is_relative_to(dest.parent) else p.name
                               for p in files], "raw_data_sha256": [sha256_file(p) for p in files]}
    prof = prof.model_copy(update={**provenance, "command": command or prof.command})
    text = profile_to_yaml(prof)
    try:
        with open(dest, "w" if overwrite else "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        raise CalibrationError(f"--out: {dest} appeared while measuring; not overwritten "
                               "(pass --overwrite-profile to replace it)") from None
    return dest, prof


def calibrate(gpu_id: str, models: list[str], out_dir: Path, *, validate_models: list[str] = (),
              fp8_kv_models: list[str] = (), fit_kv_dtypes: tuple[str, ...] = ("auto",), quick: bool = False, resume: bool = False, force: bool = False,
              raw_name: str | None = None, time_budget_s: float = 300.0, fit: bool = True,
              microbench: bool = True, tensor_parallel: int = 1, model_dirs: dict[str, str] | None = None,
              overwrite_profile: bool = False) -> dict:
    """Run the whole calibration; returns a summary dict (raw file, profile path, elapsed time).

    Everything is written in ``out_dir`` (resolved against the caller's working directory): the raw JSONL,
    the logs and the fitted profile ``<gpu>-vllm-<version>.yaml`` -- never ``calibration/profiles/`` (copy the
    profile there to make it the GPU's default).  One calibrate at a time per ``out_dir`` (:func:`out_lock`).
    ``resume`` continues the campaign's newest raw file and skips every point measured in any of its files."""
    t0 = time.perf_counter()
    out_dir = Path(out_dir).expanduser().resolve()  # before any child starts: they run from the repo root
    env_rec = environment(gpu_id, force)
    if tensor_parallel > 1:
        import torch

        if torch.cuda.device_count() < tensor_parallel:
            raise CalibrationError(f"--tensor-parallel {tensor_parallel} needs {tensor_parallel} GPUs; "
                                   f"this machine has {torch.cuda.device_count()}")
        env_rec["tensor_parallel"] = tensor_parallel
    version = str(env_rec["vllm_version"])
    try:  # file names from validated ids only: the catalog GPU id, vLLM's version, a plain --raw-name
        safe_name_part(gpu_id, "--gpu")
        safe_name_part(version, "vllm version", SAFE_VERSION)
        if raw_name is not None:
            safe_name_part(raw_name, "--raw-name", SAFE_VERSION)
    except ValueError as err:
        raise CalibrationError(str(err)) from None
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CalibrationError(f"--out: cannot create {out_dir}: {err.strerror or err}") from None
    with out_lock(out_dir):
        return _calibrate_locked(t0, env_rec, gpu_id, version, models, out_dir, validate_models=validate_models,
                                 fp8_kv_models=fp8_kv_models, fit_kv_dtypes=fit_kv_dtypes, quick=quick,
                                 resume=resume, raw_name=raw_name, time_budget_s=time_budget_s, fit=fit,
                                 microbench=microbench, tensor_parallel=tensor_parallel, model_dirs=model_dirs,
                                 overwrite_profile=overwrite_profile)


def _calibrate_locked(t0, env_rec, gpu_id, version, models, out_dir: Path, *, validate_models, fp8_kv_models,
                      fit_kv_dtypes, quick, resume, raw_name, time_budget_s, fit, microbench, tensor_parallel,
                      model_dirs, overwrite_profile) -> dict:
    existing = campaign_files(out_dir, gpu_id, version, raw_name)
    if existing and not resume:
        raise CalibrationError(f"--out: {out_dir} already holds raw records of {gpu_id} with vLLM {version} "
                               f"({', '.join(p.name for p in existing)}): pass --resume to continue them, "
                               "or give another --out")
    profile_dest = out_dir / f"{gpu_id}-vllm-{version}.yaml"
    if fit and profile_dest.exists() and not overwrite_profile:
        raise CalibrationError(f"--out: {profile_dest} exists: pass --overwrite-profile to replace it, "
                               "or give another --out")
    day = env_rec["date"][:10]
    raw = out_dir / raw_name if raw_name else (existing[-1] if existing else
                                               out_dir / f"{gpu_id}-vllm{version}-{day}.jsonl")
    files = existing if raw in existing else existing + [raw]
    append_record(raw, env_rec)
    jobs = []
    for entry in models:  # MODEL[:KV][@WEIGHTS][+mixed]; no :KV = every fit KV dtype
        jobs += [dict(j, role="fit") for j in parse_job(entry, tuple(fit_kv_dtypes))]
    for entry in validate_models:
        jobs += [dict(j, role="validate") for j in parse_job(entry)]
    jobs += [{"model": m, "kv": "fp8", "weights": "bf16", "mixed": False, "role": "validate"} for m in fp8_kv_models]
    if microbench:  # the GEMM/HBM micro-benchmark, and the fused-MoE kernel bench when a job runs its kernel
        kernel_benches(raw, out_dir, gpu_id, _campaign_records(files), jobs, _stream)
    per_job = max(60.0, time_budget_s / max(1, len(jobs)))
    for j in jobs:
        what = f"{j['model']} ({j['role']}, weights {j['weights']}, kv {j['kv']}{', mixed' if j['mixed'] else ''})"
        if resume and remaining_points(_campaign_records(files), j["model"], j["kv"], j["role"], quick,
                                       tensor_parallel, j["weights"], j["mixed"]) == 0:
            print(f"== {what}: every point already measured", flush=True)
            continue
        print(f"== {what}", flush=True)
        t_job = time.perf_counter()
        run_model(j["model"], raw, gpu_id=gpu_id, role=j["role"], quick=quick, resume=resume, kv_cache_dtype=j["kv"],
                  time_budget_s=per_job, weight_dtype=j["weights"], mixed=j["mixed"],
                  extra={"tensor_parallel": tensor_parallel, "model_dir": (model_dirs or {}).get(j["model"]),
                         "done_files": [str(f) for f in files]})
        append_record(raw, {"type": "job_time", "model": j["model"], "role": j["role"], "weight_dtype": j["weights"],
                            "kv_cache_dtype": j["kv"], "mixed": j["mixed"], "tensor_parallel": tensor_parallel,
                            "elapsed_s": time.perf_counter() - t_job})
        if j["serve"]:
            from calibration.serve_floor import serve_trace

            serve_trace(j, out_dir, raw, gpu_id=gpu_id, tensor_parallel=tensor_parallel, run=_stream, env=_child_env())
    summary = {"raw": str(raw), "raw_files": [str(f) for f in files], "elapsed_s": time.perf_counter() - t0}
    if fit:
        profile_path, profile = fit_campaign(files, profile_dest, command=env_rec["command"],
                                             overwrite=overwrite_profile)
        summary["profile"] = str(profile_path)
        summary["residuals"] = {k: v.model_dump() for k, v in profile.residuals.items()}
    print(f"calibration took {summary['elapsed_s']:.0f} s of GPU time (engine start-ups included)", flush=True)
    return summary


def parse_model_dirs(entries: list[str]) -> dict[str, str]:
    """['mistral-7b-v0.3=/models/Mistral-7B-v0.3', ...] -> {id: path}; each path must hold a config.json."""
    out = {}
    for e in entries:
        model_id, sep, path = e.partition("=")
        if not sep or not model_id or not path:
            raise CalibrationError(f"--model-dir: expected ID=PATH, got {e!r}")
        if not (Path(path) / "config.json").is_file():
            raise CalibrationError(f"--model-dir: {path} has no config.json")
        out[model_id] = path
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m calibration.run", description=__doc__)
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--model", action="append", default=[],
                    help="fit on MODEL[:KV][@WEIGHTS][+mixed][+serve] (e.g. llama-3.1-8b@fp8, mistral-7b-v0.3:fp8); "
                         "'default' = the default family plan; 'none' = no fit engine")
    ap.add_argument("--validate-model", action="append", default=[])
    ap.add_argument("--fp8-kv-model", action="append", default=[], help="validate with an fp8 KV cache")
    ap.add_argument("--fit-kv-dtype", action="append", default=[], help="KV dtypes of the fit engines (auto, fp8)")
    ap.add_argument("--out", default="calibration/data")
    ap.add_argument("--raw-name")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--overwrite-profile", action="store_true", help="replace the profile already in --out")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--no-fit", action="store_true")
    ap.add_argument("--no-microbench", action="store_true")
    ap.add_argument("--tensor-parallel", type=int, default=1, help="vLLM tensor_parallel_size of every engine")
    ap.add_argument("--model-dir", action="append", default=[],
                    help="ID=PATH: a local model directory with real weights for that catalog model")
    ap.add_argument("--time-budget-s", type=float, default=300.0)
    ns = ap.parse_args(argv)
    try:
        models = [x for m in (ns.model or ["default"]) if m != "none"
                  for x in (DEFAULT_PLAN if m == "default" else (m,))]
        parse_model_dirs(ns.model_dir)
        s = calibrate(ns.gpu, models, Path(ns.out), validate_models=ns.validate_model,
                      fp8_kv_models=ns.fp8_kv_model, fit_kv_dtypes=tuple(ns.fit_kv_dtype or ["auto"]),
                      quick=ns.quick, resume=ns.resume, force=ns.force,
                      raw_name=ns.raw_name, time_budget_s=ns.time_budget_s, fit=not ns.no_fit,
                      microbench=not ns.no_microbench, tensor_parallel=ns.tensor_parallel,
                      model_dirs=parse_model_dirs(ns.model_dir), overwrite_profile=ns.overwrite_profile)
    except CalibrationError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(s, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
