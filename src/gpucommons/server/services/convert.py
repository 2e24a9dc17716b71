"""Rows to wire schemas. Times go from epoch floats to UTC datetimes here and nowhere else."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from types import MappingProxyType

from gpucommons.api import schemas
from gpucommons.store.models import AttemptRow, TaskEventRow, TaskRow, UsageIntervalRow


def utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def utc_or_none(ts: float | None) -> datetime | None:
    return None if ts is None else utc(ts)


def checkpoint_text(row: TaskRow) -> str | None:
    return checkpoint_of(row.checkpoint_mode, row.checkpoint_interval_s)


def checkpoint_of(mode: str, interval_s: int | None) -> str | None:
    """The task's checkpoint declaration as submitted (`on-signal`, `every:<seconds>s`), or None."""
    if mode == "on-signal":
        return "on-signal"
    if mode == "every" and interval_s:
        return f"every:{interval_s}s"
    return None


#: States in which a task holds GPUs, so that what it borrows is a fact of now, not of its admission.
HOLDING = frozenset({"admitted", "running", "preempting"})
#: The state in which why a task waits is the scheduler's of now, not the row's.
PENDING = "pending"
#: No messages of now (a caller without the scheduler's view).
EMPTY: Mapping[str, str] = MappingProxyType({})


def task(
    row: TaskRow, borrowed_now: Mapping[str, int] | None = None, waiting_now: Mapping[str, str] = EMPTY
) -> schemas.Task:
    """`borrowed_now` (the scheduler's `UsageView.borrowed_by_task`) gives a live task's current
    borrowing; without it, or for a task that holds nothing, the row's value at admission stands.
    `waiting_now` (`views.WaitingMessages`) says why a pending task waits as of the last cycle; the
    row's message is what was written when its state last changed."""
    attempt = row.attempt
    borrowed = attempt.borrowed_gpus if attempt is not None else 0
    if borrowed_now is not None and row.state in HOLDING:
        borrowed = borrowed_now.get(row.id, 0)
    message = waiting_now.get(row.id, row.message) if row.state == PENDING else row.message
    return schemas.Task(
        id=row.id,
        seq=row.seq,
        name=row.name,
        team=row.team,
        state=row.state,  # type: ignore[arg-type]
        priority=row.priority_class,
        priority_value=row.priority_value,
        command=list(row.command),
        gpus=row.gpus,
        cpu_milli=row.cpu_milli,
        memory_mib=row.memory_mib,
        pool=row.pool_request,
        assigned_pool=attempt.pool if attempt is not None else None,
        gpu_indices=list(attempt.gpu_indices or []) if attempt is not None else [],
        borrowed_gpus=borrowed,
        checkpoint=checkpoint_text(row),
        submitted_at=utc(row.submitted_at),
        queued_at=utc(row.queued_at),
        admitted_at=utc_or_none(row.admitted_at),
        started_at=utc_or_none(row.started_at),
        finished_at=utc_or_none(row.finished_at),
        restart_count=row.restart_count,
        preemptions=row.preemptions,
        exit_code=row.exit_code,
        cancel_requested=row.cancel_requested,
        last_checkpoint_at=utc_or_none(row.last_checkpoint_at),
        lost_gpu_seconds=round(row.lost_gpu_seconds, 3),
        message=message,
        submitted_by=row.submitted_by,
        image=row.image,
        cluster_ref=row.cluster_ref,
        origin=row.origin,
    )


def attempt(number: int, row: AttemptRow) -> schemas.TaskAttempt:
    return schemas.TaskAttempt(
        number=number,
        admitted_at=utc(row.admitted_at),
        started_at=utc_or_none(row.started_at),
        ended_at=utc_or_none(row.ended_at),
        end_reason=row.end_reason,
        exit_code=row.exit_code,
        pool=row.pool,
        gpu_indices=list(row.gpu_indices or []),
        borrowed_gpus=row.borrowed_gpus,
        stop_reason=row.stop_reason,
        stop_requested_at=utc_or_none(row.stop_requested_at),
        kills=row.kills or 0,
        gave_up_at=utc_or_none(row.gave_up_at),
        preempted_by=row.preempted_by,
    )


def event(row: TaskEventRow) -> schemas.TaskEvent:
    return schemas.TaskEvent(
        id=row.id,
        task_id=row.task_id,
        at=utc(row.at),
        kind=row.kind,
        from_state=row.from_state,
        to_state=row.to_state,
        message=row.message,
    )


def stream_event(row: TaskEventRow, team: str) -> schemas.StreamEvent:
    return schemas.StreamEvent(**event(row).model_dump(), team=team)


def usage(row: UsageIntervalRow) -> schemas.UsageInterval:
    return schemas.UsageInterval(
        task_id=row.task_id,
        team=row.team,
        pool=row.pool,
        gpus=row.gpus,
        start=utc(row.start),
        end=utc_or_none(row.end),
        priority=row.priority,
        borrowed_gpus=row.borrowed_gpus,
        end_reason=row.end_reason,
    )
