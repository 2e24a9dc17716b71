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
"""

from __future__ import annotations

import collections
import hashlib
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpucommons.backends.ports import (
    BackendUnavailable,
    Clock,
    ClusterBackend,
    ClusterTask,
    LaunchError,
    QueuePosition,
    TaskReport,
)
from gpucommons.domain.model import Policy
from gpucommons.domain.resources import Resources
from gpucommons.domain.task import TRANSITIONS, CheckpointMode, CheckpointSpec, TaskState
from gpucommons.engine.state import ClusterState
from gpucommons.engine.types import Admission, Pending, PendingCode, Preempt, PreemptReason
from gpucommons.server.services.lifecycle import record_event, switch_task_state
from gpucommons.server.services.preemptions import record_preemption
from gpucommons.server.services.tasks import LIVE_STATES, hash_task_token
from gpucommons.server.workers.attempts import clear_attempt, task_request
from gpucommons.server.workers.cluster_ledger import TaskIntervals, write_holds
from gpucommons.server.workers.launching import TaskPaths
from gpucommons.server.workers.outputs import SchedulerHooks, UsageView
from gpucommons.store.db import Database
from gpucommons.store.models import TaskRow

log = logging.getLogger(__name__)

#: Seconds between attempts to create a task the API server did not take.
RETRY_S = 2.0
#: Reports applied in one transaction at most (one commit instead of one per report).
REPORT_BATCH = 500


def steps(current: TaskState, target: TaskState) -> list[TaskState]:
    """The shortest legal way from `current` to `target` (breadth first over the transition table,
    in the table's own order): what the task went through while the watch may have looked away."""
    if current == target:
        return []
    paths: dict[TaskState, list[TaskState]] = {current: []}
    queue = collections.deque([current])
    order = list(TaskState)
    while queue:
        state = queue.popleft()
        for nxt in sorted(TRANSITIONS[state], key=order.index):
            if nxt in paths:
                continue
            paths[nxt] = [*paths[state], nxt]
            if nxt == target:
                return paths[nxt]
            queue.append(nxt)
    raise ValueError(f"no way from {current} to {target}")


#: How far an attempt has got: a report that is behind what the store already says is stale.
_RANK = {TaskState.PENDING: 0, TaskState.ADMITTED: 1, TaskState.RUNNING: 2, TaskState.PREEMPTING: 3}


def progress(state: TaskState, attempt: int, reported: bool) -> tuple[int, int]:
    """(attempt, step) of a task's life: the eviction that ends attempt k is reported with Kueue's
    eviction count k+1 already, so a reported `preempting` belongs to the attempt before."""
    if state is TaskState.PREEMPTING and reported:
        return (attempt - 1, _RANK[state])
    return (attempt, _RANK[state])


def external_task_id(uid: str) -> str:
    """A stable id for work found on the cluster: `k` + 10 hex digits of its object's uid."""
    return "k" + hashlib.sha256(uid.encode()).hexdigest()[:10]


@dataclass
class _Command:
    task_id: str
    not_before: float = 0.0


@dataclass(frozen=True)
class _Synced:
    """The watches' first look is complete; `refs` are the objects it found."""

    refs: frozenset[str]


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
        #: Cluster objects already deleted for a cancel (not asked again at each reconcile).
        self._deleted_refs: set[str] = set()
        self.hooks = hooks or SchedulerHooks()
        self.tick_s = tick_s
        self.lock = threading.RLock()
        policy_now, self._policy_version = policy()
        self.policy = policy_now
        self.backend.use_policy(policy_now)
        self.state = ClusterState(policy_now)
        self.usage = UsageView.of(self.state)
        self.pending: dict[str, Pending] = {}
        self.last_cycle_at: float | None = None
        self.cycles = 0
        self.reports = 0
        self._commands: collections.deque[_Command] = collections.deque()
        #: What the watches sent, in order, for the reports thread to apply in batches.
        self._inbox: collections.deque[TaskReport | _Synced] = collections.deque()
        self._inbox_ready = threading.Event()
        self._dirty: set[str] = set()
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
                args=(self._on_report, self._stop, self._on_synced),
                name="commons-cluster-watch",
                daemon=True,
            ),
            threading.Thread(target=self._apply_reports, name="commons-cluster-reports", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        self._inbox_ready.set()
        for thread in self._threads:
            thread.join(timeout)
        self._threads = []

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def wake(self) -> None:
        self._wake.set()

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
            self.usage = UsageView.of(self.state)
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
                if row.state != TaskState.PENDING.value and row.assigned_pool:
                    self._admit_in(state, row.id, row.assigned_pool, row.borrowed_gpus, row.admitted_at)
        return state

    def recover(self) -> None:
        """Rebuild the mirror from the store; queue the creation of accepted tasks not yet created."""
        with self.lock:
            self._take_policy()
            state = ClusterState(self.policy)
            with self.db.session() as session:
                rows = session.scalars(
                    select(TaskRow)
                    .where(TaskRow.state.in_([TaskState.PENDING.value, *LIVE_STATES]))
                    .order_by(TaskRow.seq)
                ).all()
                for row in rows:
                    state.add_pending(task_request(row, self.policy))
                    if row.state != TaskState.PENDING.value and row.assigned_pool:
                        self._admit_in(state, row.id, row.assigned_pool, row.borrowed_gpus, row.admitted_at)
                    if row.cluster_ref is None and row.origin == "commons":
                        self._commands.append(_Command(row.id))
            self.state = state
            self.usage = UsageView.of(state)

    # --- the API's side -----------------------------------------------------------------------------

    def task_submitted(self, task_id: str) -> None:
        if not self._active:
            return  # the leader finds it in the store
        with self.lock:
            with self.db.session() as session:
                row = session.get(TaskRow, task_id)
                if row is not None and self.state.pending(task_id) is None:
                    self.state.add_pending(task_request(row, self.policy))
            self.usage = UsageView.of(self.state)
        self._commands.append(_Command(task_id))
        self._wake.set()

    def mark_dirty(self, task_id: str) -> None:
        if not self._active:
            return
        self._dirty.add(task_id)
        self._wake.set()

    def forget_pending(self, task_id: str) -> None:
        if self.state.pending(task_id) is not None:
            self.state.remove_pending(task_id)
        self.pending.pop(task_id, None)
        self.usage = UsageView.of(self.state)

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
                self._act_on_dirty()
                self._create_submitted()
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
        queued = {c.task_id for c in self._commands}
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
                self.usage = UsageView.of(self.state)
            self._commands.extend(_Command(task_id) for task_id in new)
        self._dirty.update(tid for tid, ref in cancelled if ref not in self._deleted_refs)

    def _create_submitted(self) -> None:
        now = time.monotonic()
        for _ in range(len(self._commands)):
            command = self._commands.popleft()
            if command.not_before > now:
                self._commands.append(command)
                continue
            try:
                self._create(command.task_id)
            except BackendUnavailable as exc:
                log.warning("creating %s on the cluster: %s; again in %.0fs", command.task_id, exc, RETRY_S)
                self._commands.append(_Command(command.task_id, now + RETRY_S))

    def _create(self, task_id: str) -> None:
        with self.db.session() as session:
            row = session.get(TaskRow, task_id)
            if row is None or row.state != TaskState.PENDING.value or row.cluster_ref is not None:
                return
            token = secrets.token_urlsafe(24)
            task = ClusterTask(
                task_id=row.id,
                team=row.team,
                command=tuple(row.command),
                image=row.image or self.default_image,
                gpus=row.gpus,
                priority_class=row.priority_class,
                pool=row.pool_request,
                checkpoint=CheckpointSpec(CheckpointMode(row.checkpoint_mode), row.checkpoint_interval_s),
                restart_count=row.restart_count,
                cpu_milli=row.cpu_milli,
                memory_mib=row.memory_mib,
                env={"COMMONS_URL": self.server_url, "COMMONS_TOKEN": token} if self.server_url else None,
            )
        try:
            ref = self.backend.submit(task)
        except LaunchError as exc:
            with self.lock, self.db.session() as session:
                row = session.get(TaskRow, task_id)
                if row is not None and row.state == TaskState.PENDING.value:
                    now = self.clock.now()
                    row.finished_at = now
                    switch_task_state(session, row, TaskState.FAILED, now, f"could not start: {exc}")
                    self.forget_pending(task_id)
            return
        with self.db.session() as session:
            row = session.get(TaskRow, task_id)
            if row is not None:
                row.cluster_ref = ref
                row.task_token_hash = hash_task_token(token)
                record_event(session, row, "created", self.clock.now(), f"created the Job {ref}")

    def _act_on_dirty(self) -> None:
        dirty, self._dirty = self._dirty, set()
        if not dirty:
            return
        with self.db.session() as session:
            rows = session.scalars(select(TaskRow).where(TaskRow.id.in_(sorted(dirty)))).all()
            wanted = [
                r.cluster_ref
                for r in rows
                if r.cluster_ref and (r.cancel_requested or r.state == TaskState.CANCELLED.value)
            ]
        for ref in wanted:
            if ref in self._deleted_refs:
                continue
            try:
                self.backend.delete(ref)
                self._deleted_refs.add(ref)
            except BackendUnavailable:
                self._dirty.update(r.id for r in rows if r.cluster_ref == ref)
            except LaunchError as exc:
                log.warning("cancel: %s", exc)

    # --- reports from the cluster -------------------------------------------------------------------

    def _on_synced(self, refs: frozenset[str]) -> None:
        """The watches' first look is complete (called on a watch thread): queued behind the reports
        that came before it."""
        self._inbox.append(_Synced(refs))
        self._inbox_ready.set()

    def _on_report(self, report: TaskReport) -> None:
        """A report from a watch thread: queued, so the watch goes straight back to its stream.

        Applying a report costs database round trips and a commit; done on the watch thread, the
        watches fell a minute behind at 170 events/s (bench/k8s_watch.py, docs/benchmarks.md). The
        reports thread applies them in order, many per transaction."""
        self._inbox.append(report)
        self._inbox_ready.set()

    def _apply_reports(self) -> None:
        while not self._stop.is_set():
            self._inbox_ready.wait(self.tick_s)
            self._inbox_ready.clear()
            while self._inbox and not self._stop.is_set():
                batch: list[TaskReport] = []
                while self._inbox and len(batch) < REPORT_BATCH:
                    item = self._inbox.popleft()
                    if isinstance(item, _Synced):
                        self._apply_batch(batch)
                        batch = []
                        self._settle_vanished(item.refs)
                    else:
                        batch.append(item)
                self._apply_batch(batch)

    def _apply_batch(self, reports: list[TaskReport]) -> None:
        """Apply `reports` in order in one transaction; if it fails, one transaction each, so that
        one bad report costs only itself (and says so in the log)."""
        if not reports:
            return
        try:
            self._apply_in_one(reports)
            return
        except Exception:
            if len(reports) == 1:
                log.exception("cluster worker: cannot apply the report of %s", reports[0].ref)
                self._resync_state()
                return
            log.warning("cluster worker: a batch of %d reports failed; one at a time now", len(reports))
        self._resync_state()
        for report in reports:
            try:
                self._apply_in_one([report])
            except Exception:
                log.exception("cluster worker: cannot apply the report of %s", report.ref)
                self._resync_state()

    def _apply_in_one(self, reports: list[TaskReport]) -> None:
        now = self.clock.now()
        with self.lock:
            with self.db.session() as session:
                ids = [r.task_id or external_task_id(r.uid or r.ref) for r in reports]
                session.scalars(select(TaskRow).where(TaskRow.id.in_(sorted(set(ids))))).all()  # cached
                intervals = TaskIntervals(session, ids)
                for report in reports:
                    log.debug(
                        "report %s %s attempt %d at %s: %s",
                        report.ref,
                        report.state,
                        report.attempt,
                        report.at,
                        report.message,
                    )
                    row = self._row_for(session, report, now)
                    if row is None:
                        continue
                    self._apply(session, row, report, now)
                    write_holds(intervals, row, report, now)
            self.usage = UsageView.of(self.state)
            self.reports += len(reports)

    def _resync_state(self) -> None:
        """After a rolled-back transaction the mirror may hold changes the store does not: rebuild."""
        with self.lock:
            self.state = self._state_from_store()
            self.usage = UsageView.of(self.state)

    def _settle_vanished(self, refs: frozenset[str]) -> None:
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
                self._apply(session, row, gone, now)
                write_holds(TaskIntervals(session), row, gone, now)
            self.usage = UsageView.of(self.state)

    def _row_for(self, session: Session, report: TaskReport, now: float) -> TaskRow | None:
        if report.task_id is not None:
            row = session.get(TaskRow, report.task_id)
            if row is not None and row.cluster_ref is None:
                row.cluster_ref = report.ref
            return row
        task_id = external_task_id(report.uid or report.ref)
        row = session.get(TaskRow, task_id)
        if row is not None or (report.state.is_terminal and not report.holds):
            return row
        return self._external_row(session, task_id, report, now)

    def _external_row(self, session: Session, task_id: str, report: TaskReport, now: float) -> TaskRow | None:
        """A task for work someone put on the cluster directly, billed to its namespace's team."""
        if not self.policy.has_team(report.team):
            return None
        try:
            pclass = self.policy.priority_class(report.priority or None)
        except KeyError:
            pclass = self.policy.priority_class(None)
        at = report.at or now
        row = TaskRow(
            id=task_id,
            seq=self.next_seq(session),
            name=report.ref,
            team=report.team,
            state=TaskState.PENDING.value,
            priority_class=pclass.name,
            priority_value=pclass.value,
            command=[],
            gpus=report.gpus,
            cpu_milli=0,
            memory_mib=0,
            pool_request=None,
            checkpoint_mode=CheckpointMode.NONE.value,
            submitted_by="kubernetes",
            submitted_at=at,
            queued_at=at,
            restart_count=0,
            preemptions=0,
            cancel_requested=False,
            lost_gpu_seconds=0.0,
            cluster_ref=report.ref,
            origin="cluster",
            message="found on the cluster (not submitted through GPU Commons)",
        )
        session.add(row)
        session.flush()
        record_event(session, row, "found", at, f"found {report.ref} on the cluster")
        self.state.add_pending(task_request(row, self.policy))
        return row

    def _apply(self, session: Session, row: TaskRow, report: TaskReport, now: float) -> None:
        current = TaskState(row.state)
        if current.is_terminal:
            return
        at = report.at if report.at is not None else now
        if row.gpus == 0 and report.gpus:
            row.gpus = report.gpus
        target = report.state
        if not target.is_terminal:
            reported = progress(target, report.attempt, True)
            stored = progress(current, row.restart_count, False)
            if reported < stored:
                return  # an older view than the store's: the cluster has moved on since
            if reported[0] > stored[0] and current.holds_resources:
                # A later attempt: the one we know was evicted and requeued while nobody watched.
                if current is not TaskState.PREEMPTING:
                    self._step(session, row, TaskState.PREEMPTING, report, at)
                self._step(session, row, TaskState.PENDING, report, at)
                current = TaskState.PENDING
            elif current is TaskState.PENDING and report.attempt > row.restart_count:
                row.restart_count = report.attempt  # admitted and evicted between two looks
        if target == current:
            if target is TaskState.PENDING:
                self._note_pending(row, report)
            elif target is TaskState.RUNNING and report.started_at and row.started_at is None:
                row.started_at = report.started_at
            return
        for state in steps(current, target):
            self._step(session, row, state, report, at)

    def _step(self, session: Session, row: TaskRow, state: TaskState, report: TaskReport, at: float) -> None:
        # The cluster writes whole seconds: its admission may read earlier than our own fractional
        # submission time. A step never goes back before the one it follows.
        at = max(
            [at] + [t for t in (row.queued_at, row.admitted_at, row.started_at, row.stop_requested_at) if t]
        )
        message = report.message if state == report.state else ""
        if state is TaskState.ADMITTED:
            pool = report.pool or row.pool_request or ""
            row.assigned_pool = pool
            row.borrowed_gpus = self._admit_in(self.state, row.id, pool, None, at, report.gpus or row.gpus)
            row.admitted_at = at
            self.pending.pop(row.id, None)
            note = f" (borrowing {row.borrowed_gpus} GPUs)" if row.borrowed_gpus else ""
            switch_task_state(session, row, state, at, message or f"admitted by Kueue to {pool}{note}")
            self.hooks.admitted(
                row.team,
                pool,
                row.borrowed_gpus,
                waited_s=max(0.0, at - row.queued_at),
                priority_class=row.priority_class,
            )
        elif state is TaskState.RUNNING:
            row.started_at = max(report.started_at or at, at)
            switch_task_state(session, row, state, row.started_at, message or "its pods are running")
        elif state is TaskState.PREEMPTING:
            self._preempting(session, row, report, at, message)
        elif state is TaskState.PENDING:
            switch_task_state(session, row, state, at, message or "evicted by Kueue; requeued")
            row.restart_count = max(report.attempt, row.restart_count + 1)
            row.queued_at = at
            clear_attempt(row)
            if self.state.running(row.id) is not None:
                self.state.requeue(row.id, at)
            self._note_pending(row, report)
        else:  # an end
            row.finished_at = at
            if report.exit_code is not None:
                row.exit_code = report.exit_code
            switch_task_state(session, row, state, at, message or state.value)
            clear_attempt(row, keep_placement=True)
            if self.state.running(row.id) is not None:
                self.state.finish(row.id, at)
            elif self.state.pending(row.id) is not None:
                self.state.remove_pending(row.id)
            self.pending.pop(row.id, None)

    def _preempting(
        self, session: Session, row: TaskRow, report: TaskReport, at: float, message: str
    ) -> None:
        row.preemptions += 1
        row.stop_reason = "preempted"
        row.stop_requested_at = at
        preemptor_id, preemptor_team = "", ""
        if report.preempted_by:
            found = session.execute(
                select(TaskRow.id, TaskRow.team).where(TaskRow.cluster_ref == report.preempted_by)
            ).first()
            if found is not None:
                preemptor_id, preemptor_team = found
        reason = PreemptReason(report.preempt_reason) if report.preempt_reason else PreemptReason.WITHIN_TEAM
        text = message or "evicted by Kueue"
        record_preemption(session, row, Preempt(row.id, preemptor_id, reason, text), preemptor_team, at)
        switch_task_state(session, row, TaskState.PREEMPTING, at, text)
        if self.state.running(row.id) is not None:
            self.state.mark_preempting(row.id)
        self.hooks.preempted(row.team, reason.value, preempting_team=preemptor_team)
        if row.cluster_ref:
            try:
                self.backend.request_checkpoint(row.cluster_ref, at)
            except Exception:  # best effort: the pods' SIGTERM is the signal that counts
                log.info("could not annotate %s with a checkpoint request", row.cluster_ref)

    def _note_pending(self, row: TaskRow, report: TaskReport) -> None:
        if report.message:
            self.pending[row.id] = Pending(PendingCode.CLUSTER_ADMISSION, report.message)
            row.message = report.message

    def _admit_in(
        self,
        state: ClusterState,
        task_id: str,
        pool: str,
        borrowed: int | None,
        at: float | None,
        gpus: int | None = None,
    ) -> int:
        """Mirror an admission Kueue made; returns the GPUs it borrowed (above the team's nominal)."""
        request = state.pending(task_id)
        if request is None:
            return borrowed or 0
        if borrowed is None:
            quota = state.quota.quota(request.team, pool)
            nominal = quota.nominal.gpus if quota is not None else 0
            used = state.usage(request.team, pool).gpus
            want = gpus if gpus is not None else request.resources.gpus
            borrowed = max(0, used + want - nominal) - max(0, used - nominal)
        try:
            state.admit(task_id, Admission(pool, (), Resources(gpus=borrowed)), at or self.clock.now())
        except (KeyError, ValueError) as exc:
            log.info("mirror of %s not updated: %s", task_id, exc)
        return borrowed
