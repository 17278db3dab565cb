"""Plain Kubernetes objects for vLLM engines (Deployment, Service, the pod they share) as dicts, and YAML text.

Choices, each for a reason:

* GPUs: ``nvidia.com/gpu`` requested = limited = the replica's GPUs (the NVIDIA device plugin's resource);
  a toleration for the ``nvidia.com/gpu`` taint GPU node pools commonly carry.
* CPU and host memory requests: :data:`CPU_PER_GPU` cores per GPU (one engine worker process per GPU, plus
  the API server, tokenizer/detokenizer and NCCL proxy threads) and :data:`HOST_MEMORY_BASE_GIB` +
  :data:`HOST_MEMORY_PER_GPU_GIB` per GPU; no CPU/memory limit, so loading a checkpoint is never OOM-killed.
* ``/dev/shm``: a memory-backed emptyDir of :data:`SHM_SIZE` when the replica has more than one GPU (NCCL
  and vLLM's multiprocessing executor exchange through shared memory; a container's default is 64 MiB).
  20 GiB is the vLLM production-stack chart's default ``shmSize``.
* NVLink multicast off (``NCCL_NVLS_ENABLE=0`` …) for more than one GPU: the env our own TP 2 boots ran with.
* ``/health`` probes timed from the model size (:func:`planner.deploy.layout.probe_times`): a startup probe
  that allows 3 × the boot estimate, then readiness every 10 s and liveness every 30 s.
* Rolling updates with ``maxSurge: 0``: a rollout never needs GPUs beyond the fleet's.
* Model cache: an emptyDir sized to the checkpoint + 10 % at ``/root/.cache/huggingface`` (replace it with
  a PersistentVolumeClaim to keep weights across restarts); ``HF_TOKEN`` from the optional Secret
  ``hf-token`` (key ``token``) for gated models.
"""

from __future__ import annotations

import math
import re

import yaml

from planner.deploy.command import DEFAULT_PORT, ServeCommand
from planner.deploy.layout import ProbeTimes
from planner.quoting import comment_lines
from planner.units import GiB

#: vLLM's own OpenAI-server image at the version whose flags the planner writes.
DEFAULT_IMAGE = "vllm/vllm-openai:v0.26.0"
GPU_RESOURCE = "nvidia.com/gpu"
CPU_PER_GPU = 4
HOST_MEMORY_BASE_GIB = 16
HOST_MEMORY_PER_GPU_GIB = 8
SHM_SIZE = "20Gi"
HF_TOKEN_SECRET = "hf-token"
HF_CACHE_PATH = "/root/.cache/huggingface"
#: Label/annotation prefix for what the planner writes.
PREFIX = "llm-capacity-planner"


def k8s_name(text: str, max_len: int = 63) -> str:
    """A DNS-1035 label (what Service names must be): lowercase letters, digits and '-', starting with a
    letter, at most ``max_len`` characters.  'Llama-3.1-8B' → 'llama-3-1-8b'."""
    s = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    s = re.sub(r"-+", "-", s)
    if not s or not s[0].isalpha():
        s = "m-" + s
    return s[:max_len].rstrip("-")


def labels(instance: str, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": instance,
            "app.kubernetes.io/component": component, "app.kubernetes.io/managed-by": PREFIX}


def selector(instance: str, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/instance": instance, "app.kubernetes.io/component": component}


def metadata(name: str, namespace: str | None, lab: dict, annotations: dict | None = None) -> dict:
    md: dict = {"name": name}
    if namespace:
        md["namespace"] = namespace
    md["labels"] = dict(lab)
    if annotations:
        md["annotations"] = {k: str(v) for k, v in annotations.items()}
    return md


def env_list(env: dict[str, str]) -> list[dict]:
    return [{"name": k, "value": str(v)} for k, v in sorted(env.items())]


def pod_ip_env(name: str) -> dict:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def hf_token_env() -> dict:
    return {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": HF_TOKEN_SECRET, "key": "token",
                                                                "optional": True}}}


def http_probe(path: str, port: str | int, *, initial_delay_s: int, period_s: int, failure_threshold: int) -> dict:
    return {"httpGet": {"path": path, "port": port}, "initialDelaySeconds": int(initial_delay_s),
            "periodSeconds": int(period_s), "timeoutSeconds": 5, "failureThreshold": int(failure_threshold)}


def health_probes(t: ProbeTimes, port: str | int = "http", path: str = "/health") -> dict:
    """startupProbe / readinessProbe / livenessProbe on ``path`` (vLLM's readiness endpoint is /health)."""
    return {
        "startupProbe": http_probe(path, port, initial_delay_s=t.startup_initial_delay_s, period_s=t.startup_period_s,
                                   failure_threshold=t.startup_failure_threshold),
        "readinessProbe": http_probe(path, port, initial_delay_s=t.readiness_initial_delay_s, period_s=10,
                                     failure_threshold=3),
        "livenessProbe": http_probe(path, port, initial_delay_s=t.liveness_initial_delay_s, period_s=30,
                                    failure_threshold=4),
    }


def gpu_resources(gpus: int) -> dict:
    return {"requests": {"cpu": str(CPU_PER_GPU * gpus), "memory": f"{HOST_MEMORY_BASE_GIB + HOST_MEMORY_PER_GPU_GIB * gpus}Gi",
                         GPU_RESOURCE: str(gpus)},
            "limits": {GPU_RESOURCE: str(gpus)}}


def cache_size(checkpoint_bytes: float) -> str:
    return f"{max(1, math.ceil(checkpoint_bytes * 1.1 / GiB))}Gi"


def engine_container(cmd: ServeCommand, gpus: int, probes: ProbeTimes, *, image: str = DEFAULT_IMAGE,
                     name: str = "vllm", extra_env: list[dict] = (), extra_ports: list[dict] = ()) -> dict:
    """The vLLM container: ``command`` + ``args`` are exactly ``cmd.argv`` (``vllm serve …``)."""
    port = int(cmd.argv[cmd.argv.index("--port") + 1]) if "--port" in cmd.argv else DEFAULT_PORT
    c = {
        "name": name,
        "image": image,
        "command": list(cmd.argv[:2]),
        "args": list(cmd.argv[2:]),
        "env": env_list(cmd.env) + [hf_token_env()] + list(extra_env),
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}] + list(extra_ports),
        "resources": gpu_resources(gpus),
        "volumeMounts": [{"name": "model-cache", "mountPath": HF_CACHE_PATH}],
        **health_probes(probes),
    }
    if gpus > 1:
        c["volumeMounts"].append({"name": "dshm", "mountPath": "/dev/shm"})
    return c


def pod_volumes(gpus: int, checkpoint_bytes: float) -> list[dict]:
    vols = [{"name": "model-cache", "emptyDir": {"sizeLimit": cache_size(checkpoint_bytes)}}]
    if gpus > 1:
        vols.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}})
    return vols


def gpu_tolerations() -> list[dict]:
    return [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]


def deployment(name: str, namespace: str | None, instance: str, component: str, replicas: int, container: dict,
               gpus: int, checkpoint_bytes: float, probes: ProbeTimes, annotations: dict | None = None) -> dict:
    """A Deployment of ``replicas`` single-node engine pods."""
    lab = labels(instance, component)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(name, namespace, lab, annotations),
        "spec": {
            "replicas": int(replicas),
            "selector": {"matchLabels": selector(instance, component)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "progressDeadlineSeconds": max(600, probes.startup_budget_s + 120),
            "template": {
                "metadata": {"labels": dict(lab)},
                "spec": {
                    "containers": [container],
                    "volumes": pod_volumes(gpus, checkpoint_bytes),
                    "tolerations": gpu_tolerations(),
                    "terminationGracePeriodSeconds": 60,
                },
            },
        },
    }


def service(name: str, namespace: str | None, instance: str, component: str, port: int = DEFAULT_PORT,
            sel: dict | None = None) -> dict:
    """A ClusterIP Service on ``port`` → the pods' ``http`` port."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(name, namespace, labels(instance, component)),
        "spec": {"type": "ClusterIP", "selector": sel or selector(instance, component),
                 "ports": [{"name": "http", "port": int(port), "targetPort": "http", "protocol": "TCP"}]},
    }


class _Dumper(yaml.SafeDumper):
    """Safe YAML without anchors/aliases (a list shared by two containers is written twice) and with
    multi-line strings (shell scripts) as literal blocks."""

    def ignore_aliases(self, data):
        return True


def _str(dumper: yaml.SafeDumper, data: str):
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _str)


def dump_yaml(doc: dict) -> str:
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=1000)


def to_yaml(docs: list[dict], header: list[str] = ()) -> str:
    """YAML documents separated by ``---``, after ``# `` comment lines (escaped to one line each)."""
    return comment_lines(header) + "---\n".join(dump_yaml(d) for d in docs)
