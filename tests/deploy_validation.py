"""Offline validators for everything ``planner deploy`` writes (no cluster, no network, no vLLM).

* Core Kubernetes kinds: ``kubernetes-validate`` (ships the OpenAPI schemas) at :data:`K8S_VERSION`, strict.
* Helm values: the production-stack chart's ``values.schema.json`` (vendored, ``tests/data/schemas``), on the
  values Helm validates — the chart's defaults with ours merged over them (:func:`helm_merge`).
* KubeRay ``RayCluster``: the CRD's v1 OpenAPI schema (vendored).
* KEDA ``ScaledObject``: a schema written from KEDA's documented fields (``keda.sh_scaledobjects.v1alpha1``;
  unknown fields refused), HPAs (autoscaling/v2) with ``kubernetes-validate`` like the core kinds.
* ``vllm serve`` commands: :func:`planner.deploy.flags.parse_serve_args` (the pinned option list).

``strict`` adds ``additionalProperties: false`` to every object schema that lists its properties and does
not preserve unknown fields, as ``kubectl apply --validate=strict`` rejects unknown fields.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

SCHEMAS = Path(__file__).resolve().parent / "data" / "schemas"
K8S_VERSION = "1.30.0"
CORE_KINDS = {"Deployment", "Service", "ConfigMap", "HorizontalPodAutoscaler"}


def strict_schema(schema):
    """A copy of ``schema`` in which objects with ``properties`` forbid other keys (unless they say otherwise)."""
    s = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if ("properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(s)
    return s


@functools.cache
def _validator(name: str, strict: bool):
    raw = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    schema = raw["schema"] if "schema" in raw and "_source" in raw else raw
    schema = strict_schema(schema) if strict else schema
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    cls.check_schema(schema)
    return cls(schema)


def errors(validator, doc) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def validate_k8s(doc: dict) -> None:
    """A core object, against Kubernetes 1.30's schema, unknown fields refused."""
    assert doc["kind"] in CORE_KINDS, doc["kind"]
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def validate_raycluster(doc: dict, strict: bool = True) -> None:
    assert doc["apiVersion"] == "ray.io/v1" and doc["kind"] == "RayCluster"
    errs = errors(_validator("ray.io_rayclusters.v1.schema.json", strict), doc)
    assert not errs, errs


def validate_keda(doc: dict) -> None:
    """A KEDA ScaledObject against the documented fields (the schema already refuses unknown keys)."""
    assert doc["apiVersion"] == "keda.sh/v1alpha1" and doc["kind"] == "ScaledObject"
    errs = errors(_validator("keda.sh_scaledobjects.v1alpha1.schema.json", False), doc)
    assert not errs, errs


def chart_defaults() -> dict:
    return yaml.safe_load((SCHEMAS / "production-stack-values.yaml").read_text(encoding="utf-8"))


def helm_merge(base, over):
    """Helm's coalescing of user values over chart defaults: maps merge key by key, anything else
    (lists included) replaces, and a null deletes the default."""
    if not isinstance(base, dict) or not isinstance(over, dict):
        return copy.deepcopy(over)
    out = copy.deepcopy(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        elif k in out:
            out[k] = helm_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def validate_helm_values(values: dict, strict: bool = True) -> dict:
    """Our values merged over the chart's defaults, against the chart's values.schema.json; returns the merge."""
    merged = helm_merge(chart_defaults(), values)
    errs = errors(_validator("production-stack-values.schema.json", strict), merged)
    assert not errs, errs
    return merged


def validate_manifest_text(text: str) -> list[dict]:
    """Every document of a YAML file we write, each by its kind's validator; returns the documents."""
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    assert docs
    for d in docs:
        if d["kind"] == "RayCluster":
            validate_raycluster(d)
        elif d["kind"] == "ScaledObject":
            validate_keda(d)
        else:
            validate_k8s(d)
    return docs


def render_production_stack_engine_argv(merged: dict) -> list[list[str]]:
    """The engine command the chart's ``helm/templates/deployment-vllm-multi.yaml`` (production-stack
    a6c01db, 2026-08-05) writes for each enabled modelSpec without raySpec, reproduced from the template:
    ``vllm serve <modelURL> --host 0.0.0.0 --port <containerPort>``, LoRA/tool flags, the vllmConfig
    flags in the template's order, ``extraArgs``, ``--revision``, the LMCache kv-transfer-config, the chat template."""
    out = []
    se = merged["servingEngineSpec"]
    if not se.get("enableEngine"):
        return out
    port = str(se.get("containerPort", 8000))
    for m in se.get("modelSpec") or []:
        if m.get("enabled") is False or (m.get("raySpec") or {}).get("enabled"):
            continue
        argv = ["/opt/venv/bin/vllm" if m["repository"] == "lmcache/vllm-openai" else "vllm", "serve",
                m["modelURL"], "--host", "0.0.0.0", "--port", port]
        if m.get("enableLoRA"):
            argv.append("--enable-lora")
        if m.get("enableTool"):
            argv.append("--enable-auto-tool-choice")
        if m.get("toolCallParser"):
            argv += ["--tool-call-parser", str(m["toolCallParser"])]
        c = m.get("vllmConfig")
        if c is not None:
            if "enableChunkedPrefill" in c:
                argv.append("--enable-chunked-prefill" if c["enableChunkedPrefill"] else "--no-enable-chunked-prefill")
            argv.append("--enable-prefix-caching" if c.get("enablePrefixCaching") else "--no-enable-prefix-caching")
            for key, flag in (("maxModelLen", "--max-model-len"), ("dtype", "--dtype"),
                              ("tensorParallelSize", "--tensor-parallel-size"), ("maxNumSeqs", "--max-num-seqs"),
                              ("gpuMemoryUtilization", "--gpu_memory_utilization"), ("maxLoras", "--max_loras"),
                              ("runner", "--runner"), ("convert", "--convert")):
                if key in c:
                    argv += [flag, str(c[key])]
            argv += [str(a) for a in c.get("extraArgs") or []]
        if m.get("modelRevision"):
            argv += ["--revision", str(m["modelRevision"])]
        lm = m.get("lmcacheConfig") or {}
        if lm.get("enabled"):
            argv += ["--kv-transfer-config", "<LMCache>"]
        if m.get("chatTemplate"):
            argv += ["--chat-template", f"/templates/{m['chatTemplate']}"]
        out.append(argv)
    return out
