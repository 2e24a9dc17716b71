"""The ledger rows of tasks a cluster runs, written exactly once from what its watches report.

One row per (task, start of a hold); later reports only complete it (its end and end reason), so a
re-list, a restart or a second replica writes nothing twice. A transaction of the cluster worker
applies many reports; `TaskIntervals` loads the intervals of all the tasks they name in one query
and answers every later question from memory: per report, the worker used to ask the database two
or three times, and on PostgreSQL those round trips were most of its time (docs/benchmarks.md,
"Kubernetes: 10,000 Workloads through the watch").
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpucommons.backends.ports import HoldReport, TaskReport
from gpucommons.domain.task import TaskState
from gpucommons.ledger.interval import EndReason
from gpucommons.store.models import TaskRow, UsageIntervalRow

_END_REASONS = {
    TaskState.SUCCEEDED: EndReason.SUCCEEDED,
    TaskState.FAILED: EndReason.FAILED,
    TaskState.CANCELLED: EndReason.CANCELLED,
    TaskState.PENDING: EndReason.PREEMPTED,
}


class TaskIntervals:
    """The usage intervals of some tasks within one session: loaded once, kept in step with what
    this transaction adds."""

    def __init__(self, session: Session, task_ids: Iterable[str] = ()) -> None:
        self.session = session
        self._by_task: dict[str, list[UsageIntervalRow]] = {}
        ids = sorted(set(task_ids))
        if ids:
            for task_id in ids:
                self._by_task[task_id] = []
            for interval in session.scalars(
                select(UsageIntervalRow).where(UsageIntervalRow.task_id.in_(ids))
            ):
                self._by_task[interval.task_id].append(interval)

    def of(self, task_id: str) -> list[UsageIntervalRow]:
        if task_id not in self._by_task:
            self._by_task[task_id] = list(
                self.session.scalars(select(UsageIntervalRow).where(UsageIntervalRow.task_id == task_id))
            )
        return self._by_task[task_id]

    def add(self, interval: UsageIntervalRow) -> None:
        self.session.add(interval)
        self.of(interval.task_id).append(interval)


def write_holds(intervals: TaskIntervals, row: TaskRow, report: TaskReport, now: float) -> None:
    """Record the holds `report` carries; a task that holds nothing now has no open interval,
    whatever the watch missed."""
    for hold in report.holds:
        _upsert(intervals, row, hold)
    if not report.state.holds_resources:
        end = report.at if report.at is not None else now
        reason = _END_REASONS.get(report.state, EndReason.PREEMPTED)
        for open_row in intervals.of(row.id):
            if open_row.end is None:
                open_row.end = max(end, open_row.start)
                open_row.end_reason = reason.value


def _upsert(intervals: TaskIntervals, row: TaskRow, hold: HoldReport) -> None:
    known = intervals.of(row.id)
    existing = next((i for i in known if i.start == hold.start), None)
    if existing is None:
        # A newer hold ends any older one still open (an eviction the watch did not see).
        for older in known:
            if older.end is None and older.start < hold.start:
                older.end = hold.start
                older.end_reason = EndReason.PREEMPTED.value
        intervals.add(
            UsageIntervalRow(
                task_id=row.id,
                team=row.team,
                pool=hold.pool,
                gpus=hold.gpus,
                start=hold.start,
                end=hold.end,
                priority=hold.priority or row.priority_class,
                borrowed_gpus=row.attempt.borrowed_gpus if row.attempt is not None else 0,
                end_reason=hold.end_reason,
                lost_gpu_seconds=0.0,
            )
        )
    elif hold.end is not None and (existing.end is None or existing.end != hold.end):
        existing.end = hold.end
        existing.end_reason = hold.end_reason
