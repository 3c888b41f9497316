"""JSON schemas of the KubeRay ``ray.io/v1`` fields our manifests use (RayCluster, RayJob).

``kubernetes-validate`` ships the core Kubernetes schemas only. These schemas follow
KubeRay's v1 API types (``raycluster_types.go``, ``rayjob_types.go``) field for field and
reject unknown fields; the pod templates inside are validated separately against the core
``PodTemplateSpec`` schema, strictly.
"""

from __future__ import annotations

from typing import Any

_DNS1123 = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_INT = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}

_DEFS: dict[str, Any] = {
    "meta": {
        "type": "object",
        "required": ["name"],
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string", "pattern": _DNS1123, "maxLength": 63},
            "namespace": {"type": "string", "pattern": _DNS1123},
            "labels": _STRING_MAP,
            "annotations": _STRING_MAP,
        },
    },
    "template": {"type": "object", "required": ["spec"]},
    "startParams": _STRING_MAP,
    "headGroupSpec": {
        "type": "object",
        "required": ["rayStartParams", "template"],
        "additionalProperties": False,
        "properties": {
            "serviceType": {"enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
            "headService": {"type": "object"},
            "enableIngress": {"type": "boolean"},
            "rayStartParams": {"$ref": "#/$defs/startParams"},
            "template": {"$ref": "#/$defs/template"},
        },
    },
    "workerGroupSpec": {
        "type": "object",
        "required": ["groupName", "rayStartParams", "template"],
        "additionalProperties": False,
        "properties": {
            "groupName": {"type": "string", "minLength": 1},
            "replicas": _INT,
            "minReplicas": _INT,
            "maxReplicas": _INT,
            "numOfHosts": {"type": "integer", "minimum": 1},
            "rayStartParams": {"$ref": "#/$defs/startParams"},
            "template": {"$ref": "#/$defs/template"},
            "scaleStrategy": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "workersToDelete": {"type": "array", "items": {"type": "string"}},
                    "multihostReplicasToDelete": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
    },
    "clusterSpec": {
        "type": "object",
        "required": ["headGroupSpec"],
        "additionalProperties": False,
        "properties": {
            "headGroupSpec": {"$ref": "#/$defs/headGroupSpec"},
            "workerGroupSpecs": {"type": "array", "items": {"$ref": "#/$defs/workerGroupSpec"}},
            "rayVersion": {"type": "string"},
            "enableInTreeAutoscaling": {"type": "boolean"},
            "autoscalerOptions": {"type": "object"},
            "headServiceAnnotations": _STRING_MAP,
            "suspend": {"type": "boolean"},
        },
    },
}

RAYCLUSTER_V1: dict[str, Any] = {
    "$defs": _DEFS,
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "ray.io/v1"},
        "kind": {"const": "RayCluster"},
        "metadata": {"$ref": "#/$defs/meta"},
        "spec": {"$ref": "#/$defs/clusterSpec"},
    },
}

RAYJOB_V1: dict[str, Any] = {
    "$defs": _DEFS,
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "ray.io/v1"},
        "kind": {"const": "RayJob"},
        "metadata": {"$ref": "#/$defs/meta"},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "oneOf": [{"required": ["clusterSelector"]}, {"required": ["rayClusterSpec"]}],
            "properties": {
                "activeDeadlineSeconds": {"type": "integer", "minimum": 1},
                "backoffLimit": _INT,
                "rayClusterSpec": {"$ref": "#/$defs/clusterSpec"},
                "submitterPodTemplate": {"$ref": "#/$defs/template"},
                "metadata": _STRING_MAP,
                "clusterSelector": _STRING_MAP,
                "submitterConfig": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"backoffLimit": _INT},
                },
                "managedBy": {"enum": ["ray.io/kuberay-operator", "kueue.x-k8s.io/multikueue"]},
                "deletionStrategy": {"type": "object"},
                "entrypoint": {"type": "string", "minLength": 1},
                "runtimeEnvYAML": {"type": "string"},
                "jobId": {"type": "string"},
                "submissionMode": {"enum": ["K8sJobMode", "HTTPMode", "InteractiveMode"]},
                "entrypointResources": {"type": "string"},
                "entrypointNumCpus": {"type": "number", "minimum": 0},
                "entrypointNumGpus": {"type": "number", "minimum": 0},
                "ttlSecondsAfterFinished": _INT,
                "shutdownAfterJobFinishes": {"type": "boolean"},
                "suspend": {"type": "boolean"},
                "schedule": {"type": "string"},
            },
        },
    },
}

SCHEMAS = {"RayCluster": RAYCLUSTER_V1, "RayJob": RAYJOB_V1}


def pod_templates(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(where, template) for every pod template inside a RayCluster or RayJob."""
    spec = doc.get("spec") or {}
    cluster = spec if doc["kind"] == "RayCluster" else spec.get("rayClusterSpec") or {}
    out = []
    if cluster.get("headGroupSpec"):
        out.append(("headGroupSpec.template", cluster["headGroupSpec"]["template"]))
    for i, group in enumerate(cluster.get("workerGroupSpecs") or []):
        out.append((f"workerGroupSpecs[{i}].template", group["template"]))
    if doc["kind"] == "RayJob" and spec.get("submitterPodTemplate"):
        out.append(("submitterPodTemplate", spec["submitterPodTemplate"]))
    return out
