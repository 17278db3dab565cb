"""Values for the vLLM production-stack Helm chart (github.com/vllm-project/production-stack, ``helm/``).

Why this stack: it is the vLLM project's own reference deployment — one chart that runs ``vllm serve`` per
model with a replica count and puts a router (round-robin, session or prefix-aware) in front, configured by
a plain values file with a published JSON schema (``helm/values.schema.json``, vendored in
``tests/data/schemas`` with its commit, so every values file we write is validated offline).  llm-d brings
its own scheduler, gateway (Gateway API inference extension) and operator stack; its value lies in KV-aware
scheduling and disaggregation across a cluster, more than one plan's fleet needs to start.

How the chart builds the engine command (``helm/templates/deployment-vllm-multi.yaml`` at commit a6c01db,
2026-08-05): ``vllm serve <modelURL> --host 0.0.0.0 --port <containerPort>``, then
``--enable-prefix-caching``/``--no-enable-prefix-caching``, ``--max-model-len``, ``--tensor-parallel-size``,
``--max-num-seqs``, ``--gpu_memory_utilization`` from ``vllmConfig``, then ``vllmConfig.extraArgs``.
:func:`production_stack_values` puts every other flag of our command in ``extraArgs``, so the chart runs
the same command as ``serve.sh`` (``tests/test_deploy_manifests.py`` renders it and compares).

Replicas spanning nodes (TP × PP beyond a node) are written as KubeRay RayClusters (:mod:`planner.deploy.ray`);
for those the values turn the chart's engines off and point its router at the RayClusters' head Services
(``serviceDiscovery: static``).
"""

from __future__ import annotations

from planner.deploy.command import ServeCommand
from planner.deploy.k8s import CPU_PER_GPU, HF_TOKEN_SECRET, HOST_MEMORY_BASE_GIB, HOST_MEMORY_PER_GPU_GIB, SHM_SIZE
from planner.deploy.layout import ProbeTimes

CHART = "vllm-project/production-stack"
CHART_COMMIT = "a6c01db05f65f556235413ba8dbcfb0c01132fff"
CHART_DATE = "2026-08-05"
ENGINE_REPOSITORY, ENGINE_TAG = "vllm/vllm-openai", "v0.26.0"

#: Flags the chart writes itself from vllmConfig (value-taking ones map to their vllmConfig key).
_FROM_VLLM_CONFIG = {"--max-model-len": "maxModelLen", "--tensor-parallel-size": "tensorParallelSize",
                     "--max-num-seqs": "maxNumSeqs", "--gpu-memory-utilization": "gpuMemoryUtilization"}
_INT_KEYS = {"maxModelLen", "tensorParallelSize", "maxNumSeqs"}


def chart_vllm_config(cmd: ServeCommand) -> dict:
    """``vllmConfig`` for ``cmd``: the keys the chart turns into flags, the rest of the arguments in
    ``extraArgs`` (the model, ``--port`` and the prefix-caching flag come from other values)."""
    args = cmd.serve_args()[1:]  # drop the positional model: it is modelURL
    cfg: dict = {"enablePrefixCaching": "--enable-prefix-caching" in args}
    extra: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a in _FROM_VLLM_CONFIG:
            key = _FROM_VLLM_CONFIG[a]
            cfg[key] = int(args[i + 1]) if key in _INT_KEYS else float(args[i + 1])
            i += 2
        elif a == "--port":
            i += 2
        elif a in ("--enable-prefix-caching", "--no-enable-prefix-caching"):
            i += 1
        else:
            extra.append(a)
            i += 1
    cfg["extraArgs"] = extra
    return cfg


def _probe(path: str, port: int, initial_delay_s: int, period_s: int, failure_threshold: int) -> dict:
    return {"initialDelaySeconds": int(initial_delay_s), "periodSeconds": int(period_s),
            "failureThreshold": int(failure_threshold), "httpGet": {"path": path, "port": int(port)}}


def production_stack_values(*, name: str, cmd: ServeCommand, replicas: int, gpus: int, probes: ProbeTimes,
                            cache_size: str, prefix_caching: bool, port: int = 8000) -> dict:
    """Values for one model served by ``replicas`` single-node engines of ``gpus`` GPUs each."""
    spec = {
        "name": name,
        "repository": ENGINE_REPOSITORY,
        "tag": ENGINE_TAG,
        "modelURL": cmd.argv[2],
        "replicaCount": int(replicas),
        "requestCPU": CPU_PER_GPU * gpus,
        "requestMemory": f"{HOST_MEMORY_BASE_GIB + HOST_MEMORY_PER_GPU_GIB * gpus}Gi",
        "requestGPU": int(gpus),
        "pvcStorage": cache_size,
        "shmSize": SHM_SIZE,
        "vllmConfig": chart_vllm_config(cmd),
        "env": [{"name": k, "value": v} for k, v in sorted(cmd.env.items())],
        "hf_token": {"secretName": HF_TOKEN_SECRET, "secretKey": "token"},
    }
    return {
        "servingEngineSpec": {
            "enableEngine": True,
            "containerPort": int(port),
            "modelSpec": [spec],
            "startupProbe": _probe("/health", port, probes.startup_initial_delay_s, probes.startup_period_s,
                                   probes.startup_failure_threshold),
            "readinessProbe": _probe("/health", port, probes.readiness_initial_delay_s, 10, 3),
            "livenessProbe": _probe("/health", port, probes.liveness_initial_delay_s, 30, 4),
        },
        "routerSpec": {
            "enableRouter": True,
            "replicaCount": 1,
            "serviceDiscovery": "k8s",
            # requests that share a prompt prefix go to the engine that already caches it
            "routingLogic": "prefixaware" if prefix_caching else "roundrobin",
        },
    }


def production_stack_router_values(*, backends: list[str], model_name: str) -> dict:
    """Values that run only the chart's router, in front of engines deployed elsewhere (the RayClusters of
    replicas spanning nodes): ``serviceDiscovery: static`` with one URL per engine."""
    return {
        "servingEngineSpec": {"enableEngine": False, "modelSpec": []},
        "routerSpec": {
            "enableRouter": True,
            "replicaCount": 1,
            "serviceDiscovery": "static",
            "staticBackends": ",".join(backends),
            "staticModels": ",".join([model_name] * len(backends)),
            "routingLogic": "roundrobin",
        },
    }
