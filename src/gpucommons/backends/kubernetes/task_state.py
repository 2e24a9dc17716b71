"""A task's state on a Kueue cluster, read from its Job, its Workload and its pods (pure).

Kueue, not our engine, admits on a cluster; what it decided is written on the Workload, what ran on
the pods. This module turns the three objects into one `TaskView` in GPU Commons' own words:

| the cluster says                                                   | the task is  |
|--------------------------------------------------------------------|--------------|
| a Job, no Workload yet, or `QuotaReserved=False`                   | pending      |
| `QuotaReserved=True` (quota held; admission checks may still run)  | admitted     |
| `Admitted=True` and a pod's container running                      | running      |
| `Evicted=True` while the quota is still held (pods stopping)       | preempting   |
| `Finished=True` reason `Succeeded` / otherwise                     | succeeded / failed |
| the Job gone before it finished (deleted by hand or cancelled)     | cancelled    |

A task goes back to pending after an eviction once Kueue releases its quota; `attempt` (Kueue's
eviction count) says how many times that has happened, which is the task's restart count. Times
come from the objects (`lastTransitionTime`, container `startedAt`/`finishedAt`), never from a
clock: `now` is used only when an object carries no time of its own.

Kueue's pending messages name flavors and resources; `pending_sentence` says the same with the
policy's pool and team names. Shapes: tests/data/kueue/shapes (Kueue v0.19.2), README there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gpucommons.backends.kubernetes.jobs import task_id_of_job
from gpucommons.backends.kubernetes.observe import ClusterNames, parse_time
from gpucommons.domain.task import TaskState

Manifest = dict[str, Any]

#: Evictions that are someone stopping the task on purpose (not a preemption): the task ends.
_DEACTIVATING = frozenset({"Deactivated", "InactiveWorkload", "DeactivatedDueToAdmissionCheck"})


@dataclass(frozen=True, slots=True)
class TaskView:
    """What the cluster says of one task now."""

    #: `team-nlp/commons-t3f9a2b1c0d`: namespace and Job name (the Workload's owner).
    ref: str
    team: str
    #: Ours (a Job `commons-<id>`), or None for a Job someone made with kubectl.
    task_id: str | None
    state: TaskState
    #: When the cluster says the state began (None: not known, use the time it was seen).
    since: datetime | None
    pool: str | None = None
    gpus: int = 0
    priority: str = ""
    #: Why it waits / why it stops, in our words; for an end, what the cluster said.
    message: str = ""
    exit_code: int | None = None
    #: Times Kueue evicted the Workload so far (a requeued task's restart count).
    attempt: int = 0
    #: When the container started running (running tasks).
    started_at: datetime | None = None
    #: The Job uid of the workload that preempted it (Kueue's eviction message), if any.
    preempted_by_job_uid: str | None = None
    #: Kueue's `Preempted` reason in the engine's words (within_team, reclaim, ...).
    preempt_reason: str | None = None
    #: The Job's uid (from the Job, else the Workload's owner reference).
    uid: str = ""


def _conditions(obj: Manifest | None) -> dict[str, Manifest]:
    if not obj:
        return {}
    return {c.get("type", ""): c for c in (obj.get("status") or {}).get("conditions") or []}


def _true(conditions: Mapping[str, Manifest], kind: str) -> bool:
    return conditions.get(kind, {}).get("status") == "True"


def _at(condition: Manifest | None) -> datetime | None:
    return parse_time((condition or {}).get("lastTransitionTime"))


def _evictions(workload: Manifest | None) -> int:
    stats = ((workload or {}).get("status") or {}).get("schedulingStats") or {}
    return sum(int(e.get("count", 0)) for e in stats.get("evictions") or [])


def _container_states(pods: Iterable[Manifest]) -> list[Manifest]:
    out = []
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            out.append(status.get("state") or {})
    return out


def _running_since(pods: Iterable[Manifest]) -> datetime | None:
    """The earliest start of a running container of the Job's live pods (None: none runs)."""
    starts = [
        parse_time(s["running"].get("startedAt"))
        for s in _container_states(p for p in pods if not p["metadata"].get("deletionTimestamp"))
        if "running" in s
    ]
    known = [s for s in starts if s is not None]
    return min(known) if known else None


def _started(pods: Iterable[Manifest]) -> bool:
    """A container of the Job's live pods runs or has run (pods that completed before Kueue marks
    the Workload finished still count: the task did not go back to waiting)."""
    return any(
        "running" in s or "terminated" in s
        for s in _container_states(p for p in pods if not p["metadata"].get("deletionTimestamp"))
    )


def _exit_code(pods: Iterable[Manifest], succeeded: bool) -> int | None:
    """The task's exit code: the first non-zero one of its pods' containers (a gang fails as a
    whole), else 0 when it succeeded."""
    codes = [
        int(s["terminated"].get("exitCode", 0))
        for s in _container_states(sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp", "")))
        if "terminated" in s
    ]
    failing = [c for c in codes if c != 0]
    if failing:
        return failing[-1]
    if codes or succeeded:
        return 0
    return None


def _admission(workload: Manifest, names: ClusterNames) -> tuple[str | None, int]:
    admission = (workload.get("status") or {}).get("admission") or {}
    pool, gpus = None, 0
    for assignment in admission.get("podSetAssignments") or []:
        usage = (assignment.get("resourceUsage") or {}).get(names.gpu_resource)
        if usage is not None:
            gpus += int(str(usage))
        flavor = (assignment.get("flavors") or {}).get(names.gpu_resource)
        if flavor and pool is None:
            pool = names.pools_by_flavor.get(flavor, flavor)
    return pool, gpus


#: Kueue's `Preempted` condition reasons (pkg/scheduler/preemption) in the engine's words.
_PREEMPT_REASONS = {
    "InClusterQueue": "within_team",
    "InCohortReclamation": "reclaim",
    "InCohortReclaimWhileBorrowing": "borrow_within_cohort",
    "InCohortFairSharing": "fair_share",
}


def _job_uid(job: Manifest | None, workload: Manifest | None) -> str:
    if job is not None:
        return str((job.get("metadata") or {}).get("uid") or "")
    for owner in ((workload or {}).get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("kind") == "Job":
            return str(owner.get("uid") or "")
    return ""


_JOB_UID = re.compile(r"JobUID: ([0-9a-f-]{36})")


def _preemptor_job_uid(message: str) -> str | None:
    found = _JOB_UID.search(message)
    return found.group(1) if found else None


def view_task(
    namespace: str,
    job_name: str,
    job: Manifest | None,
    workload: Manifest | None,
    pods: Iterable[Manifest],
    names: ClusterNames,
    *,
    finished_before: bool = False,
    job_deleted: bool = True,
) -> TaskView | None:
    """The task that Job `namespace/job_name` is, or None outside team namespaces.

    `job` None with `job_deleted` means the Job is gone; without it, that its Workload was seen
    before the Job itself (separate watches): nothing to say yet. `finished_before`: we already saw
    it end (a deletion after the end is not a cancellation).
    """
    team = names.teams_by_namespace.get(namespace)
    if team is None:
        return None
    pods = list(pods)
    task_id = task_id_of_job(job_name)
    ref = f"{namespace}/{job_name}"
    conditions = _conditions(workload)
    priority = ""
    pool: str | None = None
    gpus = 0
    if workload is not None:
        class_ref = ((workload.get("spec") or {}).get("priorityClassRef") or {}).get("name", "")
        priority = names.classes_by_name.get(class_ref, class_ref)
        pool, gpus = _admission(workload, names)
    attempt = _evictions(workload)

    def view(state: TaskState, since: datetime | None, message: str = "", **extra: Any) -> TaskView:
        return TaskView(
            ref,
            team,
            task_id,
            state,
            since,
            pool,
            gpus,
            priority,
            message,
            attempt=attempt,
            uid=_job_uid(job, workload),
            **extra,
        )

    if _true(conditions, "Finished"):
        finished = conditions["Finished"]
        succeeded = finished.get("reason") == "Succeeded"
        return view(
            TaskState.SUCCEEDED if succeeded else TaskState.FAILED,
            _at(finished),
            finished.get("message", ""),
            exit_code=_exit_code(pods, succeeded),
        )
    if job is None:
        if finished_before or not job_deleted:
            return None
        return view(TaskState.CANCELLED, None, f"the Job {ref} was deleted before it finished")
    evicted = conditions.get("Evicted")
    if evicted is not None and evicted.get("status") == "True" and evicted.get("reason") in _DEACTIVATING:
        return view(
            TaskState.CANCELLED,
            _at(evicted),
            f"Kueue deactivated it: {evicted.get('message', '')}".rstrip(": "),
        )
    if _true(conditions, "QuotaReserved"):
        if evicted is not None and evicted.get("status") == "True":
            message = evicted.get("message", "")
            return view(
                TaskState.PREEMPTING,
                _at(evicted),
                f"Kueue evicted it ({evicted.get('reason', '')}): {message}",
                preempted_by_job_uid=_preemptor_job_uid(message),
                preempt_reason=_PREEMPT_REASONS.get(conditions.get("Preempted", {}).get("reason", "")),
            )
        if _true(conditions, "Admitted") and _started(pods):
            started = _running_since(pods)
            return view(TaskState.RUNNING, started, started_at=started)
        since = _at(conditions.get("Admitted")) if _true(conditions, "Admitted") else None
        return view(
            TaskState.ADMITTED,
            since or _at(conditions.get("QuotaReserved")),
            _admission_message(workload, conditions),
        )
    pending = conditions.get("QuotaReserved")
    kueue_says = (pending or {}).get("message", "")
    return view(
        TaskState.PENDING,
        _at(pending) if attempt else None,
        pending_sentence(kueue_says, team, names) if kueue_says else "waiting for Kueue to consider it",
    )


def _admission_message(workload: Manifest | None, conditions: Mapping[str, Manifest]) -> str:
    if _true(conditions, "Admitted"):
        return "admitted by Kueue; starting its pods"
    checks = ((workload or {}).get("status") or {}).get("admissionChecks") or []
    waiting = [f"{c.get('name')}: {c.get('message') or c.get('state', 'Pending')}" for c in checks]
    return "quota reserved; waiting for admission checks" + (f" ({'; '.join(waiting)})" if waiting else "")


_INSUFFICIENT = re.compile(
    r"insufficient unused quota for (?P<resource>[^ ]+) in flavor (?P<flavor>[^ ,]+), "
    r"(?P<more>\d+) more needed"
)
_ABOVE_MAX = re.compile(
    r"insufficient quota for (?P<resource>[^ ]+) in flavor (?P<flavor>[^ ,]+), "
    r".*> maximum capacity \((?P<max>\d+)\)"
)
_PREEMPTING = re.compile(r"Pending the preemption of (?P<n>\d+) workload\(s\)")


def pending_sentence(message: str, team: str, names: ClusterNames) -> str:
    """Kueue's reason for a pending Workload, with the policy's names ("Kueue: …" when unknown)."""

    def resource(name: str) -> str:
        return "GPUs" if name == names.gpu_resource else name

    parts = []
    for found in _INSUFFICIENT.finditer(message):
        pool = names.pools_by_flavor.get(found["flavor"], found["flavor"])
        parts.append(
            f"team {team} and its cohort have too little unused quota in pool {pool}: "
            f"{found['more']} more {resource(found['resource'])} needed"
        )
    for found in _ABOVE_MAX.finditer(message):
        pool = names.pools_by_flavor.get(found["flavor"], found["flavor"])
        parts.append(
            f"more {resource(found['resource'])} than team {team} may ever hold in pool {pool} "
            f"(at most {found['max']} with borrowing)"
        )
    preempting = _PREEMPTING.search(message)
    if preempting:
        parts.append(f"waiting for {preempting['n']} preempted task(s) to stop")
    if not parts:
        return f"Kueue: {message}"
    return "; ".join(parts) + f" (Kueue: {message})"
