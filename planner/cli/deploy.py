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

from planner.cli.common import FLAG_OF_FIELD, JsonOpt, build, cli_errors, emit_json, error_exit, finite
from planner.cli.flags import plan_flags
from planner.cli.options import make_dir
from planner.cli.size import fleet_json
from planner.report import LIMIT_TEXT
from planner.units import GBIT_PER_S, MS, fmt_gb, fmt_gib, fmt_ms, fmt_usd

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@cli_errors
@plan_flags
def deploy_cmd(
    flags,
    max_model_len: Annotated[int | None, typer.Option("--max-model-len", min=1, help="vLLM --max-model-len (default: "
                                                      "the workload's prompt + output tokens).")] = None,
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
    from planner.cli.plan import infeasible_reason, plan_from_flags
    from planner.deploy import DeployRefused, deployment_bundle
    from planner.fleet_eval import operating_point
    from planner.specs import Workload

    if namespace is not None and not _DNS_LABEL.match(namespace):
        raise error_exit("--namespace", f"'{namespace}' is not a DNS-1123 label (lowercase letters, digits, '-')")
    mml = {"max_model_len": max_model_len} if max_model_len is not None else {}
    fp = plan_from_flags(flags, **mml)  # the fleet engine: layout and replicas, as `planner size` answers
    if fp.best is None:
        raise error_exit("infeasible", infeasible_reason(fp.fleet), code=1)
    best = fp.best
    wl = build(Workload, {"prompt_tokens": flags.prompt_tokens, "output_tokens": flags.output_tokens,
                          "request_rate_per_s": best.demand_rate_per_s, "ttft_slo_s": fp.fleet.question.ttft_slo_s,
                          "tpot_slo_s": fp.fleet.question.tpot_slo_s}, "--prompt-tokens")
    try:
        b = deployment_bundle(fp.model, fp.gpu, fp.deployment, wl, profile=fp.profile, calibration_note=fp.mode_line,
                              auto_layout=False, max_model_len=max_model_len,
                              enable_prefix_caching=flags.prefix_caching,
                              spec_preset=spec_preset, spec_model=spec_model, model_path=model_path,
                              namespace=namespace, name=name, disaggregated=disaggregated,
                              network_bytes_per_s_per_gpu=network_gbps * GBIT_PER_S, replicas=best.replicas,
                              operating=operating_point(fp.fleet.question, best))
    except DeployRefused as e:  # startup_check names fields (tensor_parallel); say the flag (--tp)
        flag = e.field if e.field.startswith("--") else FLAG_OF_FIELD.get(e.field, "--" + e.field.replace("_", "-"))
        raise error_exit("infeasible", f"{flag}: {e.reason}", code=1) from None
    written = b.write(make_dir(out)) if out is not None else []
    if json_out:
        d = b.to_dict()
        d["out_dir"] = str(out) if out is not None else None
        d["file_texts"] = dict(b.files)
        d.update(fleet_json(fp))
        emit_json(d)
        return
    typer.echo("\n".join(fp.fleet.lines()) + "\n\n" + _text(b, out, written))


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
         f"{fmt_ms(float(r.tpot_effective_s))} at batch {r.slo.batch_size:,}, limited by "
         f"{LIMIT_TEXT.get(r.slo.binding, r.slo.binding)} (decode step {fmt_ms(float(r.tpot.time_s))})"),
        *([f"  at the fleet's operating point (serving simulator): {b.operating.sentence()}"]
          if b.operating is not None else []),
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
