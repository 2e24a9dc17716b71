"""Where each kind we write lives in the API, and the order in which objects must be applied.

We talk to the API server over plain REST paths rather than discovery: the set of kinds GPU Commons
writes is small and fixed, and a fixed table keeps `apply` to one discovery call (is Kueue there?)
plus one GET and one PATCH per object.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Manifest = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind's REST home: `/apis/<group>/<version>/[namespaces/<ns>/]<plural>/<name>`."""

    kind: str
    api_version: str
    plural: str
    namespaced: bool

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def _root(self) -> str:
        return "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"

    def collection_path(self, namespace: str | None = None) -> str:
        """The collection; a namespaced kind without a namespace lists across all namespaces."""
        if self.namespaced and namespace is not None:
            return f"{self._root}/namespaces/{namespace}/{self.plural}"
        return f"{self._root}/{self.plural}"

    def object_path(self, name: str, namespace: str | None = None) -> str:
        return f"{self.collection_path(namespace)}/{name}"

    @property
    def resource(self) -> str:
        """`clusterqueues.kueue.x-k8s.io`, as the API server names it in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


KUEUE_GROUP_VERSION = "kueue.x-k8s.io/v1beta2"

KINDS: dict[str, Kind] = {
    k.kind: k
    for k in (
        Kind("Namespace", "v1", "namespaces", namespaced=False),
        Kind("ClusterRole", "rbac.authorization.k8s.io/v1", "clusterroles", namespaced=False),
        Kind("ClusterRoleBinding", "rbac.authorization.k8s.io/v1", "clusterrolebindings", namespaced=False),
        Kind("RoleBinding", "rbac.authorization.k8s.io/v1", "rolebindings", namespaced=True),
        Kind("NetworkPolicy", "networking.k8s.io/v1", "networkpolicies", namespaced=True),
        Kind("ResourceFlavor", KUEUE_GROUP_VERSION, "resourceflavors", namespaced=False),
        Kind("WorkloadPriorityClass", KUEUE_GROUP_VERSION, "workloadpriorityclasses", namespaced=False),
        Kind("Cohort", KUEUE_GROUP_VERSION, "cohorts", namespaced=False),
        Kind("AdmissionCheck", KUEUE_GROUP_VERSION, "admissionchecks", namespaced=False),
        Kind("ClusterQueue", KUEUE_GROUP_VERSION, "clusterqueues", namespaced=False),
        Kind("LocalQueue", KUEUE_GROUP_VERSION, "localqueues", namespaced=True),
        Kind("Workload", KUEUE_GROUP_VERSION, "workloads", namespaced=True),
        Kind("Job", "batch/v1", "jobs", namespaced=True),
        Kind("Pod", "v1", "pods", namespaced=True),
    )
}

#: The Kueue resources `apply` writes; all must be served before anything is applied.
KUEUE_PLURALS = (
    "resourceflavors",
    "workloadpriorityclasses",
    "cohorts",
    "admissionchecks",
    "clusterqueues",
    "localqueues",
)

#: Apply rank: what others refer to goes first. Namespaces before anything inside them; flavors,
#: priority classes, cohorts and admission checks before the ClusterQueues naming them (a queue whose
#: check is missing is inactive); ClusterQueues before the
#: LocalQueues pointing at them (Kueue marks a LocalQueue inactive while its ClusterQueue is missing).
_RANK = {
    "Namespace": 0,
    "ClusterRole": 0,
    "ResourceFlavor": 1,
    "WorkloadPriorityClass": 1,
    "Cohort": 1,
    "AdmissionCheck": 1,
    "ClusterQueue": 2,
    "ClusterRoleBinding": 3,
    "RoleBinding": 3,
    "NetworkPolicy": 3,
    "LocalQueue": 4,
    "Job": 5,
}


class UnknownKind(ValueError):
    """An object of a kind this module has no REST path for."""


def kind_of(obj: Manifest) -> Kind:
    kind = KINDS.get(obj.get("kind", ""))
    if kind is None or kind.api_version != obj.get("apiVersion"):
        raise UnknownKind(
            f"cannot apply {obj.get('apiVersion')} {obj.get('kind')}: not a kind GPU Commons writes"
        )
    return kind


def _cohort_depth(cohort: Manifest, parents: dict[str, str | None]) -> int:
    """Ancestors among the applied cohorts, so that a parent is applied before its children."""
    depth, seen = 0, {cohort["metadata"]["name"]}
    parent = parents.get(cohort["metadata"]["name"])
    while parent is not None and parent in parents and parent not in seen:
        seen.add(parent)
        depth += 1
        parent = parents[parent]
    return depth


def apply_order(objects: Sequence[Manifest]) -> list[Manifest]:
    """`objects` sorted by rank (stable: the renderer's order within a rank), parent cohorts first."""
    parents = {
        o["metadata"]["name"]: o.get("spec", {}).get("parentName")
        for o in objects
        if o.get("kind") == "Cohort"
    }

    def key(indexed: tuple[int, Manifest]) -> tuple[int, int, int]:
        index, obj = indexed
        depth = _cohort_depth(obj, parents) if obj.get("kind") == "Cohort" else 0
        return (_RANK.get(obj.get("kind", ""), len(_RANK)), depth, index)

    return [obj for _, obj in sorted(enumerate(objects), key=key)]


def object_key(obj: Manifest) -> tuple[str, str, str]:
    """(kind, namespace or "", name): identity of an object for pruning and reports."""
    meta = obj.get("metadata", {})
    return (obj.get("kind", ""), meta.get("namespace") or "", meta.get("name", ""))
