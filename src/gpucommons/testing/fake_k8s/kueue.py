"""Kueue's decisions, emulated on the cluster's own objects (pure: objects in, decisions out).

Every name, condition and message follows tests/data/kueue/shapes/README.md (Kueue v0.19.2 read at
commit 8eab6877, defaults assumed there); the section is cited beside each. What is emulated:

- the Workload Kueue's Job reconciler makes for a Job (§2): name hash, owner, labels, pod sets;
- quota as Kueue's hierarchical cohorts compute it (`pkg/cache/.../resource_node.go`: `available`,
  `potentialAvailable`, lending limits kept as guaranteed quota, borrowing limits capping what a
  queue takes from its cohort);
- flavor assignment in the ClusterQueue's flavor order with the flavor assigner's messages (§3.2);
- classic preemption (§3.3): own queue's lower-priority workloads per `withinClusterQueue`, other
  queues' workloads while their queue borrows per `reclaimWithinCohort` (and `borrowWithinCohort`),
  other queues first, lowest priority first, most recently admitted first, then the fewest victims;
- queue order: priority, then creation time (BestEffortFIFO skips a head that does not fit,
  StrictFIFO waits on it).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Any

from gpucommons.testing.fake_k8s.quantity import format_quantity, parse_quantity, pod_requests

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
FINALIZER = "kueue.x-k8s.io/resource-in-use"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
STOPPING_ANNOTATION = "kueue.x-k8s.io/stopping"
#: Labels Kueue strips from the pod template it copies into the Workload (§2, `cleanLabels`).
CLEANED_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid", "job-name")
FlavorResource = tuple[str, str]


def workload_name(job_name: str, job_uid: str) -> str:
    """§2: `job-<name>-<first 5 hex of sha1("Job\\nbatch\\n<name>\\n<uid>")>`, prefix cut to 247."""
    digest = hashlib.sha1(f"Job\nbatch\n{job_name}\n{job_uid}".encode()).hexdigest()[:5]
    return f"job-{job_name}"[:247] + "-" + digest


# --- conditions ----------------------------------------------------------------------------------


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def is_true(obj: dict[str, Any], kind: str) -> bool:
    cond = condition(obj, kind)
    return cond is not None and cond.get("status") == "True"


def set_condition(
    obj: dict[str, Any],
    kind: str,
    status: str,
    reason: str,
    message: str,
    now: str,
    generation: bool = True,
    probe: bool = False,
) -> None:
    """apimachinery's `SetStatusCondition` (§3): lastTransitionTime moves only when status flips;
    reason, message and observedGeneration are overwritten in place. `generation=False` leaves
    observedGeneration out (Kueue's Preempted=True, §3.1); `probe` adds Job's lastProbeTime."""
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    new: dict[str, Any] = {"type": kind, "status": status}
    if generation and "generation" in obj["metadata"]:
        new["observedGeneration"] = obj["metadata"]["generation"]
    if probe:
        new["lastProbeTime"] = now
    new["lastTransitionTime"] = now
    new["reason"] = reason
    new["message"] = message
    for index, old in enumerate(conditions):
        if old.get("type") == kind:
            if (old.get("status"), old.get("reason"), old.get("message")) == (status, reason, message):
                return  # nothing to say: the writer skips it (observedGeneration stays, §3.1)
            if old.get("status") == status:
                new["lastTransitionTime"] = old.get("lastTransitionTime", now)
            conditions[index] = new
            return
    conditions.append(new)


def remove_condition(obj: dict[str, Any], kind: str) -> None:
    status = obj.get("status") or {}
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != kind]


# --- the Workload of a Job (§2) -------------------------------------------------------------------


def pod_count(job: dict[str, Any]) -> int:
    """`podsCount`: parallelism, or completions when smaller."""
    spec = job["spec"]
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    return min(parallelism, int(completions)) if completions is not None else parallelism


def workload_for_job(job: dict[str, Any], priority: tuple[str, int] | None) -> dict[str, Any]:
    """01-created.json: what Kueue's Job reconciler creates (no status yet)."""
    meta = job["metadata"]
    template = copy.deepcopy(job["spec"]["template"])
    labels = {
        k: v for k, v in (template.get("metadata") or {}).get("labels", {}).items() if k not in CLEANED_LABELS
    }
    template.setdefault("metadata", {})["labels"] = labels
    spec: dict[str, Any] = {"active": True, "queueName": meta["labels"][QUEUE_LABEL]}
    if priority is not None:
        spec["priorityClassRef"] = {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": priority[0],
        }
        spec["priority"] = priority[1]
    else:
        spec["priority"] = 0
    spec["podSets"] = [
        {
            "name": "main",
            "count": pod_count(job),
            "template": template,
            "topologyRequest": {"podIndexLabel": "batch.kubernetes.io/job-completion-index"},
        }
    ]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": workload_name(meta["name"], meta["uid"]),
            "namespace": meta["namespace"],
            "labels": {JOB_UID_LABEL: meta["uid"]},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "finalizers": [FINALIZER],
        },
        "spec": spec,
    }


def podset_requests(workload: dict[str, Any]) -> list[tuple[str, int, dict[str, Fraction]]]:
    """(pod set, count, total request of the pod set) for each pod set."""
    out = []
    for podset in workload["spec"].get("podSets") or []:
        per_pod = pod_requests((podset.get("template") or {}).get("spec") or {})
        count = int(podset.get("count", 1))
        out.append((podset["name"], count, {r: q * count for r, q in per_pod.items()}))
    return out


def resource_requests_status(workload: dict[str, Any]) -> list[dict[str, Any]]:
    """`status.resourceRequests` (02): per pod set totals, formatted."""
    return [
        {"name": name, "resources": {r: format_quantity(r, q) for r, q in sorted(total.items())}}
        for name, _, total in podset_requests(workload)
    ]


def usage_of(workload: dict[str, Any]) -> dict[FlavorResource, Fraction]:
    """What an admitted Workload holds, from `status.admission` (flavor, resource) → amount."""
    usage: dict[FlavorResource, Fraction] = {}
    admission = (workload.get("status") or {}).get("admission") or {}
    for assignment in admission.get("podSetAssignments") or []:
        flavors = assignment.get("flavors") or {}
        for resource, amount in (assignment.get("resourceUsage") or {}).items():
            if resource in flavors:
                fr = (flavors[resource], resource)
                usage[fr] = usage.get(fr, Fraction(0)) + parse_quantity(amount)
    return usage


# --- quota tree -----------------------------------------------------------------------------------


@dataclass
class Quota:
    nominal: Fraction = Fraction(0)
    borrowing: Fraction | None = None
    lending: Fraction | None = None


@dataclass
class Node:
    """A ClusterQueue or a Cohort in Kueue's resource tree."""

    name: str
    is_queue: bool
    parent: str | None = None
    quotas: dict[FlavorResource, Quota] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)


def _quotas(resource_groups: Iterable[dict[str, Any]]) -> dict[FlavorResource, Quota]:
    quotas: dict[FlavorResource, Quota] = {}
    for group in resource_groups:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                quotas[(flavor["name"], res["name"])] = Quota(
                    parse_quantity(res.get("nominalQuota", 0)),
                    parse_quantity(res["borrowingLimit"]) if "borrowingLimit" in res else None,
                    parse_quantity(res["lendingLimit"]) if "lendingLimit" in res else None,
                )
    return quotas


class QuotaTree:
    """Kueue's hierarchical quota arithmetic over ClusterQueues and Cohorts, with a usage map that
    preemption can simulate changes on."""

    def __init__(self, cluster_queues: list[dict[str, Any]], cohorts: list[dict[str, Any]]) -> None:
        self.nodes: dict[str, Node] = {}
        for cohort in cohorts:
            spec = cohort.get("spec") or {}
            self.nodes["cohort:" + cohort["metadata"]["name"]] = Node(
                cohort["metadata"]["name"],
                False,
                _cohort_key(spec.get("parentName")),
                _quotas(spec.get("resourceGroups") or []),
            )
        for cq in cluster_queues:
            spec = cq.get("spec") or {}
            self.nodes["cq:" + cq["metadata"]["name"]] = Node(
                cq["metadata"]["name"],
                True,
                _cohort_key(spec.get("cohortName")),
                _quotas(spec.get("resourceGroups") or []),
            )
        for node in list(self.nodes.values()):  # implicit cohorts: named but not created
            parent = node.parent
            while parent is not None and parent not in self.nodes:
                self.nodes[parent] = Node(parent.split(":", 1)[1], False)
                parent = None
        for key, node in self.nodes.items():
            if node.parent is not None:
                self.nodes[node.parent].children.append(key)
        self.usage: dict[str, dict[FlavorResource, Fraction]] = {
            k: {} for k in self.nodes if k.startswith("cq:")
        }

    def add(self, cq: str, usage: dict[FlavorResource, Fraction], sign: int = 1) -> None:
        mine = self.usage.setdefault("cq:" + cq, {})
        for fr, amount in usage.items():
            mine[fr] = mine.get(fr, Fraction(0)) + sign * amount

    def _subtree_quota(self, key: str, fr: FlavorResource) -> Fraction:
        node = self.nodes[key]
        total = node.quotas.get(fr, Quota()).nominal
        for child in node.children:
            total += self._subtree_quota(child, fr) - self._local_quota(child, fr)
        return total

    def _local_quota(self, key: str, fr: FlavorResource) -> Fraction:
        lending = self.nodes[key].quotas.get(fr, Quota()).lending
        if lending is None:
            return Fraction(0)
        return max(Fraction(0), self._subtree_quota(key, fr) - lending)

    def _usage(self, key: str, fr: FlavorResource) -> Fraction:
        if key.startswith("cq:"):
            return self.usage.get(key, {}).get(fr, Fraction(0))
        return sum(
            (
                max(Fraction(0), self._usage(c, fr) - self._local_quota(c, fr))
                for c in self.nodes[key].children
            ),
            Fraction(0),
        )

    def available(self, key: str, fr: FlavorResource) -> Fraction:
        node = self.nodes[key]
        usage, subtree = self._usage(key, fr), self._subtree_quota(key, fr)
        if node.parent is None:
            return subtree - usage
        local = self._local_quota(key, fr)
        parent_available = self.available(node.parent, fr)
        borrowing = node.quotas.get(fr, Quota()).borrowing
        if borrowing is not None:
            stored = subtree - local
            used = max(Fraction(0), usage - local)
            parent_available = min(stored - used + borrowing, parent_available)
        return max(Fraction(0), local - usage) + parent_available

    def potential(self, key: str, fr: FlavorResource) -> Fraction:
        node = self.nodes[key]
        if node.parent is None:
            return self._subtree_quota(key, fr)
        potential = self._local_quota(key, fr) + self.potential(node.parent, fr)
        borrowing = node.quotas.get(fr, Quota()).borrowing
        if borrowing is not None:
            potential = min(potential, self._subtree_quota(key, fr) + borrowing)
        return potential

    def nominal(self, cq: str, fr: FlavorResource) -> Fraction:
        return self.nodes["cq:" + cq].quotas.get(fr, Quota()).nominal

    def borrowing(self, cq: str, fr: FlavorResource) -> bool:
        return self.usage.get("cq:" + cq, {}).get(fr, Fraction(0)) > self.nominal(cq, fr)

    def root(self, cq: str) -> str:
        key = "cq:" + cq
        while self.nodes[key].parent is not None:
            key = self.nodes[key].parent or key
        return key

    def path(self, cq: str) -> str:
        """§3.3: `/<root cohort>/…/<cq>`, or `/<cq>` without a cohort."""
        names, key = [], "cq:" + cq
        while True:
            names.append(self.nodes[key].name)
            parent = self.nodes[key].parent
            if parent is None:
                break
            key = parent
        return "/" + "/".join(reversed(names))


def _cohort_key(name: str | None) -> str | None:
    return f"cohort:{name}" if name else None


# --- flavor assignment (§3.2) ---------------------------------------------------------------------


@dataclass
class Assignment:
    mode: str  # "fit" | "preempt" | "nofit"
    flavors: dict[str, dict[str, str]] = field(default_factory=dict)  # pod set → resource → flavor
    usage: dict[FlavorResource, Fraction] = field(default_factory=dict)
    message: str = ""
    needs: set[FlavorResource] = field(default_factory=set)  # what preemption must free
    borrows: bool = False


def tolerated(taint: dict[str, Any], tolerations: list[dict[str, Any]]) -> bool:
    for toleration in tolerations:
        operator = toleration.get("operator", "Equal")
        if toleration.get("effect") not in (None, "", taint.get("effect")):
            continue
        if operator == "Exists" and toleration.get("key") in (None, "", taint.get("key")):
            return True
        if (
            operator == "Equal"
            and toleration.get("key") == taint.get("key")
            and toleration.get("value", "") == taint.get("value", "")
        ):
            return True
    return False


def assign_flavors(
    workload: dict[str, Any],
    cq: dict[str, Any],
    flavors: dict[str, dict[str, Any]],
    tree: QuotaTree,
    excluded_prefixes: tuple[str, ...] = (),
) -> Assignment:
    """Kueue's flavor assigner for a workload in `cq` against the current usage in `tree`."""
    cq_name = cq["metadata"]["name"]
    groups = (cq.get("spec") or {}).get("resourceGroups") or []
    result = Assignment("fit")
    messages: list[str] = []
    modes: list[str] = []
    for podset, template, total in _podsets(workload):
        wanted = {r: q for r, q in total.items() if not r.startswith(excluded_prefixes)}
        chosen: dict[str, str] = {}
        reasons: list[str] = []
        podset_mode = "fit"
        for resource in sorted(wanted):
            if not any(resource in g.get("coveredResources", []) for g in groups):
                reasons.append(f"resource {resource} unavailable in ClusterQueue")
                podset_mode = "nofit"
        for group in groups:
            covered = [r for r in group.get("coveredResources", []) if r in wanted]
            if not covered or podset_mode == "nofit":
                continue
            best: tuple[str, str, set[FlavorResource], bool] | None = None  # (mode, flavor, needs, borrows)
            for flavor in group.get("flavors") or []:
                name = flavor["name"]
                rf = flavors.get(name)
                if rf is None:
                    reasons.append(f"flavor {name} not found")
                    continue
                why = _flavor_mismatch(name, rf, template)
                if why:
                    reasons.append(why)
                    continue
                mode, needs, borrows = "fit", set[FlavorResource](), False
                for resource in covered:
                    fr = (name, resource)
                    request = wanted[resource] + result.usage.get(fr, Fraction(0))
                    available = tree.available("cq:" + cq_name, fr)
                    if request > tree.potential("cq:" + cq_name, fr):
                        earlier = format_quantity(resource, result.usage.get(fr, Fraction(0)))
                        asked = format_quantity(resource, wanted[resource])
                        most = format_quantity(resource, tree.potential("cq:" + cq_name, fr))
                        reasons.append(
                            f"insufficient quota for {resource} in flavor {name}, previously considered "
                            f"podsets requests ({earlier}) + current podset request ({asked}) > "
                            f"maximum capacity ({most})"
                        )
                        mode = "nofit"
                        break
                    if request > available:
                        reasons.append(
                            f"insufficient unused quota for {resource} in flavor {name}, "
                            f"{format_quantity(resource, request - available)} more needed"
                        )
                        mode, needs = "preempt", needs | {fr}
                    current = tree.usage.get("cq:" + cq_name, {}).get(fr, Fraction(0))
                    if current + request > tree.nominal(cq_name, fr):
                        borrows = True
                if mode == "fit":
                    best = ("fit", name, needs, borrows)
                    break
                if mode == "preempt" and best is None:
                    best = ("preempt", name, needs, borrows)
            if best is None:
                podset_mode = "nofit"
                continue
            mode, name, needs, borrows = best
            for resource in covered:
                chosen[resource] = name
                fr = (name, resource)
                result.usage[fr] = result.usage.get(fr, Fraction(0)) + wanted[resource]
            result.needs |= needs
            result.borrows = result.borrows or borrows
            if mode == "preempt" and podset_mode == "fit":
                podset_mode = "preempt"
        result.flavors[podset] = chosen
        modes.append(podset_mode)
        if podset_mode != "fit":
            messages.append(f"couldn't assign flavors to pod set {podset}: {', '.join(sorted(set(reasons)))}")
    result.mode = "nofit" if "nofit" in modes else ("preempt" if "preempt" in modes else "fit")
    result.message = "; ".join(messages)
    return result


def _podsets(workload: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Fraction]]]:
    out = []
    for podset in workload["spec"].get("podSets") or []:
        template = podset.get("template") or {}
        count = int(podset.get("count", 1))
        per_pod = pod_requests(template.get("spec") or {})
        out.append((podset["name"], template, {r: q * count for r, q in per_pod.items()}))
    return out


def _flavor_mismatch(name: str, flavor: dict[str, Any], template: dict[str, Any]) -> str:
    spec = flavor.get("spec") or {}
    pod = template.get("spec") or {}
    node_labels = spec.get("nodeLabels") or {}
    for key, value in (pod.get("nodeSelector") or {}).items():
        if key in node_labels and node_labels[key] != value:
            return f"flavor {name} doesn't match node affinity"
    for taint in spec.get("nodeTaints") or []:
        if not tolerated(taint, pod.get("tolerations") or []):
            text = f"{taint.get('key')}={taint.get('value', '')}:{taint.get('effect')}"
            return f"untolerated taint {{{text}}} in flavor {name}"
    return ""


def assignment_status(workload: dict[str, Any], assignment: Assignment, cq_name: str) -> dict[str, Any]:
    """`status.admission` (03/04)."""
    podset_assignments = []
    for podset, count, total in podset_requests(workload):
        flavors = assignment.flavors.get(podset, {})
        podset_assignments.append(
            {
                "name": podset,
                "flavors": dict(sorted(flavors.items())),
                "resourceUsage": {r: format_quantity(r, total[r]) for r in sorted(flavors)},
                "count": count,
            }
        )
    return {"clusterQueue": cq_name, "podSetAssignments": podset_assignments}


# --- preemption (§3.3) ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    workload: dict[str, Any]
    cq: str
    priority: int
    admitted_at: str
    usage: dict[FlavorResource, Fraction]

    @property
    def key(self) -> tuple[str, str]:
        return (self.workload["metadata"]["namespace"], self.workload["metadata"]["name"])


def preemption_targets(
    preemptor: dict[str, Any],
    cq: dict[str, Any],
    assignment: Assignment,
    admitted: list[Candidate],
    tree: QuotaTree,
) -> list[tuple[Candidate, str]]:
    """The fewest admitted workloads whose removal lets `preemptor` fit, with the Preempted reason of
    each (InClusterQueue, InCohortReclamation, InCohortReclaimWhileBorrowing); [] when none will do."""
    cq_name = cq["metadata"]["name"]
    policy = (cq.get("spec") or {}).get("preemption") or {}
    within = policy.get("withinClusterQueue", "Never")
    reclaim = policy.get("reclaimWithinCohort", "Never")
    borrow_within = ((policy.get("borrowWithinCohort") or {}).get("policy")) or "Never"
    priority = int(preemptor["spec"].get("priority", 0))
    created = preemptor["metadata"].get("creationTimestamp", "")
    needed = assignment.needs
    root = tree.root(cq_name)
    own: list[Candidate] = []
    others: list[Candidate] = []
    for cand in admitted:
        if not (set(cand.usage) & needed):
            continue
        if cand.cq == cq_name:
            lower = cand.priority < priority
            newer_equal = (
                cand.priority == priority and cand.workload["metadata"].get("creationTimestamp", "") > created
            )
            if (within == "LowerPriority" and lower) or (
                within == "LowerOrNewerEqualPriority" and (lower or newer_equal)
            ):
                own.append(cand)
        elif tree.root(cand.cq) == root and root != "cq:" + cq_name:
            others.append(cand)

    def ordered(cands: list[Candidate]) -> list[Candidate]:
        return sorted(cands, key=lambda c: (c.cq == cq_name, c.priority, _neg(c.admitted_at), c.key))

    within_nominal = all(
        tree.usage.get("cq:" + cq_name, {}).get(fr, Fraction(0)) + assignment.usage.get(fr, Fraction(0))
        <= tree.nominal(cq_name, fr)
        for fr in assignment.usage
    )
    attempts: list[tuple[list[Candidate], bool]] = []
    if within_nominal:
        reclaimable = [
            c for c in others if reclaim == "Any" or (reclaim == "LowerPriority" and c.priority < priority)
        ]
        attempts.append((ordered(own + reclaimable), False))
    if borrow_within == "LowerPriority":
        attempts.append((ordered(own + [c for c in others if c.priority < priority]), True))
    else:
        attempts.append((ordered(own), True))
    for candidates, allow_borrowing in attempts:
        targets = _minimal(candidates, cq_name, assignment, tree, allow_borrowing)
        if targets:
            reasons = []
            for target in targets:
                if target.cq == cq_name:
                    reasons.append((target, "InClusterQueue"))
                else:
                    reasons.append(
                        (
                            target,
                            "InCohortReclaimWhileBorrowing" if allow_borrowing else "InCohortReclamation",
                        )
                    )
            return reasons
    return []


def _neg(text: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in text)


def _fits(cq_name: str, assignment: Assignment, tree: QuotaTree, allow_borrowing: bool) -> bool:
    for fr, amount in assignment.usage.items():
        if amount > tree.available("cq:" + cq_name, fr):
            return False
        if not allow_borrowing:
            used = tree.usage.get("cq:" + cq_name, {}).get(fr, Fraction(0))
            if used + amount > tree.nominal(cq_name, fr):
                return False
    return True


def _minimal(
    candidates: list[Candidate], cq_name: str, assignment: Assignment, tree: QuotaTree, allow_borrowing: bool
) -> list[Candidate]:
    removed: list[Candidate] = []
    fits = False
    for cand in candidates:
        if cand.cq != cq_name and not any(tree.borrowing(cand.cq, fr) for fr in cand.usage):
            continue  # reclaim only takes back what a queue borrows
        tree.add(cand.cq, cand.usage, -1)
        removed.append(cand)
        if _fits(cq_name, assignment, tree, allow_borrowing):
            fits = True
            break
    if not fits:
        for cand in removed:
            tree.add(cand.cq, cand.usage)
        return []
    targets = list(removed)
    for cand in reversed(removed[:-1]):  # give back the ones that were not needed
        tree.add(cand.cq, cand.usage)
        if _fits(cq_name, assignment, tree, allow_borrowing):
            targets.remove(cand)
        else:
            tree.add(cand.cq, cand.usage, -1)
    for cand in targets:
        tree.add(cand.cq, cand.usage)
    return targets


def preemption_message(
    preemptor: dict[str, Any], reason: str, preemptor_path: str, preemptee_path: str
) -> str:
    """§3.3's template."""
    text = {
        "InClusterQueue": "prioritization in the ClusterQueue",
        "InCohortReclamation": "reclamation within the cohort",
        "InCohortFairSharing": "Fair Sharing within the cohort",
        "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
    }[reason]
    job_uid = (preemptor["metadata"].get("labels") or {}).get(JOB_UID_LABEL, "UNKNOWN")
    return (
        f"Preempted to accommodate a workload (UID: {preemptor['metadata']['uid']}, JobUID: {job_uid}) "
        "due to "
        f"{text}; preemptor path: {preemptor_path}; preemptee path: {preemptee_path}"
    )


def queue_order_key(workload: dict[str, Any]) -> tuple[int, str, str]:
    """Within a ClusterQueue: higher priority first, then older (§4, BestEffortFIFO / StrictFIFO)."""
    meta = workload["metadata"]
    return (-int(workload["spec"].get("priority", 0)), meta.get("creationTimestamp", ""), meta["uid"])


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
