"""The human-readable files of a deployment bundle: ``serve.sh`` and the bundle's ``README.md``."""

from __future__ import annotations

from planner.deploy.command import ServeCommand
from planner.deploy.disagg_k8s import PROXY_SCRIPT, PROXY_SOURCE
from planner.deploy.helm import CHART, CHART_COMMIT, CHART_DATE
from planner.deploy.layout import ReplicaLayout
from planner.quoting import comment_lines, md_code_block, md_text
from planner.report import LIMIT_TEXT, SizingReport
from planner.specs import GpuSpec, ModelSpec
from planner.units import GBIT_PER_S, fmt_gb, fmt_gib, fmt_ms, fmt_usd


def serve_script(model: ModelSpec, gpu: GpuSpec, layout: ReplicaLayout, cmd: ServeCommand, report: SizingReport,
                 max_model_len: int, operating=None) -> str:
    """``serve.sh``: comment lines with the predictions, then one line: ``[ENV=… ]vllm serve …``."""
    comments = [
        f"{model.name} on {gpu.name}: one replica, {layout.describe()}.",
        (f"Predicted KV pool: {fmt_gb(cmd.predicted_kv_pool_bytes_per_gpu, 2)} = "
         f"{fmt_gib(cmd.predicted_kv_pool_bytes_per_gpu, 2)} per GPU, {cmd.predicted_kv_capacity_tokens:,} tokens; "
         f"max concurrency at max_model_len {max_model_len:,}: {cmd.predicted_max_concurrency:,} requests."),
        (f"Predicted TTFT {fmt_ms(float(report.ttft.time_s))} (idle), TPOT {fmt_ms(float(report.tpot_effective_s))} "
         f"at batch {report.slo.batch_size:,} ({report.profile_mode} model)."),
    ]
    if operating is not None:
        comments.append(f"At the fleet's operating point (serving simulator): {operating.sentence()}.")
    if layout.multi_node:
        comments.append(f"Runs on the Ray head once all {layout.nodes} nodes have joined one Ray cluster "
                        "(ray start --head / ray start --address=<head>:6379); k8s-raycluster.yaml does that.")
    # every outside string (names) only in comment lines, escaped to one line each; the command is quoted
    return "#!/bin/sh\n" + comment_lines(comments) + cmd.shell() + "\n"


def _row(label: str, value: str) -> str:
    return f"| {label} | {value} |"


def bundle_readme(bundle) -> str:
    """README.md of a :class:`planner.deploy.bundle.DeployBundle`: what each file is, the predictions, how to apply."""
    b, r, s, lay = bundle, bundle.report, bundle.serve, bundle.layout
    f = r.fleet
    w = r.workload
    target = ", ".join(x for x in (f"{w.request_rate_per_s:g} requests/s" if w.request_rate_per_s else "",
                                   f"{w.concurrency:,} in flight" if w.concurrency else "") if x) or "one replica"
    out = [
        f"# {md_text(b.model.name)} on {md_text(b.gpu.name)}: deployment bundle",
        "",
        f"Written by `planner deploy` for vLLM 0.26.0. Latency model: {md_text(b.calibration_note or r.profile_mode)}.",
        "",
        "## One replica",
        "",
        lay.describe() + ".",
        "",
        *md_code_block(s.shell(), "sh"),
        "",
        "| predicted | value |",
        "| --- | --- |",
        _row("KV pool per GPU", f"{fmt_gb(s.predicted_kv_pool_bytes_per_gpu, 2)} = "
             f"{fmt_gib(s.predicted_kv_pool_bytes_per_gpu, 2)} ({s.predicted_kv_capacity_tokens:,} tokens)"),
        _row(f"max concurrency at max_model_len {b.max_model_len:,}", f"{s.predicted_max_concurrency:,} requests"),
        _row("TTFT, idle / joining the batch", f"{fmt_ms(float(r.ttft.time_s))} / {fmt_ms(float(r.slo.ttft_s))}"),
        _row(f"TPOT at batch {r.slo.batch_size:,}, limited by {LIMIT_TEXT.get(r.slo.binding, r.slo.binding)}",
             f"{fmt_ms(float(r.tpot_effective_s))} (decode step alone {fmt_ms(float(r.tpot.time_s))})"),
        _row(f"throughput at batch {r.slo.batch_size:,}", f"{float(r.throughput.requests_per_s):,.3f} requests/s, "
             f"{float(r.throughput.output_tokens_per_s):,.0f} output tokens/s"),
        *([_row("at the fleet's operating point (serving simulator)", b.operating.sentence())]
          if b.operating is not None else []),
        _row("boot to /health (estimate)",
             f"{b.probes.boot_estimate_s:,.0f} s; startup probe allows {b.probes.startup_budget_s:,} s"),
        "",
        ("vLLM logs its own numbers at start-up (`Available KV cache memory`, `GPU KV cache size`, "
         "`Maximum concurrency`): compare them with the table."),
        "",
        "## Fleet",
        "",
        (f"For {target}: **{f.replicas:,} replica(s) = {f.num_gpus:,} GPUs**, "
         f"{fmt_usd(f.num_gpus * r.price_usd_per_hour)}/hour at {fmt_usd(r.price_usd_per_hour)}/GPU-hour "
         f"({md_text(r.price_source)}, {md_text(r.price_date)})."),
        "",
        "## Files",
        "",
        "- `serve.sh`: the one-replica command above (run it where the GPUs are).",
        "- `predictions.json`: every number here and the full sizing report, machine-readable.",
    ]
    if "k8s-deployment.yaml" in b.files:
        out.append("- `k8s-deployment.yaml`: a Deployment of the fleet's replicas and its Service "
                   "(`kubectl apply -f k8s-deployment.yaml`).")
    if "k8s-raycluster.yaml" in b.files:
        out.append(f"- `k8s-raycluster.yaml`: one KubeRay RayCluster per replica ({lay.nodes} nodes each: TP inside "
                   "a node, PP across nodes on Ray), a Service per replica's head and one for all of them; needs "
                   "the KubeRay operator (`helm install kuberay-operator kuberay/kuberay-operator`).")
    out.append(f"- `helm-values-production-stack.yaml`: values for the vLLM production-stack chart ({CHART}, "
               f"checked against its values.schema.json at {CHART_COMMIT[:7]}, {CHART_DATE}): "
               "`helm repo add vllm https://vllm-project.github.io/production-stack && "
               "helm install vllm vllm/vllm-stack -f helm-values-production-stack.yaml`"
               + (" (router only, in front of the RayClusters)." if lay.multi_node else "."))
    if "k8s-disaggregated.yaml" in b.files:
        out.append(f"- `k8s-disaggregated.yaml`: prefill and decode pools with NixlConnector and the proxy "
                   f"({PROXY_SOURCE}; first `kubectl create configmap <name>-pd-proxy --from-file={PROXY_SCRIPT}`).")
    out += [
        "",
        ("Before applying: for gated models create the token Secret "
         "(`kubectl create secret generic hf-token --from-literal=token=hf_...`); the model cache is an emptyDir, "
         "swap it for a PersistentVolumeClaim to keep the weights across restarts."),
    ]
    if b.disaggregated is not None:
        out += _disagg_section(b.disaggregated, b.pd_serve)
    if b.notes:
        out += ["", "## Notes", ""] + [f"- {md_text(n)}" for n in b.notes]
    return "\n".join(out) + "\n"


def _disagg_section(d, pd_cmds: dict[str, ServeCommand] | None) -> list[str]:
    dis, col = d.disaggregated, d.colocated
    out = [
        "",
        "## Disaggregated prefill/decode (planning option, NOT measured)",
        "",
        ("No 1P1D pair has run yet: our GPU machine's vLLM 0.26 bundle has no NIXL package (0.26 has no "
         "NCCL-based KV connector); calibration/campaigns/h200x2-disagg.sh measures one. Every number below "
         "is the model's."),
        "",
        "| | co-located | disaggregated |",
        "| --- | --- | --- |",
        f"| replicas | {col.replicas:,} | {d.prefill.replicas:,} prefill + {d.decode.replicas:,} decode |",
        f"| GPUs | {col.gpus:,} | {dis.gpus:,} |",
        f"| $/hour | {fmt_usd(col.usd_per_hour)} | {fmt_usd(dis.usd_per_hour)} |",
        f"| TTFT | {fmt_ms(col.ttft_s)} | {fmt_ms(dis.ttft_s)} |",
        f"| TPOT | {fmt_ms(col.tpot_s)} | {fmt_ms(dis.tpot_s)} |",
        "",
        (f"KV hand-off per request: {fmt_gb(d.kv_network.bytes_per_request, 3)} from {d.kv_network.sending_gpus} "
         f"GPU(s): {fmt_ms(d.kv_network.time_s, 2)} over the network "
         f"({d.kv_network.bandwidth_bytes_per_s_per_gpu / GBIT_PER_S:,.0f} Gb/s per GPU), "
         f"{fmt_ms(d.kv_nvlink.time_s, 3)} over NVLink within a node. Prefill replicas run "
         f"{d.prefill.utilization:.0%} busy (queue wait {fmt_ms(d.prefill.queue_wait_s)}); decode replicas hold "
         f"{d.decode.batch_per_replica:,} requests at a {fmt_ms(d.decode.step_s)} step at most (the TPOT target); "
         f"at this demand they run {d.decode_operating_batch:,.1f} at a {fmt_ms(d.tpot_s)} step. The decode side "
         f"of TTFT is {fmt_ms(d.decode_side_s)}: the hand-off and 3.5 decode steps (vLLM 0.26's asynchronous "
         "scheduling, the pull of the blocks, the recomputed last prompt token)."),
        "",
        (f"Verdict: **{d.verdict}** ({fmt_usd(dis.usd_per_hour)} against {fmt_usd(col.usd_per_hour)} per hour "
         "for the same demand and targets)."),
    ]
    for role, c in (pd_cmds or {}).items():
        out += ["", f"The {role} pool runs:", "", *md_code_block(c.shell(), "sh")]
    if pd_cmds:
        out += ["", ("Each engine also needs `VLLM_NIXL_SIDE_CHANNEL_HOST` = an address the other pool reaches (the "
                     "manifest sets the pod IP) and, where two engines share a host, its own "
                     "`VLLM_NIXL_SIDE_CHANNEL_PORT` (default 5600).")]
    return out
