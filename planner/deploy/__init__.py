"""From a plan to a running deployment (issue #11).

* :func:`startup_check` — the one rule for "can this deployment start" (:mod:`planner.startup`).
* :func:`serve_command` — one replica's exact ``vllm serve`` command, vLLM 0.26 flags (:mod:`planner.deploy.command`),
  checked against the pinned option list of vLLM 0.26.0's parser (:mod:`planner.deploy.flags`).
* :func:`deployment_bundle` — the command with its predictions and every file ``planner deploy`` writes:
  Kubernetes Deployment + Service (:mod:`planner.deploy.k8s`), vLLM production-stack Helm values
  (:mod:`planner.deploy.helm`), KubeRay RayClusters for replicas spanning nodes (:mod:`planner.deploy.ray`),
  and disaggregated prefill/decode pools (:mod:`planner.deploy.disagg`, :mod:`planner.deploy.disagg_k8s`).
"""

from planner.deploy.bundle import DeployBundle, DeployRefused, deployment_bundle
from planner.deploy.command import (
    KV_CACHE_DTYPE_FLAG,
    ONLINE_QUANTIZATION,
    PREQUANTIZED,
    ServeCommand,
    serve_command,
)
from planner.deploy.vendor import AMD, MULTICAST_OFF_ENV, NVIDIA, runtime_for
from planner.startup import MIN_HEADROOM_BYTES, StartupCheck, StartupProblem, startup_check

__all__ = [
    "KV_CACHE_DTYPE_FLAG",
    "MIN_HEADROOM_BYTES",
    "MULTICAST_OFF_ENV",
    "ONLINE_QUANTIZATION",
    "PREQUANTIZED",
    "AMD",
    "NVIDIA",
    "DeployBundle",
    "DeployRefused",
    "ServeCommand",
    "StartupCheck",
    "StartupProblem",
    "deployment_bundle",
    "runtime_for",
    "serve_command",
    "startup_check",
]
