"""The scheduler's hands: carry out what the engine decided — preempt, reserve, launch.

A preemption signals the victim (it goes back to the queue when it has stopped, which the supervisor
sees). An admission is first reserved in the store — GPUs (unique in the database), the ledger
interval, the task's token — in transactions of `RESERVE_CHUNK`, and only then launched: a crash
between the two leaves an admitted task without a process, which recovery requeues. Each start's
handle is stored before the next launch (real processes must never run unrecorded), all at once for
executors whose attempts die with the server (`batch_starts`), or, for a backend whose starts are slow
remote calls (sbatch, `BackendTraits.concurrent_starts`), from threads the cycle does not wait for.

It exists apart from the scheduler (`scheduler.py`) so that the lifecycle and the store mirror read
on their own; the watch over live attempts is in `scheduler_supervisor`.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpucommons.backends.ports import Clock, Executor, Handle, Launch, LaunchError
from gpucommons.domain.model import Policy
from gpucommons.domain.stopping import StopReason
from gpucommons.domain.task import TaskState
from gpucommons.engine.state import ClusterState
from gpucommons.engine.types import Admit, Preempt
from gpucommons.ledger.interval import EndReason
from gpucommons.server.services.ledger import open_interval
from gpucommons.server.services.lifecycle import switch_task_state
from gpucommons.server.services.preemptions import record_preemption
from gpucommons.server.services.tasks import LIVE_STATES, hash_task_token
from gpucommons.server.workers.attempts import begin_attempt, end_attempt, handle_of, pool_gpu_indices
from gpucommons.server.workers.launching import LaunchBuilder
from gpucommons.server.workers.outputs import SchedulerHooks
from gpucommons.server.workers.scheduler_supervisor import AttemptSupervisor, release_unstarted
from gpucommons.store.db import Database
from gpucommons.store.models import AttemptRow, GpuAllocationRow, TaskRow

log = logging.getLogger(__name__)

#: Admissions reserved per transaction.
RESERVE_CHUNK = 64


@dataclass(frozen=True)
class Reservation:
    """What reserving one admission gave: a `launch` to start; or a `failure` (the reservation is
    stored but no launch could be built: the task fails with that sentence); or neither (the task was
    no longer pending: nothing was reserved)."""

    launch: Launch | None = None
    failure: str | None = None


#: The task was no longer pending.
NOTHING_RESERVED = Reservation()


@dataclass
class Admissions:
    """The cycle's reserved admissions: the launches still to start, the starts that failed (task
    id, why), and how many were reserved in all (with `batch_starts` the launches start at once and
    are not listed, yet each changed the engine's state)."""

    launches: list[Launch]
    failed: list[tuple[str, str]]
    reserved: int = 0

    def __len__(self) -> int:
        return self.reserved


class ActuatorHost(Protocol):
    """The scheduler the actuator acts for."""

    db: Database
    lock: threading.RLock
    executor: Executor
    clock: Clock
    launcher: LaunchBuilder
    hooks: SchedulerHooks
    shared_store: bool
    batch_starts: bool
    supervisor: AttemptSupervisor

    @property
    def policy(self) -> Policy: ...

    @property
    def state(self) -> ClusterState: ...

    def forget_pending(self, task_id: str) -> None: ...


class Actuator:
    """Preemptions, reservations and launches (module docstring)."""

    def __init__(self, host: ActuatorHost) -> None:
        self.host = host
        #: Threads for `traits.concurrent_starts` (made on first use).
        self._starter: ThreadPoolExecutor | None = None

    def shutdown(self) -> None:
        if self._starter is not None:
            # Starts in flight finish and are stored: an attempt must not run unrecorded.
            self._starter.shutdown(wait=True)
            self._starter = None

    def recover_unstarted(self, now: float) -> None:
        """After a restart: adopt each reserved attempt that was launched before its handle was
        stored; requeue the ones that never started (caller holds `lock`)."""
        host = self.host
        with host.db.session() as session:
            admitted = session.scalars(select(TaskRow).where(TaskRow.state == TaskState.ADMITTED.value)).all()
            for row in admitted:
                if handle_of(row) is not None:
                    continue  # started and stored: the supervisor watches it
                handle = host.executor.find_attempt(row.id)
                if handle is not None and row.attempt is not None:
                    # Launched just before the server died, before its handle was stored: the
                    # attempt is adopted like any other (running, or settled from its exit file).
                    _record_handle(row.attempt, handle, str(host.launcher.paths.log(row.id)))
                    row.started_at = row.attempt.started_at = row.admitted_at or now
                    switch_task_state(
                        session,
                        row,
                        TaskState.RUNNING,
                        now,
                        f"re-adopted (pid {handle.pid}): started just before the server stopped",
                    )
                    continue
                release_unstarted(session, row)  # nothing ran: nothing to bill
                row.queued_at = now
                switch_task_state(
                    session, row, TaskState.PENDING, now, "the server stopped before launch; requeued"
                )
                end_attempt(row, now, EndReason.PREEMPTED, requeue=True)

    # --- preempting ---------------------------------------------------------------------------------

    def preempt(self, preempt: Preempt, now: float) -> int:
        """Signal the victim (caller holds `lock`); 1 if a preemption was issued."""
        host = self.host
        rt = host.state.running(preempt.victim_id)
        if rt is None or rt.preempting:
            return 0
        with host.db.session() as session:
            row = session.get(TaskRow, preempt.victim_id)
            if row is None or row.state not in LIVE_STATES:
                return 0
            if host.shared_store:
                preemptor_row = session.get(TaskRow, preempt.preemptor_id)
                if preemptor_row is None or preemptor_row.state != TaskState.PENDING.value:
                    # Cancelled through another replica since the last reconcile: preempt nobody for it.
                    host.forget_pending(preempt.preemptor_id)
                    return 0
            handle = handle_of(row)
            attempt = row.attempt
            if attempt is None:
                return 0
            attempt.preempted_by = preempt.preemptor_id
            row.preemptions += 1
            message = preempt.message or f"preempted for {preempt.preemptor_id} ({preempt.reason.value})"
            preemptor = host.state.pending(preempt.preemptor_id)
            preemptor_team = preemptor.team if preemptor is not None else ""
            record_preemption(session, row, preempt, preemptor_team, now)
            if row.state != TaskState.PREEMPTING.value:
                switch_task_state(session, row, TaskState.PREEMPTING, now, message)
            if attempt.stop_requested_at is None and handle is not None:
                host.supervisor.begin_stop(session, row, handle, StopReason.PREEMPTED, now, message)
            elif attempt.stop_reason is None:
                attempt.stop_reason = StopReason.PREEMPTED
        host.state.mark_preempting(preempt.victim_id, preempt.preemptor_id)
        host.hooks.preempted(rt.task.team, preempt.reason.value, preempting_team=preemptor_team)
        return 1

    # --- reserving ----------------------------------------------------------------------------------

    def reserve_all(self, admits: tuple[Admit, ...], now: float) -> Admissions:
        """Reserve every admission of the cycle (caller holds `lock`).

        Reserving before launching means a crash between the two leaves an admitted task without a
        process, which recovery requeues.
        """
        host = self.host
        done = Admissions([], [])
        # In chunks, so that no transaction holds SQLite's write lock for long under load.
        for first in range(0, len(admits), RESERVE_CHUNK):
            chunk = admits[first : first + RESERVE_CHUNK]
            with host.db.session() as session:
                ids = [a.task_id for a in chunk]
                query = select(TaskRow).where(TaskRow.id.in_(ids))
                if host.shared_store:
                    # Row locks (PostgreSQL): a cancel stored by another replica waits for this
                    # reservation, or this reservation sees the task cancelled; never both.
                    query = query.with_for_update(of=TaskRow)
                rows = {r.id: r for r in session.scalars(query)}
                reserved_here: list[Launch] = []
                for admit in chunk:
                    reserved = self._reserve(session, rows.get(admit.task_id), admit, now)
                    if reserved.launch is not None or reserved.failure is not None:
                        done.reserved += 1
                    if reserved.launch is not None:
                        reserved_here.append(reserved.launch)
                    elif reserved.failure is not None:
                        done.failed.append((admit.task_id, reserved.failure))
                if not host.batch_starts:
                    done.launches += reserved_here
                    continue
                # Attempts that die with the server anyway start in the same transaction.
                started = []
                for launch in reserved_here:
                    try:
                        started.append((launch, self._start(launch), now))
                    except Exception as exc:
                        done.failed.append((launch.task_id, str(exc)))
                self._record_started(rows, started)
        return done

    def _reserve(self, session: Session, row: TaskRow | None, admit: Admit, now: float) -> Reservation:
        """Pending → admitted in the store: GPUs (unique in the DB), ledger interval, the launch."""
        host = self.host
        request = host.state.pending(admit.task_id)
        if request is None:
            return NOTHING_RESERVED
        if row is None or row.state != TaskState.PENDING.value:
            host.forget_pending(admit.task_id)
            return NOTHING_RESERVED
        pool = host.policy.pool(admit.admission.pool)
        gpu_indices = pool_gpu_indices(admit.admission)
        if len(gpu_indices) < request.resources.gpus:
            gpu_indices = _free_indices(
                session, admit.admission.pool, pool.nodes * pool.gpus_per_node, request.resources.gpus
            )
        # The engine's state first: it refuses a placement clash before the store is touched; if the
        # store write then fails, the cycle's caller rebuilds the state from the store.
        host.state.admit(admit.task_id, admit.admission, now)
        token = secrets.token_urlsafe(24)
        borrowed = admit.admission.borrowed
        begin_attempt(session, row, admit.admission, gpu_indices, now)
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
        host.hooks.admitted(
            request.team,
            admit.admission.pool,
            borrowed.gpus,
            waited_s=now - request.queued_at,
            priority_class=request.priority_class,
        )
        try:
            return Reservation(launch=host.launcher.launch(row, token))
        except (ValueError, OSError, LaunchError) as exc:
            return Reservation(failure=str(exc))

    # --- launching ----------------------------------------------------------------------------------

    @property
    def starts_in_background(self) -> bool:
        """Starts go to threads the cycle does not wait for (`launch_all`): they may be handed over
        while the cycle still holds the lock, as soon as they are reserved."""
        return self.host.executor.traits.concurrent_starts > 1 and not self.host.batch_starts

    def launch_all(self, admissions: Admissions) -> None:
        """Start each reserved attempt; store each handle before the next launch (or, with
        `batch_starts`, for executors whose attempts die with the server, all at once). Called
        without `lock`: the API must not wait for the starts.

        A backend whose starts are slow remote calls (sbatch) may start `traits.concurrent_starts` at
        once, in threads the cycle does not wait for: each handle is stored as soon as its start
        returns, and an attempt a crash left started but unstored is found again by `find_attempt` at
        recovery (the trait promises it)."""
        host = self.host
        launches, failed = admissions.launches, admissions.failed
        if self.starts_in_background and launches:
            self._launch_concurrently(launches)
            launches = []
        started: list[tuple[Launch, Handle, float]] = []
        for launch in launches:
            try:
                handle = self._start(launch)
            except Exception as exc:  # the executor says why; the task fails with that message
                failed.append((launch.task_id, str(exc)))
                continue
            started.append((launch, handle, host.clock.now()))
            if not host.batch_starts:
                self._mark_running(started)
                started = []
        self._mark_running(started)
        if failed:
            with host.lock:
                for task_id, reason in failed:
                    self._fail_start(task_id, host.clock.now(), reason)

    def _launch_concurrently(self, launches: list[Launch]) -> None:
        """Hand the starts to `concurrent_starts` threads and return: the cycle goes on (ends are
        settled, stops escalated) while sbatch calls are in flight; each start is stored as soon as it
        returns, under `lock`."""
        if self._starter is None:
            width = self.host.executor.traits.concurrent_starts
            self._starter = ThreadPoolExecutor(width, thread_name_prefix="commons-start")
        for launch in launches:
            self._starter.submit(self._start_and_record, launch)

    def _start_and_record(self, launch: Launch) -> None:
        host = self.host
        try:
            handle = self._start(launch)
        except Exception as exc:  # the executor says why; the task fails with that message
            with host.lock:
                self._fail_start(launch.task_id, host.clock.now(), str(exc))
            return
        with host.lock:
            self._mark_running([(launch, handle, host.clock.now())])

    def _start(self, launch: Launch) -> Handle:
        if self.host.batch_starts:  # in-process attempts print nothing: no log file to mark
            return self.host.executor.start(launch)
        with contextlib.suppress(OSError), launch.log_path.open("a") as f:
            f.write(
                f"--- commons: attempt {launch.env['COMMONS_RESTART_COUNT']} of {launch.task_id} starting\n"
            )
        return self.host.executor.start(launch)

    def _mark_running(self, started: list[tuple[Launch, Handle, float]]) -> None:
        if not started:
            return
        with self.host.db.session() as session:
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
            if row.attempt is None:
                continue  # not reserved (cannot happen: the launch was built from its attempt)
            _record_handle(row.attempt, handle, str(launch.log_path))
            row.started_at = row.attempt.started_at = at
            assert session is not None
            switch_task_state(session, row, TaskState.RUNNING, at, f"started (pid {handle.pid})")
            self.host.supervisor.handles[launch.task_id] = handle

    def _fail_start(self, task_id: str, now: float, reason: str) -> None:
        log.warning("launch of %s failed: %s", task_id, reason)
        with self.host.db.session() as session:
            row = session.get(TaskRow, task_id)
            if row is not None:
                release_unstarted(session, row)  # it never ran: nothing to bill
                row.finished_at = now
                switch_task_state(session, row, TaskState.FAILED, now, f"could not start: {reason}")
                end_attempt(row, now, EndReason.FAILED, requeue=False)
        self.host.state.finish(task_id, now)


def _record_handle(attempt: AttemptRow, handle: Handle, log_path: str) -> None:
    """What finds the attempt's process again after a restart."""
    attempt.pid = handle.pid
    attempt.start_marker = handle.start_marker
    attempt.exit_file = str(handle.exit_file) if handle.exit_file else None
    attempt.log_path = log_path


def _free_indices(session: Session, pool: str, capacity: int, want: int) -> list[int]:
    """Lowest free GPU indices of the pool, when the engine placed the task without indices."""
    taken = set(session.scalars(select(GpuAllocationRow.gpu_index).where(GpuAllocationRow.pool == pool)))
    return [i for i in range(capacity) if i not in taken][:want]
