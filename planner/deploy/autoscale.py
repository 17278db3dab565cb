"""Autoscaling manifests for the engines ``planner deploy`` writes: a KEDA ``ScaledObject`` and, for a
cluster without KEDA, a ``HorizontalPodAutoscaler`` (autoscaling/v2) on a custom per-pod metric.

Both scale the Deployment ``planner deploy`` names (``vllm-<model id>``) on the two metrics of
:class:`planner.capacity.autoscale.Policy`, each summed over the fleet and compared with its per-replica
threshold (HPA's ``AverageValue`` target: desired = ⌈Σ ÷ threshold⌉; the larger of the two wins): the
completed-request rate (threshold: the target rate per replica) and requests running + waiting (threshold:
one replica's count at the knee, the overload alarm).

* KEDA (fields from keda.sh/docs/2.15/reference/scaledobject-spec and the Prometheus scaler,
  keda.sh/docs/2.13/scalers/prometheus, read 2026-12-01): ``scaleTargetRef``, ``pollingInterval``,
  ``cooldownPeriod``, ``minReplicaCount``, ``maxReplicaCount``, ``advanced.horizontalPodAutoscalerConfig.behavior``
  (scale-up at once, scale-down stabilised over the cooldown), two ``prometheus`` triggers with
  ``serverAddress``, ``query``, ``threshold`` and ``activationThreshold`` as strings.  ``metricName`` is left
  out (deprecated in KEDA 2.10, removed in 2.12).
* HPA: two ``Pods`` metrics, ``vllm_request_success_per_second`` and ``vllm_requests_in_system``, that the
  prometheus-adapter rules in the file's header derive from ``vllm:request_success_total`` and the gauges
  ``vllm:num_requests_running`` + ``vllm:num_requests_waiting``.

The model name reaches the PromQL label matcher escaped (backslash and double quote), and names are
DNS labels (:func:`planner.deploy.k8s.k8s_name`).
"""

from __future__ import annotations

import math

from planner.deploy.k8s import PREFIX, k8s_name, labels, to_yaml

__all__ = ["DEFAULT_PROMETHEUS_URL", "autoscale_files", "hpa", "keda_scaled_object", "promql_in_system"]

#: kube-prometheus-stack's in-cluster Prometheus Service (its chart's default name in namespace monitoring).
DEFAULT_PROMETHEUS_URL = "http://prometheus-operated.monitoring.svc:9090"
HPA_METRIC = "vllm_requests_in_system"
HPA_RATE_METRIC = "vllm_request_success_per_second"


def _label_value(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def promql_in_system(served_model_name: str) -> str:
    """The fleet's requests running + waiting for one served model."""
    m = _label_value(served_model_name)
    return (f'sum(vllm:num_requests_running{{model_name="{m}"}}) + '
            f'sum(vllm:num_requests_waiting{{model_name="{m}"}})')


def promql_rate(served_model_name: str) -> str:
    """The fleet's completed requests per second (1-minute window) for one served model."""
    return f'sum(rate(vllm:request_success_total{{model_name="{_label_value(served_model_name)}"}}[1m]))'


def _threshold(x: float) -> str:
    return f"{max(x, 0.01):.2f}"


def _behavior(cooldown_s: float) -> dict:
    return {"scaleUp": {"stabilizationWindowSeconds": 0,
                        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]},
            "scaleDown": {"stabilizationWindowSeconds": int(math.ceil(cooldown_s)),
                          "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}


def keda_scaled_object(policy, *, model_id: str, name: str | None = None, namespace: str | None = None,
                       prometheus_url: str = DEFAULT_PROMETHEUS_URL) -> dict:
    """A KEDA ScaledObject for ``policy`` (:class:`planner.capacity.autoscale.Policy`)."""
    target = k8s_name(name or f"vllm-{model_id}")
    meta = {"name": k8s_name(f"{target}-scaler"), "labels": labels(target, "autoscaler"),
            "annotations": {f"{PREFIX}/threshold-rate-per-s": _threshold(policy.target_rate_per_s),
                            f"{PREFIX}/threshold-requests-in-system": _threshold(policy.threshold_in_system),
                            f"{PREFIX}/lead-time-s": f"{policy.lead.total_s:.0f}"}}
    if namespace:
        meta["namespace"] = k8s_name(namespace)
    return {
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": meta,
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "pollingInterval": int(math.ceil(policy.polling_interval_s)),
            "cooldownPeriod": int(math.ceil(policy.cooldown_s)),
            "minReplicaCount": int(policy.min_replicas), "maxReplicaCount": int(policy.max_replicas),
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": _behavior(policy.cooldown_s)}},
            "triggers": [{"type": "prometheus", "name": "rate", "metricType": "AverageValue", "metadata": {
                "serverAddress": prometheus_url, "query": promql_rate(model_id),
                "threshold": _threshold(policy.target_rate_per_s), "activationThreshold": "0"}},
                {"type": "prometheus", "name": "overload", "metricType": "AverageValue", "metadata": {
                    "serverAddress": prometheus_url, "query": promql_in_system(model_id),
                    "threshold": _threshold(policy.threshold_in_system), "activationThreshold": "0"}}],
        },
    }


def hpa(policy, *, model_id: str, name: str | None = None, namespace: str | None = None) -> dict:
    """An autoscaling/v2 HorizontalPodAutoscaler on the per-pod metric :data:`HPA_METRIC`."""
    target = k8s_name(name or f"vllm-{model_id}")
    meta = {"name": k8s_name(f"{target}-hpa"), "labels": labels(target, "autoscaler")}
    if namespace:
        meta["namespace"] = k8s_name(namespace)
    def pods(metric: str, value: float) -> dict:
        milli = int(round(max(value, 0.01) * 1000))
        return {"type": "Pods", "pods": {"metric": {"name": metric},
                                         "target": {"type": "AverageValue", "averageValue": f"{milli}m"}}}

    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta,
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": max(1, int(policy.min_replicas)), "maxReplicas": int(policy.max_replicas),
            "metrics": [pods(HPA_RATE_METRIC, policy.target_rate_per_s), pods(HPA_METRIC, policy.threshold_in_system)],
            "behavior": _behavior(policy.cooldown_s),
        },
    }


ADAPTER_RULE = [
    "prometheus-adapter rules that serve the HPA's per-pod metrics (add them to the adapter's rules.custom):",
    '  - seriesQuery: \'vllm:request_success_total{namespace!="",pod!=""}\'',
    "    resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}",
    f'    name: {{matches: "vllm:request_success_total", as: "{HPA_RATE_METRIC}"}}',
    "    metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)'",
    '  - seriesQuery: \'vllm:num_requests_running{namespace!="",pod!=""}\'',
    "    resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}",
    f'    name: {{matches: "vllm:num_requests_running", as: "{HPA_METRIC}"}}',
    "    metricsQuery: 'sum(vllm:num_requests_running{<<.LabelMatchers>>} + "
    "vllm:num_requests_waiting{<<.LabelMatchers>>}) by (<<.GroupBy>>)'",
]


def autoscale_files(policy, *, model_id: str, name: str | None = None, namespace: str | None = None,
                    prometheus_url: str = DEFAULT_PROMETHEUS_URL) -> dict[str, str]:
    """``keda-scaledobject.yaml`` and ``hpa.yaml`` (use one of them, not both, on the same Deployment)."""
    lead = policy.lead
    head = [f"Autoscaling for the vllm-{model_id} Deployment of `planner deploy`, written by `planner capacity`.",
            f"Scale on completed requests/s, {policy.target_rate_per_s:.3g} per replica (the knee less the headroom), "
            f"and on running + waiting > {policy.threshold_in_system:.1f} per replica (one replica at its knee, "
            "simulated).",
            f"Scale-up lead time {lead.total_s:.0f} s: detection {lead.detection_s:.0f} s + node "
            f"{lead.node_provision_s:.0f} s + boot {lead.boot_s:.0f} s (measured) + weights "
            f"{lead.weight_load_s:.0f} s.",
            "Apply ONE of keda-scaledobject.yaml or hpa.yaml to a Deployment, not both."]
    return {"keda-scaledobject.yaml": to_yaml([keda_scaled_object(policy, model_id=model_id, name=name,
                                                                  namespace=namespace, prometheus_url=prometheus_url)],
                                              head),
            "hpa.yaml": to_yaml([hpa(policy, model_id=model_id, name=name, namespace=namespace)],
                                head + [""] + ADAPTER_RULE)}
