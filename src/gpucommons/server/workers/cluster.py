"""The worker for a cluster that admits by itself (Kueue): mirror what it decides into the store.

Our engine does not decide here. The worker

1. creates each submitted task on the cluster (`ClusterBackend.submit`), retrying while the API
   server is unavailable, failing the task with the cluster's sentence when it refuses it;
2. applies every `TaskReport` the backend's watchers send: the task's state (through the legal
   steps of the transition table, so its events tell the whole story even when the watch missed
   some), its restart count, its exit code, who preempted it, and the ledger intervals of its holds
   — exactly once, keyed by (task, start) in the store, so a re-list, a restart or a second replica
   writes nothing twice; work someone put on the cluster directly (kubectl) becomes a task of
   origin `cluster` of its namespace's team, shown and billed like any other;
3. deletes the cluster object of a cancelled task, and asks a preempted task to save its state;
4. keeps the engine's `ClusterState` in step (pending, admitted with what it borrowed, finished),
   so the teams, queue and metrics views are the same as with the embedded engine.

The store is the truth; `recover()` rebuilds the mirror from it and re-submits what was accepted
but never reached the cluster. With several server processes on one database only the leader runs
this worker (`workers.election`); the others keep a read-only `mirror()` for their views, and the
leader finds what they stored (submissions, cancels) in the database every `reconcile_s`.

Its parts: `cluster_commands` (1 and 3's deletions), `cluster_inbox` (the reports thread: 2 in
batches), `cluster_reports` (one report → a row and the mirror), `cluster_ledger` (the intervals),
`cluster_steps` (the pure rules). This module holds the lifecycle, the API's side and the mirror.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpucommons.backends.ports import (
    Clock,
    ClusterBackend,
    QueuePosition,
    TaskReport,
)
from gpucommons.domain.model import Policy
from gpucommons.domain.task import TaskState
from gpucommons.engine.state import ClusterState
from gpucommons.engine.types import Pending, PendingCode
from gpucommons.server.services.tasks import LIVE_STATES
from gpucommons.server.workers.attempts import task_request
from gpucommons.server.workers.cluster_commands import ClusterCommands
from gpucommons.server.workers.cluster_inbox import ReportInbox
from gpucommons.server.workers.cluster_ledger import TaskIntervals, write_holds
from gpucommons.server.workers.cluster_reports import ReportApplier
from gpucommons.server.workers.commands import CommandDesk
from gpucommons.server.workers.launching import TaskPaths
from gpucommons.server.workers.outputs import ReadView, SchedulerHooks, UsageView
from gpucommons.store.db import Database
from gpucommons.store.models import TaskRow

log = logging.getLogger(__name__)


class ClusterWorker:
    """`port.TaskWorker` over a `ClusterBackend` (module docstring)."""

    def __init__(
        self,
        db: Database,
        policy: Callable[[], tuple[Policy, int]],
        backend: ClusterBackend,
        clock: Clock,
        paths: TaskPaths,
        *,
        next_seq: Callable[[Session], int],
        server_url: str = "",
        default_image: str = "",
        hooks: SchedulerHooks | None = None,
        tick_s: float = 0.5,
        apply_policy: bool = False,
        standby: bool = False,
        reconcile_s: float = 2.0,
    ) -> None:
        self.db = db
        self._policy_source = policy
        self.backend = backend
        self.clock = clock
        self.paths = paths
        self.next_seq = next_seq
        self.server_url = server_url
        self.default_image = default_image
        #: Write each applied policy to the cluster (`commons up --apply-policy`).
        self.apply_policy = apply_policy
        #: A standby worker (a process that may follow) acts only once `start()` makes it lead.
        self._active = not standby
        self.reconcile_s = reconcile_s
        self._reconciled_at = float("-inf")
        self.hooks = hooks or SchedulerHooks()
        self.tick_s = tick_s
        self.lock = threading.RLock()
        policy_now, self._policy_version = policy()
        self.policy = policy_now
        self.backend.use_policy(policy_now)
        self.state = ClusterState(policy_now)
        self.pending: dict[str, Pending] = {}
        self.view = ReadView.of(self.state, self.pending)
        #: The API's and the budget watcher's commands (`workers.commands`).
        self.desk = CommandDesk(self)
        self.applier = ReportApplier(self)
        self.last_cycle_at: float | None = None
        self.cycles = 0
        self.reports = 0
        self.commands = ClusterCommands(self)
        self.inbox = ReportInbox(self)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._logs_at: dict[str, float] = {}
        self._refs_before_watch: set[str | None] = set()

    # --- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> None:
        self._active = True
        self.recover()
        with self.db.session() as session:
            # Only tasks created before the first look can have vanished unseen.
            self._refs_before_watch = set(
                session.scalars(
                    select(TaskRow.cluster_ref).where(
                        TaskRow.state.in_([TaskState.PENDING.value, *LIVE_STATES]),
                        TaskRow.cluster_ref.is_not(None),
                    )
                )
            )
        self._stop.clear()
        self._threads = [
            threading.Thread(target=self._run_commands, name="commons-cluster-commands", daemon=True),
            threading.Thread(
                target=self.backend.run,
                args=(self.inbox.report, self._stop, self.inbox.synced),
                name="commons-cluster-watch",
                daemon=True,
            ),
            threading.Thread(
                target=self.inbox.run, args=(self._stop,), name="commons-cluster-reports", daemon=True
            ),
        ]
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        self.inbox.wake()
        for thread in self._threads:
            thread.join(timeout)
        self._threads = []

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def wake(self) -> None:
        self._wake.set()

    @property
    def usage(self) -> UsageView:
        return self.view.usage

    def publish(self) -> None:
        """Swap in a fresh read view of the mirror (caller holds `lock`, or is its only writer)."""
        self.view = ReadView.of(self.state, self.pending)

    def mirror(self) -> None:
        """A follower's read-only view: the mirror rebuilt from the store, each pending task's reason
        as the leader last stored it. Decides nothing, writes nothing."""
        with self.lock:
            self._take_policy()
            self.state = self._state_from_store()
            with self.db.session() as session:
                waiting = session.execute(
                    select(TaskRow.id, TaskRow.message).where(TaskRow.state == TaskState.PENDING.value)
                ).all()
            self.pending = {
                tid: Pending(PendingCode.CLUSTER_ADMISSION, message) for tid, message in waiting if message
            }
            self.publish()
            self.last_cycle_at = self.clock.now()

    def _state_from_store(self) -> ClusterState:
        state = ClusterState(self.policy)
        with self.db.session() as session:
            rows = session.scalars(
                select(TaskRow)
                .where(TaskRow.state.in_([TaskState.PENDING.value, *LIVE_STATES]))
                .order_by(TaskRow.seq)
            ).all()
            for row in rows:
                state.add_pending(task_request(row, self.policy))
                attempt = row.attempt
                if row.state != TaskState.PENDING.value and attempt is not None and attempt.pool:
                    at = row.admitted_at or self.clock.now()
                    self.applier.admit_in(state, row.id, attempt.pool, attempt.borrowed_gpus, at)
        self.desk.restore(state)
        return state

    def recover(self) -> None:
        """Rebuild the mirror from the store; queue the creation of accepted tasks not yet created."""
        with self.lock:
            self._take_policy()
            self.state = self._state_from_store()
            self.publish()
            with self.db.session() as session:
                never_created = session.scalars(
                    select(TaskRow.id)
                    .where(
                        TaskRow.state.in_([TaskState.PENDING.value, *LIVE_STATES]),
                        TaskRow.cluster_ref.is_(None),
                        TaskRow.origin == "commons",
                    )
                    .order_by(TaskRow.seq)
                ).all()
            self.commands.create(*never_created)

    # --- the API's side -----------------------------------------------------------------------------

    def task_submitted(self, task_id: str) -> None:
        if not self._active:
            return  # the leader finds it in the store
        with self.lock:
            with self.db.session() as session:
                row = session.get(TaskRow, task_id)
                if row is not None and self.state.pending(task_id) is None:
                    self.state.add_pending(task_request(row, self.policy))
            self.publish()
        self.commands.create(task_id)
        self._wake.set()

    def mark_dirty(self, task_id: str) -> None:
        if not self._active:
            return
        self.commands.cancel(task_id)
        self._wake.set()

    def forget_pending(self, task_id: str) -> None:
        if self.state.pending(task_id) is not None:
            self.state.remove_pending(task_id)
        self.pending.pop(task_id, None)
        self.publish()

    def positions(self) -> Mapping[str, QueuePosition]:
        by_ref = self.backend.positions()
        if not by_ref:
            return {}
        with self.db.session() as session:
            rows = session.execute(
                select(TaskRow.id, TaskRow.cluster_ref).where(
                    TaskRow.state == TaskState.PENDING.value, TaskRow.cluster_ref.in_(list(by_ref))
                )
            ).all()
        return {task_id: by_ref[ref] for task_id, ref in rows if ref is not None and ref in by_ref}

    def publish_policy(self, policy: Policy) -> None:
        if self.apply_policy:
            self.backend.apply_policy(policy)

    def refresh_log(self, task_id: str) -> None:
        """Copy the pods' output into the task's log file (at most every 2 s per task)."""
        now = time.monotonic()
        if now - self._logs_at.get(task_id, float("-inf")) < 2.0:
            return
        self._logs_at[task_id] = now
        with self.db.session() as session:
            row = session.get(TaskRow, task_id)
            ref = row.cluster_ref if row is not None else None
        if ref is None:
            return
        text = self.backend.read_log(ref)
        if text is None:
            return
        path = self.paths.log(task_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".part")
        partial.write_bytes(text)
        os.replace(partial, path)

    # --- commands to the cluster --------------------------------------------------------------------

    def _run_commands(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.tick_s)
            self._wake.clear()
            try:
                self._take_policy()
                self._take_stored()
                self.commands.run_once()
            except Exception:
                log.exception("cluster worker: a round of commands failed; trying again")
            self.last_cycle_at = self.clock.now()
            self.cycles += 1

    def _take_policy(self) -> None:
        policy, version = self._policy_source()
        if version != self._policy_version:
            with self.lock:
                self.state.set_policy(policy)
                self.policy, self._policy_version = policy, version
                self.backend.use_policy(policy)

    def _take_stored(self) -> None:
        """What other server processes stored: tasks accepted but not yet on the cluster, and
        cancels of tasks that are (every `reconcile_s`)."""
        if time.monotonic() - self._reconciled_at < self.reconcile_s:
            return
        self._reconciled_at = time.monotonic()
        queued = self.commands.queued()
        with self.db.session() as session:
            uncreated = session.scalars(
                select(TaskRow.id).where(
                    TaskRow.state == TaskState.PENDING.value,
                    TaskRow.cluster_ref.is_(None),
                    TaskRow.origin == "commons",
                )
            ).all()
            cancelled = session.execute(
                select(TaskRow.id, TaskRow.cluster_ref).where(
                    TaskRow.cluster_ref.is_not(None),
                    (TaskRow.cancel_requested.is_(True) & TaskRow.state.in_(list(LIVE_STATES)))
                    | (
                        (TaskRow.state == TaskState.CANCELLED.value)
                        & (TaskRow.finished_at > self.clock.now() - 600)
                        & (TaskRow.origin == "commons")
                    ),
                )
            ).all()
        new = [task_id for task_id in uncreated if task_id not in queued]
        if new:
            with self.lock, self.db.session() as session:
                for row in session.scalars(select(TaskRow).where(TaskRow.id.in_(new))):
                    if self.state.pending(row.id) is None:
                        self.state.add_pending(task_request(row, self.policy))
                self.publish()
            self.commands.create(*new)
        self.commands.cancel(*(tid for tid, ref in cancelled if not self.commands.deleted(ref)))

    # --- reports from the cluster (applied by `self.inbox`'s thread) ------------------------------

    def mirror_changed(self, reports: int) -> None:
        """`reports` were applied: the views' usage is recomputed once for all of them."""
        self.publish()
        self.reports += reports

    def rebuild_mirror(self) -> None:
        """After a rolled-back transaction the mirror may hold changes the store does not: rebuild."""
        with self.lock:
            self.state = self._state_from_store()
            self.publish()

    def settle_vanished(self, refs: frozenset[str]) -> None:
        """A task whose object the first look did not find was deleted while nobody watched (by
        hand, or with its namespace)."""
        now = self.clock.now()
        with self.lock, self.db.session() as session:
            rows = session.scalars(
                select(TaskRow).where(
                    TaskRow.state.in_([TaskState.PENDING.value, *LIVE_STATES]),
                    TaskRow.cluster_ref.is_not(None),
                )
            ).all()
            for row in rows:
                if row.cluster_ref in refs or row.cluster_ref not in self._refs_before_watch:
                    continue
                gone = TaskReport(
                    ref=row.cluster_ref or "",
                    team=row.team,
                    task_id=row.id,
                    state=TaskState.CANCELLED,
                    at=None,
                    message=f"the Job {row.cluster_ref} was deleted while GPU Commons was not watching",
                )
                self.applier.apply(session, row, gone, now)
                write_holds(TaskIntervals(session), row, gone, now)
            self.publish()
