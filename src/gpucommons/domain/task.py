"""Tasks and their lifecycle: one transition table, one gate that applies it (as h11 does)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gpucommons.domain.resources import Resources


class TaskState(StrEnum):
    PENDING = "pending"
    ADMITTED = "admitted"
    RUNNING = "running"
    PREEMPTING = "preempting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def holds_resources(self) -> bool:
        """Admitted, running and preempting tasks hold their GPUs until they stop."""
        return self in (TaskState.ADMITTED, TaskState.RUNNING, TaskState.PREEMPTING)


TERMINAL_STATES = frozenset({TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED})

#: Every legal lifecycle step. Anything else is a bug or a race, and is refused.
TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    TaskState.PENDING: frozenset({TaskState.ADMITTED, TaskState.CANCELLED, TaskState.FAILED}),
    TaskState.ADMITTED: frozenset(
        {TaskState.RUNNING, TaskState.PREEMPTING, TaskState.PENDING, TaskState.FAILED, TaskState.CANCELLED}
    ),
    TaskState.RUNNING: frozenset(
        {TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED, TaskState.PREEMPTING}
    ),
    TaskState.PREEMPTING: frozenset(
        {TaskState.PENDING, TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED}
    ),
    TaskState.SUCCEEDED: frozenset(),
    TaskState.FAILED: frozenset(),
    TaskState.CANCELLED: frozenset(),
}


class InvalidTransition(ValueError):
    """A lifecycle step that the transition table does not allow."""

    def __init__(self, current: TaskState, new: TaskState) -> None:
        allowed = ", ".join(sorted(TRANSITIONS[current])) or "nothing (it has ended)"
        super().__init__(f"a task cannot go from {current} to {new}; from {current} it may go to {allowed}")
        self.current = current
        self.new = new


def check_transition(current: TaskState, new: TaskState) -> TaskState:
    """The one gate for state changes: returns `new` or raises `InvalidTransition`."""
    if new not in TRANSITIONS[current]:
        raise InvalidTransition(current, new)
    return new


class CheckpointMode(StrEnum):
    """How a task saves its state, declared at submit."""

    NONE = "none"
    ON_SIGNAL = "on-signal"
    EVERY = "every"


@dataclass(frozen=True, slots=True)
class CheckpointSpec:
    mode: CheckpointMode = CheckpointMode.NONE
    interval_s: int | None = None

    @property
    def saves_state(self) -> bool:
        return self.mode is not CheckpointMode.NONE


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """What a user asks for when submitting a task."""

    team: str
    resources: Resources
    command: tuple[str, ...] = ()
    name: str = ""
    priority_class: str | None = None
    pool: str | None = None
    checkpoint: CheckpointSpec = CheckpointSpec()
