"""The one place a task's state changes.

`switch_task_state` checks the transition table (`domain.task.check_transition`) and appends an
event row in the caller's transaction, so the state and its history can never disagree.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from gpucommons.domain.task import TaskState, check_transition
from gpucommons.store.models import TaskEventRow, TaskRow


def record_event(
    session: Session,
    task: TaskRow,
    kind: str,
    at: float,
    message: str = "",
    from_state: str | None = None,
    to_state: str | None = None,
) -> TaskEventRow:
    event = TaskEventRow(
        task_id=task.id, at=at, kind=kind, from_state=from_state, to_state=to_state, message=message
    )
    session.add(event)
    return event


def switch_task_state(session: Session, task: TaskRow, new: TaskState, at: float, message: str = "") -> None:
    """Move `task` to `new` (raises `InvalidTransition` for a step the table forbids) and record it."""
    current = TaskState(task.state)
    check_transition(current, new)
    task.state = new.value
    if message:
        task.message = message
    record_event(session, task, "transition", at, message, from_state=current.value, to_state=new.value)
