"""What the API server does to an object before storing it: defaulting, Kueue's mutating webhook
for Jobs, and validation (the CRD schema for Kueue's kinds, with unknown fields pruned as the API
server prunes them, and the few built-in rules the recorded shapes rely on).

Defaults are those visible in tests/data/kueue/shapes/job-suspended.json and
pod-terminated-preempted.json (Kubernetes 1.36: `pkg/apis/batch/v1/defaults.go`,
`pkg/apis/core/v1/defaults.go`, the ServiceAccount and DefaultTolerationSeconds admission plugins).
"""

from __future__ import annotations

import copy
import random
from functools import cache
from typing import Any

import yaml

from gpucommons.testing.fake_k8s import statuses
from gpucommons.testing.fake_k8s.kueue import QUEUE_LABEL
from gpucommons.testing.fake_k8s.resources import KUEUE_GV, ResourceType
from gpucommons.testing.repo_data import KUEUE_DATA

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_DEFAULT_TOLERATIONS = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]


def _container_defaults(container: dict[str, Any]) -> None:
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    image = str(container.get("image", ""))
    tag = image.rsplit("/", 1)[-1]
    latest = ":" not in tag or tag.endswith(":latest")
    container.setdefault("imagePullPolicy", "Always" if latest and "@" not in image else "IfNotPresent")


def pod_spec_defaults(spec: dict[str, Any]) -> None:
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        _container_defaults(container)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")


def job_defaults(job: dict[str, Any]) -> None:
    """`SetDefaults_Job` and the Job strategy's selector and labels (job-suspended.json)."""
    meta, spec = job["metadata"], job.setdefault("spec", {})
    uid, name = meta["uid"], meta["name"]
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("manualSelector", False)
    spec.setdefault(
        "podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
    )
    spec.setdefault("suspend", False)
    labels = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    }
    spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    template = spec.setdefault("template", {})
    template.setdefault("metadata", {}).setdefault("labels", {})
    template["metadata"]["labels"] = {**labels, **template["metadata"]["labels"]}
    pod_spec_defaults(template.setdefault("spec", {}))
    ordered = {
        k: spec[k]
        for k in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit")
        if k in spec
    }
    ordered.update(
        {k: v for k, v in spec.items() if k not in ordered and k not in ("suspend", "selector", "template")}
    )
    ordered["suspend"], ordered["selector"], ordered["template"] = (
        spec["suspend"],
        spec["selector"],
        spec["template"],
    )
    job["spec"] = ordered


def pod_defaults(pod: dict[str, Any], names: random.Random) -> None:
    """ServiceAccount (token volume and mounts), DefaultTolerationSeconds and Priority admission."""
    spec = pod.setdefault("spec", {})
    pod_spec_defaults(spec)
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    tolerations = spec.setdefault("tolerations", [])
    for toleration in _DEFAULT_TOLERATIONS:
        if not any(t.get("key") == toleration["key"] for t in tolerations):
            tolerations.append(dict(toleration))
    volume = "kube-api-access-" + "".join(names.choice(_NAME_CHARS) for _ in range(5))
    spec.setdefault("volumes", []).append(
        {
            "name": volume,
            "projected": {
                "defaultMode": 420,
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {
                        "configMap": {
                            "name": "kube-root-ca.crt",
                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        }
                    },
                    {
                        "downwardAPI": {
                            "items": [
                                {
                                    "path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                }
                            ]
                        }
                    },
                ],
            },
        }
    )
    for container in spec.get("containers") or []:
        container.setdefault("volumeMounts", []).append(
            {"name": volume, "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
        )
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}


def qos_class(spec: dict[str, Any]) -> str:
    """`pkg/apis/core/v1/helper/qos`: BestEffort without requests or limits, Guaranteed when
    every container's CPU and memory requests equal their limits, Burstable otherwise."""
    requests, guaranteed = False, True
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        limits, asked = resources.get("limits") or {}, resources.get("requests") or {}
        if limits or asked:
            requests = True
        for name in ("cpu", "memory"):
            if name not in limits or asked.get(name, limits[name]) != limits[name]:
                guaranteed = False
    if not requests:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def validate_job(resource: ResourceType, job: dict[str, Any]) -> None:
    template = (job.get("spec") or {}).get("template") or {}
    pod = template.get("spec") or {}
    name = job["metadata"]["name"]
    if not pod.get("containers"):
        raise statuses.invalid(resource, name, "spec.template.spec.containers", "Required value")
    if pod.get("restartPolicy") not in ("Never", "OnFailure"):
        raise statuses.invalid(
            resource,
            name,
            "spec.template.spec.restartPolicy",
            f'Unsupported value: "{pod.get("restartPolicy", "")}": supported values: "OnFailure", "Never"',
        )


# --- Kueue's CRD schemas ------------------------------------------------------------------------------


@cache
def crd_schema(plural: str) -> dict[str, Any] | None:
    """The v1beta2 openAPIV3Schema from tests/data/kueue/crds, or None outside a checkout."""
    path = KUEUE_DATA / "crds" / f"kueue.x-k8s.io_{plural}.yaml"
    if not path.exists():
        return None
    crd = yaml.safe_load(path.read_text())
    for version in crd["spec"]["versions"]:
        if version["name"] == "v1beta2":
            schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
            return schema
    return None


@cache
def _validator(plural: str) -> Any:
    import jsonschema

    schema = crd_schema(plural)
    if schema is None:
        return None
    return jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())


def prune(obj: Any, schema: dict[str, Any]) -> Any:
    """Drop fields the schema does not declare, as the API server does for structural CRDs."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return obj
    if isinstance(obj, dict) and "properties" in schema:
        return {k: prune(v, schema["properties"][k]) for k, v in obj.items() if k in schema["properties"]}
    if isinstance(obj, dict) and isinstance(schema.get("additionalProperties"), dict):
        return {k: prune(v, schema["additionalProperties"]) for k, v in obj.items()}
    if isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [prune(v, schema["items"]) for v in obj]
    return obj


def validate_kueue(resource: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    schema = crd_schema(resource.plural)
    if schema is None:
        return obj
    meta = obj.get("metadata", {})
    pruned: dict[str, Any] = prune({k: v for k, v in obj.items() if k != "metadata"}, schema)
    pruned["metadata"] = meta
    error = next(
        iter(sorted(_validator(resource.plural).iter_errors({**pruned, "metadata": {}}), key=str)), None
    )
    if error is not None:
        field = ".".join(str(p) for p in error.absolute_path) or "<root>"
        raise statuses.invalid(resource, meta.get("name", ""), field, f"Invalid value: {error.message}")
    return pruned


def admit_object(
    operation: str,
    resource: ResourceType,
    obj: dict[str, Any],
    old: dict[str, Any] | None,
    status_only: bool,
    *,
    names: random.Random,
    kueue: bool,
    local_queue_exists: Any,
    validate: bool,
) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    if operation == "CREATE" and resource.kind == "Job":
        job_defaults(obj)
        labels = obj["metadata"].setdefault("labels", {})
        if (
            kueue
            and QUEUE_LABEL not in labels
            and local_queue_exists(obj["metadata"]["namespace"], "default")
        ):
            labels[QUEUE_LABEL] = "default"  # LocalQueueDefaulting
        if not labels:
            del obj["metadata"]["labels"]
        if kueue and QUEUE_LABEL in labels:
            obj["spec"]["suspend"] = True  # Kueue's Job webhook (README §2)
        validate_job(resource, obj)
    elif operation == "CREATE" and resource.kind == "Pod":
        pod_defaults(obj, names)
    elif resource.kind == "Namespace":
        # the NamespaceDefaultLabelName admission step: every namespace carries its own name
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        if operation == "CREATE":
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj["status"] = {"phase": "Active"}
    if validate and resource.group_version == KUEUE_GV:
        obj = validate_kueue(resource, obj)
        if resource.kind == "Workload" and old is not None:
            before = (old.get("status") or {}).get("admission")
            after = (obj.get("status") or {}).get("admission")
            if before and after and before != after:
                raise statuses.invalid(
                    resource, obj["metadata"]["name"], "status.admission", "Invalid value: field is immutable"
                )
    return obj
