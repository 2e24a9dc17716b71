"""Work on the cluster that GPU Commons did not start (plain `sbatch`): usage the engine must count.

The backend lists it (`Executor.foreign_work`); each cycle the scheduler hands the list here. A job seen
for the first time becomes a task of the team its account maps to: a RUNNING row (origin `cluster`,
`cluster_ref` the backend's ref) with an open ledger interval from the job's start, so it shows in
`commons tasks` and is metered and billed like any other; and in the engine a running, unpreemptible
admission on its nodes, so nothing is placed on its GPUs and the team's quota counts it. A job gone
from the list has ended: its interval closes and its task is done.

A job whose account no team has is the platform's: a team named `platform`, when the policy has one
with a quota in the pool. Otherwise there is nobody to charge: its nodes are out of service while it
runs (the queue says whose job holds them), which keeps the engine from placing on its GPUs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpucommons.backends.ports import ForeignWork
from gpucommons.domain.model import Policy
from gpucommons.domain.task import CheckpointMode, TaskState
from gpucommons.engine.state import ClusterState
from gpucommons.engine.types import Admission, NodeSlice
from gpucommons.ledger.interval import EndReason
from gpucommons.server.services.ledger import close_interval, open_interval
from gpucommons.server.services.lifecycle import record_event, switch_task_state
from gpucommons.server.services.tasks import LIVE_STATES
from gpucommons.server.workers.attempts import admission_of, begin_attempt, end_attempt, task_request
from gpucommons.store.models import TaskRow

PLATFORM_TEAM = "platform"
ORIGIN = "cluster"


def foreign_task_id(ref: str) -> str:
    """A stable id for a job found on the cluster: `x` + 10 hex digits of its ref (`slurm:1234`)."""
    return "x" + hashlib.sha256(ref.encode()).hexdigest()[:10]


def owner(policy: Policy, work: ForeignWork) -> str | None:
    """The team charged for `work`: its account's team, else `platform`; None when neither has a
    quota in the pool (nobody to charge)."""
    for team in (work.team, PLATFORM_TEAM):
        if team and policy.has_team(team) and policy.team(team).quota(work.pool) is not None:
            return team
    return None


def lowest_free(
    state: ClusterState, pool: str, placement: Iterable[tuple[int, int]]
) -> list[tuple[int, list[int]]]:
    """The engine's placement of a job Slurm placed: on each of its nodes, the lowest GPUs the engine
    has free (Slurm's own indices do not matter to the engine, only that they are held)."""
    nodes = state.nodes.pools.get(pool)
    out: list[tuple[int, list[int]]] = []
    if nodes is None:
        return out
    gpn = nodes.gpus_per_node
    for node, gpus in placement:
        if not 0 <= node < len(nodes.free_mask):
            continue
        mask = nodes.free_mask[node]
        free = [node * gpn + i for i in range(gpn) if mask >> i & 1][:gpus]
        if free:
            out.append((node, free))
    return out


class ForeignWorkTracker:
    """Keeps the store and the engine in step with the backend's foreign work (module docstring)."""

    def __init__(self, next_seq: Callable[[Session], int]) -> None:
        self.next_seq = next_seq
        #: ref → task id of the foreign tasks that are live in the store.
        self.known: dict[str, str] = {}

    def load(self, session: Session) -> None:
        """The live foreign tasks the store holds (after a rebuild)."""
        rows = session.execute(
            select(TaskRow.cluster_ref, TaskRow.id).where(
                TaskRow.origin == ORIGIN, TaskRow.state.in_(LIVE_STATES), TaskRow.cluster_ref.is_not(None)
            )
        ).all()
        self.known = {str(ref): str(task_id) for ref, task_id in rows}

    def sync(
        self, session: Session, state: ClusterState, policy: Policy, work: Iterable[ForeignWork], now: float
    ) -> Mapping[str, Mapping[int, str]]:
        """Record new foreign work, end what is gone; returns the nodes held by work nobody is charged
        for (pool → node index → why), for the caller to take out of service."""
        current = {w.ref: w for w in work}
        unowned: dict[str, dict[int, str]] = {}
        for ref, item in current.items():
            if ref in self.known:
                continue
            team = owner(policy, item)
            if team is None:
                for node, _ in item.placement:
                    unowned.setdefault(item.pool, {})[node] = (
                        f"node {node} runs {ref} ({item.name or 'a job'} of user {item.user or '?'}), "
                        "whose account no team has"
                    )
                continue
            self._found(session, state, policy, item, team, now)
        for ref in [r for r in self.known if r not in current]:
            self._ended(session, state, self.known.pop(ref), now)
        return unowned

    def _found(
        self, session: Session, state: ClusterState, policy: Policy, item: ForeignWork, team: str, now: float
    ) -> None:
        task_id = foreign_task_id(item.ref)
        if session.get(TaskRow, task_id) is not None:  # ended and recorded before: never twice
            return
        pclass = policy.priority_class(None)
        at = min(item.started_at, now)
        placed = lowest_free(state, item.pool, item.placement)
        row = TaskRow(
            id=task_id,
            seq=self.next_seq(session),
            name=(item.name or item.ref)[:200],
            team=team,
            state=TaskState.RUNNING.value,
            priority_class=pclass.name,
            priority_value=pclass.value,
            command=[],
            gpus=sum(g for _, g in item.placement),
            cpu_milli=0,
            memory_mib=0,
            pool_request=None,
            checkpoint_mode=CheckpointMode.NONE.value,
            submitted_by=item.user or "slurm",
            submitted_at=at,
            queued_at=at,
            admitted_at=at,
            started_at=at,
            restart_count=0,
            preemptions=0,
            cancel_requested=False,
            lost_gpu_seconds=0.0,
            cluster_ref=item.ref,
            origin=ORIGIN,
            message=f"{item.ref} on the cluster, not started by GPU Commons (user {item.user or '?'})",
        )
        session.add(row)
        session.flush()
        admission = Admission(item.pool, tuple(NodeSlice(node, tuple(idx)) for node, idx in placed))
        attempt = begin_attempt(session, row, admission, sorted(i for _, idx in placed for i in idx), at)
        attempt.started_at = at
        record_event(session, row, "found", at, row.message)
        open_interval(session, row, at)
        state.add_pending(task_request(row, policy))
        state.admit(row.id, admission_of(row), at)
        self.known[item.ref] = task_id

    def _ended(self, session: Session, state: ClusterState, task_id: str, now: float) -> None:
        row = session.get(TaskRow, task_id)
        if row is not None and row.state in LIVE_STATES:
            close_interval(session, row, now, EndReason.SUCCEEDED)
            row.finished_at = now
            switch_task_state(session, row, TaskState.SUCCEEDED, now, "ended on the cluster")
            end_attempt(row, now, EndReason.SUCCEEDED, requeue=False)
        if state.running(task_id) is not None:
            state.finish(task_id, now)
