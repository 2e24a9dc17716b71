"""Checkpoint declarations (`on-signal`, `every:30m`) and the rules that depend on them."""

from __future__ import annotations

from typing import Protocol

from gpucommons.api.errors import CheckpointRequired, ValidationFailed
from gpucommons.domain.model import PriorityClass
from gpucommons.domain.task import CheckpointMode, CheckpointSpec
from gpucommons.policy import parse_duration

#: The longest checkpoint interval a task may declare: a year. Longer says "never" (declare none);
#: and the store keeps the interval in a 32-bit column, which PostgreSQL refuses to overflow.
MAX_CHECKPOINT_INTERVAL_S = 365 * 86_400


def parse_checkpoint(text: str | None) -> CheckpointSpec:
    """`None` → no declaration; `on-signal`; `every:<n><s|m|h|d>`."""
    if text is None or text == "":
        return CheckpointSpec()
    if text == "on-signal":
        return CheckpointSpec(CheckpointMode.ON_SIGNAL)
    prefix, _, interval = text.partition(":")
    try:
        if prefix != "every":
            raise ValueError("expected on-signal or every:<duration>")
        seconds = parse_duration(interval)
        if seconds <= 0:
            raise ValueError("the interval must be positive")
        if seconds > MAX_CHECKPOINT_INTERVAL_S:
            raise ValueError(f"the interval must be at most 365d ({MAX_CHECKPOINT_INTERVAL_S} s)")
    except ValueError as exc:
        raise ValidationFailed(
            f"checkpoint {text!r} is neither 'on-signal' nor 'every:<duration>' (e.g. every:30m): {exc}",
            {"errors": [{"field": "checkpoint", "message": str(exc)}]},
        ) from None
    return CheckpointSpec(CheckpointMode.EVERY, seconds)


def require_declaration(spec: CheckpointSpec, pclass: PriorityClass) -> None:
    """Classes with `checkpoint_required` refuse tasks that do not say how they save state."""
    if pclass.checkpoint_required and not spec.saves_state:
        raise CheckpointRequired(
            f"priority class {pclass.name!r} requires a checkpoint declaration: its tasks may be "
            f"preempted (after a {pclass.grace_period_s}s grace period), and preemption is only painless "
            "for a task that saves its state. Submit with --checkpoint on-signal (save within the grace "
            "period after SIGTERM) or --checkpoint every:30m (save periodically and report each "
            "checkpoint with `commons checkpoint`).",
            {"priority": pclass.name, "field": "checkpoint"},
        )


def last_saved_at(started_at: float | None, last_checkpoint_at: float | None) -> float | None:
    """When the attempt's state was last safe: its last checkpoint, else its start."""
    if started_at is None:
        return last_checkpoint_at
    if last_checkpoint_at is None:
        return started_at
    return max(started_at, last_checkpoint_at)


def unsaved_gpu_seconds(mode: str, gpus: int, saved_at: float | None, now: float) -> float:
    """Work that a preemption now would lose. A task that saves on signal loses nothing."""
    if saved_at is None or mode == CheckpointMode.ON_SIGNAL.value:
        return 0.0
    return max(0.0, now - saved_at) * gpus


class CheckpointedAttempt(Protocol):
    """What the unsaved work of an attempt is read from: a `TaskRow`, or a row of those columns."""

    @property
    def checkpoint_mode(self) -> str: ...
    @property
    def gpus(self) -> int: ...
    @property
    def started_at(self) -> float | None: ...
    @property
    def last_checkpoint_at(self) -> float | None: ...


def unsaved_work(task: CheckpointedAttempt, now: float) -> float:
    """The GPU-seconds a preemption of the task's attempt would lose now (what the engine weighs
    when it chooses victims): the one reading of it, for the supervisor's full and quick paths."""
    saved = last_saved_at(task.started_at, task.last_checkpoint_at)
    return unsaved_gpu_seconds(task.checkpoint_mode, task.gpus, saved, now)
