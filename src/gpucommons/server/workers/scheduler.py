"""The live scheduler: keep the engine's `ClusterState` in step with the store, decide, act.

One thread runs `cycle()` whenever something happens (submit, exit, cancel, checkpoint, policy
change — `wake()`) and at least every `tick` seconds (exit polling, grace-period deadlines). A cycle:

1. take in newly submitted tasks and a new policy, if any;
2. watch live attempts: settle the ones that ended, escalate stops (signal → grace → SIGKILL),
   enforce max_runtime, start stops for cancel requests, warn about overdue checkpoints;
3. `engine.decide(state, now, EngineConfig.commons())` — the same call the simulator makes;
4. act: Admit → reserve GPUs (DB-unique), open the ledger interval; Preempt → signal the
   victim, which goes back to the queue when it has stopped;
5. settle what ended meanwhile and go back to 3 at the same `now` until a cycle changes nothing: the
   simulator's loop (`engine.instant`, through `scheduler_instant`); then launch.

The store is the truth; the in-memory state mirrors it and is rebuilt from it at startup (crash
recovery) or whenever a store write fails. Every change happens under `lock`: the cycle's, and the
API's and the budget watcher's, which arrive as commands (`desk`, a `CommandDesk`).
Readers take `view`, the immutable read view published at the end of each cycle and after each
command (docs/decisions/0013-scheduler-commands-and-read-views.md); nothing outside the workers
takes `lock` or reads `state`.

With several server processes on one database (`shared_store`), only the leader runs cycles; the
others store tasks, cancels and checkpoints that this process did not see through its own inbox. So
every cycle also takes in the tasks above the submission watermark (`domain.intake`), and every
`reconcile_s` the pending set is compared with the store (a pending task cancelled elsewhere leaves the
queue, a task missed by the watermark joins it). Cancels and checkpoints of live attempts need nothing
more: supervision reads every live row once per tick anyway. A follower's scheduler never acts; its
state is refreshed read-only (`mirror`) so the views it serves stay current.

Its parts: `scheduler_supervisor` (2: the live attempts, one function per state, and settling an
ended one), `scheduler_actuator` (4: preemptions, reservations, launches). This module holds the
lifecycle, the cycle, the mirror of the store (1, rebuild, recovery) and the API's side.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpucommons.backends.ports import Clock, Executor, QueuePosition
from gpucommons.domain.intake import SeqWatermark
from gpucommons.domain.model import Policy
from gpucommons.domain.task import TaskState
from gpucommons.engine import decide
from gpucommons.engine.instant import settle_instant
from gpucommons.engine.state import ClusterState, decayed_usage_from_history
from gpucommons.engine.types import EngineConfig, Pending
from gpucommons.server.services.ledger import holds_since
from gpucommons.server.services.tasks import LIVE_STATES
from gpucommons.server.workers.attempts import (
    admission_of,
    admitted_order,
    handle_of,
    task_request,
    with_out_of_service,
)
from gpucommons.server.workers.commands import CommandDesk
from gpucommons.server.workers.foreign import ForeignWorkTracker
from gpucommons.server.workers.launching import LaunchBuilder
from gpucommons.server.workers.outputs import CycleStats, ReadView, SchedulerHooks, UsageView
from gpucommons.server.workers.scheduler_actuator import Actuator
from gpucommons.server.workers.scheduler_instant import MAX_CYCLES_PER_INSTANT, LiveInstant
from gpucommons.server.workers.scheduler_supervisor import AttemptSupervisor
from gpucommons.store.db import Database
from gpucommons.store.models import TaskEventRow, TaskRow

log = logging.getLogger(__name__)

#: After a rebuild the watermark starts this many submissions below the largest one seen, so that
#: submissions whose transactions were still open during the rebuild are found by the next scans.
INTAKE_LOOKBACK = 1000
#: Ledger holds ended more than this many usage half-lives ago weigh under 2^-20 and are not read.
USAGE_MEMORY_HALF_LIVES = 20
#: A follower rebuilds its view at least this often, even when the store's mark has not moved.
MIRROR_FULL_EVERY_S = 30.0


class Scheduler:
    """`port.TaskWorker` over our engine and an `Executor` (module docstring)."""

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
        self.executor.use_policy(policy_now)
        #: Why each pending task waits, from the last cycle (published in `view.reasons`).
        self.pending: dict[str, Pending] = {}
        self.view = ReadView.of(self.state, self.pending)
        #: The API's and the budget watcher's commands (`workers.commands`).
        self.desk = CommandDesk(self)
        self.last_cycle_at: float | None = None
        self.cycles = 0
        #: The backend's nodes out of service at the last cycle (pool → node index → why).
        self._out_of_service: Mapping[str, Mapping[int, str]] = {}
        #: Of those, the ones the backend took out (down, drained): their tasks move elsewhere.
        self.nodes_left: Mapping[str, Mapping[int, str]] = {}
        #: The live attempts and their watch; the actions on the engine's decisions.
        self.supervisor = AttemptSupervisor(self)
        self.actuator = Actuator(self)
        #: Cluster work we did not start (plain sbatch), as tasks (needs `next_seq` for their rows).
        self._foreign = ForeignWorkTracker(next_seq) if next_seq is not None else None
        #: A follower's last two looks at the store (`mirror`), when it last rebuilt, and how many
        #: looks found nothing to rebuild.
        self._mirror_marks: tuple[tuple[int, int, int] | None, tuple[int, int, int] | None] = (None, None)
        self._mirrored_at = float("-inf")
        self.mirrors_skipped = 0

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
        self.actuator.shutdown()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wake(self) -> None:
        self._wake.set()

    @property
    def active(self) -> bool:
        return self._active

    @property
    def usage(self) -> UsageView:
        return self.view.usage

    def publish(self) -> None:
        """Swap in a fresh read view of the state (caller holds `lock`)."""
        self.view = ReadView.of(self.state, self.pending)

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
                try:
                    self.rebuild()
                except Exception:
                    log.exception(
                        "rebuilding the state from the store failed too; the next failed cycle tries again"
                    )

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
                        state.mark_preempting(row.id, row.attempt.preempted_by if row.attempt else None)
                for row in rows:
                    # The engine's "no second preemption without progress" rule counts past
                    # preemptions; a restarted server must not forget them.
                    if row.preemptions:
                        state.set_preemption_count(row.id, row.preemptions)
                self._remember_usage(session, state)
                handles = {r.id: h for r in live if (h := handle_of(r)) is not None}
                if self._foreign is not None:
                    self._foreign.load(session)
                if self.shared_store:
                    top = session.scalar(select(func.max(TaskRow.seq))) or 0
                    self._intake = SeqWatermark(max(0, top - INTAKE_LOOKBACK), self._intake.patience_s)
                    self._reconciled_at = time.monotonic()
            self.state = state
            self.desk.restore(state)
            self.supervisor.reset(handles)
            self.publish()

    def _remember_usage(self, session: Session, state: ClusterState) -> None:
        """With a usage half-life, fair-share order weighs who used the cluster lately; the store
        keeps no decayed figure, so it is rebuilt from the ledger (holds older than
        `USAGE_MEMORY_HALF_LIVES` half-lives weigh under a millionth and are not read)."""
        half_life = state.policy.scheduling.usage_half_life_s
        if half_life <= 0:
            return
        now = self.clock.now()
        history = holds_since(session, now - USAGE_MEMORY_HALF_LIVES * half_life)
        state.restore_usage_memory(now, decayed_usage_from_history(history, now, half_life))

    def mirror(self) -> None:
        """A follower's read-only view: the state rebuilt from the store and the engine's reasons for
        every pending task, as the leader would give them. Decides nothing, writes nothing.

        Rebuilding reads every pending and live task and decides over all of them: at 10,000 pending
        that is a noticeable share of a core every `follow_every_s`, on every follower, even while
        nothing happens. So it is skipped while the store has not changed (`_store_mark`: no new
        task event, task or policy since the last two looks; two, because PostgreSQL may make an
        event with a lower id visible after a higher one), and done at least every
        `MIRROR_FULL_EVERY_S` whatever the mark says (fair-share usage decays with time alone)."""
        mark = self._store_mark()
        now_mono = time.monotonic()
        unchanged = mark == self._mirror_marks[0] == self._mirror_marks[1]
        self._mirror_marks = (self._mirror_marks[1], mark)
        if unchanged and now_mono - self._mirrored_at < MIRROR_FULL_EVERY_S:
            self.mirrors_skipped += 1
            self.last_cycle_at = self.clock.now()  # the view is still the store's as of now
            return
        self._mirrored_at = now_mono
        self.rebuild()
        with self.lock:
            now = self.clock.now()
            decisions = decide(self.state, now, self.config)
            self.pending = dict(decisions.pending)
            self.last_cycle_at = now
            self.publish()

    def _store_mark(self) -> tuple[int, int, int]:
        """What changes whenever a task does: the newest task event's id, the newest task's number,
        and the policy's version."""
        with self.db.session() as session:
            last_event, last_seq = session.execute(
                select(
                    select(func.max(TaskEventRow.id)).scalar_subquery(),
                    select(func.max(TaskRow.seq)).scalar_subquery(),
                )
            ).one()
        return (last_event or 0, last_seq or 0, self._policy_source()[1])

    def recover(self) -> None:
        """After a restart: rebuild, requeue attempts that never started, then settle the dead.

        Attempts whose processes still run are simply kept (their stops continue where they were);
        attempts that ended while the server was down are settled by the next cycle from their exit
        files, at the time the file was written, so ledger intervals close when the process ended.
        """
        now = self.clock.now()
        self._active = True
        with self.lock:
            self.actuator.recover_unstarted(now)
            self.rebuild()
        self.cycle()

    # --- the cycle ----------------------------------------------------------------------------------

    def cycle(self) -> CycleStats:
        started = time.perf_counter()
        with self.lock:
            now = self.clock.now()
            self._take_policy()
            self._take_inventory()
            self._take_inbox()
            if self.shared_store:
                self._take_stored()
            # The simulator's own loop: settle ended attempts, decide, act, until nothing changes at
            # `now` (docs/decisions/0010-one-loop-per-instant.md).
            hands = LiveInstant(self.supervisor, self.actuator)
            instant = settle_instant(self.state, now, self.config, hands, max_cycles=MAX_CYCLES_PER_INSTANT)
            self.pending = with_out_of_service(instant.pending, self._out_of_service)
            self.last_cycle_at = now
            self.cycles += 1
            self.publish()
        # Starting processes takes time; the API must not wait for it (nothing here touches the
        # engine's state, except a failed start, which takes the lock again).
        self.actuator.launch_all(hands.admissions)
        self.hooks.cycle_done(time.perf_counter() - started, instant.decisions)
        if not instant.settled:
            log.warning("%d decision cycles at one instant, still changing: going on at once", instant.cycles)
            self._wake.set()
        elif self.supervisor.ended_later:
            self._wake.set()  # an attempt ended while the cycle ran: settle it now, not at the next tick
        return hands.stats

    def mark_dirty(self, task_id: str) -> None:
        """The API changed a live task (cancel, checkpoint): supervise it at the next cycle."""
        if not self._active:
            return
        self.supervisor.dirty.add(task_id)
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
        self.nodes_left = out
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
