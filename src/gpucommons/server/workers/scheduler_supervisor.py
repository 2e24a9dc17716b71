"""The scheduler's watch over live attempts: settle the ended, escalate stops, warn about checkpoints.

Every cycle polls the cached handles of the live attempts; every `tick` seconds (or at once for a task
the API touched) it reads every live row and looks after each by its state: a cancel request or an
exceeded `max_runtime` starts a stop (the class's signal, SIGKILL after its grace period), a stop
whose grace period is over is escalated (every step of a stop decided by the pure
`domain.stopping.stop_step`, in `advance_stop`), a task that declared `every:X` checkpoints but reported
nothing for 2X gets a warning event, and the engine learns each attempt's unsaved GPU-seconds.

A checkpointing task on a node the backend took out of service (a Slurm node drained for
maintenance) is stopped the same way and requeued, to resume elsewhere; one that cannot resume runs
to its end there, as a drain lets it (a node that goes down loses it: the executor reports it lost).

An attempt that ended is settled in the same transaction: its ledger interval closes, its GPUs go
(one DELETE for the whole cycle), and the task goes back to the queue or to its final state. What
one transaction releases travels in a `Release`, not in the scheduler's fields; the attempts it
settled are released by the executor (exit files deleted) only once it has committed.

It exists apart from the scheduler (`scheduler.py`) so that the lifecycle and the store mirror read
on their own; the actions on the engine's decisions are in `scheduler_actuator`.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from gpucommons.backends.ports import Clock, Executor, ExitStatus, Handle
from gpucommons.domain.model import Policy, PriorityClass
from gpucommons.domain.stopping import StopAction, StopFields, StopReason, parse_signal, stop_step
from gpucommons.domain.task import CheckpointMode, TaskState
from gpucommons.engine.state import ClusterState
from gpucommons.ledger.interval import EndReason
from gpucommons.server.services.checkpoints import last_saved_at, unsaved_work
from gpucommons.server.services.ledger import close_interval, drop_open_interval, open_intervals
from gpucommons.server.services.lifecycle import record_event, switch_task_state
from gpucommons.server.services.tasks import LIVE_STATES
from gpucommons.server.workers.attempts import (
    end_attempt,
    ended_at,
    ended_by,
    handle_of,
    lost_gpu_seconds,
    outcome,
)
from gpucommons.store.db import Database
from gpucommons.store.models import AttemptRow, GpuAllocationRow, TaskRow, UsageIntervalRow

log = logging.getLogger(__name__)

#: The grace period of a stop whose priority class the policy no longer has.
DEFAULT_GRACE_S = 30


def _where(attempt: AttemptRow) -> str:
    """Where an attempt runs, for a person: its pool's nodes and its process."""
    nodes = sorted({int(node) for node, _ in attempt.placement or []})
    on = f"node {', '.join(map(str, nodes))} of pool {attempt.pool}" if nodes else f"pool {attempt.pool}"
    return f"{on}, process {attempt.pid}" if attempt.pid is not None else on


def _signal_of(pclass: PriorityClass | None) -> int:
    """The class's stop signal; SIGTERM for a class the policy no longer has (or a bad name)."""
    try:
        return parse_signal(pclass.signal) if pclass is not None else int(signal.SIGTERM)
    except ValueError:
        return int(signal.SIGTERM)


@dataclass
class Release:
    """What one transaction releases: the tasks whose GPU allocations go in one DELETE at its end
    (`flush`), the open ledger intervals read up front for the attempts it settles, and those
    attempts, for the executor to release once the transaction has committed."""

    session: Session
    intervals: dict[str, list[UsageIntervalRow]] = field(default_factory=dict)
    freeing: list[str] = field(default_factory=list)
    settled: list[Handle] = field(default_factory=list)

    @classmethod
    def reading(cls, session: Session, task_ids: Collection[str]) -> Release:
        """A release whose attempts' open intervals are read in one query."""
        return cls(session, open_intervals(session, task_ids))

    def resources(self, row: TaskRow, at: float, reason: EndReason, lost: float) -> None:
        """Free the task's GPUs (at `flush`) and close its ledger interval."""
        self.freeing.append(row.id)
        close_interval(self.session, row, at, reason, lost, self.intervals)

    def unstarted(self, row: TaskRow) -> None:
        """Free the GPUs of an attempt that never started (at `flush`) and drop its interval."""
        self.freeing.append(row.id)
        self.intervals.pop(row.id, None)
        drop_open_interval(self.session, row)

    def flush(self) -> None:
        """One DELETE for every task released so far."""
        if self.freeing:
            self.session.execute(
                delete(GpuAllocationRow)
                .where(GpuAllocationRow.task_id.in_(self.freeing))
                .execution_options(synchronize_session=False)
            )
            self.freeing = []


def release_resources(session: Session, row: TaskRow, at: float, reason: EndReason, lost: float) -> None:
    """Free one task's GPUs and close its ledger interval now (outside a cycle's watch)."""
    release = Release(session)
    release.resources(row, at, reason, lost)
    release.flush()


def release_unstarted(session: Session, row: TaskRow) -> None:
    """Free the GPUs of an attempt that never started, leaving no ledger interval (nothing ran)."""
    release = Release(session)
    release.unstarted(row)
    release.flush()


class SupervisorHost(Protocol):
    """The scheduler the supervisor works for."""

    db: Database
    executor: Executor
    clock: Clock
    tick_s: float

    @property
    def policy(self) -> Policy: ...

    @property
    def state(self) -> ClusterState: ...

    #: Pool → engine node index → why the backend took it out of service (down, drained).
    nodes_left: Mapping[str, Mapping[int, str]]


class AttemptSupervisor:
    """The live attempts (by task id, polled without reading the store) and their watch (module
    docstring). The caller holds the scheduler's `lock`."""

    def __init__(self, host: SupervisorHost) -> None:
        self.host = host
        #: Live attempts by task id: polled every cycle without reading the store.
        self.handles: dict[str, Handle] = {}
        #: Tasks the API changed (cancel, checkpoint): supervised at the next cycle.
        self.dirty: set[str] = set()
        #: Whether the last `watch` left an attempt that ended after its instant to the next cycle,
        #: which should then come at once rather than at the next tick.
        self.ended_later = False
        self.supervised_at = float("-inf")

    def reset(self, handles: dict[str, Handle]) -> None:
        """After a rebuild: these attempts, every one supervised at the next cycle."""
        self.handles = handles
        self.supervised_at = float("-inf")

    def watch(self, now: float) -> int:
        """Settle ended attempts (every cycle, by polling the cached handles) and supervise the live
        ones (stops, max_runtime, checkpoints: every `tick` seconds, or at once when the API touched
        one), so a busy cycle costs one poll per attempt, not a read of every live row."""
        executor = self.host.executor
        clock = self.host.clock
        reported = [
            (tid, handle, status)
            for tid, handle in self.handles.items()
            if (status := executor.poll(handle)) is not None
        ]
        current = clock.now()  # read after the polls, so that no end they saw is later than it
        ended_ids = [tid for tid, handle, status in reported if ended_by(handle, status, now, current)]
        self.ended_later = len(ended_ids) < len(reported)
        full = now - self.supervised_at >= self.host.tick_s
        dirty, self.dirty = self.dirty, set()
        if not ended_ids and not full and not dirty:
            return 0
        ended = 0
        with self.host.db.session() as session, session.no_autoflush:
            query = select(TaskRow).where(TaskRow.state.in_(LIVE_STATES))
            if not full:
                query = query.where(TaskRow.id.in_([*ended_ids, *dirty]))
            rows = session.scalars(query.order_by(TaskRow.seq)).all()
            release = Release.reading(session, ended_ids)
            for row in rows:
                handle = handle_of(row)
                if handle is None:
                    continue
                self.handles.setdefault(row.id, handle)
                status = executor.poll(handle)
                if status is not None:
                    if not ended_by(handle, status, now, clock.now()):
                        self.ended_later = True  # after this cycle's instant: the next cycle settles it
                        continue
                    self.settle(release, row, handle, status, now)
                    ended += 1
                    continue
                self._supervise(session, row, handle, now)
            release.flush()
        # Released (exit files deleted) only now that the transaction has committed: a crash before
        # the commit must leave the files for the next leader to settle the attempts from.
        for handle in release.settled:
            with contextlib.suppress(Exception):
                executor.release(handle)
        if full:
            self.supervised_at = now
        return ended

    def refresh_unsaved_work(self, now: float) -> bool:
        """Every admitted task's unsaved work as of `now`, read from the store; True if any value
        changed. Supervision hands it to the engine once per tick; a cycle that proposes
        preemptions needs it now, as the simulator gives it, or the checkpoint-aware choice of
        victims reads values up to a tick old (a cycle woken by a submission between ticks)."""
        state = self.host.state
        with self.host.db.session() as session:
            rows = session.execute(
                select(
                    TaskRow.id,
                    TaskRow.checkpoint_mode,
                    TaskRow.gpus,
                    TaskRow.started_at,
                    TaskRow.last_checkpoint_at,
                ).where(TaskRow.state.in_(LIVE_STATES))
            ).all()
        changed = False
        for task in rows:
            rt = state.running(task.id)
            if rt is None:
                continue
            unsaved = unsaved_work(task, now)
            if unsaved != rt.unsaved_gpu_s:
                state.set_unsaved_work(task.id, unsaved)
                changed = True
        return changed

    # --- a live attempt, by its state --------------------------------------------------------------

    def _supervise(self, session: Session, row: TaskRow, handle: Handle, now: float) -> None:
        if row.attempt is not None and row.attempt.stop_requested_at is None:
            self._running(session, row, handle, now)
        if row.attempt is not None and row.attempt.stop_requested_at is not None:
            self.advance_stop(session, row, handle, now)
        self._checkpoint_watch(session, row, now)
        if self.host.state.running(row.id) is not None:
            self.host.state.set_unsaved_work(row.id, unsaved_work(row, now))

    def _running(self, session: Session, row: TaskRow, handle: Handle, now: float) -> None:
        """No stop yet: start one for a cancel request, an exceeded max_runtime, or a node taken
        out of service under a task that can resume elsewhere."""
        pclass = self._class(row.priority_class)
        if row.cancel_requested:
            self.begin_stop(session, row, handle, StopReason.CANCELLED, now, "cancel requested: stopping")
        elif row.checkpoint_mode != CheckpointMode.NONE.value and (left := self._node_left(row)) is not None:
            self.begin_stop(
                session, row, handle, StopReason.NODE_LEFT, now, f"{left}: stopping to resume elsewhere"
            )
        elif (
            pclass is not None
            and pclass.max_runtime_s is not None
            and row.started_at is not None
            and now - row.started_at >= pclass.max_runtime_s
        ):
            self.begin_stop(
                session,
                row,
                handle,
                StopReason.MAX_RUNTIME,
                now,
                f"ran for its class's max_runtime ({pclass.max_runtime_s}s): stopping",
            )

    def _checkpoint_watch(self, session: Session, row: TaskRow, now: float) -> None:
        """A task that declared `every:X` but reported nothing for 2X gets a warning event."""
        if row.checkpoint_mode != CheckpointMode.EVERY.value or not row.checkpoint_interval_s:
            return
        if row.state != TaskState.RUNNING.value or row.started_at is None:
            return
        since = max(
            x for x in (row.started_at, row.last_checkpoint_at, row.checkpoint_warned_at) if x is not None
        )
        if now - since >= 2 * row.checkpoint_interval_s:
            row.checkpoint_warned_at = now
            silent = now - (last_saved_at(row.started_at, row.last_checkpoint_at) or now)
            record_event(
                session,
                row,
                "warning",
                now,
                f"no checkpoint reported for {silent:.0f}s although the task declared "
                f"every:{row.checkpoint_interval_s}s; a preemption now would lose that work",
            )

    def _node_left(self, row: TaskRow) -> str | None:
        """Why one of the task's nodes is out of service, if one is."""
        if row.attempt is None:
            return None
        out = self.host.nodes_left.get(row.attempt.pool, {})
        for node, _ in row.attempt.placement or []:
            if int(node) in out:
                return out[int(node)]
        return None

    # --- stops ----------------------------------------------------------------------------------------

    def _class(self, name: str) -> PriorityClass | None:
        try:
            return self.host.policy.priority_class(name)
        except KeyError:
            return None

    def begin_stop(
        self, session: Session, row: TaskRow, handle: Handle, reason: StopReason, now: float, message: str
    ) -> None:
        """Start a stop for `reason`: its first step (the class's signal) is taken now."""
        if row.attempt is None:
            return
        row.attempt.stop_reason = reason
        self.advance_stop(session, row, handle, now, message)

    def advance_stop(self, session: Session, row: TaskRow, handle: Handle, now: float, why: str = "") -> None:
        """Take the step the stop machine (`domain.stopping.stop_step`) says is due for this attempt
        now — the class's signal, SIGKILL once its deadline has passed, or nothing — and store the
        fields it leaves. The only place a stop moves on."""
        attempt = row.attempt
        if attempt is None:
            return
        pclass = self._class(row.priority_class)
        grace = pclass.grace_period_s if pclass is not None else DEFAULT_GRACE_S
        stop = StopFields(
            attempt.stop_requested_at,
            attempt.stop_deadline,
            attempt.killed_at,
            attempt.kills or 0,
            attempt.last_kill_at,
            attempt.gave_up_at,
        )
        step = stop_step(stop, now, grace_s=grace, signum=_signal_of(pclass))
        if step.action is StopAction.SEND_SIGNAL:
            assert step.signum is not None
            self.host.executor.signal(handle, step.signum)
            sig = signal.Signals(step.signum).name
            message = f"{why or 'stopping'}; sent {sig}, SIGKILL after {grace}s"
            record_event(session, row, "signal", now, message)
        elif step.action is StopAction.KILL:
            self.host.executor.kill(handle)
            if stop.killed_at is None:
                given = stop.kill_due(grace, now) - (stop.requested_at or now)
                record_event(session, row, "killed", now, f"grace period of {given:g}s over: SIGKILL")
            else:
                since = now - stop.killed_at
                record_event(
                    session, row, "killed", now, f"no end seen {since:.0f}s after SIGKILL: SIGKILL again"
                )
        elif step.action is StopAction.GIVE_UP:
            assert stop.killed_at is not None
            message = (
                f"SIGKILL sent {stop.kills} times over {now - stop.killed_at:.0f}s and the backend never "
                "reported the end: no more are sent; the task keeps its GPUs until the end is seen "
                f"(check {_where(attempt)} by hand)"
            )
            log.warning("task %s: %s", row.id, message)
            record_event(session, row, "warning", now, message)
        done = stop.after(step, now)
        if done != stop:
            attempt.stop_requested_at = done.requested_at
            attempt.stop_deadline = done.deadline
            attempt.killed_at = done.killed_at
            attempt.kills = done.kills
            attempt.last_kill_at = done.last_kill_at
            attempt.gave_up_at = done.gave_up_at

    # --- an attempt ended ------------------------------------------------------------------------------

    def settle(self, release: Release, row: TaskRow, handle: Handle, status: ExitStatus, now: float) -> None:
        """The attempt ended: close its interval, free its GPUs, requeue or finish the task."""
        session = release.session
        state = self.host.state
        at = ended_at(handle, now, row.started_at, status)
        new_state, reason, message = outcome(row, status)
        lost = lost_gpu_seconds(row, at) if reason is EndReason.PREEMPTED else 0.0
        release.resources(row, at, reason, lost)
        row.exit_code = (
            status.code if status.code is not None else (-status.signal if status.signal else None)
        )
        end_attempt(row, at, reason, requeue=new_state is TaskState.PENDING, exit_code=row.exit_code)
        if new_state is TaskState.PENDING:
            row.lost_gpu_seconds += lost
            if row.state != TaskState.PREEMPTING.value:
                switch_task_state(session, row, TaskState.PREEMPTING, at, "attempt ended; requeueing")
            row.restart_count += 1
            row.queued_at = at
            switch_task_state(
                session,
                row,
                TaskState.PENDING,
                at,
                message + (f"; lost {lost:.0f} GPU-s" if lost else ""),
            )
            if state.running(row.id) is not None:
                state.requeue(row.id, at)
        else:
            row.finished_at = at
            switch_task_state(session, row, new_state, at, message)
            if state.running(row.id) is not None:
                state.finish(row.id, at)
        self.handles.pop(row.id, None)
        release.settled.append(handle)
