"""AMD deployments (issue #19): `planner deploy --gpu mi300x` writes manifests that schedule on AMD nodes —
``amd.com/gpu`` (ROCm's device plugin), the ROCm vLLM image, RCCL settings instead of NVIDIA's NVLink-multicast
switches — validated offline like the NVIDIA ones (tests/deploy_validation.py)."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from deploy_validation import validate_helm_values, validate_manifest_text
from planner.cli.app import app
from planner.deploy import AMD, MULTICAST_OFF_ENV, NVIDIA, deployment_bundle, runtime_for
from planner.io import catalog
from planner.specs import Deployment, Workload


def _bundle(model: str, tp: int, pp: int = 1, gpu: str = "mi300x"):
    m, g = catalog.model(model), catalog.gpu(gpu)
    dep = Deployment.for_gpu(g, num_gpus=tp * pp, tensor_parallel=tp, pipeline_parallel=pp)
    return deployment_bundle(m, g, dep, Workload(prompt_tokens=4096, output_tokens=512, request_rate_per_s=2.0),
                             auto_layout=False)


def test_runtime_follows_the_vendor():
    assert runtime_for(catalog.gpu("mi300x")) is AMD and runtime_for(catalog.gpu("h200-sxm")) is NVIDIA
    assert AMD.image == "vllm/vllm-openai-rocm:v0.26.0" and AMD.gpu_resource == "amd.com/gpu"


@pytest.mark.parametrize("model,tp,pp", [("llama-3.1-8b", 1, 1), ("llama-3.1-70b", 2, 1), ("llama-3.1-405b", 8, 2)])
def test_amd_manifests_schedule_on_amd_and_validate(model, tp, pp):
    b = _bundle(model, tp, pp)
    texts = {k: v for k, v in b.files.items() if k.startswith("k8s-")}
    assert texts
    for name, text in texts.items():
        docs = validate_manifest_text(text)  # core kinds strict; RayCluster by its CRD schema
        assert "nvidia.com/gpu" not in text and "amd.com/gpu" in text, name
        assert "vllm/vllm-openai-rocm:v0.26.0" in text and "vllm/vllm-openai:" not in text, name
        assert not any(k in text for k in MULTICAST_OFF_ENV), name
        if tp * pp > 1:
            assert all(k in text for k in AMD.multi_gpu_env), name
        assert any(d["kind"] in ("Deployment", "RayCluster") for d in docs)
    values = yaml.safe_load(b.files["helm-values-production-stack.yaml"])
    validate_helm_values(values)
    for spec in (values.get("servingEngineSpec") or {}).get("modelSpec") or []:
        assert spec["requestGPUType"] == "amd.com/gpu" and spec["repository"] == "vllm/vllm-openai-rocm"
    env = b.serve.env
    assert (set(env) == set(AMD.multi_gpu_env)) if tp * pp > 1 else env == {}
    assert "NCCL_NVLS_ENABLE" not in b.files["serve.sh"]


def test_nvidia_manifests_unchanged_by_the_vendor_step():
    b = _bundle("llama-3.1-70b", 2, gpu="h200-sxm")
    text = b.files["k8s-deployment.yaml"]
    assert "nvidia.com/gpu" in text and "amd.com/gpu" not in text and "vllm/vllm-openai:v0.26.0" in text
    assert all(k in text for k in MULTICAST_OFF_ENV)


def test_cli_deploy_mi300x_writes_amd_files(tmp_path):
    r = CliRunner().invoke(app, ["deploy", "-m", "llama-3.1-8b", "--gpu", "mi300x", "--rate", "5",
                                 "--prompt-tokens", "1024", "--output-tokens", "128", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "k8s-deployment.yaml").read_text()
    assert "amd.com/gpu" in text and "nvidia.com/gpu" not in text
    pred = json.loads((tmp_path / "predictions.json").read_text())
    assert pred["gpu_id"] == "mi300x"
