"""From a plan to a running deployment: :func:`deployment_bundle` → :class:`DeployBundle` (the command, the
predictions beside it, and every file ``planner deploy`` writes).

Use from the dashboard (no file system needed)::

    from planner.io import catalog
    from planner.deploy import DeployRefused, deployment_bundle
    from planner.specs import Deployment, Workload

    gpu = catalog.gpu("h200-sxm")
    profile, note = catalog.resolve_profile("auto", gpu.id)     # calibrated where a profile exists
    base = Deployment.for_gpu(gpu, weight_dtype="bf16")          # TP/PP are chosen unless auto_layout=False
    wl = Workload(prompt_tokens=4096, output_tokens=512, request_rate_per_s=20, ttft_slo_s=0.5, tpot_slo_s=0.05)
    try:
        b = deployment_bundle(catalog.model("llama-3.1-8b"), gpu, base, wl, profile=profile, calibration_note=note)
    except DeployRefused as e:          # the plan would not start (or cannot meet its SLO): show e.field, e.reason
        ...
    st.code(b.serve_command, language="bash")          # one replica's exact `vllm serve`
    st.json(b.predictions)                               # KV pool, max concurrency, TTFT/TPOT, fleet, …
    for name, text in b.files.items():                   # serve.sh, predictions.json, k8s-*.yaml, helm values, README.md
        st.download_button(name, text, file_name=name)

A ValueError is bad input (a field and a reason in its message); :class:`DeployRefused` is a plan that
would not start, with the :func:`planner.startup.startup_check` problem that says why.
"""

from __future__ import annotations

import dataclasses

import json
from dataclasses import dataclass, field
from pathlib import Path

from planner.deploy.vendor import helm_values_for, retarget, runtime_for
from planner.deploy.bundle_text import bundle_readme, serve_script
from planner.deploy.command import ServeCommand, serve_command
from planner.deploy.disagg import NETWORK_BYTES_PER_S_PER_GPU, DisaggPlan, plan_disaggregated
from planner.deploy.disagg_k8s import KV_ROLE, disaggregated_objects, nixl_kv_transfer_config
from planner.deploy.flags import parse_serve_args
from planner.deploy.helm import production_stack_router_values, production_stack_values
from planner.deploy.k8s import (
    DEFAULT_IMAGE,
    PREFIX,
    cache_size,
    deployment,
    engine_container,
    k8s_name,
    service,
    to_yaml,
)
from planner.deploy.layout import (
    ProbeTimes,
    ReplicaLayout,
    boot_estimate_s,
    checkpoint_bytes,
    layout_candidates,
    probe_times,
    replica_layout,
)
from planner.compile_keys import cold_start_note
from planner.deploy.ray import head_service_selector, raycluster
from planner.fleet_eval import OperatingPoint
from planner.startup import StartupProblem, startup_check
from planner.io.files import write_text
from planner.io.jsonl import json_safe
from planner.plan import plan
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.report import SizingReport
from planner.serving.config import prefix_caching_for
from planner.specs import Deployment, GpuSpec, ModelSpec, Workload
from planner.units import fmt_layout

#: The most pods one Kubernetes cluster is built for (kubernetes.io, "Considerations for large clusters": at most
#: 150,000 total pods, 5,000 nodes): a fleet beyond it is not one cluster's manifest.
MAX_CLUSTER_PODS = 150_000
#: Replicas spanning nodes are written one KubeRay RayCluster each (about 6 KB of YAML apiece): at most this many,
#: so k8s-raycluster.yaml stays near 1.5 MB and is written in well under a second.
MAX_RAYCLUSTERS = 256

#: speculative_config "method" per planner preset (vLLM 0.26 SpeculativeConfig; a plain draft model needs none).
SPEC_METHOD = {"draft-model": None, "eagle": "eagle", "medusa": "medusa"}


class DeployRefused(Exception):
    """A plan ``planner deploy`` will not write: it would not start (or serves nothing under its SLO)."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field, self.reason = field, reason


@dataclass(frozen=True)
class DeployBundle:
    """One plan made deployable: the chosen layout, one replica's command, the plan, the fleet, the files."""

    model: ModelSpec
    gpu: GpuSpec
    layout: ReplicaLayout
    serve: ServeCommand  # one replica (co-located); the disaggregated pools add --kv-transfer-config (pd_serve)
    report: SizingReport  # plan() of one replica: memory, TTFT/TPOT, throughput, fleet
    max_model_len: int
    probes: ProbeTimes
    disaggregated: DisaggPlan | None
    calibration_note: str
    notes: tuple[str, ...]
    files: dict[str, str] = field(default_factory=dict)
    pd_serve: dict[str, ServeCommand] | None = None  # with disaggregated: 'prefill' / 'decode' pool commands
    operating: OperatingPoint | None = None  # the fleet engine's: one replica's rate, in flight and tails

    @property
    def serve_command(self) -> str:
        """One replica's exact command line (env + ``vllm serve …``)."""
        return self.serve.shell()

    @property
    def replicas(self) -> int:
        return self.report.fleet.replicas

    @property
    def predictions(self) -> dict:
        """Everything predicted, JSON-safe, units in the names (what predictions.json holds)."""
        r, s, f = self.report, self.serve, self.report.fleet
        return {
            "model_id": self.model.id, "gpu_id": self.gpu.id, "vllm_version": "0.26.0",
            "tensor_parallel": self.layout.tensor_parallel, "pipeline_parallel": self.layout.pipeline_parallel,
            "nodes_per_replica": self.layout.nodes, "gpus_per_node": self.layout.gpus_per_node,
            "gpus_per_replica": self.layout.gpus, "layout_chosen_automatically": self.layout.auto,
            "max_model_len": self.max_model_len,
            "serve_command": s.shell(), "serve_argv": list(s.argv), "serve_env": dict(s.env),
            "kv_pool_bytes_per_gpu": s.predicted_kv_pool_bytes_per_gpu,
            "kv_capacity_tokens": s.predicted_kv_capacity_tokens,
            "max_concurrency_at_max_model_len": s.predicted_max_concurrency,
            "ttft_idle_s": float(r.ttft.time_s), "ttft_under_load_s": float(r.slo.ttft_s),
            "tpot_s": float(r.tpot_effective_s), "decode_step_s": float(r.tpot.time_s),
            "batch_size_per_replica": r.slo.batch_size,
            "requests_per_s_per_replica": float(r.throughput.requests_per_s),
            "output_tokens_per_s_per_replica": float(r.throughput.output_tokens_per_s),
            "replicas": f.replicas, "gpus": f.num_gpus, "usd_per_hour": f.num_gpus * r.price_usd_per_hour,
            "request_rate_per_s": f.request_rate_per_s, "concurrency": f.concurrency,
            "fleet_utilization": None if f.utilization != f.utilization else f.utilization,
            "price_usd_per_gpu_hour": r.price_usd_per_hour, "price_source": r.price_source,
            "boot_estimate_s": self.probes.boot_estimate_s, "startup_probe_budget_s": self.probes.startup_budget_s,
            "calibration_mode": r.profile_mode, "calibration_note": self.calibration_note,
            "operating_point": self.operating.as_dict() if self.operating is not None else None,
            "disaggregated": self._disagg_dict(),
            "notes": list(self.notes), "files": sorted(self.files),
        }

    def _disagg_dict(self) -> dict | None:
        if self.disaggregated is None:
            return None
        cmds = {f"{role}_serve_{k}": v for role, c in (self.pd_serve or {}).items()
                for k, v in (("command", c.shell()), ("argv", list(c.argv)), ("env", dict(c.env)))}
        return {**self.disaggregated.to_dict(), **cmds}

    def to_dict(self) -> dict:
        """:attr:`predictions` plus the full sizing report (``planner size --json``'s fields)."""
        return {**self.predictions, "sizing": self.report.to_dict()}

    def write(self, out_dir: str | Path) -> list[Path]:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, text in sorted(self.files.items()):
            p = out / name
            write_text(p, text, "--out")  # a full disk names the file (SpecError, a ValueError)
            if name.endswith(".sh"):
                p.chmod(0o755)
            paths.append(p)
        return paths


def _spec_config(spec_preset: str | None, spec_model: str | None) -> dict | None:
    if spec_preset is None:
        return None
    from planner.serving import SPEC_PRESETS

    if spec_preset not in SPEC_PRESETS:
        raise ValueError(f"--spec-preset: unknown preset '{spec_preset}'; known: {', '.join(SPEC_PRESETS)}")
    if not spec_model:
        raise ValueError(f"--spec-model: --spec-preset {spec_preset} needs the draft model / head to load "
                         "(a Hugging Face repository or path)")
    cfg = {"model": spec_model, "num_speculative_tokens": SPEC_PRESETS[spec_preset].num_speculative_tokens}
    if SPEC_METHOD[spec_preset]:
        cfg["method"] = SPEC_METHOD[spec_preset]
    return cfg


def _choose(model: ModelSpec, gpu: GpuSpec, base: Deployment, workload: Workload, max_model_len: int,
            profile: CalibrationProfile, auto_layout: bool) -> tuple[ReplicaLayout, Deployment, SizingReport]:
    """The first layout that starts and serves the workload under its SLO (in :func:`layout_candidates`
    order when ``auto_layout``); DeployRefused with the startup or SLO problem otherwise."""
    if max_model_len > model.max_context_tokens or base.max_num_batched_tokens < base.max_num_seqs:
        # no layout fixes these: say so at once instead of after trying every layout
        first = startup_check(model, gpu, base, max_model_len, profile).problems
        p = next(x for x in first if x.field in ("max_model_len", "max_num_batched_tokens"))
        raise DeployRefused(p.field, p.reason)
    layouts = (layout_candidates(model, gpu) if auto_layout
               else [replica_layout(gpu, base.tensor_parallel, base.pipeline_parallel)])
    problem: StartupProblem | None = None
    slo_miss: tuple[ReplicaLayout, SizingReport] | None = None
    tried = None
    for lay in layouts:
        tried = lay
        dep = base.replace(tensor_parallel=lay.tensor_parallel, pipeline_parallel=lay.pipeline_parallel,
                           num_gpus=lay.gpus)
        check = startup_check(model, gpu, dep, max_model_len, profile)
        if not check.ok:
            problem = check.problems[0]
            continue
        report = plan(model, gpu, dep, workload, profile)
        if report.slo.batch_size > 0:
            return lay, dep, report
        slo_miss = slo_miss or (lay, report)
    if slo_miss is not None:
        lay, report = slo_miss
        slo, w = report.slo, workload
        fld = "--tpot-slo-ms" if (w.tpot_slo_s is not None and slo.tpot_batch1_s > w.tpot_slo_s) else "--ttft-slo-ms"
        raise DeployRefused(fld, "; ".join(report.reasons) or "no batch meets the SLO")
    assert problem is not None
    if auto_layout and tried is not None:
        largest = fmt_layout(tried.tensor_parallel, tried.pipeline_parallel, always_pp=True)
        raise DeployRefused(problem.field, f"no layout up to {largest} starts; the largest: {problem.reason}")
    raise DeployRefused(problem.field, problem.reason)


def deployment_bundle(model: ModelSpec, gpu: GpuSpec, base: Deployment, workload: Workload, *,
                      profile: CalibrationProfile = IDEAL_PROFILE, calibration_note: str = "",
                      auto_layout: bool = True, max_model_len: int | None = None,
                      enable_prefix_caching: bool | None = None, spec_preset: str | None = None,
                      spec_model: str | None = None, model_path: str | None = None, namespace: str | None = None,
                      name: str | None = None, image: str = DEFAULT_IMAGE, disaggregated: bool = False,
                      network_bytes_per_s_per_gpu: float = NETWORK_BYTES_PER_S_PER_GPU,
                      replicas: int | None = None, operating: OperatingPoint | None = None) -> DeployBundle:
    """The deployable form of a plan: ``base`` gives dtypes, memory utilisation and scheduler limits; its TP/PP
    are used as given when ``auto_layout`` is False, else the smallest layout that starts and meets the SLO
    is chosen (TP inside a node; beyond a node TP = the node's GPUs, PP = nodes).  ``max_model_len``
    defaults to the workload's prompt + output tokens.  ``replicas``: the fleet engine's replica count
    (:func:`planner.fleet.plan_fleet`), which the manifests deploy instead of the steady-state report's, and
    ``operating`` its operating point (:func:`planner.fleet_eval.operating_point`), shown beside the steady state's
    rows.  A fleet the engine sized is written even where the steady-state formula finds no batch under the
    workload's targets (the replica's rows are then at its limits, and a note says so).
    Nothing is written to disk (see :meth:`DeployBundle.write`)."""
    mml = int(max_model_len) if max_model_len is not None else workload.context_tokens
    enable_prefix_caching = prefix_caching_for(model, enable_prefix_caching)
    if mml < workload.context_tokens:
        raise ValueError(f"--max-model-len: {mml:,} is below the workload's prompt + output = "
                         f"{workload.context_tokens:,} tokens")
    spec_cfg = _spec_config(spec_preset, spec_model)
    notes = []
    try:
        layout, dep, report = _choose(model, gpu, base, workload, mml, profile, auto_layout)
    except DeployRefused as e:
        if replicas is None or e.field not in ("--ttft-slo-ms", "--tpot-slo-ms"):
            raise
        layout, dep, report = _choose(model, gpu, base, workload.model_copy(
            update={"ttft_slo_s": None, "tpot_slo_s": None}), mml, profile, auto_layout)
        notes.append(f"the steady-state formula finds no batch under the targets ({e.reason}) where the fleet "
                     "engine's serving simulation, which sized this fleet, does: the replica's rows are at its "
                     "limits, the operating point is the simulator's")
    if replicas is not None:
        report = dataclasses.replace(report, fleet=dataclasses.replace(
            report.fleet, replicas_for_rate=int(replicas), replicas_for_concurrency=0))
    if disaggregated and layout.multi_node:
        spans = fmt_layout(layout.tensor_parallel, layout.pipeline_parallel, always_pp=True)
        raise ValueError("--disaggregated: replicas spanning nodes are not written for disaggregated serving "
                         f"({spans} > {gpu.max_gpus_per_node} GPUs)")
    common = {"max_model_len": mml, "profile": profile, "enable_prefix_caching": enable_prefix_caching,
              "speculative_config": spec_cfg, "model_path": model_path}
    cmd = serve_command(model, gpu, dep, distributed_executor_backend="ray" if layout.multi_node else None, **common)
    parse_serve_args(cmd.serve_args())  # every flag is one of vLLM 0.26.0's (raises otherwise)
    ckpt = checkpoint_bytes(model)
    probes = probe_times(boot_estimate_s(model, layout))
    # the plan's "the workload needs N replicas; the deployment has 1" is what this bundle deploys
    # the cold-start note of the engine as written (its --max-model-len bounds the warm-up prompts)
    notes += list(cmd.notes) + [cold_start_note(model, dep, profile, mml) if n.startswith("cold start") else n
                                for n in report.notes if not n.startswith("the workload needs")]
    if spec_cfg:
        notes.append("speculative decoding: the predicted TTFT/TPOT are without it (`planner simulate "
                     "--spec-preset` models it), and the draft's weights come out of the KV pool, which the "
                     "predicted pool does not subtract")
    disagg = plan_disaggregated(model, gpu, dep, workload, report, profile,
                                network_bytes_per_s_per_gpu) if disaggregated else None
    _check_manifest_size(workload, layout, report.fleet.replicas, disagg)
    inst = k8s_name(name or f"vllm-{model.id}")
    ann = _annotations(cmd, report)
    files: dict[str, str] = {"serve.sh": serve_script(model, gpu, layout, cmd, report, mml, operating)}
    replicas = report.fleet.replicas
    rt = runtime_for(gpu)  # AMD: amd.com/gpu, the ROCm image, RCCL settings (planner.deploy.vendor)
    if layout.multi_node:
        objs = []
        backends = []
        for i in range(replicas):
            rc = f"{inst}-{i}"
            objs.append(raycluster(rc, namespace, inst, cmd, layout, probes, ckpt, image=image, annotations=ann))
            objs.append(service(rc, namespace, inst, "engine", sel=head_service_selector(rc)))
            backends.append(f"http://{rc}:8000")
        objs.append(service(inst, namespace, inst, "engine"))
        files["k8s-raycluster.yaml"] = to_yaml(retarget(objs, rt), _header(model, gpu, layout, replicas, "KubeRay RayCluster"))
        values = production_stack_router_values(backends=backends, model_name=model.id)
    else:
        c = engine_container(cmd, layout.gpus, probes, image=image)
        objs = [deployment(inst, namespace, inst, "engine", replicas, c, layout.gpus, ckpt, probes, ann),
                service(inst, namespace, inst, "engine")]
        files["k8s-deployment.yaml"] = to_yaml(retarget(objs, rt), _header(model, gpu, layout, replicas, "Deployment + Service"))
        values = production_stack_values(name=inst, cmd=cmd, replicas=replicas, gpus=layout.gpus, probes=probes,
                                         cache_size=cache_size(ckpt), prefix_caching=enable_prefix_caching)
    files["helm-values-production-stack.yaml"] = to_yaml(
        [helm_values_for(values, rt)], _header(model, gpu, layout, replicas, "vLLM production-stack Helm values"))
    pd_cmds = None
    if disagg is not None:
        pd_cmds = {role: serve_command(model, gpu, dep, kv_transfer_config=nixl_kv_transfer_config(role), **common)
                   for role in KV_ROLE}
        for c in pd_cmds.values():
            parse_serve_args(c.serve_args())
        objs = disaggregated_objects(f"{inst}-pd", namespace, pd_cmds, layout.gpus, probes, ckpt,
                                     disagg.prefill.replicas, disagg.decode.replicas, image=image, annotations=ann)
        files["k8s-disaggregated.yaml"] = to_yaml(retarget(objs, rt), _header(model, gpu, layout, disagg.disaggregated.replicas,
                                                                "disaggregated prefill/decode (NixlConnector), NOT measured"))
    files["README.md"] = files["predictions.json"] = ""  # listed in predictions' "files"; filled below
    bundle = DeployBundle(model, gpu, layout, cmd, report, mml, probes, disagg, calibration_note, tuple(notes), files,
                          pd_cmds, operating)
    files["README.md"] = bundle_readme(bundle)
    files["predictions.json"] = json.dumps(json_safe(bundle.to_dict()), indent=2, allow_nan=False, default=str) + "\n"
    return bundle


def _check_manifest_size(workload: Workload, layout: ReplicaLayout, replicas: int, disagg: DisaggPlan | None) -> None:
    """DeployRefused (naming the demand's flag) for a fleet no manifest should hold: more pods than one Kubernetes
    cluster is built for, or more RayClusters than :data:`MAX_RAYCLUSTERS` -- checked before any object is built
    (a rate of 10,000 req/s of DeepSeek-V3 on A100s would otherwise write 5,927 RayClusters, 34 MB)."""
    flag = "--rate" if workload.request_rate_per_s else "--users"
    pools = replicas + (disagg.prefill.replicas + disagg.decode.replicas if disagg is not None else 0)
    pods = pools * layout.nodes
    if pods > MAX_CLUSTER_PODS:
        raise DeployRefused(flag, f"the fleet needs {replicas:,} replicas = {pods:,} pods, more than one Kubernetes "
                                  f"cluster holds ({MAX_CLUSTER_PODS:,} pods); split the demand across clusters")
    if layout.multi_node and replicas > MAX_RAYCLUSTERS:
        raise DeployRefused(flag, f"the fleet needs {replicas:,} replicas spanning {layout.nodes} nodes each; "
                                  f"planner deploy writes one KubeRay RayCluster per replica and at most "
                                  f"{MAX_RAYCLUSTERS}: split the demand into deployments of at most {MAX_RAYCLUSTERS} "
                                  "replicas, or choose a GPU whose node holds a replica")


def _annotations(cmd: ServeCommand, report: SizingReport) -> dict:
    return {f"{PREFIX}/kv-pool-bytes-per-gpu": f"{cmd.predicted_kv_pool_bytes_per_gpu:.0f}",
            f"{PREFIX}/kv-capacity-tokens": str(cmd.predicted_kv_capacity_tokens),
            f"{PREFIX}/max-concurrency": str(cmd.predicted_max_concurrency),
            f"{PREFIX}/ttft-s": f"{float(report.ttft.time_s):.4g}",
            f"{PREFIX}/tpot-s": f"{float(report.tpot_effective_s):.4g}"}


def _header(model: ModelSpec, gpu: GpuSpec, layout: ReplicaLayout, replicas: int, what: str) -> list[str]:
    return [f"{what}: {model.name} on {gpu.name}, {replicas} replica(s) of {layout.describe()}",
            "Written by `planner deploy` (llm-capacity-planner) for vLLM 0.26.0; see README.md beside this file."]
