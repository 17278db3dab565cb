"""Kubernetes objects for disaggregated prefill/decode with vLLM's NixlConnector.

Both pools run the same ``vllm serve`` command with ``--kv-transfer-config
'{"kv_connector":"NixlConnector","kv_role":"kv_both"}'`` (vLLM's NixlConnector usage guide); each pod
advertises its own IP for the NIXL handshake (``VLLM_NIXL_SIDE_CHANNEL_HOST`` = the pod IP, port
:data:`NIXL_SIDE_CHANNEL_PORT`).  In front sits the proxy vLLM's disaggregated examples use,
``tests/v1/kv_connector/nixl_integration/toy_proxy_server.py`` from vLLM's source tree at v0.26.0: it
sends each request to a prefill replica with ``max_tokens = 1`` and ``do_remote_decode``, then streams the
answer from a decode replica with the returned ``kv_transfer_params`` (the decode replica pulls the KV
over NIXL).  The script is not in the vLLM image: create the ConfigMap it is mounted from with
``kubectl create configmap <name>-pd-proxy --from-file=toy_proxy_server.py`` from a v0.26.0 checkout.
The proxy round-robins over the hosts it is given; here each pool is one Service, so Kubernetes spreads
connections over that pool's pods.

NOT measured: no 1P1D pair was booted (our GPU machine's vLLM 0.26 bundle has no NIXL; 0.26 has no
NCCL-based KV connector).
"""

from __future__ import annotations

from planner.deploy.command import DEFAULT_PORT, ServeCommand
from planner.deploy.k8s import (
    DEFAULT_IMAGE,
    deployment,
    engine_container,
    http_probe,
    labels,
    metadata,
    pod_ip_env,
    selector,
    service,
)
from planner.deploy.layout import ProbeTimes

NIXL_KV_TRANSFER_CONFIG = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
NIXL_SIDE_CHANNEL_PORT = 5600
PROXY_SCRIPT = "toy_proxy_server.py"
PROXY_SOURCE = "vllm-project/vllm v0.26.0: tests/v1/kv_connector/nixl_integration/toy_proxy_server.py"


def proxy_argv(prefill_host: str, decode_host: str, port: int = DEFAULT_PORT) -> list[str]:
    return ["python3", f"/proxy/{PROXY_SCRIPT}", "--host", "0.0.0.0", "--port", str(port),
            "--prefiller-hosts", prefill_host, "--prefiller-ports", str(port),
            "--decoder-hosts", decode_host, "--decoder-ports", str(port)]


def disaggregated_objects(name: str, namespace: str | None, cmd: ServeCommand, gpus: int, probes: ProbeTimes,
                          checkpoint_bytes: float, prefill_replicas: int, decode_replicas: int, *,
                          image: str = DEFAULT_IMAGE, annotations: dict | None = None) -> list[dict]:
    """Prefill and decode Deployments + Services, the proxy Deployment and its Service (named ``name``)."""
    nixl_env = [pod_ip_env("VLLM_NIXL_SIDE_CHANNEL_HOST"),
                {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_SIDE_CHANNEL_PORT)}]
    nixl_port = [{"name": "nixl", "containerPort": NIXL_SIDE_CHANNEL_PORT, "protocol": "TCP"}]
    objs: list[dict] = []
    for role, replicas in (("prefill", prefill_replicas), ("decode", decode_replicas)):
        c = engine_container(cmd, gpus, probes, image=image, extra_env=nixl_env, extra_ports=nixl_port)
        objs.append(deployment(f"{name}-{role}", namespace, name, role, replicas, c, gpus, checkpoint_bytes, probes,
                               {**(annotations or {}), "llm-capacity-planner/role": role}))
        objs.append(service(f"{name}-{role}", namespace, name, role))
    proxy = {
        "name": "pd-proxy",
        "image": image,
        "command": proxy_argv(f"{name}-prefill", f"{name}-decode"),
        "ports": [{"name": "http", "containerPort": DEFAULT_PORT, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "2", "memory": "4Gi"}},
        "readinessProbe": http_probe("/healthcheck", "http", initial_delay_s=5, period_s=10, failure_threshold=3),
        "livenessProbe": http_probe("/healthcheck", "http", initial_delay_s=15, period_s=30, failure_threshold=4),
        "volumeMounts": [{"name": "proxy", "mountPath": "/proxy", "readOnly": True}],
    }
    lab = labels(name, "proxy")
    objs.append({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(f"{name}-proxy", namespace, lab, {"llm-capacity-planner/proxy-source": PROXY_SOURCE}),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector(name, "proxy")},
            "template": {"metadata": {"labels": dict(lab)},
                         "spec": {"containers": [proxy],
                                  "volumes": [{"name": "proxy", "configMap": {"name": f"{name}-pd-proxy"}}]}},
        },
    })
    objs.append(service(name, namespace, name, "proxy"))
    return objs
