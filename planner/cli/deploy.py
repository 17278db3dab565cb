"""``planner deploy``: a plan as a ``vllm serve`` command known to boot, and manifests for the fleet.

Registered by :mod:`planner.cli.app`; the work is :func:`planner.deploy.deployment_bundle`.
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path
from typing import Annotated

import typer

from planner.cli.common import FLAG_OF_FIELD, JsonOpt, build, cli_errors, error_exit, finite
from planner.cli.options import (
    DEFAULT_OUTPUT_TOKENS,
    DEFAULT_PROMPT_TOKENS,
    STEADY,
    GpuMemoryUtilizationOpt,
    GpuOpt,
    KvDtypeOpt,
    MaxNumBatchedTokensOpt,
    MaxNumSeqsOpt,
    ModelOpt,
    OutputTokensOpt,
    ProfileOpt,
    PromptTokensOpt,
    RateOpt,
    ThinkTimeOpt,
    UsersOpt,
    make_dir,
    tpot_help,
    ttft_help,
)
from planner.units import GBIT_PER_S, MS, fmt_gb, fmt_gib, fmt_ms, fmt_usd

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@cli_errors
def deploy_cmd(
    model: ModelOpt,
    gpu: GpuOpt,
    tp: Annotated[int | None, typer.Option("--tp", min=1, help="Tensor-parallel GPUs per replica (default: chosen "
                                           "with --pp: the smallest layout that starts and meets the SLO).")] = None,
    pp: Annotated[int | None, typer.Option("--pp", min=1, help="Pipeline stages per replica (nodes, for a replica "
                                           "larger than a node).")] = None,
    weight_dtype: Annotated[str | None, typer.Option("--weight-dtype", help="bf16, fp16, fp8, int8, int4, nf4, mxfp4 "
                                                     "(default: the checkpoint's own dtype).")] = None,
    kv_dtype: KvDtypeOpt = "bf16",
    prompt_tokens: PromptTokensOpt = DEFAULT_PROMPT_TOKENS,
    output_tokens: OutputTokensOpt = DEFAULT_OUTPUT_TOKENS,
    max_model_len: Annotated[int | None, typer.Option("--max-model-len", min=1, help="vLLM --max-model-len (default: "
                                                      "--prompt-tokens + --output-tokens).")] = None,
    ttft_slo_ms: Annotated[float | None, typer.Option("--ttft-slo-ms", callback=finite("--ttft-slo-ms"),
                                                      help=ttft_help(STEADY))] = None,
    tpot_slo_ms: Annotated[float | None, typer.Option("--tpot-slo-ms", callback=finite("--tpot-slo-ms"),
                                                      help=tpot_help(STEADY))] = None,
    rate: RateOpt = None,
    users: UsersOpt = None,
    think_time_s: ThinkTimeOpt = 0.0,
    gpu_memory_utilization: GpuMemoryUtilizationOpt = 0.92,
    max_num_batched_tokens: MaxNumBatchedTokensOpt = None,
    max_num_seqs: MaxNumSeqsOpt = None,
    profile: ProfileOpt = "auto",
    prefix_caching: Annotated[bool, typer.Option("--prefix-caching/--no-prefix-caching",
                                                 help="vLLM automatic prefix caching (off: --no-enable-prefix-caching)."
                                                 )] = True,
    spec_preset: Annotated[str | None, typer.Option("--spec-preset", help="Speculative decoding: draft-model, eagle "
                                                    "or medusa (needs --spec-model).")] = None,
    spec_model: Annotated[str | None, typer.Option("--spec-model", help="Draft model / EAGLE or Medusa head to load "
                                                   "(Hugging Face repository or path).")] = None,
    model_path: Annotated[str | None, typer.Option("--model-path", help="What vllm serve loads (default: the "
                                                   "catalog's Hugging Face repository).")] = None,
    namespace: Annotated[str | None, typer.Option("--namespace", help="Kubernetes namespace of every object "
                                                  "(default: none written: kubectl's current one).")] = None,
    name: Annotated[str | None, typer.Option("--name", help="Kubernetes name of the deployment (default: "
                                             "vllm-<model>).")] = None,
    disaggregated: Annotated[bool, typer.Option("--disaggregated", help="Also plan disaggregated prefill/decode "
                                                "pools (needs --rate) and write k8s-disaggregated.yaml.")] = False,
    network_gbps: Annotated[float, typer.Option("--network-gbps", callback=finite("--network-gbps"),
                                                help="Inter-node bandwidth per GPU for the KV hand-off, Gb/s.")] = 400.0,
    out: Annotated[Path | None, typer.Option("--out", help="Write the files into this directory.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """One replica's exact `vllm serve` command with its predicted KV pool, max concurrency and latency, and
    manifests for the fleet.  A plan that would not start is refused (exit 1, one line `error: <flag>: <reason>`; bad input exits 2).

    Files written with --out DIR:

    serve.sh: the one-replica command (env + vllm serve, vLLM 0.26 flags), predictions in its comments.

    predictions.json: every prediction and the full sizing report (what --json prints, without file texts).

    k8s-deployment.yaml: Deployment (replicas = the fleet) + Service: nvidia.com/gpu requests, /health
    startup/readiness/liveness probes timed from the model size, /dev/shm for TP, NVLink multicast off.

    k8s-raycluster.yaml (instead, when a replica spans nodes): one KubeRay RayCluster per replica, TP
    inside a node and PP across nodes on Ray (--distributed-executor-backend ray), and Services.

    helm-values-production-stack.yaml: values for the vLLM production-stack chart (engines + router;
    the router alone in front of RayClusters).

    k8s-disaggregated.yaml (with --disaggregated): prefill and decode pools with NixlConnector and the
    proxy from vLLM's examples; a planning option, not measured.

    README.md: what each file is, the predictions, how to apply them.
    """
    from planner.io import catalog
    from planner.cli.plan import check_demand
    from planner.deploy import DeployRefused, deployment_bundle
    from planner.specs import Deployment, Workload

    if namespace is not None and not _DNS_LABEL.match(namespace):
        raise error_exit("--namespace", f"'{namespace}' is not a DNS-1123 label (lowercase letters, digits, '-')")
    m = catalog.model(model)
    g = catalog.gpu(gpu)
    auto = tp is None and pp is None
    t, p = tp or 1, pp or 1
    base = build(functools.partial(Deployment.for_gpu, g), {
        "num_gpus": t * p, "tensor_parallel": t, "pipeline_parallel": p,
        "weight_dtype": weight_dtype or m.native_dtype, "kv_cache_dtype": kv_dtype,
        "gpu_memory_utilization": gpu_memory_utilization,
        **({"max_num_batched_tokens": max_num_batched_tokens} if max_num_batched_tokens is not None else {}),
        **({"max_num_seqs": max_num_seqs} if max_num_seqs is not None else {}),
    }, "--tp")
    check_demand(rate, users, think_time_s)
    wl = build(Workload, {
        "prompt_tokens": prompt_tokens, "output_tokens": output_tokens, "concurrency": users,
        "request_rate_per_s": rate,
        "ttft_slo_s": ttft_slo_ms * MS if ttft_slo_ms is not None else None,
        "tpot_slo_s": tpot_slo_ms * MS if tpot_slo_ms is not None else None,
    }, "--prompt-tokens")
    prof, mode_line = catalog.resolve_profile(profile, g.id, field="--profile")

    def bundle(workload):
        try:
            return deployment_bundle(m, g, base, workload, profile=prof, calibration_note=mode_line, auto_layout=auto,
                                     max_model_len=max_model_len, enable_prefix_caching=prefix_caching,
                                     spec_preset=spec_preset, spec_model=spec_model, model_path=model_path,
                                     namespace=namespace, name=name, disaggregated=disaggregated,
                                     network_bytes_per_s_per_gpu=network_gbps * GBIT_PER_S)
        except DeployRefused as e:  # startup_check names fields (tensor_parallel); say the flag (--tp)
            flag = e.field if e.field.startswith("--") else FLAG_OF_FIELD.get(e.field, "--" + e.field.replace("_", "-"))
            raise error_exit("infeasible", f"{flag}: {e.reason}", code=1) from None

    b = bundle(wl)
    if users is not None and think_time_s and b.report.batch_size:  # users who think: the rate and in flight they make
        from planner.steady_fleet import e2e_s, users_rate_per_s

        e2e = e2e_s(b.report)
        u_rate = users_rate_per_s(users, think_time_s, e2e)
        b = bundle(Workload(**{**wl.model_dump(), "request_rate_per_s": u_rate,
                               "concurrency": max(1, min(users, math.ceil(u_rate * e2e - 1e-9)))}))
    written = b.write(make_dir(out)) if out is not None else []
    if json_out:
        d = b.to_dict()
        d["out_dir"] = str(out) if out is not None else None
        d["file_texts"] = dict(b.files)
        typer.echo(json.dumps(d, indent=2, allow_nan=False, default=str))
        return
    typer.echo(_text(b, out, written))


def _text(b, out: Path | None, written: list[Path]) -> str:
    r, s, f = b.report, b.serve, b.report.fleet
    lines = [
        f"{b.model.name} on {b.gpu.name}: {b.layout.describe()}",
        f"Mode: {b.calibration_note or r.profile_mode}",
        "",
        "One replica:",
        f"  {s.shell()}",
        (f"  KV pool {fmt_gb(s.predicted_kv_pool_bytes_per_gpu, 2)} = {fmt_gib(s.predicted_kv_pool_bytes_per_gpu, 2)} "
         f"per GPU, {s.predicted_kv_capacity_tokens:,} tokens; max concurrency at max_model_len "
         f"{b.max_model_len:,}: {s.predicted_max_concurrency:,} requests"),
        (f"  TTFT {fmt_ms(float(r.ttft.time_s))} idle, {fmt_ms(float(r.slo.ttft_s))} joining the batch; TPOT "
         f"{fmt_ms(float(r.tpot_effective_s))} at batch {r.slo.batch_size:,} (decode step {fmt_ms(float(r.tpot.time_s))})"),
        f"  boot to /health ≈ {b.probes.boot_estimate_s:,.0f} s (startup probe allows {b.probes.startup_budget_s:,} s)",
        (f"Fleet: {f.replicas:,} replica(s) = {f.num_gpus:,} GPUs, {fmt_usd(f.num_gpus * r.price_usd_per_hour)}/hour"
         + (f" for {f.request_rate_per_s:,.3g} req/s" if f.request_rate_per_s else "")
         + (f" and {f.concurrency:,} in flight" if f.concurrency else "")),
    ]
    d = b.disaggregated
    if d is not None:
        dis, col = d.disaggregated, d.colocated
        lines.append(
            f"Disaggregated (not measured): {d.prefill.replicas:,} prefill + {d.decode.replicas:,} decode = "
            f"{dis.gpus:,} GPUs, {fmt_usd(dis.usd_per_hour)}/hour, TTFT {fmt_ms(dis.ttft_s)}, TPOT {fmt_ms(dis.tpot_s)}; "
            f"KV hand-off {fmt_ms(d.kv_network.time_s, 2)} per request | co-located: {col.gpus:,} GPUs, "
            f"{fmt_usd(col.usd_per_hour)}/hour, TTFT {fmt_ms(col.ttft_s)}, TPOT {fmt_ms(col.tpot_s)}")
    if out is not None:
        lines.append(f"Wrote {len(written)} files to {out}: {', '.join(p.name for p in written)}")
    else:
        lines.append(f"Files (write them with --out DIR): {', '.join(sorted(b.files))}")
    lines += [f"  note: {n}" for n in b.notes]
    return "\n".join(lines)
