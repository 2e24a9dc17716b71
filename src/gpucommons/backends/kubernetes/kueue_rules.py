"""Kueue's admission rules that its CRD schemas do not carry: CEL rules and webhook checks.

A JSON-Schema validator ignores `x-kubernetes-validations` (CEL), and some checks live only in
Kueue's webhooks (pkg/webhooks/clusterqueue_webhook.go). Without an API server here, we re-check them
on rendered objects, so that `commons k8s render` never produces what `kubectl apply` would refuse.
Each rule is a small function named for the rule it mirrors.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

from gpucommons.backends.kubernetes.names import NAMESPACE_NAME_LABEL

Manifest = dict[str, Any]
Rule = Callable[[list[Manifest]], Iterator[str]]

MAX_FLAVORS_PER_QUEUE = 256
MAX_RESOURCES_PER_QUEUE = 256
MAX_FLAVOR_RESOURCE_PAIRS_PER_GROUP = 512
INT32 = (-(2**31), 2**31 - 1)

_SUFFIXES: dict[str, int | Decimal] = {
    "": 1,
    "m": Decimal("0.001"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}
_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(m|k|M|G|Ki|Mi|Gi|Ti)?$")


def parse_quantity(value: int | str) -> Decimal:
    """The subset of Kubernetes quantities the renderer writes (`8`, `500m`, `64Gi`)."""
    if isinstance(value, int):
        return Decimal(value)
    match = _QUANTITY.match(value)
    if not match:
        raise ValueError(f"not a quantity: {value!r}")
    return Decimal(match.group(1)) * Decimal(_SUFFIXES[match.group(2) or ""])


def _of_kind(objects: list[Manifest], kind: str) -> list[Manifest]:
    return [o for o in objects if o.get("kind") == kind]


def borrowing_limit_needs_a_cohort(objects: list[Manifest]) -> Iterator[str]:
    """CEL on ClusterQueue: borrowingLimit must be nil when cohort is empty (webhook: lendingLimit too)."""
    for cq in _of_kind(objects, "ClusterQueue"):
        if cq["spec"].get("cohortName"):
            continue
        for group in cq["spec"].get("resourceGroups", []):
            for flavor in group["flavors"]:
                for res in flavor["resources"]:
                    for key in ("borrowingLimit", "lendingLimit"):
                        if key in res:
                            yield f"ClusterQueue {cq['metadata']['name']}: {key} without a cohort"


def cohort_limits_need_a_parent(objects: list[Manifest]) -> Iterator[str]:
    """Kueue's Cohort webhook: borrowingLimit and lendingLimit only on a Cohort with a parent."""
    for cohort in _of_kind(objects, "Cohort"):
        if cohort["spec"].get("parentName"):
            continue
        for group in cohort["spec"].get("resourceGroups", []):
            for flavor in group["flavors"]:
                for res in flavor["resources"]:
                    for key in ("borrowingLimit", "lendingLimit"):
                        if key in res:
                            yield f"Cohort {cohort['metadata']['name']}: {key} without a parent"


def borrow_within_cohort_needs_reclaim(objects: list[Manifest]) -> Iterator[str]:
    """CEL on ClusterQueue.preemption: not (reclaimWithinCohort == Never and borrowWithinCohort != Never)."""
    for cq in _of_kind(objects, "ClusterQueue"):
        preemption = cq["spec"].get("preemption", {})
        if preemption.get("reclaimWithinCohort", "Never") == "Never" and (
            preemption.get("borrowWithinCohort", {}).get("policy", "Never") != "Never"
        ):
            yield f"ClusterQueue {cq['metadata']['name']}: borrowWithinCohort without reclaimWithinCohort"


def lending_limit_within_nominal(objects: list[Manifest]) -> Iterator[str]:
    """Webhook: lendingLimit <= nominalQuota."""
    for cq in _of_kind(objects, "ClusterQueue"):
        for group in cq["spec"].get("resourceGroups", []):
            for flavor in group["flavors"]:
                for res in flavor["resources"]:
                    if "lendingLimit" in res and parse_quantity(res["lendingLimit"]) > parse_quantity(
                        res["nominalQuota"]
                    ):
                        yield (
                            f"ClusterQueue {cq['metadata']['name']} flavor {flavor['name']} {res['name']}: "
                            "lendingLimit above nominalQuota"
                        )


def flavors_list_covered_resources_in_order(objects: list[Manifest]) -> Iterator[str]:
    """Webhook: each flavor lists exactly the group's coveredResources, in order; a flavor in one group;
    at most 256 flavors and 256 resources per queue, 512 flavor-resource pairs per group."""
    for cq in [*_of_kind(objects, "ClusterQueue"), *_of_kind(objects, "Cohort")]:
        name = f"{cq['kind']} {cq['metadata']['name']}"
        seen: set[str] = set()
        resources: set[str] = set()
        for group in cq["spec"].get("resourceGroups", []):
            covered = group["coveredResources"]
            if len(set(covered)) != len(covered) or resources.intersection(covered):
                yield f"{name}: a resource is covered twice"
            resources.update(covered)
            if len(group["flavors"]) * len(covered) > MAX_FLAVOR_RESOURCE_PAIRS_PER_GROUP:
                yield f"{name}: over {MAX_FLAVOR_RESOURCE_PAIRS_PER_GROUP} flavor-resource pairs"
            for flavor in group["flavors"]:
                if [r["name"] for r in flavor["resources"]] != covered:
                    yield f"{name} flavor {flavor['name']}: resources are not coveredResources"
                if flavor["name"] in seen:
                    yield f"{name}: flavor {flavor['name']} listed twice"
                seen.add(flavor["name"])
        if len(seen) > MAX_FLAVORS_PER_QUEUE or len(resources) > MAX_RESOURCES_PER_QUEUE:
            yield f"{name}: too many flavors or resources"


def references_resolve(objects: list[Manifest]) -> Iterator[str]:
    """Everything a queue names is rendered too: flavors, cohorts, admission checks, parent cohorts,
    the LocalQueue's ClusterQueue and namespace. (Kueue would accept dangling names and leave the
    queue inactive.)"""
    flavors = {o["metadata"]["name"] for o in _of_kind(objects, "ResourceFlavor")}
    cohort_names = {o["metadata"]["name"] for o in _of_kind(objects, "Cohort")}
    queues = {o["metadata"]["name"] for o in _of_kind(objects, "ClusterQueue")}
    namespaces = {o["metadata"]["name"] for o in _of_kind(objects, "Namespace")}
    checks = {o["metadata"]["name"] for o in _of_kind(objects, "AdmissionCheck")}
    for cq in _of_kind(objects, "ClusterQueue"):
        spec = cq["spec"]
        if spec.get("cohortName") and spec["cohortName"] not in cohort_names:
            yield f"ClusterQueue {cq['metadata']['name']}: unknown cohort {spec['cohortName']}"
        for check in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []:
            if check["name"] not in checks:
                yield f"ClusterQueue {cq['metadata']['name']}: unknown admission check {check['name']}"
        for group in spec.get("resourceGroups", []):
            for flavor in group["flavors"]:
                if flavor["name"] not in flavors:
                    yield f"ClusterQueue {cq['metadata']['name']}: unknown flavor {flavor['name']}"
        selected = spec.get("namespaceSelector", {}).get("matchLabels", {}).get(NAMESPACE_NAME_LABEL)
        if selected not in namespaces:
            yield f"ClusterQueue {cq['metadata']['name']}: selects no rendered namespace"
    for cohort in _of_kind(objects, "Cohort"):
        parent = cohort["spec"].get("parentName")
        if parent is not None and parent not in cohort_names:
            yield f"Cohort {cohort['metadata']['name']}: unknown parent {parent}"
        for group in cohort["spec"].get("resourceGroups", []):
            for flavor in group["flavors"]:
                if flavor["name"] not in flavors:
                    yield f"Cohort {cohort['metadata']['name']}: unknown flavor {flavor['name']}"
    for lq in _of_kind(objects, "LocalQueue"):
        if lq["spec"]["clusterQueue"] not in queues:
            yield f"LocalQueue {lq['metadata']['namespace']}/{lq['metadata']['name']}: unknown ClusterQueue"
        if lq["metadata"]["namespace"] not in namespaces:
            ns = lq["metadata"]["namespace"]
            yield f"LocalQueue {lq['metadata']['name']}: namespace {ns} is not rendered"


def cohort_tree_has_no_cycle(objects: list[Manifest]) -> Iterator[str]:
    """Kueue marks every cohort of a cycle inactive."""
    parent = {o["metadata"]["name"]: o["spec"].get("parentName") for o in _of_kind(objects, "Cohort")}
    for start in parent:
        seen = {start}
        node = parent[start]
        while node is not None:
            if node in seen:
                yield f"Cohort {start}: its parents form a cycle"
                break
            seen.add(node)
            node = parent.get(node)


def priority_values_are_int32(objects: list[Manifest]) -> Iterator[str]:
    for wpc in _of_kind(objects, "WorkloadPriorityClass"):
        if not INT32[0] <= wpc["value"] <= INT32[1]:
            yield f"WorkloadPriorityClass {wpc['metadata']['name']}: value outside int32"


def flavor_taints_and_tolerations(objects: list[Manifest]) -> Iterator[str]:
    """CEL on ResourceFlavor: taint effects, toleration operators and keys."""
    effects = {"NoSchedule", "PreferNoSchedule", "NoExecute"}
    for rf in _of_kind(objects, "ResourceFlavor"):
        spec = rf["spec"]
        name = rf["metadata"]["name"]
        if len(spec.get("nodeTaints", [])) > 8 or len(spec.get("tolerations", [])) > 8:
            yield f"ResourceFlavor {name}: more than 8 taints or tolerations"
        for taint in spec.get("nodeTaints", []):
            if taint.get("effect") not in effects:
                yield f"ResourceFlavor {name}: bad taint effect {taint.get('effect')}"
        for tol in spec.get("tolerations", []):
            operator = tol.get("operator")
            if "key" not in tol and operator != "Exists":
                yield f"ResourceFlavor {name}: toleration without key must use operator Exists"
            if operator is not None and operator not in ("Equal", "Exists"):
                yield f"ResourceFlavor {name}: bad toleration operator {operator}"
            if operator == "Exists" and "value" in tol:
                yield f"ResourceFlavor {name}: toleration with Exists has a value"
            if "tolerationSeconds" in tol and tol.get("effect") != "NoExecute":
                yield f"ResourceFlavor {name}: tolerationSeconds needs effect NoExecute"
            if "effect" in tol and tol["effect"] not in effects:
                yield f"ResourceFlavor {name}: bad toleration effect {tol['effect']}"


RULES: tuple[Rule, ...] = (
    borrowing_limit_needs_a_cohort,
    cohort_limits_need_a_parent,
    borrow_within_cohort_needs_reclaim,
    lending_limit_within_nominal,
    flavors_list_covered_resources_in_order,
    references_resolve,
    cohort_tree_has_no_cycle,
    priority_values_are_int32,
    flavor_taints_and_tolerations,
)


def kueue_rule_violations(objects: list[Manifest]) -> list[str]:
    """Every rule broken by `objects` (empty when Kueue's CEL rules and webhooks would accept them)."""
    return [problem for rule in RULES for problem in rule(objects)]
