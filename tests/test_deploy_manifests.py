"""Every manifest ``planner deploy`` writes validates offline: Deployments and Services against Kubernetes 1.30
(kubernetes-validate, strict), Helm values against the production-stack chart's values.schema.json (merged over
the chart's defaults, as Helm does), RayClusters against KubeRay's CRD schema; and the chart runs our command."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess

import pytest
import yaml
from deploy_validation import (
    chart_defaults,
    render_production_stack_engine_argv,
    validate_helm_values,
    validate_manifest_text,
    validate_raycluster,
)

from planner.io import catalog
from planner.deploy import MULTICAST_OFF_ENV, deployment_bundle
from planner.deploy.flags import parse_serve_args
from planner.deploy.k8s import k8s_name
from planner.deploy.ray import serve_argv_of_head
from planner.specs import Deployment, Workload

H200, H100 = catalog.gpu("h200-sxm"), catalog.gpu("h100-sxm")
WL = Workload(prompt_tokens=2048, output_tokens=256, request_rate_per_s=12, ttft_slo_s=1.0, tpot_slo_s=0.1)


@pytest.fixture(scope="module")
def single():
    """Llama 3.1 8B on H200s at 12 req/s, with the disaggregated option."""
    return deployment_bundle(catalog.model("llama-3.1-8b"), H200, Deployment.for_gpu(H200), WL, disaggregated=True,
                             namespace="llm")


@pytest.fixture(scope="module")
def tp2():
    return deployment_bundle(catalog.model("qwen2.5-32b"), H200, Deployment.for_gpu(H200, num_gpus=2, tensor_parallel=2),
                             WL, auto_layout=False)


@pytest.fixture(scope="module")
def multinode():
    """Llama 3.1 405B bf16 on 8-GPU H100 nodes for 300 requests in flight."""
    return deployment_bundle(catalog.model("llama-3.1-405b"), H100, Deployment.for_gpu(H100),
                             Workload(prompt_tokens=2048, output_tokens=256, concurrency=300))


def docs_of(b, name):
    return validate_manifest_text(b.files[name])


def helm_values(b):
    return yaml.safe_load(b.files["helm-values-production-stack.yaml"])


def test_vendored_schemas_are_fair():
    """The chart's own defaults pass its schema even in the strict form; a misspelt key fails it."""
    validate_helm_values({})
    with pytest.raises(AssertionError, match="replicaCnt"):
        validate_helm_values({"servingEngineSpec": {"modelSpec": [{"name": "x", "replicaCnt": 2}]}})
    assert chart_defaults()["servingEngineSpec"]["modelSpec"][0]["name"] == "mistral"


@pytest.mark.parametrize("fixture", ["single", "tp2", "multinode"])
def test_every_manifest_validates(fixture, request):
    b = request.getfixturevalue(fixture)
    yamls = [n for n in b.files if n.startswith("k8s-")]
    assert yamls
    for name in yamls:
        for d in docs_of(b, name):
            for key in ("name", "namespace"):
                v = d["metadata"].get(key)
                if v is not None:
                    assert v == k8s_name(v), (name, key, v)  # DNS-1035 labels
    validate_helm_values(helm_values(b))
    assert json.loads(b.files["predictions.json"])["files"] == sorted(b.files)


def test_deployment_shape(single, tp2):
    """GPU requests = limits = the replica's GPUs; replicas = the fleet; /health probes; /dev/shm and multicast off
    only with more than one GPU."""
    for b, gpus in ((single, 1), (tp2, 2)):
        dep, svc = docs_of(b, "k8s-deployment.yaml")
        assert dep["spec"]["replicas"] == b.replicas == b.report.fleet.replicas
        pod = dep["spec"]["template"]["spec"]
        c = pod["containers"][0]
        assert c["resources"]["limits"]["nvidia.com/gpu"] == c["resources"]["requests"]["nvidia.com/gpu"] == str(gpus)
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert c[probe]["httpGet"]["path"] == "/health"
        assert c["livenessProbe"]["initialDelaySeconds"] == round(b.probes.boot_estimate_s + 0.5)
        env = {e["name"]: e.get("value") for e in c["env"]}
        vols = {v["name"]: v for v in pod["volumes"]}
        if gpus > 1:
            assert vols["dshm"]["emptyDir"]["medium"] == "Memory"
            assert all(env[k] == v for k, v in MULTICAST_OFF_ENV.items())
        else:
            assert "dshm" not in vols and not set(MULTICAST_OFF_ENV) & set(env)
        assert c["command"] + c["args"] == list(b.serve.argv)
        assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    assert docs_of(single, "k8s-deployment.yaml")[0]["metadata"]["namespace"] == "llm"


@pytest.mark.parametrize("fixture", ["single", "tp2"])
def test_production_stack_runs_our_command(fixture, request):
    """The chart's engine command (its template reproduced in deploy_validation) parses to the same options as
    serve.sh, apart from the --host it adds; replicaCount is the fleet."""
    b = request.getfixturevalue(fixture)
    merged = validate_helm_values(helm_values(b))
    (argv,) = render_production_stack_engine_argv(merged)
    chart = parse_serve_args(argv[2:])
    ours = parse_serve_args(b.serve.serve_args())
    assert chart.pop("--host") == "0.0.0.0"
    assert chart == ours
    spec = merged["servingEngineSpec"]["modelSpec"][0]
    assert spec["replicaCount"] == b.replicas and spec["requestGPU"] == b.layout.gpus
    assert merged["routerSpec"]["routingLogic"] == "prefixaware"


def test_multinode_raycluster(multinode):
    """405B bf16 (811 GB) does not fit one 8 × 80 GB node: TP 8 × PP 2 on 2 nodes, a RayCluster per replica with
    one 8-GPU head and one 8-GPU worker; the head execs our command with --distributed-executor-backend ray."""
    b = multinode
    assert (b.layout.tensor_parallel, b.layout.pipeline_parallel, b.layout.nodes) == (8, 2, 2)
    assert "k8s-deployment.yaml" not in b.files
    docs = docs_of(b, "k8s-raycluster.yaml")
    clusters = [d for d in docs if d["kind"] == "RayCluster"]
    assert len(clusters) == b.replicas == b.report.fleet.replicas
    rc = clusters[0]
    assert rc["metadata"]["annotations"]["ray.io/overwrite-container-cmd"] == "true"
    head = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    (wg,) = rc["spec"]["workerGroupSpecs"]
    assert wg["replicas"] == wg["minReplicas"] == wg["maxReplicas"] == 1
    for c in (head, wg["template"]["spec"]["containers"][0]):
        assert c["resources"]["limits"]["nvidia.com/gpu"] == "8"
        assert {"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in c["env"]
    argv = serve_argv_of_head(head["args"][0])
    assert argv == list(b.serve.argv)
    p = parse_serve_args(argv[2:])
    assert (p["--tensor-parallel-size"], p["--pipeline-parallel-size"], p["--distributed-executor-backend"]) == \
        ("8", "2", "ray")
    assert ">= 16 else 1" in head["args"][0]  # waits for all 16 GPUs
    values = helm_values(b)
    merged = validate_helm_values(values)
    assert render_production_stack_engine_argv(merged) == []  # router only
    assert merged["routerSpec"]["staticBackends"].count("http://") == b.replicas


def test_raycluster_schema_catches_mistakes(multinode):
    rc = next(d for d in yaml.safe_load_all(multinode.files["k8s-raycluster.yaml"]) if d["kind"] == "RayCluster")
    bad = copy.deepcopy(rc)
    bad["spec"]["workerGroupSpecs"][0]["replicas"] = "one"
    with pytest.raises(AssertionError, match="replicas"):
        validate_raycluster(bad)
    bad = copy.deepcopy(rc)
    bad["spec"]["headGroupSpec"]["rayStartParam"] = {}
    with pytest.raises(AssertionError, match="rayStartParam"):
        validate_raycluster(bad)


def test_disaggregated_manifests(single):
    """Prefill and decode Deployments sized by the disaggregated plan, both with the NixlConnector config and the
    pod IP for the NIXL handshake; the proxy Service carries the bundle's name."""
    d = single.disaggregated
    docs = docs_of(single, "k8s-disaggregated.yaml")
    deps = {x["metadata"]["name"]: x for x in docs if x["kind"] == "Deployment"}
    inst = "vllm-llama-3-1-8b-pd"
    assert deps[f"{inst}-prefill"]["spec"]["replicas"] == d.prefill.replicas
    assert deps[f"{inst}-decode"]["spec"]["replicas"] == d.decode.replicas
    for role in ("prefill", "decode"):
        c = deps[f"{inst}-{role}"]["spec"]["template"]["spec"]["containers"][0]
        p = parse_serve_args(c["args"])
        role_name = {"prefill": "kv_producer", "decode": "kv_consumer"}[role]  # kv_both is deprecated for NIXL
        assert json.loads(p["--kv-transfer-config"]) == {"kv_connector": "NixlConnector", "kv_role": role_name}
        assert any(e["name"] == "VLLM_NIXL_SIDE_CHANNEL_HOST" for e in c["env"])
    proxy = deps[f"{inst}-proxy"]["spec"]["template"]["spec"]["containers"][0]
    assert proxy["command"][proxy["command"].index("--prefiller-hosts") + 1] == f"{inst}-prefill"
    assert any(x["kind"] == "Service" and x["metadata"]["name"] == inst for x in docs)
    assert "NOT measured" in single.files["README.md"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_shell_texts_are_valid_shell(multinode, single, tmp_path):
    """The Ray head's script and serve.sh parse as shell (bash -n)."""
    rc = next(d for d in yaml.safe_load_all(multinode.files["k8s-raycluster.yaml"]) if d["kind"] == "RayCluster")
    texts = [rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["args"][0],
             multinode.files["serve.sh"], single.files["serve.sh"]]
    for i, text in enumerate(texts):
        p = tmp_path / f"s{i}.sh"
        p.write_text(text)
        assert subprocess.run(["bash", "-n", str(p)], check=False, capture_output=True).returncode == 0, text
