"""Writing and reading the usage ledger (docs/design.md, contract 4) in the store.

An interval opens when a task is admitted (its GPUs are reserved from then on) and closes when the
attempt ends — succeeded, failed, cancelled or preempted — at the time the process ended. An
attempt that never started (the server died between admission and launch, or the backend refused
the start) leaves no interval: only what ran is billed (`drop_open_interval`).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from decimal import Decimal

from sqlalchemy import delete, or_, select
from sqlalchemy.orm import Session

from gpucommons.domain.resources import Resources
from gpucommons.ledger.interval import EndReason, UsageInterval
from gpucommons.store.models import TaskRow, UsageIntervalRow


def open_interval(session: Session, task: TaskRow, at: float) -> UsageIntervalRow:
    """The ledger interval of the task's current attempt, from `at` (`begin_attempt` made it)."""
    attempt = task.attempt
    row = UsageIntervalRow(
        task_id=task.id,
        team=task.team,
        pool=attempt.pool if attempt is not None else "",
        gpus=task.gpus,
        start=at,
        end=None,
        priority=task.priority_class,
        borrowed_gpus=attempt.borrowed_gpus if attempt is not None else 0,
        end_reason=EndReason.RUNNING.value,
        lost_gpu_seconds=0.0,
    )
    session.add(row)
    return row


def open_intervals(session: Session, task_ids: Collection[str]) -> dict[str, list[UsageIntervalRow]]:
    """The open intervals of these tasks (one query for a whole batch of ended attempts)."""
    found: dict[str, list[UsageIntervalRow]] = {}
    if task_ids:
        query = select(UsageIntervalRow).where(
            UsageIntervalRow.task_id.in_(list(task_ids)), UsageIntervalRow.end.is_(None)
        )
        for row in session.scalars(query):
            found.setdefault(row.task_id, []).append(row)
    return found


def close_interval(
    session: Session,
    task: TaskRow,
    at: float,
    reason: EndReason,
    lost_gpu_s: float = 0.0,
    preloaded: dict[str, list[UsageIntervalRow]] | None = None,
) -> None:
    """Close the task's open interval (if any) at `at`, never before it started."""
    if preloaded is not None and task.id in preloaded:
        rows = preloaded.pop(task.id)
    else:
        rows = list(open_intervals(session, [task.id]).get(task.id, []))
    for row in rows:
        row.end = max(at, row.start)
        row.end_reason = reason.value
        row.lost_gpu_seconds = lost_gpu_s


def drop_open_interval(session: Session, task: TaskRow) -> None:
    """Remove the task's open interval: its attempt never started, so nothing ran to bill. (Closing
    it instead billed a crash's downtime as `preempted` work of a task that never ran.)"""
    session.execute(
        delete(UsageIntervalRow)
        .where(UsageIntervalRow.task_id == task.id, UsageIntervalRow.end.is_(None))
        .execution_options(synchronize_session="fetch")
    )


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def usage_intervals(
    session: Session, teams: Collection[str], start: float | None, end: float | None, now: float
) -> list[UsageInterval]:
    """Intervals of `teams` overlapping `[start, end)`, cut at its edges; open ones end at `now`
    (or at `end` when that is earlier) with end_reason `running`."""
    query = select(UsageIntervalRow).where(UsageIntervalRow.team.in_(sorted(teams)))
    if end is not None:
        query = query.where(UsageIntervalRow.start < end)
    if start is not None:
        query = query.where(or_(UsageIntervalRow.end.is_(None), UsageIntervalRow.end > start))
    query = query.order_by(UsageIntervalRow.start, UsageIntervalRow.id)
    out: list[UsageInterval] = []
    for row in session.scalars(query):
        lo = row.start if start is None else max(row.start, start)
        hi = row.end if row.end is not None else max(now, row.start)
        reason = EndReason(row.end_reason)
        if end is not None and hi > end:
            hi = end
            reason = EndReason.RUNNING if row.end is None or row.end > end else reason
        if hi < lo:
            continue
        out.append(
            UsageInterval(
                task_id=row.task_id,
                team=row.team,
                pool=row.pool,
                gpus=row.gpus,
                start=_dt(lo),
                end=_dt(hi),
                priority=row.priority,
                borrowed_gpus=row.borrowed_gpus,
                end_reason=reason,
                # Work lost to a preemption belongs to the period the preemption ends in: an
                # interval cut before its end (reason `running`) has lost nothing yet.
                lost_gpu_hours=(
                    Decimal(0)
                    if reason is EndReason.RUNNING
                    else Decimal(str(round(row.lost_gpu_seconds / 3600, 6)))
                ),
            )
        )
    return out


def held_spans(
    session: Session, teams: Collection[str], start: float, end: float, now: float
) -> list[tuple[str, str, int, int, int]]:
    """(team, pool, gpus, start µs, end µs) of the intervals overlapping `[start, end)`, open ones
    ending at `now`: what the history charts integrate. Columns only, no row objects: a month of a
    busy cluster is read in a fraction of `usage_intervals`' time (bench/history.py)."""
    query = select(
        UsageIntervalRow.team,
        UsageIntervalRow.pool,
        UsageIntervalRow.gpus,
        UsageIntervalRow.start,
        UsageIntervalRow.end,
    ).where(
        UsageIntervalRow.team.in_(sorted(teams)),
        UsageIntervalRow.start < end,
        or_(UsageIntervalRow.end.is_(None), UsageIntervalRow.end > start),
    )
    return [
        (team, pool, gpus, round(s * 1_000_000), round((e if e is not None else max(now, s)) * 1_000_000))
        for team, pool, gpus, s, e in session.execute(query)
    ]


def holds_since(session: Session, since: float) -> list[tuple[str, float, float | None, Resources]]:
    """What each team held from `since` on (intervals still open or ended after it), with its
    task's CPU and memory, oldest first: the history a restarted scheduler rebuilds the engine's
    decayed usage from (`engine.state.decayed_usage_from_history`)."""
    rows = session.execute(
        select(
            UsageIntervalRow.team,
            UsageIntervalRow.start,
            UsageIntervalRow.end,
            UsageIntervalRow.gpus,
            TaskRow.cpu_milli,
            TaskRow.memory_mib,
        )
        .join(TaskRow, TaskRow.id == UsageIntervalRow.task_id)
        .where(or_(UsageIntervalRow.end.is_(None), UsageIntervalRow.end > since))
        .order_by(UsageIntervalRow.start, UsageIntervalRow.id)
    ).all()
    return [
        (team, start, end, Resources(gpus=gpus, cpu_milli=cpu, memory_mib=memory))
        for team, start, end, gpus, cpu, memory in rows
    ]
