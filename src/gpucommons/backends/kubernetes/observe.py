"""Kueue Workloads → usage ledger intervals (pure: objects and times in, `UsageInterval`s out).

On a cluster Kueue, not our engine, decides who holds which GPUs; its Workload objects say so.
A Workload's `status.admission` names the flavor (pool) and the resources reserved; its conditions
say when things happened (`lastTransitionTime`):

- `Admitted=True`: the Job is unsuspended; the hold on the GPUs starts.
- `Evicted=True` (reason `Preempted`, `PodsReadyTimeout`, `Deactivated`, ...): Kueue suspends the
  Job. The GPUs stay held until its pods are gone — the grace period — and then Kueue clears the
  admission and sets `Admitted=False`: that is where the interval ends, with the eviction's reason.
- `Finished=True` (reason `Succeeded` or `Failed`): the interval ends there.
- the Workload deleted while admitted (its Job deleted): the interval ends when we see it, cancelled.

A Workload admitted again after a preemption starts a new interval. `LedgerState` remembers the
open intervals and the ones already written, so a re-list after a dropped watch, or a restart that
replays every Workload, writes nothing twice. What happened while nobody watched cannot be rebuilt
(conditions keep only their latest transition): a hold that began and ended unseen is lost, and an
eviction missed between two admissions ends the older interval at the newer admission.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gpucommons.backends.kubernetes.jobs import task_id_of_job
from gpucommons.backends.kubernetes.kueue_rules import parse_quantity
from gpucommons.backends.kubernetes.names import dedicated_flavor_name, k8s_name, namespace_name
from gpucommons.backends.kubernetes.render import RenderOptions
from gpucommons.domain.model import Isolation, Policy
from gpucommons.ledger import EndReason, UsageInterval

Manifest = dict[str, Any]

#: Eviction reasons that are someone stopping the task on purpose; every other eviction requeues it.
_CANCELLING_EVICTIONS = frozenset({"Deactivated", "InactiveWorkload"})


@dataclass(frozen=True, slots=True)
class ClusterNames:
    """Kubernetes names back to policy names: namespace → team, flavor → pool, class → class."""

    teams_by_namespace: Mapping[str, str]
    pools_by_flavor: Mapping[str, str]
    classes_by_name: Mapping[str, str]
    gpu_resource: str = "nvidia.com/gpu"

    @classmethod
    def from_policy(cls, policy: Policy, options: RenderOptions | None = None) -> ClusterNames:
        options = options or RenderOptions()
        pools = {k8s_name(p.name): p.name for p in policy.pools}
        for team in policy.teams:
            if team.isolation is Isolation.DEDICATED:
                pools.update({dedicated_flavor_name(q.pool, team.name): q.pool for q in team.quotas})
        return cls(
            teams_by_namespace={
                namespace_name(t.name, options.namespace_prefix): t.name for t in policy.teams
            },
            pools_by_flavor=pools,
            classes_by_name={k8s_name(c.name): c.name for c in policy.priority_classes},
            gpu_resource=options.gpu_resource,
        )


@dataclass(frozen=True, slots=True)
class Transition:
    """A condition's latest change: `Evicted` with reason `Preempted` at 10:05."""

    status: bool
    reason: str
    at: datetime | None


@dataclass(frozen=True, slots=True)
class WorkloadView:
    """What the ledger needs from one Workload object."""

    uid: str
    task_id: str
    team: str
    priority: str
    #: (pool, GPUs) while Kueue holds an admission for it.
    admission: tuple[str, int] | None
    admitted: Transition | None
    evicted: Transition | None
    finished: Transition | None


@dataclass(frozen=True, slots=True)
class Hold:
    """An open interval: the GPUs a Workload holds since `start`."""

    task_id: str
    team: str
    pool: str
    gpus: int
    priority: str
    start: datetime

    def close(self, end: datetime, reason: EndReason) -> UsageInterval:
        return UsageInterval(
            self.task_id,
            self.team,
            self.pool,
            self.gpus,
            self.start,
            max(end, self.start),
            self.priority,
            end_reason=reason,
        )


@dataclass(slots=True)
class LedgerState:
    """What the observer remembers between events. Mutable on purpose: a cluster has tens of
    thousands of Workloads, and copying the state at every event made replay quadratic."""

    #: Workload uid → its open interval.
    holds: dict[str, Hold] = field(default_factory=dict)
    #: Workload uid → starts of its intervals already written: a re-list must not write them again.
    written: dict[str, set[datetime]] = field(default_factory=dict)


def parse_time(text: str | None) -> datetime | None:
    """RFC 3339 as the API server writes it (`2026-11-30T10:00:00Z`)."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _condition(obj: Manifest, kind: str) -> Transition | None:
    for c in obj.get("status", {}).get("conditions") or []:
        if c.get("type") == kind:
            return Transition(
                c.get("status") == "True", c.get("reason", ""), parse_time(c.get("lastTransitionTime"))
            )
    return None


def _task_id(obj: Manifest) -> str:
    """The task id of the Job that owns the Workload; `namespace/workload` for Jobs we did not create."""
    meta = obj["metadata"]
    for owner in meta.get("ownerReferences") or []:
        if owner.get("kind") == "Job":
            task_id = task_id_of_job(owner.get("name", ""))
            if task_id:
                return task_id
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _admission(obj: Manifest, names: ClusterNames) -> tuple[str, int] | None:
    admission = obj.get("status", {}).get("admission")
    if not admission:
        return None
    pool, gpus = "", 0
    for assignment in admission.get("podSetAssignments") or []:
        usage = (assignment.get("resourceUsage") or {}).get(names.gpu_resource)
        if usage is None:
            continue
        gpus += int(parse_quantity(usage))
        flavor = (assignment.get("flavors") or {}).get(names.gpu_resource, "")
        pool = pool or names.pools_by_flavor.get(flavor, flavor)
    return (pool, gpus) if gpus > 0 else None


def read_workload(obj: Manifest, names: ClusterNames) -> WorkloadView | None:
    """The Workload's view, or None for Workloads outside team namespaces (not ours to bill)."""
    meta = obj.get("metadata") or {}
    team = names.teams_by_namespace.get(meta.get("namespace", ""))
    if team is None:
        return None
    ref = (obj.get("spec") or {}).get("priorityClassRef") or {}
    priority = names.classes_by_name.get(ref.get("name", ""), ref.get("name", ""))
    return WorkloadView(
        uid=meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}",
        task_id=_task_id(obj),
        team=team,
        priority=priority,
        admission=_admission(obj, names),
        admitted=_condition(obj, "Admitted"),
        evicted=_condition(obj, "Evicted"),
        finished=_condition(obj, "Finished"),
    )


def _eviction_reason(view: WorkloadView) -> EndReason:
    if view.evicted is not None and view.evicted.reason in _CANCELLING_EVICTIONS:
        return EndReason.CANCELLED
    return EndReason.PREEMPTED


def _finish_reason(view: WorkloadView) -> EndReason:
    assert view.finished is not None
    return EndReason.SUCCEEDED if view.finished.reason == "Succeeded" else EndReason.FAILED


def _hold_from(view: WorkloadView, now: datetime) -> Hold | None:
    if view.admission is None or view.admitted is None or not view.admitted.status:
        return None
    pool, gpus = view.admission
    return Hold(view.task_id, view.team, pool, gpus, view.priority, view.admitted.at or now)


def observe(
    state: LedgerState, event: str, obj: Manifest, now: datetime, names: ClusterNames
) -> list[UsageInterval]:
    """One watch event (`ADDED`, `MODIFIED`, `DELETED`) → the intervals it closes; `state` is updated.

    No I/O and no clock: `now` is when the event was seen, used only when the object carries no
    time of its own.
    """
    view = read_workload(obj, names)
    if view is None:
        return []
    written = state.written.setdefault(view.uid, set())
    closed: list[UsageInterval] = []
    held = state.holds.pop(view.uid, None)
    current = _hold_from(view, now)

    def close(hold: Hold, end: datetime, reason: EndReason) -> None:
        if hold.start not in written:
            closed.append(hold.close(end, reason))
            written.add(hold.start)

    if view.finished is not None and view.finished.status:
        hold = held or current
        if hold is not None:
            close(hold, view.finished.at or now, _finish_reason(view))
    elif event == "DELETED":
        if held is not None:
            close(held, now, EndReason.CANCELLED)
    elif current is not None:
        if held is not None and held.start != current.start:
            # Evicted and readmitted between two looks: the eviction's time if we have it.
            evicted_at = view.evicted.at if view.evicted is not None else None
            end = evicted_at if evicted_at is not None and evicted_at <= current.start else current.start
            close(held, end, EndReason.PREEMPTED)
        if current.start not in written:
            state.holds[view.uid] = current
    elif held is not None:
        # Admission cleared after an eviction: the pods are gone, the GPUs are free.
        released = view.admitted.at if view.admitted is not None and not view.admitted.status else None
        close(held, released or now, _eviction_reason(view))
    if event == "DELETED" or not written:
        state.written.pop(view.uid, None)
    return closed


def replay(
    events: list[tuple[str, Manifest, datetime]], names: ClusterNames, state: LedgerState | None = None
) -> tuple[LedgerState, list[UsageInterval]]:
    """`observe` over a recorded sequence of (event, Workload, seen at)."""
    state = state if state is not None else LedgerState()
    out: list[UsageInterval] = []
    for event, obj, seen in events:
        out += observe(state, event, obj, seen, names)
    return state, out


def forget_missing(state: LedgerState, present: set[str], now: datetime) -> list[UsageInterval]:
    """After a re-list: Workloads held open but no longer listed were deleted while nobody watched;
    their intervals end now, cancelled (the best we know). Forgets every unlisted Workload."""
    gone = [uid for uid in state.holds if uid not in present]
    closed = [state.holds.pop(uid).close(now, EndReason.CANCELLED) for uid in gone]
    for uid in [uid for uid in state.written if uid not in present]:
        del state.written[uid]
    return closed


def open_intervals(state: LedgerState, now: datetime) -> list[UsageInterval]:
    """The holds still open, as intervals ending `now` with end reason `running` (for exports)."""
    return [h.close(now, EndReason.RUNNING) for h in state.holds.values()]
