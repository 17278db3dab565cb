"""Boot the ``vllm serve`` command the planner generates, check its KV pool against the prediction, and
drive real load through its OpenAI-compatible endpoint with the standard tools.

    python -m calibration.serve_bench --model llama-3.1-8b --gpu h200-sxm --max-model-len 4096 \\
        --out DIR --run fixed:input=1024,output=128,n=600,rate=20 --agentic sessions=40,turns=6 --guidellm rate=10

Steps (each writes a record to ``DIR/serve_bench.jsonl`` as it happens; a failure is recorded, the next runs):

1. ``planner.deploy.serve_command`` builds the command (dummy weights: ``--load-format dummy``, a local model
   directory with a config.json, the synthetic tokenizer of :mod:`calibration.tokenizer` in a folder of its
   own as ``--tokenizer``); its startup check and predicted KV pool are recorded (``deploy``).
2. The server starts (``python -m vllm.entrypoints.cli.main serve …``, log kept); ``/health`` is polled.
   The logged ``Available KV cache memory`` / ``GPU KV cache size`` and the exact block count from
   ``/metrics`` (``vllm:cache_config_info``) are compared with the prediction (``boot``), and a few
   completions go through the endpoint (``smoke``).
3. Each ``--run`` is one ``vllm bench serve`` (random dataset, Poisson arrivals, ``--save-detailed``: per
   request start times, TTFT and inter-token latencies) → ``bench-<name>.json`` beside the records.
4. ``--agentic``: a multi-turn client (sessions of turns that continue the previous turn's prompt and
   output after a think time, all behind one shared system prompt) → per-request records with their
   parent turn, and the server's prefix-cache hit counters.
5. ``--guidellm``: GuideLLM's benchmark at a fixed rate → its JSON report (if guidellm is installed).

Nothing here runs without a GPU and vLLM; ``planner.serving.replay`` reads what it writes.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from calibration.probes import MULTICAST_OFF  # noqa: E402
from calibration.records import append_record, host_info, parse_engine_log, scrape  # noqa: E402
from calibration.serve_agentic import agentic  # noqa: E402


def parse_kv(text: str, flag: str) -> dict:
    """'input=1024,output=128,n=600' -> {'input': 1024.0, ...}; the first bare word (before ':') is a name."""
    out: dict = {}
    name, sep, rest = text.partition(":")
    if not sep:
        name, rest = "", text
    if name:
        out["name"] = name
    for part in filter(None, rest.split(",")):
        k, eq, v = part.partition("=")
        if not eq:
            raise SystemExit(f"error: {flag}: expected key=value, got {part!r}")
        try:
            out[k.strip()] = float(v)
        except ValueError:
            raise SystemExit(f"error: {flag}: {k}: not a number: {v!r}") from None
    return out


# ------------------------------------------------------------------------------------- the server


class Server:
    """A ``vllm serve`` process group with its log; ``stop()`` ends every child."""

    def __init__(self, serve_args: list[str], env: dict, log_path: Path, port: int):
        self.log_path = log_path
        self.port = port
        cmd = [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", *serve_args]
        self.cmd = cmd
        self.log = open(log_path, "w", encoding="utf-8")
        # same process group as this script: a `timeout` that kills the script kills the server too
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=str(REPO))
        self.t0 = time.perf_counter()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_ready(self, timeout_s: float) -> float:
        while time.perf_counter() - self.t0 < timeout_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url("/health"), timeout=2) as r:
                    if r.status == 200:
                        return time.perf_counter() - self.t0
            except Exception:  # noqa: BLE001 - not up yet
                pass
            time.sleep(1.0)
        raise TimeoutError(f"vllm serve not healthy after {timeout_s:.0f} s: {self.log_tail()}")

    def log_text(self) -> str:
        self.log.flush()
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def log_tail(self, n: int = 800) -> str:
        return self.log_text()[-n:].replace("\n", " | ")

    def get(self, path: str) -> str:
        with urllib.request.urlopen(self.url(path), timeout=10) as r:
            return r.read().decode()

    def post(self, path: str, body: dict, timeout_s: float = 120) -> dict:
        req = urllib.request.Request(self.url(path), data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as r:
                return json.loads(r.read().decode())
        except urllib.error.HTTPError as err:  # keep the server's reason (vLLM's ErrorResponse message)
            body = err.read().decode("utf-8", errors="replace")[:2000]
            raise RuntimeError(f"HTTP {err.code} from {path}: {body}") from None

    def stop(self) -> None:
        """SIGINT (vLLM shuts its engine down), then SIGKILL for the server and every child left."""
        try:
            import psutil

            children = psutil.Process(self.proc.pid).children(recursive=True)
        except Exception:  # noqa: BLE001 - psutil missing or the server already gone
            children = []
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        for c in children:
            try:
                c.kill()
            except Exception:  # noqa: BLE001
                pass
        self.log.close()


# -------------------------------------------------------------------------------------- the tools


def bench_serve(server: Server, model_dir: Path, out_dir: Path, run: dict, seed: int, timeout_s: float,
                tokenizer_dir: Path | None = None) -> Path:
    """One ``vllm bench serve`` run (random dataset) -> its saved JSON with per-request timings."""
    name = run["name"]
    path = out_dir / f"bench-{name}.json"
    cmd = [sys.executable, "-m", "vllm.entrypoints.cli.main", "bench", "serve", "--backend", "vllm",
           "--host", "127.0.0.1", "--port", str(server.port), "--model", str(model_dir),
           "--served-model-name", run["served_model_name"], "--tokenizer", str(tokenizer_dir or model_dir),
           "--dataset-name", "random", "--random-input-len", str(int(run["input"])),
           "--random-output-len", str(int(run["output"])), "--random-range-ratio", f"{run.get('ratio', 0.0):g}",
           "--random-prefix-len", str(int(run.get("prefix", 0))), "--num-prompts", str(int(run["n"])),
           "--request-rate", f"{run['rate']:g}" if run.get("rate") else "inf",
           "--burstiness", f"{run.get('burstiness', 1.0):g}", "--seed", str(seed), "--ignore-eos",
           "--save-result", "--save-detailed", "--result-dir", str(out_dir), "--result-filename", path.name]
    if run.get("concurrency"):
        cmd += ["--max-concurrency", str(int(run["concurrency"]))]
    log = out_dir / f"bench-{name}.log"
    with open(log, "w", encoding="utf-8") as f:
        f.write(" ".join(cmd) + "\n")
        f.flush()
        subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s, cwd=str(REPO), check=True)
    return path


def guidellm(server: Server, model_dir: Path, out_dir: Path, spec: dict, served: str, timeout_s: float,
             tokenizer_dir: Path | None = None) -> Path:
    """GuideLLM (0.8: ``guidellm run``) at a constant rate with synthetic prompts -> its JSON report
    (per request: ``request_start_time``, ``time_to_first_token_ms``, ``inter_token_latency_ms``, ...)."""
    name = spec.get("name", "run")
    path = out_dir / f"guidellm-{name}.json"
    data = f"kind=synthetic_text,prompt_tokens={int(spec.get('input', 512))},output_tokens={int(spec.get('output', 128))}"
    cmd = [sys.executable, "-m", "guidellm", "run",
           "--backend", f"kind=openai_http,target={server.url('')},model={served},request_format=/v1/completions",
           "--tokenizer", f"kind=huggingface_auto,model={tokenizer_dir or model_dir}", "--data", data,
           "--profile", f"kind={spec.get('profile', 'poisson') if isinstance(spec.get('profile'), str) else 'poisson'},"
                        f"rate={spec.get('rate', 5):g}",
           "--constraint", f"kind=min_requests,count={int(spec.get('n', 200))}",
           "--output", f"kind=json,path={path}", "--disable-console-interactive"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    site = os.environ.get("GUIDELLM_SITE", "")  # guidellm's own wheels, kept off the server's path
    if site:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH", ""), site]))
    log = out_dir / f"guidellm-{name}.log"
    with open(log, "w", encoding="utf-8") as f:
        f.write(" ".join(cmd) + "\n")
        f.flush()
        subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s, env=env, check=True)
    return path


# ------------------------------------------------------------------------------------------- main


def add_bench_args(ap: argparse.ArgumentParser) -> None:
    """The options serve_bench and calibration/disagg_bench.py share."""
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--run", action="append", default=[], help="NAME:input=,output=,n=,rate=[,ratio=,prefix=]")
    ap.add_argument("--boot-timeout-s", type=float, default=420.0)
    ap.add_argument("--budget-s", type=float, default=1e9, help="skip steps that would start after this")
    ap.add_argument("--seed", type=int, default=0)


def parse_runs(texts: list[str]) -> list[dict]:
    runs = [parse_kv(t, "--run") for t in texts]
    for i, r in enumerate(runs):
        r.setdefault("name", f"run{i}")
    return runs


def run_benches(front, runs: list[dict], served: str, model_dir: Path, out: Path, records: Path, seed: int,
                tok_dir: Path, t_start: float, budget_s: float, counters) -> None:
    """Each run as one ``vllm bench serve`` against ``front`` (anything with ``port``), a ``bench`` record with
    ``counters()`` before and after it (or an ``error`` / ``skipped`` record)."""
    for i, run in enumerate(runs):
        run["served_model_name"] = served
        est = run["n"] / run["rate"] + 15 if run.get("rate") else 40
        if time.perf_counter() - t_start + est > budget_s:
            append_record(records, {"type": "skipped", "run": run["name"], "reason": "time budget"})
            continue
        t, wall = time.perf_counter(), time.time()
        before = counters()
        try:
            path = bench_serve(front, model_dir, out, run, seed + i, timeout_s=est + 120, tokenizer_dir=tok_dir)
            append_record(records, {"type": "bench", "run": run["name"], "spec": run, "file": path.name,
                                    "wall_s": time.perf_counter() - t, "wall_start": wall, "wall_end": time.time(),
                                    "metrics_before": before,
                                    "metrics_after": counters()})
            print(f"BENCH {run['name']} done in {time.perf_counter() - t:.0f} s", flush=True)
        except Exception as err:  # noqa: BLE001
            append_record(records, {"type": "error", "run": run["name"], "error": f"{type(err).__name__}: {err}"})
            print(f"BENCH {run['name']} FAILED: {err}", flush=True)


def main(argv: list[str] | None = None) -> int:
    from planner.specs import Deployment

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--gpu", default="h200-sxm")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--weight-dtype", default=None, help="the model's published dtype unless given")
    ap.add_argument("--kv-dtype", default="bf16")
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--gpu-memory-utilization", type=float, default=Deployment.default("gpu_memory_utilization"))
    ap.add_argument("--no-prefix-caching", action="store_true")
    ap.add_argument("--max-num-batched-tokens", type=int, default=Deployment.default("max_num_batched_tokens"),
                    help="the scheduler's token budget per step (vllm serve's default 8,192)")
    ap.add_argument("--max-cudagraph-capture-size", type=int, default=None,
                    help="the largest step (tokens) vLLM replays as a CUDA graph (default: vLLM's, 512)")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--api-server-count", type=int, default=1,
                    help="vllm serve --api-server-count: OpenAI server processes in front of the one engine")
    ap.add_argument("--step-trace", action="store_true",
                    help="time every engine step in the server (calibration/steptrace: OUT/steps.<pid>.jsonl)")
    ap.add_argument("--switch-interval-s", type=float, default=0.0,
                    help="sys.setswitchinterval in the server's processes (0: Python's default, 5 ms)")
    add_bench_args(ap)
    ap.add_argument("--size-sweep", action="append", default=[], help="NAME:from=,step=,n=[,output=]: before the runs, "
                    "one request at a time of from, from + step, ... prompt tokens (a warm-up of step sizes: "
                    "size_sweep); repeatable, in order")
    ap.add_argument("--agentic", default="", help="sessions=,turns=,system=,user=,output=,think=,session_rate=")
    ap.add_argument("--guidellm", default="", help="rate=,n=,input=,output=")
    ns = ap.parse_args(argv)
    from calibration.hfconfig import write_hf_config
    from calibration.hfconfig_families import loaded_weight_dtype
    from calibration.tokenizer import write_tokenizer
    from calibration.variants import probe_model
    from planner.deploy import serve_command
    from planner.io import catalog

    t_start = time.perf_counter()
    ns.out.mkdir(parents=True, exist_ok=True)
    records = ns.out / "serve_bench.jsonl"
    model, gpu = probe_model(ns.model), catalog.gpu(ns.gpu)
    # what the written config.json loads (a native-MXFP4 MoE stays MXFP4 when bf16 is asked): the plan, the command's
    # prediction and the record all say that
    ns.weight_dtype = loaded_weight_dtype(model, ns.weight_dtype or model.native_dtype)
    dep = Deployment.for_gpu(gpu, num_gpus=ns.tp, tensor_parallel=ns.tp, weight_dtype=ns.weight_dtype,
                             kv_cache_dtype=ns.kv_dtype, gpu_memory_utilization=ns.gpu_memory_utilization,
                             max_num_batched_tokens=ns.max_num_batched_tokens,
                             max_cudagraph_capture_tokens=ns.max_cudagraph_capture_size)
    profile = catalog.profile_for(gpu.id, transfer=True)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"serve-bench-{model.id}-{ns.weight_dtype}-{ns.port}"
    model_dir = write_hf_config(model, work, ns.weight_dtype)
    # The tokenizer in its own folder, with no config.json: transformers 5 picks a tokenizer class from the
    # model's config.json (model_type qwen2 -> Qwen2Tokenizer, which ignores the word-level tokenizer.json and
    # turned every prompt into 0-2 tokens in the first Qwen2.5-32B TP 2 runs); without one it reads tokenizer.json.
    tok_dir = write_tokenizer(work / "tokenizer", model.vocab_size)
    cmd = serve_command(model, gpu, dep, max_model_len=ns.max_model_len, profile=profile,
                        enable_prefix_caching=False if ns.no_prefix_caching else None, model_path=str(model_dir),
                        served_model_name=model.id, port=ns.port,
                        extra_args=("--load-format", "dummy", "--seed", str(ns.seed), "--tokenizer", str(tok_dir),
                                    *(("--api-server-count", str(ns.api_server_count)) if ns.api_server_count > 1
                                      else ())))
    append_record(records, {"type": "deploy", "model": model.id, "gpu": gpu.id, "tensor_parallel": ns.tp,
                            "weight_dtype": ns.weight_dtype, "kv_cache_dtype": ns.kv_dtype,
                            "argv": list(cmd.argv), "env": cmd.env, "shell": cmd.shell(),
                            "startup_ok": cmd.check.ok, "startup_problems": cmd.check.reasons(),
                            "predicted_kv_pool_bytes_per_gpu": cmd.predicted_kv_pool_bytes_per_gpu,
                            "predicted_kv_capacity_tokens": cmd.predicted_kv_capacity_tokens,
                            "profile_mode": profile.mode if profile else "ideal",
                            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                            "command": " ".join(sys.argv), "host": host_info()})
    print(f"DEPLOY {cmd.shell()}", flush=True)
    env = {**os.environ, **MULTICAST_OFF, **cmd.env, **trace_env(ns.out, ns.step_trace, ns.switch_interval_s)}
    server = Server(cmd.serve_args(), env, ns.out / "serve.log", ns.port)
    try:
        boot_s = server.wait_ready(ns.boot_timeout_s)
        log = parse_engine_log(server.log_text())
        cache = scrape(server.get("/metrics")).get("cache_config", {})
        blocks = int(cache.get("num_gpu_blocks", 0) or 0)
        bs = int(cache.get("block_size", 16) or 16)
        logged_pool = log.get("kv_available_bytes")
        rec = {"type": "boot", "model": model.id, "boot_s": boot_s, "num_gpu_blocks": blocks, "block_size": bs,
               "kv_cache_tokens_metrics": blocks * bs, **log,
               "predicted_kv_pool_bytes_per_gpu": cmd.predicted_kv_pool_bytes_per_gpu,
               "predicted_kv_capacity_tokens": cmd.predicted_kv_capacity_tokens,
               "kv_pool_error_pct": (100.0 * (cmd.predicted_kv_pool_bytes_per_gpu - logged_pool) / logged_pool
                                     if logged_pool else None),
               "kv_tokens_error_pct": (100.0 * (cmd.predicted_kv_capacity_tokens - blocks * bs) / (blocks * bs)
                                       if blocks else None)}
        append_record(records, rec)
        print(f"BOOT ok in {boot_s:.0f} s: KV pool logged {logged_pool} B, predicted "
              f"{cmd.predicted_kv_pool_bytes_per_gpu:.4g} B ({rec['kv_pool_error_pct']}%), blocks {blocks}", flush=True)
        smoke = []
        for i in range(3):
            t = time.perf_counter()
            try:  # a refused smoke request is recorded with the server's reason; the load runs still go
                r = server.post("/v1/completions", {"model": model.id, "prompt": "w5 w6 w7 w8", "max_tokens": 16,
                                                    "ignore_eos": True, "temperature": 0.0})
                smoke.append({"latency_s": time.perf_counter() - t, "usage": r.get("usage")})
            except Exception as err:  # noqa: BLE001
                smoke.append({"latency_s": time.perf_counter() - t, "error": f"{type(err).__name__}: {err}"[:2000]})
                print(f"SMOKE request refused: {err}", flush=True)
        append_record(records, {"type": "smoke", "requests": smoke})
        for i, text in enumerate(ns.size_sweep):
            size_sweep(server, model.id, model.vocab_size, parse_kv(text, "--size-sweep"), records, ns.seed + i)
        run_benches(server, parse_runs(ns.run), model.id, model_dir, ns.out, records, ns.seed, tok_dir, t_start,
                    ns.budget_s, lambda: _counters(scrape(server.get("/metrics"))))
        if ns.agentic:
            spec = parse_kv(ns.agentic, "--agentic")
            spec.setdefault("name", "agentic")
            try:
                summary = asyncio.run(agentic(server, model.id, model.vocab_size, spec, records, ns.seed))
                append_record(records, {"type": "agentic", "spec": spec, **summary})
                print(f"AGENTIC {summary}", flush=True)
            except Exception as err:  # noqa: BLE001
                append_record(records, {"type": "error", "run": "agentic", "error": f"{type(err).__name__}: {err}",
                                        "traceback": traceback.format_exc()[-1500:]})
                print(f"AGENTIC FAILED: {err}", flush=True)
        if ns.guidellm:
            spec = parse_kv(ns.guidellm, "--guidellm")
            try:
                path = guidellm(server, model_dir, ns.out, spec, model.id, tokenizer_dir=tok_dir,
                                timeout_s=spec.get("n", 200) / spec.get("rate", 5) + 180)
                append_record(records, {"type": "guidellm", "spec": spec, "file": path.name})
                print(f"GUIDELLM done -> {path.name}", flush=True)
            except Exception as err:  # noqa: BLE001
                append_record(records, {"type": "error", "run": "guidellm", "error": f"{type(err).__name__}: {err}"})
                print(f"GUIDELLM FAILED: {err}", flush=True)
    except Exception as err:  # noqa: BLE001 - the boot failed: record why
        append_record(records, {"type": "boot_failed", "model": model.id, "error": f"{type(err).__name__}: {err}"[:2000]})
        print(f"BOOT FAILED: {err}", flush=True)
    finally:
        server.stop()
    return 0


def size_sweep(server: Server, served: str, vocab_size: int, spec: dict, records: Path, seed: int) -> dict:
    """Requests of ``from``, ``from + step``, ... prompt tokens (``n`` of them, ``output`` tokens each, random words
    of the synthetic tokenizer: no prefix-cache hit), one at a time, so each prompt is one engine step of exactly its
    length: with step 32 a warm-up of every 32-token step size the Triton MXFP4 MoE compiles on first use
    (planner.kernel_families.cold_start_note).  Appends a ``size_sweep`` record with each request's latency."""
    import random

    from calibration.tokenizer import SPECIAL, word

    rng = random.Random(seed)
    sizes = [int(spec["from"] + i * spec.get("step", 32)) for i in range(int(spec["n"]))]
    lat, errors, wall = [], [], time.time()
    for n in sizes:
        prompt = " ".join(word(rng.randrange(len(SPECIAL), vocab_size)) for _ in range(n))
        t = time.perf_counter()
        try:
            r = server.post("/v1/completions", {"model": served, "prompt": prompt, "max_tokens": int(spec.get(
                "output", 1)), "ignore_eos": True, "temperature": 0.0})
            lat.append(time.perf_counter() - t)
            if (r.get("usage") or {}).get("prompt_tokens") not in (None, n):
                errors.append(f"{n}: the server counted {r['usage']['prompt_tokens']} prompt tokens")
        except Exception as err:  # noqa: BLE001
            lat.append(None)
            errors.append(f"{n}: {type(err).__name__}: {err}"[:300])
    rec = {"type": "size_sweep", "run": spec.get("name", "sweep"), "spec": spec, "prompt_tokens": sizes,
           "latency_s": lat, "errors": errors, "wall_start": wall, "wall_end": time.time()}
    append_record(records, rec)
    print(f"SIZE SWEEP {len(sizes)} requests in {rec['wall_end'] - wall:.0f} s, {len(errors)} error(s)", flush=True)
    return rec


def trace_env(out: Path, step_trace: bool, switch_interval_s: float) -> dict:
    """The server's extra environment for calibration/steptrace/sitecustomize.py (nothing when neither is asked)."""
    if not step_trace and not switch_interval_s:
        return {}
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "calibration" / "steptrace"),
                                                       os.environ.get("PYTHONPATH", "")]))}
    if step_trace:
        env["PLANNER_STEP_TRACE"] = str(out.resolve() / "steps")
    if switch_interval_s:
        env["PLANNER_SWITCH_INTERVAL_S"] = f"{switch_interval_s:g}"
    return env


#: vLLM's per-request latency histograms whose _sum/_count a bench record keeps: the engine's own split of TTFT into
#: queueing (arrival at the engine core -> first scheduled) and prefill (first scheduled -> first token), which the
#: client's timestamps cannot separate (issue: MoE chat TTFT under-predicted 41-47 %, calibration/data/README.md)
LATENCY_HISTOGRAMS = ("time_to_first_token_seconds", "request_queue_time_seconds", "request_prefill_time_seconds",
                      "request_decode_time_seconds", "request_inference_time_seconds", "e2e_request_latency_seconds",
                      "inter_token_latency_seconds", "request_time_per_output_token_seconds")


def _counters(m: dict) -> dict:
    """The /metrics values a bench record keeps (summed over labels by ``scrape``): prefix-cache, token, success
    and preemption counters, and the _sum/_count of the latency histograms (their buckets are left out: summed
    over ``le`` they mean nothing)."""
    keep = tuple(f"vllm:{h}_{part}" for h in LATENCY_HISTOGRAMS for part in ("sum", "count"))
    return {k: v for k, v in m.items() if k.startswith("vllm:") and (
        "prefix_cache" in k or "tokens_total" in k or "request_success" in k or "preempt" in k or k in keep)}


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    os._exit(rc)
