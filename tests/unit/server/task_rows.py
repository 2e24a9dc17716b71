"""A stored task with its current attempt, built in memory for the pure rules of an attempt's end."""

from __future__ import annotations

from gpucommons.store.models import AttemptRow, TaskRow

#: What a stop keeps on the task's current attempt rather than on the task.
ATTEMPT_FIELDS = frozenset({"stop_reason", "stop_requested_at", "killed_at"})


def running_task(**fields: object) -> TaskRow:
    """A running task with its current attempt; `fields` go to whichever of the two holds them."""
    base: dict[str, object] = dict(
        id="t1",
        gpus=4,
        cancel_requested=False,
        checkpoint_mode="none",
        started_at=100.0,
        last_checkpoint_at=None,
    )
    base.update({k: v for k, v in fields.items() if k not in ATTEMPT_FIELDS})
    attempt = AttemptRow(task_id="t1", admitted_at=100.0, started_at=100.0, pool="p")
    for name, value in fields.items():
        if name in ATTEMPT_FIELDS:
            setattr(attempt, name, value)
    task = TaskRow(**base)
    task.attempt = attempt
    return task
