"""What a deployment needs from the GPU's vendor: the Kubernetes device-plugin resource, the vLLM image, and the
collective-library environment of an engine on more than one GPU.

* NVIDIA — ``nvidia.com/gpu`` (NVIDIA device plugin), ``vllm/vllm-openai:v0.26.0`` (CUDA), NVLink multicast off
  for NCCL (:data:`planner.deploy.command.MULTICAST_OFF_ENV`: the env our own TP 2 boots ran with).
* AMD — ``amd.com/gpu`` (ROCm's k8s-device-plugin, https://github.com/ROCm/k8s-device-plugin),
  ``vllm/vllm-openai-rocm:v0.26.0`` (vLLM's ROCm build, pushed by vLLM's release pipeline beside the CUDA one,
  https://hub.docker.com/r/vllm/vllm-openai-rocm), and RCCL settings from AMD's MI300X workload-tuning guide for
  vLLM (https://rocm.docs.amd.com/en/latest/how-to/rocm-for-ai/inference-optimization/workload.html, read
  2026-12-01): ``NCCL_MIN_NCHANNELS=112`` (RCCL reads NCCL_* names; more channels for TP all-reduce on the 8-GPU
  Infinity Fabric mesh), ``HIP_FORCE_DEV_KERNARG=1`` (kernel arguments in device memory: lower launch latency),
  ``TORCH_BLAS_PREFER_HIPBLASLT=1`` (hipBLASLt GEMMs).  NVIDIA's NVLS/NVSHMEM switches mean nothing there.

:func:`retarget` rewrites manifests written for NVIDIA (the builders in :mod:`planner.deploy.k8s`,
:mod:`planner.deploy.ray`, :mod:`planner.deploy.helm`) for another vendor; tests/deploy_validation.py validates
both offline.  Not measured on an AMD cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["AMD", "MULTICAST_OFF_ENV", "NVIDIA", "Runtime", "helm_values_for", "multi_gpu_env", "retarget",
           "runtime_for"]

#: NVLink multicast off for engines on more than one NVIDIA GPU (NCCL NVLS, PyTorch symmetric memory, NVSHMEM):
#: on shared hosts a program that uses it can take the GPUs out of service.  The same table as
#: ``calibration.probes.MULTICAST_OFF``, which our GPU runs used.
MULTICAST_OFF_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

VLLM_TAG = "v0.26.0"


@dataclass(frozen=True)
class Runtime:
    """One vendor's device-plugin resource, vLLM image and multi-GPU environment."""

    vendor: str
    gpu_resource: str
    image_repository: str
    multi_gpu_env: dict = field(default_factory=dict)

    @property
    def image(self) -> str:
        return f"{self.image_repository}:{VLLM_TAG}"


NVIDIA = Runtime("nvidia", "nvidia.com/gpu", "vllm/vllm-openai", dict(MULTICAST_OFF_ENV))
AMD = Runtime("amd", "amd.com/gpu", "vllm/vllm-openai-rocm",
              {"NCCL_MIN_NCHANNELS": "112", "HIP_FORCE_DEV_KERNARG": "1", "TORCH_BLAS_PREFER_HIPBLASLT": "1"})
RUNTIMES = {"nvidia": NVIDIA, "amd": AMD}


def runtime_for(gpu) -> Runtime:
    """The runtime of ``gpu``'s vendor (NVIDIA's for a vendor without its own: vLLM's CUDA build)."""
    return RUNTIMES.get(getattr(gpu, "vendor", "nvidia"), NVIDIA)


def multi_gpu_env(gpu) -> dict:
    """The collective-library environment of an engine on more than one ``gpu``."""
    return dict(runtime_for(gpu).multi_gpu_env)


def helm_values_for(values: dict, rt: Runtime) -> dict:
    """production-stack Helm values for ``rt``: :func:`retarget`, and each engine's ``requestGPUType`` (the chart
    requests ``nvidia.com/gpu`` unless told otherwise)."""
    out = retarget(values, rt)
    if rt.vendor != "nvidia":
        for m in (out.get("servingEngineSpec") or {}).get("modelSpec") or []:
            m["requestGPUType"] = rt.gpu_resource
    return out


def retarget(obj, rt: Runtime):
    """``obj`` (a manifest: dicts, lists, strings) written for NVIDIA, for ``rt``: the device-plugin resource
    (keys, toleration keys, values), the image (``vllm/vllm-openai:…`` and the Helm ``repository``), and the
    multi-GPU environment (NVIDIA's entries replaced by ``rt``'s, in ``env`` lists and env dicts)."""
    if rt.vendor == "nvidia":
        return obj
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            out[rt.gpu_resource if k == NVIDIA.gpu_resource else k] = retarget(v, rt)
        if set(MULTICAST_OFF_ENV) & set(out) and all(isinstance(v, str) for v in out.values()):
            out = {k: v for k, v in out.items() if k not in MULTICAST_OFF_ENV} | rt.multi_gpu_env
        return out
    if isinstance(obj, list):
        items = [retarget(x, rt) for x in obj]
        names = [x.get("name") for x in items if isinstance(x, dict) and set(x) <= {"name", "value"}]
        if set(MULTICAST_OFF_ENV) & set(names):
            items = [x for x in items if not (isinstance(x, dict) and x.get("name") in MULTICAST_OFF_ENV)]
            items += [{"name": k, "value": v} for k, v in rt.multi_gpu_env.items()]
        return items
    if isinstance(obj, str):
        if obj == NVIDIA.gpu_resource:
            return rt.gpu_resource
        if obj.startswith(NVIDIA.image_repository + ":"):
            return rt.image_repository + obj[len(NVIDIA.image_repository):]
        if obj == NVIDIA.image_repository:
            return rt.image_repository
        return obj
    return obj
