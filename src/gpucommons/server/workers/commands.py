"""The commands a worker takes from the API and the budget watcher, and the desk that applies them.

The routers used to open their own transaction, take the worker's lock and call its internals
(`forget_pending`, `publish_policy`), the budget watcher wrote the engine's state, and a checkpoint
report changed a live row with no lock at all. Now each change the API makes to what the worker owns
is one command value handed to `TaskWorker.execute`; the worker's desk applies it under the worker's
lock, in one transaction of its own, tells the worker what changed (queue, supervision, wake-up) and
publishes a fresh read view before it returns. So a command and a cycle never interleave: a cancel
that races an admission either finds the task still pending (it leaves the queue before the next
decision) or already admitted (the cancel is recorded and supervision stops the attempt) — never
both, never neither (docs/decisions/0013-scheduler-commands-and-read-views.md).

Commands run on the caller's thread, not the scheduler's: the cycle releases the lock before it
starts processes, and a cancel should not wait for a Slurm submission to finish. Callers authorize
first (the routers do); a command assumes it may do what it says.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, TypeVar, overload

from sqlalchemy.orm import Session

from gpucommons.api import schemas
from gpucommons.api.errors import NotFound
from gpucommons.domain.model import Policy
from gpucommons.domain.task import TaskState
from gpucommons.engine.state import ClusterState
from gpucommons.identity.principal import Principal
from gpucommons.server.services import convert, policies
from gpucommons.server.services import tasks as task_service
from gpucommons.store.db import Database
from gpucommons.store.models import TaskRow


@dataclass(frozen=True, slots=True)
class Cancel:
    """Cancel a task: a pending one ends at once and leaves its queue; a live one is stopped."""

    task_id: str
    by: Principal
    now: float
    #: Lock the row first (several processes on one database: the leader may be reserving it).
    lock_row: bool = False


@dataclass(frozen=True, slots=True)
class RecordCheckpoint:
    """A live task saved a checkpoint (its overdue warning and preemption cost start again)."""

    task_id: str
    report: schemas.CheckpointReport
    now: float


@dataclass(frozen=True, slots=True)
class ApplyPolicy:
    """Validate and store a policy text; unless `dry_run`, carry it to the admitting side first and
    hand the stored one to `adopt` (the server's policy holder) once it is committed."""

    text: str
    subject: str
    now: float
    dry_run: bool
    adopt: Callable[[Policy, int], None]


@dataclass(frozen=True, slots=True)
class SetTeamSpends:
    """Each team's spend this month, in cents (the budget watcher's pricing of the ledger)."""

    spends: Mapping[str, int]


Command = Cancel | RecordCheckpoint | ApplyPolicy | SetTeamSpends
R = TypeVar("R")


class CommandHost(Protocol):
    """What the desk needs of the worker it serves (both workers have it)."""

    db: Database
    lock: threading.RLock
    state: ClusterState

    def forget_pending(self, task_id: str) -> None: ...

    def mark_dirty(self, task_id: str) -> None: ...

    def publish_policy(self, policy: Policy) -> None: ...

    def publish(self) -> None: ...

    def wake(self) -> None: ...


@dataclass
class CommandDesk:
    """Applies commands to one worker (module docstring) and keeps what must outlive its state."""

    host: CommandHost
    #: The last spends handed over: a state rebuilt from the store (which keeps none) gets them back.
    spends: Mapping[str, int] = field(default_factory=dict)

    @overload
    def execute(self, command: Cancel | RecordCheckpoint) -> schemas.Task: ...
    @overload
    def execute(self, command: ApplyPolicy) -> schemas.PolicyInfo: ...
    @overload
    def execute(self, command: SetTeamSpends) -> None: ...

    def execute(self, command: Command) -> schemas.Task | schemas.PolicyInfo | None:
        host = self.host
        with host.lock:
            match command:
                case Cancel():
                    out: schemas.Task | schemas.PolicyInfo | None = self._cancel(command)
                case RecordCheckpoint():
                    out = self._in_transaction(command.task_id, lambda s, r: self._checkpoint(s, r, command))
                case ApplyPolicy():
                    out = self._apply_policy(command)
                case SetTeamSpends():
                    self.spends = MappingProxyType(dict(command.spends))
                    self.restore(host.state)
                    out = None
            host.publish()
        if isinstance(command, (Cancel, RecordCheckpoint)):
            host.mark_dirty(command.task_id)
        elif isinstance(command, ApplyPolicy):
            host.wake()
        return out

    def restore(self, state: ClusterState) -> None:
        """Hand the last spends to `state` (a new one after a rebuild; caller holds the lock)."""
        for team, cents in self.spends.items():
            state.set_team_spend(team, cents)

    # --- the commands ------------------------------------------------------------------------------

    def _in_transaction(self, task_id: str, change: Callable[[Session, TaskRow], R]) -> R:
        with self.host.db.session() as session:
            row = session.get(TaskRow, task_id)
            if row is None:
                raise NotFound(f"no task {task_id!r}")
            return change(session, row)

    def _cancel(self, command: Cancel) -> schemas.Task:
        def change(session: Session, row: TaskRow) -> schemas.Task:
            if command.lock_row:
                # The leader may be reserving this task in another process: its row lock orders the
                # two (PostgreSQL; the worker's lock does it within one process).
                session.refresh(row, with_for_update={"of": TaskRow})
            task_service.cancel(session, row, command.by, command.now)
            return convert.task(row)

        out = self._in_transaction(command.task_id, change)
        if out.state == TaskState.CANCELLED.value:
            self.host.forget_pending(command.task_id)
        return out

    @staticmethod
    def _checkpoint(session: Session, row: TaskRow, command: RecordCheckpoint) -> schemas.Task:
        task_service.report_checkpoint(session, row, command.report, command.now)
        return convert.task(row)

    def _apply_policy(self, command: ApplyPolicy) -> schemas.PolicyInfo:
        with self.host.db.session() as session:
            policy, row = policies.apply(session, command.text, command.subject, command.now, command.dry_run)
            out = policies.info(row, policy)
            if not command.dry_run:
                # Before the commit: a cluster that refuses the policy leaves the stored one in force
                # (raises `BackendUnavailable`).
                self.host.publish_policy(policy)
        if not command.dry_run:
            command.adopt(policy, row.id)
        return out
