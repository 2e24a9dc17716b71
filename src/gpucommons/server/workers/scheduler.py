"""The live scheduler: keep the engine's `ClusterState` in step with the store, decide, act.

One thread runs `cycle()` whenever something happens (submit, exit, cancel, checkpoint, policy
change — `wake()`) and at least every `tick` seconds (exit polling, grace-period deadlines). A cycle:

1. take in newly submitted tasks and a new policy, if any;
2. watch live attempts: settle the ones that ended, escalate stops (signal → grace → SIGKILL),
   enforce max_runtime, start stops for cancel requests, warn about overdue checkpoints;
3. `engine.decide(state, now, EngineConfig.commons())` — the same call the simulator makes;
4. act: Admit → reserve GPUs (DB-unique), open the ledger interval, launch; Preempt → signal the
   victim, which goes back to the queue when it has stopped.

The store is the truth; the in-memory state mirrors it and is rebuilt from it at startup (crash
recovery) or whenever a store write fails. Every change happens under `lock`.

With several server processes on one database (`shared_store`), only the leader runs cycles; the
others store tasks, cancels and checkpoints that this process did not see through its own inbox. So
every cycle also takes in the tasks above the submission watermark (`domain.intake`), and every
`reconcile_s` the pending set is compared with the store (a pending task cancelled elsewhere leaves the
queue, a task missed by the watermark joins it). Cancels and checkpoints of live attempts need nothing
more: supervision reads every live row once per tick anyway. A follower's scheduler never acts; its
state is refreshed read-only (`mirror`) so the views it serves stay current.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from gpucommons.backends.ports import (
    Clock,
    Executor,
    ExitStatus,
    Handle,
    Launch,
    LaunchError,
    QueuePosition,
)
from gpucommons.domain.intake import SeqWatermark
from gpucommons.domain.model import Policy, PriorityClass
from gpucommons.domain.stopping import StopAction, StopPlan, next_stop_step, parse_signal
from gpucommons.domain.task import CheckpointMode, TaskState
from gpucommons.engine import decide
from gpucommons.engine.state import ClusterState
from gpucommons.engine.types import Admit, EngineConfig, Pending, Preempt
from gpucommons.ledger.interval import EndReason
from gpucommons.server.services.checkpoints import last_saved_at, unsaved_gpu_seconds
from gpucommons.server.services.ledger import close_interval, open_interval, open_intervals
from gpucommons.server.services.lifecycle import record_event, switch_task_state
from gpucommons.server.services.preemptions import record_preemption
from gpucommons.server.services.tasks import LIVE_STATES, hash_task_token
from gpucommons.server.workers.attempts import (
    admission_of,
    admitted_order,
    clear_attempt,
    ended_at,
    handle_of,
    lost_gpu_seconds,
    outcome,
    pool_gpu_indices,
    task_request,
    with_out_of_service,
)
from gpucommons.server.workers.foreign import ForeignWorkTracker
from gpucommons.server.workers.launching import LaunchBuilder
from gpucommons.server.workers.outputs import CycleStats, SchedulerHooks, UsageView
from gpucommons.store.db import Database
from gpucommons.store.models import GpuAllocationRow, TaskRow, UsageIntervalRow

log = logging.getLogger(__name__)

#: Admissions reserved per transaction.
RESERVE_CHUNK = 64
#: After a rebuild the watermark starts this many submissions below the largest one seen, so that
#: submissions whose transactions were still open during the rebuild are found by the next scans.
INTAKE_LOOKBACK = 1000


class Scheduler:
    def __init__(
        self,
        db: Database,
        policy: Callable[[], tuple[Policy, int]],
        executor: Executor,
        clock: Clock,
        launcher: LaunchBuilder,
        *,
        tick_s: float = 0.5,
        hooks: SchedulerHooks | None = None,
        config: EngineConfig | None = None,
        shared_store: bool = False,
        reconcile_s: float = 2.0,
        intake_patience_s: float = 10.0,
        standby: bool = False,
        next_seq: Callable[[Session], int] | None = None,
    ) -> None:
        self.db = db
        self._policy_source = policy
        self.executor = executor
        self.clock = clock
        self.launcher = launcher
        self.paths = launcher.paths
        self.tick_s = tick_s
        self.hooks = hooks or SchedulerHooks()
        self.config = config or EngineConfig.commons()
        #: Store the handles of a cycle's launches in one transaction: only for executors whose
        #: attempts cannot outlive the server (the timer executor); real processes are recorded one
        #: by one, so a crash never leaves a running process the store does not know.
        self.batch_starts = not executor.traits.attempts_outlive_server
        self.lock = threading.RLock()
        #: Other processes store tasks in the same database (module docstring).
        self.shared_store = shared_store
        self.reconcile_s = reconcile_s
        self._intake = SeqWatermark(0, intake_patience_s)
        self._reconciled_at = float("-inf")
        #: Takes in submissions, cancels and checkpoints. A `standby` scheduler (a process that may
        #: follow) drops them until `recover` makes it the acting one: the leader finds them in the store.
        self._active = not standby
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._inbox: deque[str] = deque()
        policy_now, version = policy()
        self.policy = policy_now
        self._policy_version = version
        self.state = ClusterState(policy_now)
        self.usage = UsageView.of(self.state)
        self.executor.use_policy(policy_now)
        #: Why each pending task waits, from the last cycle (the queue endpoint reads it).
        self.pending: dict[str, Pending] = {}
        self.last_cycle_at: float | None = None
        self.cycles = 0
        #: Live attempts by task id: polled every cycle without reading the store.
        self._handles: dict[str, Handle] = {}
        self._dirty: set[str] = set()
        self._supervised_at = float("-inf")
        #: Tasks whose GPU allocations go at the end of the current transaction (one DELETE).
        self._freeing: list[str] = []
        self._batching_frees = False
        #: Attempts settled in the current transaction, released after it commits.
        self._settled: list[Handle] = []
        #: Open ledger intervals of the attempts being settled, read in one query per cycle.
        self._intervals: dict[str, list[UsageIntervalRow]] = {}
        #: The backend's nodes out of service at the last cycle (pool → node index → why).
        self._out_of_service: Mapping[str, Mapping[int, str]] = {}
        #: Threads for `traits.concurrent_starts` (made on first use).
        self._starter: ThreadPoolExecutor | None = None
        #: Cluster work we did not start (plain sbatch), as tasks (needs `next_seq` for their rows).
        self._foreign = ForeignWorkTracker(next_seq) if next_seq is not None else None

    # --- lifecycle of the worker ----------------------------------------------------------------

    def start(self) -> None:
        self.recover()
        self._thread = threading.Thread(target=self._run, name="commons-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self._starter is not None:
            # Starts in flight finish and are stored: an attempt must not run unrecorded.
            self._starter.shutdown(wait=True)
            self._starter = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wake(self) -> None:
        self._wake.set()

    @property
    def active(self) -> bool:
        return self._active

    def task_submitted(self, task_id: str) -> None:
        """A new pending task is in the store: take it in at the next cycle (which starts now)."""
        if not self._active:
            return
        self._inbox.append(task_id)
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.tick_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.cycle()
            except Exception:
                log.exception("scheduling cycle failed; rebuilding the state from the store")
                with contextlib.suppress(Exception):
                    self.rebuild()

    # --- state from the store ---------------------------------------------------------------------

    def rebuild(self) -> None:
        """Rebuild the engine's state from the store (startup, or after a failed write)."""
        with self.lock:
            policy, version = self._policy_source()
            if version != self._policy_version:
                self.executor.use_policy(policy)
            self.policy, self._policy_version = policy, version
            state = ClusterState(policy)
            self._inbox.clear()
            with self.db.session() as session:
                rows = session.scalars(
                    select(TaskRow)
                    .where(TaskRow.state.in_([TaskState.PENDING.value, *LIVE_STATES]))
                    .order_by(TaskRow.seq)
                ).all()
                live = sorted((r for r in rows if r.state != TaskState.PENDING.value), key=admitted_order)
                for row in live:
                    state.add_pending(task_request(row, policy))
                    state.admit(row.id, admission_of(row), row.admitted_at or row.queued_at)
                for row in rows:
                    if row.state == TaskState.PENDING.value:
                        state.add_pending(task_request(row, policy))
                for row in live:
                    if row.state == TaskState.PREEMPTING.value:
                        state.mark_preempting(row.id, row.preempted_by)
                for row in rows:
                    # The engine's "no second preemption without progress" rule counts past
                    # preemptions; a restarted server must not forget them.
                    if row.preemptions:
                        state.set_preemption_count(row.id, row.preemptions)
                self._handles = {r.id: h for r in live if (h := handle_of(r)) is not None}
                if self._foreign is not None:
                    self._foreign.load(session)
                if self.shared_store:
                    top = session.scalar(select(func.max(TaskRow.seq))) or 0
                    self._intake = SeqWatermark(max(0, top - INTAKE_LOOKBACK), self._intake.patience_s)
                    self._reconciled_at = time.monotonic()
            self.state = state
            self._supervised_at = float("-inf")

    def mirror(self) -> None:
        """A follower's read-only view: the state rebuilt from the store and the engine's reasons for
        every pending task, as the leader would give them. Decides nothing, writes nothing."""
        self.rebuild()
        with self.lock:
            now = self.clock.now()
            decisions = decide(self.state, now, self.config)
            self.pending = dict(decisions.pending)
            self.last_cycle_at = now
            self.usage = UsageView.of(self.state)

    def recover(self) -> None:
        """After a restart: rebuild, requeue attempts that never started, then settle the dead.

        Attempts whose processes still run are simply kept (their stops continue where they were);
        attempts that ended while the server was down are settled by the next cycle from their exit
        files, at the time the file was written, so ledger intervals close when the process ended.
        """
        now = self.clock.now()
        self._active = True
        with self.lock:
            with self.db.session() as session:
                never_started = session.scalars(
                    select(TaskRow).where(TaskRow.state == TaskState.ADMITTED.value, TaskRow.pid.is_(None))
                ).all()
                for row in never_started:
                    handle = self.executor.find_attempt(row.id)
                    if handle is not None:
                        # Launched just before the server died, before its handle was stored: the
                        # attempt is adopted like any other (running, or settled from its exit file).
                        row.pid, row.start_marker = handle.pid, handle.start_marker
                        row.exit_file = str(handle.exit_file) if handle.exit_file else None
                        row.log_path = str(self.paths.log(row.id))
                        row.started_at = row.admitted_at or now
                        switch_task_state(
                            session,
                            row,
                            TaskState.RUNNING,
                            now,
                            f"re-adopted (pid {handle.pid}): started just before the server stopped",
                        )
                        continue
                    self._release_resources(session, row, now, EndReason.PREEMPTED, 0.0)
                    row.queued_at = now
                    switch_task_state(
                        session, row, TaskState.PENDING, now, "the server stopped before launch; requeued"
                    )
                    clear_attempt(row)
            self.rebuild()
        self.cycle()

    # --- the cycle ----------------------------------------------------------------------------------

    def cycle(self) -> CycleStats:
        started = time.perf_counter()
        stats = CycleStats()
        with self.lock:
            now = self.clock.now()
            self._take_policy()
            self._take_inventory()
            self._take_inbox()
            if self.shared_store:
                self._take_stored()
            stats.ended = self._watch(now)
            decisions = decide(self.state, now, self.config)
            self.pending = with_out_of_service(decisions.pending, self._out_of_service)
            for preempt in decisions.preempt:
                stats.preempted += self._preempt(preempt, now)
            launches, failed = self._reserve_all(decisions.admit, now)
            stats.admitted = len(launches) + len(failed)
            self.last_cycle_at = now
            self.cycles += 1
            self.usage = UsageView.of(self.state)
        # Starting processes takes time; the API must not wait for it (nothing here touches the
        # engine's state, except a failed start, which takes the lock again).
        self._launch_all(launches, failed)
        self.hooks.cycle_done(time.perf_counter() - started, decisions)
        if stats.ended and not decisions.empty:
            self._wake.set()
        return stats

    def mark_dirty(self, task_id: str) -> None:
        """The API changed a live task (cancel, checkpoint): supervise it at the next cycle."""
        if not self._active:
            return
        self._dirty.add(task_id)
        self._wake.set()

    def _take_policy(self) -> None:
        policy, version = self._policy_source()
        if version != self._policy_version:
            self.state.set_policy(policy)
            self.policy, self._policy_version = policy, version
            self.executor.use_policy(policy)

    def _take_inventory(self) -> None:
        """Nodes the backend reports out of service (down, drained) take no new work; the queue
        says which and why; work started on the cluster without us is taken in (`foreign`) (caller
        holds `lock`). A no-op for backends that report neither."""
        out: Mapping[str, Mapping[int, str]] = self.executor.out_of_service()
        if self._foreign is not None:
            work = self.executor.foreign_work()
            if work or self._foreign.known:
                with self.db.session() as session:
                    unowned = self._foreign.sync(session, self.state, self.policy, work, self.clock.now())
                out = {p: {**out.get(p, {}), **unowned.get(p, {})} for p in {*out, *unowned}}
        for pool in self.policy.pools:
            nodes = frozenset(out.get(pool.name, {}))
            if nodes != self.state.out_of_service(pool.name):
                self.state.set_out_of_service(pool.name, nodes)
        self._out_of_service = out

    def _take_inbox(self) -> None:
        if not self._inbox:
            return
        ids = []
        while self._inbox:
            ids.append(self._inbox.popleft())
        with self.db.session() as session:
            rows = session.scalars(select(TaskRow).where(TaskRow.id.in_(ids)).order_by(TaskRow.seq)).all()
            for row in rows:
                if row.state == TaskState.PENDING.value and self.state.pending(row.id) is None:
                    self.state.add_pending(task_request(row, self.policy))

    def positions(self) -> Mapping[str, QueuePosition]:
        """Our engine's order is the queue's order: nothing to add."""
        return {}

    def refresh_log(self, task_id: str) -> None:
        """Attempts write their log files themselves."""

    def publish_policy(self, policy: Policy) -> None:
        """Our engine admits: it takes the new policy at its next cycle."""

    def _take_stored(self) -> None:
        """Tasks other processes stored: new ones above the watermark (every cycle), and every
        `reconcile_s` the whole pending set against the store (caller holds `lock`)."""
        reconcile = time.monotonic() - self._reconciled_at >= self.reconcile_s
        with self.db.session() as session:
            above = session.execute(
                select(TaskRow.id, TaskRow.seq, TaskRow.state).where(TaskRow.seq > self._intake.floor)
            ).all()
            self._intake.saw((seq for _, seq, _ in above), time.monotonic())
            pending_ids = {tid for tid, _, st in above if st == TaskState.PENDING.value}
            if reconcile:
                self._reconciled_at = time.monotonic()
                stored = set(
                    session.scalars(select(TaskRow.id).where(TaskRow.state == TaskState.PENDING.value))
                )
                for task in list(self.state.iter_pending()):
                    if task.id not in stored:
                        self.forget_pending(task.id)
                pending_ids |= stored
            new = [
                tid
                for tid in pending_ids
                if self.state.pending(tid) is None and self.state.running(tid) is None
            ]
            if not new:
                return
            rows = session.scalars(
                select(TaskRow)
                .where(TaskRow.id.in_(new), TaskRow.state == TaskState.PENDING.value)
                .order_by(TaskRow.seq)
            ).all()
            for row in rows:
                self.state.add_pending(task_request(row, self.policy))

    def forget_pending(self, task_id: str) -> None:
        """A pending task was cancelled: take it out of its queue (caller holds `lock`)."""
        if self.state.pending(task_id) is not None:
            self.state.remove_pending(task_id)
        with contextlib.suppress(ValueError):
            self._inbox.remove(task_id)
        self.pending.pop(task_id, None)

    # --- watching live attempts ---------------------------------------------------------------------

    def _watch(self, now: float) -> int:
        """Settle ended attempts (every cycle, by polling the cached handles) and supervise the live
        ones (stops, max_runtime, checkpoints: every `tick` seconds, or at once when the API touched
        one), so a busy cycle costs one poll per attempt, not a read of every live row."""
        ended_ids = [tid for tid, handle in self._handles.items() if self.executor.poll(handle) is not None]
        full = now - self._supervised_at >= self.tick_s
        dirty, self._dirty = self._dirty, set()
        if not ended_ids and not full and not dirty:
            return 0
        ended = 0
        self._batching_frees = True
        try:
            with self.db.session() as session, session.no_autoflush:
                query = select(TaskRow).where(TaskRow.state.in_(LIVE_STATES))
                if not full:
                    query = query.where(TaskRow.id.in_([*ended_ids, *dirty]))
                rows = session.scalars(query.order_by(TaskRow.seq)).all()
                self._intervals = open_intervals(session, ended_ids)
                for row in rows:
                    handle = handle_of(row)
                    if handle is None:
                        continue
                    self._handles.setdefault(row.id, handle)
                    status = self.executor.poll(handle)
                    if status is not None:
                        self._settle(session, row, handle, status, now)
                        ended += 1
                        continue
                    self._supervise(session, row, handle, now)
                self._free_gpus(session)
            for handle in self._settled:
                with contextlib.suppress(Exception):
                    self.executor.release(handle)
        finally:
            self._batching_frees = False
            self._freeing = []
            self._intervals = {}
            self._settled = []
        if full:
            self._supervised_at = now
        return ended

    def _supervise(self, session: Session, row: TaskRow, handle: Handle, now: float) -> None:
        pclass = self._class(row.priority_class)
        if row.stop_requested_at is None:
            if row.cancel_requested:
                self._begin_stop(session, row, handle, "cancelled", now, "cancel requested: stopping")
            elif (
                pclass is not None
                and pclass.max_runtime_s is not None
                and row.started_at is not None
                and now - row.started_at >= pclass.max_runtime_s
            ):
                self._begin_stop(
                    session,
                    row,
                    handle,
                    "max_runtime",
                    now,
                    f"ran for its class's max_runtime ({pclass.max_runtime_s}s): stopping",
                )
        if row.stop_requested_at is not None and row.killed_at is None:
            plan = self._stop_plan(row)
            step = next_stop_step(plan, now, signal_sent=True, kill_sent=False)
            if step.action is StopAction.KILL:
                self.executor.kill(handle)
                row.killed_at = now
                record_event(session, row, "killed", now, f"grace period of {plan.grace_s:g}s over: SIGKILL")
        self._checkpoint_watch(session, row, now)
        if self.state.running(row.id) is not None:
            saved = last_saved_at(row.started_at, row.last_checkpoint_at)
            self.state.set_unsaved_work(
                row.id, unsaved_gpu_seconds(row.checkpoint_mode, row.gpus, saved, now)
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

    def _class_signal(self, priority_class: str) -> int:
        pclass = self._class(priority_class)
        try:
            return parse_signal(pclass.signal) if pclass is not None else int(signal.SIGTERM)
        except ValueError:
            return int(signal.SIGTERM)

    def _class(self, name: str) -> PriorityClass | None:
        try:
            return self.policy.priority_class(name)
        except KeyError:
            return None

    def _stop_plan(self, row: TaskRow) -> StopPlan:
        issued = row.stop_requested_at if row.stop_requested_at is not None else self.clock.now()
        grace = (row.stop_deadline - issued) if row.stop_deadline is not None else 0.0
        return StopPlan(issued_at=issued, grace_s=grace, signum=self._class_signal(row.priority_class))

    def _begin_stop(
        self, session: Session, row: TaskRow, handle: Handle, reason: str, now: float, message: str
    ) -> None:
        pclass = self._class(row.priority_class)
        grace = pclass.grace_period_s if pclass is not None else 30
        row.stop_reason = reason
        row.stop_requested_at = now
        row.stop_deadline = now + grace
        plan = self._stop_plan(row)
        self.executor.signal(handle, plan.signum)
        sig = signal.Signals(plan.signum).name
        record_event(session, row, "signal", now, f"{message}; sent {sig}, SIGKILL after {grace}s")

    # --- an attempt ended ------------------------------------------------------------------------

    def _settle(self, session: Session, row: TaskRow, handle: Handle, status: ExitStatus, now: float) -> None:
        at = ended_at(handle, now, row.started_at, status)
        new_state, reason, message = outcome(row, status)
        lost = lost_gpu_seconds(row, at) if reason is EndReason.PREEMPTED else 0.0
        self._release_resources(session, row, at, reason, lost)
        row.exit_code = (
            status.code if status.code is not None else (-status.signal if status.signal else None)
        )
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
            clear_attempt(row)
            if self.state.running(row.id) is not None:
                self.state.requeue(row.id, at)
        else:
            row.finished_at = at
            switch_task_state(session, row, new_state, at, message)
            clear_attempt(row, keep_placement=True)
            if self.state.running(row.id) is not None:
                self.state.finish(row.id, at)
        self._handles.pop(row.id, None)
        # Released (its exit file deleted) only once this transaction has committed: a crash before
        # the commit must leave the file for the next leader to settle the attempt from.
        self._settled.append(handle)

    def _release_resources(
        self, session: Session, row: TaskRow, at: float, reason: EndReason, lost: float
    ) -> None:
        """Free the task's GPUs (at the end of the transaction) and close its ledger interval."""
        self._freeing.append(row.id)
        close_interval(session, row, at, reason, lost, self._intervals)
        if not self._batching_frees:
            self._free_gpus(session)

    def _free_gpus(self, session: Session) -> None:
        """One DELETE for every task released in this transaction."""
        if self._freeing:
            session.execute(
                delete(GpuAllocationRow)
                .where(GpuAllocationRow.task_id.in_(self._freeing))
                .execution_options(synchronize_session=False)
            )
            self._freeing = []

    # --- acting on decisions -----------------------------------------------------------------------

    def _preempt(self, preempt: Preempt, now: float) -> int:
        rt = self.state.running(preempt.victim_id)
        if rt is None or rt.preempting:
            return 0
        with self.db.session() as session:
            row = session.get(TaskRow, preempt.victim_id)
            if row is None or row.state not in LIVE_STATES:
                return 0
            if self.shared_store:
                preemptor_row = session.get(TaskRow, preempt.preemptor_id)
                if preemptor_row is None or preemptor_row.state != TaskState.PENDING.value:
                    # Cancelled through another replica since the last reconcile: preempt nobody for it.
                    self.forget_pending(preempt.preemptor_id)
                    return 0
            handle = handle_of(row)
            row.preempted_by = preempt.preemptor_id
            row.preemptions += 1
            message = preempt.message or f"preempted for {preempt.preemptor_id} ({preempt.reason.value})"
            preemptor = self.state.pending(preempt.preemptor_id)
            preemptor_team = preemptor.team if preemptor is not None else ""
            record_preemption(session, row, preempt, preemptor_team, now)
            if row.state != TaskState.PREEMPTING.value:
                switch_task_state(session, row, TaskState.PREEMPTING, now, message)
            if row.stop_requested_at is None and handle is not None:
                self._begin_stop(session, row, handle, "preempted", now, message)
            elif row.stop_reason is None:
                row.stop_reason = "preempted"
        self.state.mark_preempting(preempt.victim_id, preempt.preemptor_id)
        self.hooks.preempted(rt.task.team, preempt.reason.value, preempting_team=preemptor_team)
        return 1

    def _reserve_all(
        self, admits: tuple[Admit, ...], now: float
    ) -> tuple[list[Launch], list[tuple[str, str]]]:
        """Reserve every admission of the cycle in one transaction (caller holds `lock`).

        Reserving before launching means a crash between the two leaves an admitted task without a
        process, which recovery requeues.
        """
        launches: list[Launch] = []
        failed: list[tuple[str, str]] = []
        # In chunks, so that no transaction holds SQLite's write lock for long under load.
        for first in range(0, len(admits), RESERVE_CHUNK):
            chunk = admits[first : first + RESERVE_CHUNK]
            with self.db.session() as session:
                ids = [a.task_id for a in chunk]
                query = select(TaskRow).where(TaskRow.id.in_(ids))
                if self.shared_store:
                    # Row locks (PostgreSQL): a cancel stored by another replica waits for this
                    # reservation, or this reservation sees the task cancelled; never both.
                    query = query.with_for_update()
                rows = {r.id: r for r in session.scalars(query)}
                reserved_here: list[Launch] = []
                for admit in chunk:
                    reserved = self._reserve(session, rows.get(admit.task_id), admit, now)
                    if isinstance(reserved, Launch):
                        reserved_here.append(reserved)
                    elif reserved is not None:
                        failed.append((admit.task_id, reserved))
                if not self.batch_starts:
                    launches += reserved_here
                    continue
                # Attempts that die with the server anyway start in the same transaction.
                started = []
                for launch in reserved_here:
                    try:
                        started.append((launch, self._start(launch), now))
                    except Exception as exc:
                        failed.append((launch.task_id, str(exc)))
                self._record_started(rows, started)
        return launches, failed

    def _launch_all(self, launches: list[Launch], failed: list[tuple[str, str]]) -> None:
        """Start each reserved attempt; store each handle before the next launch (or, with
        `batch_starts`, for executors whose attempts die with the server, all at once).

        A backend whose starts are slow remote calls (sbatch) may start `traits.concurrent_starts` at
        once, in threads the cycle does not wait for: each handle is stored as soon as its start
        returns, and an attempt a crash left started but unstored is found again by `find_attempt` at
        recovery (the trait promises it)."""
        if self.executor.traits.concurrent_starts > 1 and not self.batch_starts and launches:
            self._launch_concurrently(launches)
            launches = []
        started: list[tuple[Launch, Handle, float]] = []
        for launch in launches:
            try:
                handle = self._start(launch)
            except Exception as exc:  # the executor says why; the task fails with that message
                failed.append((launch.task_id, str(exc)))
                continue
            started.append((launch, handle, self.clock.now()))
            if not self.batch_starts:
                self._mark_running(started)
                started = []
        self._mark_running(started)
        if failed:
            with self.lock:
                for task_id, reason in failed:
                    self._fail_start(task_id, self.clock.now(), reason)

    def _launch_concurrently(self, launches: list[Launch]) -> None:
        """Hand the starts to `concurrent_starts` threads and return: the cycle goes on (ends are
        settled, stops escalated) while sbatch calls are in flight; each start is stored as soon as it
        returns, under `lock`."""
        if self._starter is None:
            width = self.executor.traits.concurrent_starts
            self._starter = ThreadPoolExecutor(width, thread_name_prefix="commons-start")
        for launch in launches:
            self._starter.submit(self._start_and_record, launch)

    def _start_and_record(self, launch: Launch) -> None:
        try:
            handle = self._start(launch)
        except Exception as exc:  # the executor says why; the task fails with that message
            with self.lock:
                self._fail_start(launch.task_id, self.clock.now(), str(exc))
            return
        with self.lock:
            self._mark_running([(launch, handle, self.clock.now())])

    def _reserve(
        self, session: Session, row: TaskRow | None, admit: Admit, now: float
    ) -> Launch | str | None:
        """Pending → admitted in the store: GPUs (unique in the DB), ledger interval, the launch."""
        request = self.state.pending(admit.task_id)
        if request is None:
            return None
        if row is None or row.state != TaskState.PENDING.value:
            self.forget_pending(admit.task_id)
            return None
        pool = self.policy.pool(admit.admission.pool)
        gpu_indices = pool_gpu_indices(admit.admission)
        if len(gpu_indices) < request.resources.gpus:
            gpu_indices = self._free_indices(
                session, admit.admission.pool, pool.nodes * pool.gpus_per_node, request.resources.gpus
            )
        # The engine's state first: it refuses a placement clash before the store is touched; if the
        # store write then fails, the cycle's caller rebuilds the state from the store.
        self.state.admit(admit.task_id, admit.admission, now)
        token = secrets.token_urlsafe(24)
        borrowed = admit.admission.borrowed
        row.assigned_pool = admit.admission.pool
        row.placement = [[s.node, list(s.gpu_indices)] for s in admit.admission.placement]
        row.gpu_indices = gpu_indices
        row.borrowed_gpus, row.borrowed_cpu_milli, row.borrowed_memory_mib = (
            borrowed.gpus,
            borrowed.cpu_milli,
            borrowed.memory_mib,
        )
        row.admitted_at = now
        row.task_token_hash = hash_task_token(token)
        note = f" (borrowing {borrowed.describe()})" if borrowed.any_positive() else ""
        switch_task_state(
            session, row, TaskState.ADMITTED, now, admit.message or f"admitted to {pool.name}{note}"
        )
        session.add_all(
            GpuAllocationRow(pool=pool.name, gpu_index=i, task_id=row.id, allocated_at=now)
            for i in gpu_indices
        )
        open_interval(session, row, now)
        self.hooks.admitted(
            request.team,
            admit.admission.pool,
            borrowed.gpus,
            waited_s=now - request.queued_at,
            priority_class=request.priority_class,
        )
        try:
            return self.launcher.launch(row, token)
        except (ValueError, OSError, LaunchError) as exc:
            return str(exc)

    def _free_indices(self, session: Session, pool: str, capacity: int, want: int) -> list[int]:
        """Lowest free GPU indices of the pool, when the engine placed the task without indices."""
        taken = set(session.scalars(select(GpuAllocationRow.gpu_index).where(GpuAllocationRow.pool == pool)))
        return [i for i in range(capacity) if i not in taken][:want]

    def _start(self, launch: Launch) -> Handle:
        if self.batch_starts:  # in-process attempts print nothing: no log file to mark
            return self.executor.start(launch)
        with contextlib.suppress(OSError), launch.log_path.open("a") as f:
            f.write(
                f"--- commons: attempt {launch.env['COMMONS_RESTART_COUNT']} of {launch.task_id} starting\n"
            )
        return self.executor.start(launch)

    def _mark_running(self, started: list[tuple[Launch, Handle, float]]) -> None:
        if not started:
            return
        with self.db.session() as session:
            ids = [launch.task_id for launch, _, _ in started]
            rows = {r.id: r for r in session.scalars(select(TaskRow).where(TaskRow.id.in_(ids)))}
            self._record_started(rows, started)

    def _record_started(self, rows: dict[str, TaskRow], started: list[tuple[Launch, Handle, float]]) -> None:
        """Admitted → running, with what is needed to find the attempt again after a restart."""
        session = None
        for launch, handle, at in started:
            row = rows.get(launch.task_id)
            if row is None:
                continue
            session = session or Session.object_session(row)
            row.pid = handle.pid
            row.start_marker = handle.start_marker
            row.exit_file = str(handle.exit_file) if handle.exit_file else None
            row.log_path = str(launch.log_path)
            row.started_at = at
            assert session is not None
            switch_task_state(session, row, TaskState.RUNNING, at, f"started (pid {handle.pid})")
            self._handles[launch.task_id] = handle

    def _fail_start(self, task_id: str, now: float, reason: str) -> None:
        log.warning("launch of %s failed: %s", task_id, reason)
        with self.db.session() as session:
            row = session.get(TaskRow, task_id)
            if row is not None:
                self._release_resources(session, row, now, EndReason.FAILED, 0.0)
                row.finished_at = now
                switch_task_state(session, row, TaskState.FAILED, now, f"could not start: {reason}")
        self.state.finish(task_id, now)
