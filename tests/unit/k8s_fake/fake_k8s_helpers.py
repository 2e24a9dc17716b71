"""The recorded shapes (tests/data/kueue/shapes) and a comparison that ignores what a run cannot
reproduce: uids, names made from them, times, resourceVersions, IPs and digests."""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from typing import Any

import yaml

from gpucommons.testing.fake_k8s import FakeCluster
from gpucommons.testing.repo_data import KUEUE_DATA

SHAPES = KUEUE_DATA / "shapes"
NAMESPACE = "team-nlp"
JOB = "commons-t0a1b2c3d4e"
_PATTERNS = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uid>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"), "<time>"),
    (re.compile(r"[0-9a-f]{40,}"), "<hex>"),
    (re.compile(r"10\.42\.\d+\.\d+"), "<pod-ip>"),
    (re.compile(r"kube-api-access-[a-z0-9]{5}"), "kube-api-access-<x>"),
    (re.compile(r"(job-[a-z0-9-]+)-[0-9a-f]{5}$"), r"\1-<hash>"),
    (re.compile(r"^(commons-[a-z0-9]+)-[a-z0-9]{5}$"), r"\1-<pod>"),
]
_DROPPED = {"resourceVersion", "managedFields", "accumulatedPastExecutionTimeSeconds"}


def shape(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SHAPES / name).read_text())
    return data


def as_created(name: str) -> dict[str, Any]:
    """A recorded object as a client would send it: no status, no server fields."""
    obj = shape(name)
    obj.pop("status", None)
    for key in ("uid", "resourceVersion", "generation", "creationTimestamp"):
        obj["metadata"].pop(key, None)
    return obj


def job_from_shape(name: str = "job-suspended.json", job: str = JOB, gpus: int = 8) -> dict[str, Any]:
    """The recorded Job as its author wrote it (before the API server's defaults)."""
    obj = as_created("job-suspended.json")
    obj["metadata"]["name"] = job
    spec = obj["spec"]
    spec.pop("selector")
    spec["suspend"] = False
    spec["template"]["metadata"]["labels"] = {}
    resources = spec["template"]["spec"]["containers"][0]["resources"]
    resources["requests"]["nvidia.com/gpu"] = resources["limits"]["nvidia.com/gpu"] = str(gpus)
    resources["requests"]["cpu"] = str(4 * gpus)
    resources["requests"]["memory"] = f"{32 * gpus}Gi"
    return obj


def normalise(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: normalise(v, k) for k, v in value.items() if k not in _DROPPED}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, str):
        for pattern, replacement in _PATTERNS:
            value = pattern.sub(replacement, value)
    return value


def without(obj: dict[str, Any], *paths: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    for path in paths:
        node: Any = out
        keys = path.split(".")
        for key in keys[:-1]:
            node = node.get(key, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node.pop(keys[-1], None)
    return out


def setup_nlp(cluster: FakeCluster, with_check: bool = False) -> None:
    """The recorded scenario's setup objects (cfg-*.json) and a node of the h100 flavor."""
    cluster.put(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": NAMESPACE, "labels": {"kubernetes.io/metadata.name": NAMESPACE}},
        }
    )
    names = ["cfg-resourceflavor-h100.json", "cfg-workloadpriorityclass-training.json"]
    if with_check:
        names += [
            "cfg-admissioncheck-gpucommons-governance.json",
            "cfg-clusterqueue-nlp-with-admission-check.json",
        ]
    else:
        names.append("cfg-clusterqueue-nlp.json")
    names.append("cfg-localqueue-default.json")
    for name in names:
        cluster.apply(as_created(name))
    cluster.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "urgent"},
            "value": 1000,
        }
    )
    cluster.add_node(
        "gpu-h100-node-07",
        labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        gpus=64,
        cpu="512",
        memory="8Ti",
        taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    )


@cache
def crd_schema(plural: str) -> dict[str, Any]:
    crd = yaml.safe_load((KUEUE_DATA / "crds" / f"kueue.x-k8s.io_{plural}.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta2")
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema
