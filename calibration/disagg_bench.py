"""Boot the 1P1D pair ``planner deploy --disaggregated`` writes (its prefill and decode ``vllm serve`` commands, with
NixlConnector as kv_producer / kv_consumer), the prefill → decode proxy in front, and drive it with
``vllm bench serve`` — the same runs :mod:`calibration.serve_bench` drives a co-located engine with.

    python -m calibration.disagg_bench --model llama-3.1-8b --max-model-len 4096 --out DIR \\
        --prefill-gpu 0 --decode-gpu 1 --run chat10:input=1024,output=128,ratio=0.8,n=200,rate=10

Steps (each writes a record to ``DIR/pd_bench.jsonl`` as it happens; a failure is recorded, the rest goes on):

1. ``nixl``: is the NIXL package importable, which version (vLLM 0.26 stops an engine without it:
   ``RuntimeError: NIXL is not available``).
2. ``deploy`` (one per role): :func:`planner.deploy.deployment_bundle` with ``disaggregated=True`` writes the
   commands; each is run as written with the dummy-weight arguments serve_bench adds (``--load-format dummy``,
   ``--seed``, ``--tokenizer``, the local config folder as the model) and its own ``--port``; the environment
   adds ``CUDA_VISIBLE_DEVICES`` and ``VLLM_NIXL_SIDE_CHANNEL_HOST/PORT`` (one port per engine: both share
   this host).  Every argument is checked against vLLM 0.26.0's option list first.
3. ``boot`` per role: time to /health, the logged KV pool, the block count from /metrics.
4. The proxy (:mod:`calibration.pd_proxy`, vLLM's toy proxy protocol; per-request legs in ``proxy.jsonl``),
   one smoke request through it (``smoke``), then each ``--run`` as one ``vllm bench serve`` against the proxy
   (``bench``: its file, both engines' counters before and after).

Nothing here runs without two GPUs and vLLM; :mod:`planner.serving.disagg_replay` reads what it writes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
import time
import types
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from calibration.probes import MULTICAST_OFF
from calibration.records import append_record, parse_engine_log, scrape
from calibration.serve_bench import Server, _counters, add_bench_args, parse_runs, run_benches

ROLES = ("prefill", "decode")


def nixl_status() -> dict:
    """Whether ``import nixl`` works in this Python (in a child: a broken install must not stop the run)."""
    code = ("import importlib.metadata as m, nixl; from nixl._api import nixl_agent; "
            "print(m.version('nixl'))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    if r.returncode == 0:
        return {"ok": True, "version": r.stdout.strip()}
    return {"ok": False, "error": (r.stderr.strip().splitlines() or ["?"])[-1][:500]}


def pd_commands(model, gpu, dep, workload, max_model_len: int, profile, model_dir: Path, tok_dir: Path,
                ports: dict, seed: int) -> dict:
    """Each role's argv (after ``vllm serve``) and env: the bundle's commands, run on dummy weights."""
    from planner.deploy import deployment_bundle
    from planner.deploy.flags import parse_serve_args

    b = deployment_bundle(model, gpu, dep, workload, profile=profile, auto_layout=False,
                          max_model_len=max_model_len, model_path=str(model_dir), disaggregated=True)
    out = {}
    for role in ROLES:
        c = b.pd_serve[role]
        args = c.serve_args()
        args[args.index("--port") + 1] = str(ports[role])
        args += ["--load-format", "dummy", "--seed", str(seed), "--tokenizer", str(tok_dir)]
        parse_serve_args(args)  # still only vLLM 0.26.0's flags
        out[role] = {"bundle_argv": list(c.argv), "bundle_env": dict(c.env), "serve_args": args,
                     "env": dict(c.env), "port": ports[role]}
    out["bundle"] = b
    return out


def wait_http(url: str, timeout_s: float) -> float:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return time.perf_counter() - t0
        except OSError:  # not up yet
            time.sleep(0.5)
            continue
        time.sleep(0.5)
    raise TimeoutError(f"{url} not answering after {timeout_s:.0f} s")


def _boot_record(role: str, server: Server, boot_s: float, cmd_pred) -> dict:
    log = parse_engine_log(server.log_text())
    cache = scrape(server.get("/metrics")).get("cache_config", {})
    blocks, bs = int(cache.get("num_gpu_blocks", 0) or 0), int(cache.get("block_size", 16) or 16)
    return {"type": "boot", "role": role, "boot_s": boot_s, "num_gpu_blocks": blocks, "block_size": bs,
            "kv_cache_tokens_metrics": blocks * bs, **log,
            "predicted_kv_pool_bytes_per_gpu": cmd_pred.predicted_kv_pool_bytes_per_gpu,
            "predicted_kv_capacity_tokens": cmd_pred.predicted_kv_capacity_tokens,
            "nixl_in_log": "NIXL is available" in server.log_text()}


def main(argv: list[str] | None = None) -> int:
    from planner.specs import Deployment, Workload

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--gpu", default="h200-sxm")
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--gpu-memory-utilization", type=float, default=Deployment.default("gpu_memory_utilization"))
    ap.add_argument("--prefill-gpu", default="0")
    ap.add_argument("--decode-gpu", default="1")
    ap.add_argument("--port", type=int, default=8000, help="the proxy's; the engines take port+100 and port+200")
    ap.add_argument("--side-channel-port", type=int, default=5600, help="prefill's; decode takes the next one")
    add_bench_args(ap)
    ns = ap.parse_args(argv)
    from calibration.hfconfig import write_hf_config
    from calibration.tokenizer import write_tokenizer
    from planner.io import catalog

    t_start = time.perf_counter()
    ns.out.mkdir(parents=True, exist_ok=True)
    records = ns.out / "pd_bench.jsonl"
    runs = parse_runs(ns.run)
    nixl = nixl_status()
    append_record(records, {"type": "nixl", **nixl})
    print(f"NIXL {nixl}", flush=True)
    model, gpu = catalog.model(ns.model), catalog.gpu(ns.gpu)
    dep = Deployment.for_gpu(gpu, num_gpus=1, tensor_parallel=1, gpu_memory_utilization=ns.gpu_memory_utilization)
    first = runs[0] if runs else {"input": 1024, "output": 128, "rate": 10}
    wl = Workload(prompt_tokens=int(first["input"]), output_tokens=int(first["output"]),
                  request_rate_per_s=max([r.get("rate", 0) for r in runs] + [1.0]))
    profile = catalog.profile_for(gpu.id, transfer=True)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"disagg-bench-{model.id}-{ns.port}"
    model_dir = write_hf_config(model, work, "bf16")
    tok_dir = write_tokenizer(work / "tokenizer", model.vocab_size)
    ports = {"prefill": ns.port + 100, "decode": ns.port + 200}
    cmds = pd_commands(model, gpu, dep, wl, ns.max_model_len, profile, model_dir, tok_dir, ports, ns.seed)
    bundle = cmds.pop("bundle")
    gpus = {"prefill": ns.prefill_gpu, "decode": ns.decode_gpu}
    servers: dict[str, Server] = {}
    proxy = None
    try:
        for k, role in enumerate(ROLES):
            c = cmds[role]
            env_add = {**c["env"], "CUDA_VISIBLE_DEVICES": gpus[role], "VLLM_NIXL_SIDE_CHANNEL_HOST": "127.0.0.1",
                       "VLLM_NIXL_SIDE_CHANNEL_PORT": str(ns.side_channel_port + k)}
            append_record(records, {"type": "deploy", "role": role, "model": model.id, "gpu": gpu.id,
                                    "tensor_parallel": 1, "bundle_argv": c["bundle_argv"],
                                    "bundle_env": c["bundle_env"], "argv": ["vllm", "serve", *c["serve_args"]],
                                    "env_added": env_add, "port": c["port"],
                                    "predicted": bundle.predictions["disaggregated"],
                                    "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                                    "command": " ".join(sys.argv)})
            print(f"DEPLOY {role}: {' '.join(c['serve_args'])}", flush=True)
            servers[role] = Server(c["serve_args"], {**os.environ, **MULTICAST_OFF, **env_add},
                                   ns.out / f"serve-{role}.log", c["port"])
        for role in ROLES:  # both boot at once
            try:
                boot_s = servers[role].wait_ready(ns.boot_timeout_s)
                append_record(records, _boot_record(role, servers[role], boot_s, bundle.pd_serve[role]))
                print(f"BOOT {role} ok in {boot_s:.0f} s", flush=True)
            except Exception as err:  # noqa: BLE001 - record why (e.g. NIXL is not available) and stop
                append_record(records, {"type": "boot_failed", "role": role, "nixl": nixl,
                                        "error": f"{type(err).__name__}: {err}"[:3000]})
                print(f"BOOT {role} FAILED: {err}", flush=True)
                return 0
        proxy_log = ns.out / "proxy.jsonl"
        proxy = subprocess.Popen([sys.executable, "-m", "calibration.pd_proxy", "--port", str(ns.port),
                                  "--prefill", f"http://127.0.0.1:{ports['prefill']}",
                                  "--decode", f"http://127.0.0.1:{ports['decode']}", "--log", str(proxy_log)],
                                 cwd=str(REPO), stdout=open(ns.out / "proxy.log", "w"),  # noqa: SIM115 - the proxy's
                                 stderr=subprocess.STDOUT)
        wait_http(f"http://127.0.0.1:{ns.port}/healthcheck", 60)
        front = types.SimpleNamespace(port=ns.port, url=lambda p: f"http://127.0.0.1:{ns.port}{p}")
        try:  # one request through proxy, prefill and decode: a refusal is recorded with its reason
            r = Server.post(front, "/v1/completions", {"model": model.id, "prompt": "w5 w6 w7 w8", "max_tokens": 16,
                                                       "ignore_eos": True, "temperature": 0.0})
            append_record(records, {"type": "smoke", "usage": r.get("usage"), "text": str(r)[:500]})
        except Exception as err:  # noqa: BLE001
            append_record(records, {"type": "smoke", "error": f"{type(err).__name__}: {err}"[:2000]})
            print(f"SMOKE through the proxy refused: {err}", flush=True)
        run_benches(front, runs, model.id, model_dir, ns.out, records, ns.seed, tok_dir, t_start, ns.budget_s,
                    lambda: {r: _counters(scrape(servers[r].get("/metrics"))) for r in ROLES})
    except Exception as err:  # noqa: BLE001
        append_record(records, {"type": "error", "run": "setup", "error": f"{type(err).__name__}: {err}"[:3000]})
        print(f"FAILED: {err}", flush=True)
    finally:
        if proxy is not None:
            proxy.kill()
        for s in servers.values():
            s.stop()
    return 0


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    os._exit(rc)
