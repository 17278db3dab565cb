"""Kubernetes objects for disaggregated prefill/decode with vLLM's NixlConnector.

Checked against vLLM 0.26.0's own code, the released wheel ``vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl``
(sha256 adb1e4c9…15006de, the one our GPU bundle installs):

* ``--kv-transfer-config`` is :class:`vllm.config.kv_transfer.KVTransferConfig` as JSON
  (``vllm/config/kv_transfer.py`` lines 22-69: ``kv_connector``, ``kv_role``, ``kv_buffer_device``,
  ``kv_connector_extra_config``, …); ``kv_role`` is one of ``kv_producer``, ``kv_consumer``, ``kv_both``
  (lines 11-13, checked in ``__post_init__`` lines 96-106, which also refuses a connector without a role).
* The prefill pool runs ``kv_role = kv_producer`` and the decode pool ``kv_consumer``:
  ``vllm/distributed/kv_transfer/kv_connector/v1/nixl/connector.py`` lines 122-128 warn that ``kv_both`` with
  NixlConnector "is deprecated and will be removed in a future release. Please set kv_role='kv_producer' for
  prefill instances and kv_role='kv_consumer' for decode instances".  ``NixlConnector`` is
  ``NixlPullConnector`` (same file, line 387): the decode replica READs the prefilled blocks.
* Each engine serves its NIXL handshake on ``VLLM_NIXL_SIDE_CHANNEL_HOST``:``VLLM_NIXL_SIDE_CHANNEL_PORT``
  (``vllm/envs.py`` lines 1563-1570, defaults ``localhost`` and 5600; the port + the data-parallel index,
  ``nixl/base_scheduler.py`` lines 64-68), and tells the other side that address in its
  ``kv_transfer_params`` (``nixl/pull_scheduler.py`` lines 269-280).  Every engine, prefill or decode, binds
  it (``base_scheduler.py`` lines 273-289), so two engines on one host need two ports.  In a pod the host is
  the pod IP (the default ``localhost`` is unreachable from the other pool).

In front sits the proxy of vLLM's NIXL integration tests, ``tests/v1/kv_connector/nixl_integration/
toy_proxy_server.py`` (not in the wheel; read at vllm-project/vllm commit 030ea52): per request it POSTs to a
prefill replica with ``kv_transfer_params = {"do_remote_decode": true, …}``, ``max_tokens = 1`` and
``stream = false``, then streams the answer from a decode replica with the ``kv_transfer_params`` the
prefill replica returned; ``/healthcheck``; ``--prefiller-hosts/--prefiller-ports/--decoder-hosts/
--decoder-ports`` (round robin).  Create the ConfigMap it is mounted from with ``kubectl create configmap
<name>-pd-proxy --from-file=toy_proxy_server.py`` from a vLLM v0.26.0 checkout.  Here each pool is one
Service, so Kubernetes spreads connections over that pool's pods.

NOT measured: no 1P1D pair has run (the GPU machine's vLLM 0.26 bundle has no ``nixl`` package; without it
the engine stops with ``RuntimeError: NIXL is not available``, ``nixl/base_worker.py`` lines 246-248).
``calibration/campaigns/h200x2-disagg.sh`` measures it where NIXL is installed.
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

#: The pool roles and their ``kv_role`` (vLLM 0.26 ``KVTransferConfig``; ``kv_both`` is deprecated for NIXL).
KV_ROLE = {"prefill": "kv_producer", "decode": "kv_consumer"}
#: vLLM's default ``VLLM_NIXL_SIDE_CHANNEL_PORT`` (vllm/envs.py, 0.26.0).
NIXL_SIDE_CHANNEL_PORT = 5600
PROXY_SCRIPT = "toy_proxy_server.py"
PROXY_SOURCE = "vllm-project/vllm v0.26.0: tests/v1/kv_connector/nixl_integration/toy_proxy_server.py"


def nixl_kv_transfer_config(role: str) -> dict:
    """``--kv-transfer-config`` of a ``role`` ('prefill' or 'decode') pool: NixlConnector with its kv_role."""
    if role not in KV_ROLE:
        raise ValueError(f"role: expected one of {', '.join(KV_ROLE)}, got {role!r}")
    return {"kv_connector": "NixlConnector", "kv_role": KV_ROLE[role]}


def proxy_argv(prefill_host: str, decode_host: str, port: int = DEFAULT_PORT) -> list[str]:
    return ["python3", f"/proxy/{PROXY_SCRIPT}", "--host", "0.0.0.0", "--port", str(port),
            "--prefiller-hosts", prefill_host, "--prefiller-ports", str(port),
            "--decoder-hosts", decode_host, "--decoder-ports", str(port)]


def disaggregated_objects(name: str, namespace: str | None, commands: dict[str, ServeCommand], gpus: int,
                          probes: ProbeTimes, checkpoint_bytes: float, prefill_replicas: int, decode_replicas: int, *,
                          image: str = DEFAULT_IMAGE, annotations: dict | None = None) -> list[dict]:
    """Prefill and decode Deployments + Services, the proxy Deployment and its Service (named ``name``);
    ``commands``: each pool's ``vllm serve`` by role ('prefill', 'decode')."""
    nixl_env = [pod_ip_env("VLLM_NIXL_SIDE_CHANNEL_HOST"),
                {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_SIDE_CHANNEL_PORT)}]
    nixl_port = [{"name": "nixl", "containerPort": NIXL_SIDE_CHANNEL_PORT, "protocol": "TCP"}]
    objs: list[dict] = []
    for role, replicas in (("prefill", prefill_replicas), ("decode", decode_replicas)):
        c = engine_container(commands[role], gpus, probes, image=image, extra_env=nixl_env, extra_ports=nixl_port)
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
