"""A replica across nodes as a KubeRay ``RayCluster`` (ray.io/v1): TP inside each node, PP across nodes on Ray.

vLLM's multi-node recipe (``examples/online_serving/run_cluster.sh``): every node joins one Ray cluster
(``ray start --head`` on one, ``ray start --address=<head>`` on the others), then ``vllm serve … 
--tensor-parallel-size <GPUs per node> --pipeline-parallel-size <nodes> --distributed-executor-backend ray``
runs on the head.  On Kubernetes, KubeRay (github.com/ray-project/kuberay) runs that cluster: the head pod
is one of the replica's nodes (its GPUs count), ``nodes − 1`` worker pods are the others.

The head overrides KubeRay's generated command (annotation ``ray.io/overwrite-container-cmd: "true"``, as in
KubeRay's ``ray-cluster.overwrite-command.yaml`` sample): it starts Ray with KubeRay's own generated
``$KUBERAY_GEN_RAY_START_CMD`` in the background, waits until the cluster has all ``TP × PP`` GPUs, then
``exec``s the exact ``vllm serve`` command.  ``VLLM_HOST_IP`` is each pod's IP (vLLM's multi-node guide).
The CRD schema the objects are validated against is vendored in ``tests/data/schemas``.
"""

from __future__ import annotations

import shlex

from planner.deploy.command import ServeCommand
from planner.deploy.k8s import (
    DEFAULT_IMAGE,
    HF_CACHE_PATH,
    env_list,
    gpu_resources,
    gpu_tolerations,
    health_probes,
    hf_token_env,
    labels,
    metadata,
    pod_ip_env,
    pod_volumes,
)
from planner.deploy.layout import ProbeTimes, ReplicaLayout
from planner.quoting import shell_line, shell_word

OVERWRITE_CMD = "ray.io/overwrite-container-cmd"
RAY_PORTS = [{"name": "gcs-server", "containerPort": 6379}, {"name": "dashboard", "containerPort": 8265},
             {"name": "client", "containerPort": 10001}]


def head_script(cmd: ServeCommand, gpus: int) -> str:
    """The head container's shell script: Ray in the background, wait for ``gpus`` GPUs, exec vllm serve."""
    wait = ('import ray, sys; ray.init(address="auto", logging_level="ERROR"); '
            f'sys.exit(0 if ray.cluster_resources().get("GPU", 0) >= {gpus} else 1)')
    return "\n".join([
        "ulimit -n 65536",
        "$KUBERAY_GEN_RAY_START_CMD &",
        f"until python3 -c {shell_word(wait)}; do echo waiting for {gpus} GPUs in the Ray cluster; sleep 5; done",
        "exec " + shell_line(cmd.argv),
    ])


def serve_argv_of_head(script: str) -> list[str]:
    """The ``vllm serve`` argv a head script execs (everything after its three set-up lines: a quoted
    argument may hold a newline) — what tests parse."""
    last = script.strip().split("\n", 3)[-1]
    argv = shlex.split(last)
    return argv[1:] if argv and argv[0] == "exec" else argv


def _pod(container: dict, lab: dict, layout: ReplicaLayout, checkpoint_bytes: float) -> dict:
    return {"metadata": {"labels": dict(lab)},
            "spec": {"containers": [container], "volumes": pod_volumes(layout.gpus_per_node, checkpoint_bytes),
                     "tolerations": gpu_tolerations()}}


def raycluster(name: str, namespace: str | None, instance: str, cmd: ServeCommand, layout: ReplicaLayout,
               probes: ProbeTimes, checkpoint_bytes: float, *, image: str = DEFAULT_IMAGE,
               annotations: dict | None = None) -> dict:
    """One replica: a RayCluster whose head runs ``cmd`` (which must carry ``--distributed-executor-backend ray``)."""
    if "--distributed-executor-backend" not in cmd.argv:
        raise ValueError("serve command: a replica across nodes needs --distributed-executor-backend ray")
    g = layout.gpus_per_node
    env = env_list(cmd.env) + [hf_token_env(), pod_ip_env("VLLM_HOST_IP")]
    mounts = [{"name": "model-cache", "mountPath": HF_CACHE_PATH}] + (
        [{"name": "dshm", "mountPath": "/dev/shm"}] if g > 1 else [])
    port = int(cmd.argv[cmd.argv.index("--port") + 1])
    probes_head = health_probes(probes)
    head = {
        "name": "ray-head",
        "image": image,
        "command": ["/bin/bash", "-lc", "--"],
        "args": [head_script(cmd, layout.gpus)],
        "env": env,
        "ports": RAY_PORTS + [{"name": "http", "containerPort": port}],
        "resources": gpu_resources(g),
        "volumeMounts": mounts,
        "startupProbe": probes_head["startupProbe"],
        "readinessProbe": probes_head["readinessProbe"],
    }
    worker = {
        "name": "ray-worker",
        "image": image,
        "command": ["/bin/bash", "-lc", "--"],
        "args": ["ulimit -n 65536; $KUBERAY_GEN_RAY_START_CMD"],
        "env": env,
        "resources": gpu_resources(g),
        "volumeMounts": mounts,
    }
    md = metadata(name, namespace, labels(instance, "engine"), {OVERWRITE_CMD: "true", **(annotations or {})})
    workers = layout.nodes - 1
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": md,
        "spec": {
            "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"},
                              "template": _pod(head, labels(instance, "engine"), layout, checkpoint_bytes)},
            "workerGroupSpecs": [{
                "groupName": "gpu-nodes",
                "replicas": workers, "minReplicas": workers, "maxReplicas": workers,
                "rayStartParams": {},
                "template": _pod(worker, labels(instance, "ray-worker"), layout, checkpoint_bytes),
            }],
        },
    }


def head_service_selector(cluster_name: str) -> dict:
    """Pods KubeRay labels as the head of ``cluster_name``."""
    return {"ray.io/cluster": cluster_name, "ray.io/node-type": "head"}
