"""The fake's own table of served resources (independent of the code under test) and its recordings.

Built-in kinds: plural, kind, group/version, scope and whether `/status` is a subresource, as
`kubectl api-resources` lists them on Kubernetes 1.36. Kueue's come from the recorded discovery
answer (`recordings/discovery_kueue_v1beta2.json`, itself from the CRDs in tests/data/kueue/crds).
Each `recordings/*.json` file names where its shape comes from in its `source` field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

RECORDINGS = Path(__file__).resolve().parent / "recordings"
KUEUE_GV = "kueue.x-k8s.io/v1beta2"
VISIBILITY_GV = "visibility.kueue.x-k8s.io/v1beta2"


@dataclass(frozen=True, slots=True)
class ResourceType:
    plural: str
    kind: str
    group_version: str
    namespaced: bool
    status: bool
    short_names: tuple[str, ...] = ()

    @property
    def group(self) -> str:
        return self.group_version.rpartition("/")[0]

    @property
    def qualified(self) -> str:
        """`clusterqueues.kueue.x-k8s.io`, `pods`: how API errors name the resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None, name: str | None = None) -> str:
        prefix = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        where = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        return f"{prefix}{where}/{self.plural}" + (f"/{name}" if name else "")


_BUILTIN = (
    ResourceType("namespaces", "Namespace", "v1", False, True, ("ns",)),
    ResourceType("nodes", "Node", "v1", False, True, ("no",)),
    ResourceType("pods", "Pod", "v1", True, True, ("po",)),
    ResourceType("configmaps", "ConfigMap", "v1", True, False, ("cm",)),
    ResourceType("secrets", "Secret", "v1", True, False),
    ResourceType("serviceaccounts", "ServiceAccount", "v1", True, False, ("sa",)),
    ResourceType("services", "Service", "v1", True, True, ("svc",)),
    ResourceType("events", "Event", "v1", True, False, ("ev",)),
    ResourceType("persistentvolumeclaims", "PersistentVolumeClaim", "v1", True, True, ("pvc",)),
    ResourceType("jobs", "Job", "batch/v1", True, True),
    ResourceType("leases", "Lease", "coordination.k8s.io/v1", True, False),
    ResourceType("clusterroles", "ClusterRole", "rbac.authorization.k8s.io/v1", False, False),
    ResourceType("clusterrolebindings", "ClusterRoleBinding", "rbac.authorization.k8s.io/v1", False, False),
    ResourceType("roles", "Role", "rbac.authorization.k8s.io/v1", True, False),
    ResourceType("rolebindings", "RoleBinding", "rbac.authorization.k8s.io/v1", True, False),
    ResourceType("networkpolicies", "NetworkPolicy", "networking.k8s.io/v1", True, False, ("netpol",)),
)


def recording(name: str) -> tuple[int, Any]:
    data = json.loads((RECORDINGS / f"{name}.json").read_text())
    return int(data["status"]), data["body"]


@cache
def kueue_discovery() -> dict[str, Any]:
    body: dict[str, Any] = recording("discovery_kueue_v1beta2")[1]
    return body


@cache
def all_resources() -> tuple[ResourceType, ...]:
    listing = kueue_discovery()["resources"]
    with_status = {r["name"].split("/")[0] for r in listing if r["name"].endswith("/status")}
    kueue = tuple(
        ResourceType(
            r["name"],
            r["kind"],
            KUEUE_GV,
            r["namespaced"],
            r["name"] in with_status,
            tuple(r.get("shortNames", ())),
        )
        for r in listing
        if "/" not in r["name"]
    )
    return _BUILTIN + kueue


@cache
def by_plural() -> dict[tuple[str, str], ResourceType]:
    """(group/version, plural) → type."""
    return {(r.group_version, r.plural): r for r in all_resources()}


@cache
def by_kind() -> dict[str, ResourceType]:
    return {r.kind: r for r in all_resources()}


def resource_for(kind_or_plural: str) -> ResourceType:
    """`Job`, `jobs`, `workloads`: the one type of that kind or plural name."""
    kinds = by_kind()
    if kind_or_plural in kinds:
        return kinds[kind_or_plural]
    for resource in all_resources():
        if resource.plural == kind_or_plural or kind_or_plural in resource.short_names:
            return resource
    raise KeyError(f"the fake cluster serves no resource {kind_or_plural!r}")


def group_versions() -> list[str]:
    return sorted({r.group_version for r in all_resources()} | {VISIBILITY_GV})


def resource_list(group_version: str) -> dict[str, Any]:
    """`GET /api/v1`, `/apis/batch/v1`, ...: a meta/v1 APIResourceList (k8s.io/apimachinery
    pkg/apis/meta/v1/types.go), verbs as the API server lists them."""
    if group_version == KUEUE_GV:
        return kueue_discovery()
    if group_version == VISIBILITY_GV:
        resources = [
            {
                "name": "clusterqueues",
                "singularName": "clusterqueue",
                "namespaced": False,
                "kind": "ClusterQueue",
                "verbs": ["get", "list"],
            },
            {
                "name": "clusterqueues/pendingworkloads",
                "singularName": "",
                "namespaced": False,
                "kind": "PendingWorkloadsSummary",
                "verbs": ["get"],
            },
            {
                "name": "localqueues",
                "singularName": "localqueue",
                "namespaced": True,
                "kind": "LocalQueue",
                "verbs": ["get", "list"],
            },
            {
                "name": "localqueues/pendingworkloads",
                "singularName": "",
                "namespaced": True,
                "kind": "PendingWorkloadsSummary",
                "verbs": ["get"],
            },
        ]
    else:
        verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        resources = []
        for r in all_resources():
            if r.group_version != group_version:
                continue
            resources.append(
                {
                    "name": r.plural,
                    "singularName": r.kind.lower(),
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": verbs,
                    **({"shortNames": list(r.short_names)} if r.short_names else {}),
                }
            )
            if r.status:
                resources.append(
                    {
                        "name": f"{r.plural}/status",
                        "singularName": "",
                        "namespaced": r.namespaced,
                        "kind": r.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
            if r.plural == "pods":
                resources.append(
                    {
                        "name": "pods/log",
                        "singularName": "",
                        "namespaced": True,
                        "kind": "Pod",
                        "verbs": ["get"],
                    }
                )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }
