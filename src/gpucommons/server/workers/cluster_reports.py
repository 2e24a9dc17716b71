"""Applying what a cluster reports about a task to its row, its events and the worker's mirror.

`ReportApplier` is the cluster worker's (`workers.cluster`) half that turns one `TaskReport` into
store changes: the task's state through the legal steps of the transition table (so its events tell
the whole story even when a watch missed some), its restart count and exit code, who preempted it,
a new task for work someone put on the cluster directly, and the engine's `ClusterState` kept in step
for the teams, queue and metrics views. It decides nothing; Kueue did. The worker owns the threads,
the transactions and the ledger (`workers.cluster_ledger`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpucommons.backends.ports import Clock, ClusterBackend, TaskReport
from gpucommons.domain.model import Policy
from gpucommons.domain.resources import Resources
from gpucommons.domain.stopping import StopReason
from gpucommons.domain.task import CheckpointMode, TaskState
from gpucommons.engine.state import ClusterState
from gpucommons.engine.types import Admission, Pending, PendingCode, Preempt, PreemptReason
from gpucommons.ledger.interval import EndReason
from gpucommons.server.services.lifecycle import record_event, switch_task_state
from gpucommons.server.services.preemptions import record_preemption
from gpucommons.server.workers.attempts import begin_attempt, end_attempt, task_request
from gpucommons.server.workers.cluster_steps import external_task_id, progress, steps
from gpucommons.server.workers.outputs import SchedulerHooks
from gpucommons.store.models import TaskRow

log = logging.getLogger(__name__)


class MirrorHost(Protocol):
    """What applying a report reads and keeps in step: the worker's mirror and its outlets."""

    policy: Policy
    state: ClusterState
    pending: dict[str, Pending]
    hooks: SchedulerHooks
    backend: ClusterBackend
    clock: Clock
    next_seq: Callable[[Session], int]


class ReportApplier:
    """Reports → rows and mirror, for one worker (`host`); called with the worker's lock held."""

    def __init__(self, host: MirrorHost) -> None:
        self.host = host

    def row_for(
        self, session: Session, report: TaskReport, now: float, rows: dict[str, TaskRow]
    ) -> TaskRow | None:
        """The task `report` is about: from `rows` (the batch's tasks, loaded at once), or a new
        task for work found on the cluster."""
        if report.task_id is not None:
            row = rows.get(report.task_id)
            if row is not None and row.cluster_ref is None:
                row.cluster_ref = report.ref
            return row
        task_id = external_task_id(report.uid or report.ref)
        row = rows.get(task_id)
        if row is not None or (report.state.is_terminal and not report.holds):
            return row
        row = self._external_row(session, task_id, report, now)
        if row is not None:
            rows[task_id] = row
        return row

    def _external_row(self, session: Session, task_id: str, report: TaskReport, now: float) -> TaskRow | None:
        """A task for work someone put on the cluster directly, billed to its namespace's team."""
        if not self.host.policy.has_team(report.team):
            return None
        try:
            pclass = self.host.policy.priority_class(report.priority or None)
        except KeyError:
            pclass = self.host.policy.priority_class(None)
        at = report.at or now
        row = TaskRow(
            id=task_id,
            seq=self.host.next_seq(session),
            name=report.ref,
            team=report.team,
            state=TaskState.PENDING.value,
            priority_class=pclass.name,
            priority_value=pclass.value,
            command=[],
            gpus=report.gpus,
            cpu_milli=0,
            memory_mib=0,
            pool_request=None,
            checkpoint_mode=CheckpointMode.NONE.value,
            submitted_by="kubernetes",
            submitted_at=at,
            queued_at=at,
            restart_count=0,
            preemptions=0,
            cancel_requested=False,
            lost_gpu_seconds=0.0,
            cluster_ref=report.ref,
            origin="cluster",
            message="found on the cluster (not submitted through GPU Commons)",
        )
        session.add(row)
        session.flush()
        record_event(session, row, "found", at, f"found {report.ref} on the cluster")
        self.host.state.add_pending(task_request(row, self.host.policy))
        return row

    def apply(self, session: Session, row: TaskRow, report: TaskReport, now: float) -> None:
        current = TaskState(row.state)
        if current.is_terminal:
            return
        at = report.at if report.at is not None else now
        if row.gpus == 0 and report.gpus:
            row.gpus = report.gpus
        target = report.state
        if not target.is_terminal:
            reported = progress(target, report.attempt, True)
            stored = progress(current, row.restart_count, False)
            if reported < stored:
                return  # an older view than the store's: the cluster has moved on since
            if reported[0] > stored[0] and current.holds_resources:
                # A later attempt: the one we know was evicted and requeued while nobody watched.
                if current is not TaskState.PREEMPTING:
                    self._step(session, row, TaskState.PREEMPTING, report, at)
                self._step(session, row, TaskState.PENDING, report, at)
                current = TaskState.PENDING
            elif current is TaskState.PENDING and report.attempt > row.restart_count:
                row.restart_count = report.attempt  # admitted and evicted between two looks
        if target == current:
            if target is TaskState.PENDING:
                self._note_pending(row, report)
            elif target is TaskState.RUNNING and report.started_at and row.started_at is None:
                row.started_at = report.started_at
                if row.attempt is not None:
                    row.attempt.started_at = report.started_at
            return
        for state in steps(current, target):
            self._step(session, row, state, report, at)

    def _step(self, session: Session, row: TaskRow, state: TaskState, report: TaskReport, at: float) -> None:
        # The cluster writes whole seconds: its admission may read earlier than our own fractional
        # submission time. A step never goes back before the one it follows.
        stop_requested_at = row.attempt.stop_requested_at if row.attempt is not None else None
        at = max([at] + [t for t in (row.queued_at, row.admitted_at, row.started_at, stop_requested_at) if t])
        message = report.message if state == report.state else ""
        if state is TaskState.ADMITTED:
            pool = report.pool or row.pool_request or ""
            borrowed = self.admit_in(self.host.state, row.id, pool, None, at, report.gpus or row.gpus)
            begin_attempt(session, row, Admission(pool, (), Resources(gpus=borrowed)), [], at)
            self.host.pending.pop(row.id, None)
            note = f" (borrowing {borrowed} GPUs)" if borrowed else ""
            switch_task_state(session, row, state, at, message or f"admitted by Kueue to {pool}{note}")
            self.host.hooks.admitted(
                row.team,
                pool,
                borrowed,
                waited_s=max(0.0, at - row.queued_at),
                priority_class=row.priority_class,
            )
        elif state is TaskState.RUNNING:
            row.started_at = max(report.started_at or at, at)
            if row.attempt is not None:
                row.attempt.started_at = row.started_at
            switch_task_state(session, row, state, row.started_at, message or "its pods are running")
        elif state is TaskState.PREEMPTING:
            self._preempting(session, row, report, at, message)
        elif state is TaskState.PENDING:
            switch_task_state(session, row, state, at, message or "evicted by Kueue; requeued")
            row.restart_count = max(report.attempt, row.restart_count + 1)
            row.queued_at = at
            # The Job and its token stay: Kueue admits the same Job again.
            end_attempt(row, at, EndReason.PREEMPTED, requeue=True, keep_token=True)
            if self.host.state.running(row.id) is not None:
                self.host.state.requeue(row.id, at)
            self._note_pending(row, report)
        else:  # an end
            row.finished_at = at
            if report.exit_code is not None:
                row.exit_code = report.exit_code
            switch_task_state(session, row, state, at, message or state.value)
            end_attempt(row, at, EndReason(state.value), requeue=False, exit_code=report.exit_code)
            if self.host.state.running(row.id) is not None:
                self.host.state.finish(row.id, at)
            elif self.host.state.pending(row.id) is not None:
                self.host.state.remove_pending(row.id)
            self.host.pending.pop(row.id, None)

    def _preempting(
        self, session: Session, row: TaskRow, report: TaskReport, at: float, message: str
    ) -> None:
        row.preemptions += 1
        if row.attempt is not None:
            row.attempt.stop_reason = StopReason.PREEMPTED
            row.attempt.stop_requested_at = at
        preemptor_id, preemptor_team = "", ""
        if report.preempted_by:
            found = session.execute(
                select(TaskRow.id, TaskRow.team).where(TaskRow.cluster_ref == report.preempted_by)
            ).first()
            if found is not None:
                preemptor_id, preemptor_team = found
        reason = PreemptReason(report.preempt_reason) if report.preempt_reason else PreemptReason.WITHIN_TEAM
        text = message or "evicted by Kueue"
        record_preemption(session, row, Preempt(row.id, preemptor_id, reason, text), preemptor_team, at)
        switch_task_state(session, row, TaskState.PREEMPTING, at, text)
        if self.host.state.running(row.id) is not None:
            self.host.state.mark_preempting(row.id)
        self.host.hooks.preempted(row.team, reason.value, preempting_team=preemptor_team)
        if row.cluster_ref:
            try:
                self.host.backend.request_checkpoint(row.cluster_ref, at)
            except Exception:  # best effort: the pods' SIGTERM is the signal that counts
                log.info("could not annotate %s with a checkpoint request", row.cluster_ref)

    def _note_pending(self, row: TaskRow, report: TaskReport) -> None:
        if report.message:
            self.host.pending[row.id] = Pending(PendingCode.CLUSTER_ADMISSION, report.message)
            row.message = report.message

    def admit_in(
        self,
        state: ClusterState,
        task_id: str,
        pool: str,
        borrowed: int | None,
        at: float | None,
        gpus: int | None = None,
    ) -> int:
        """Mirror an admission Kueue made; returns the GPUs it borrowed (above the team's nominal)."""
        request = state.pending(task_id)
        if request is None:
            return borrowed or 0
        if borrowed is None:
            quota = state.quota.quota(request.team, pool)
            nominal = quota.nominal.gpus if quota is not None else 0
            used = state.usage(request.team, pool).gpus
            want = gpus if gpus is not None else request.resources.gpus
            borrowed = max(0, used + want - nominal) - max(0, used - nominal)
        try:
            state.admit(task_id, Admission(pool, (), Resources(gpus=borrowed)), at or self.host.clock.now())
        except (KeyError, ValueError) as exc:
            log.info("mirror of %s not updated: %s", task_id, exc)
        return borrowed
