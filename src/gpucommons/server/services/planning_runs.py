"""Planning runs: replay a month of the cluster's own history under a proposed policy (or under the
quota advisor's proposal) in the background, and keep the result as a stored run.

A run is a `PlanningRunRow`: created `queued` by the API, then a worker thread (one run at a time, so
the scheduler keeps its CPU) turns the month's tasks into a trace, runs the what-if comparison
(`planning.whatif.compare`, the same one `commons whatif` uses) of the current policy against the
proposed one, writes its progress as it goes, and stores the report. A server that stops while a run
is under way marks it failed at its next start, saying so.

With several replicas on one database only the leader works runs off (`lead`, a leader duty): a run
created through a follower stays `queued` in the store until the leader's runner, which looks for
queued runs every `poll_s`, takes it; a new leader fails the runs its dead predecessor had under way
and takes the queued ones.

The trace: one job per task submitted in the month that ever held GPUs. Its work is the GPU-time it
kept (every attempt's run time, less the work preemptions threw away); a task without checkpoints is
modelled as losing all its work when preempted, one with `every:X` as saving every X, one with
`on-signal` as saving when told to stop. Tasks that never started are left out (their work is
unknown) and counted in the report.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from gpucommons.api import history as wire
from gpucommons.api.errors import BadRequest, NotFound
from gpucommons.domain.model import Policy
from gpucommons.domain.resources import Resources
from gpucommons.ledger.period import Period
from gpucommons.planning.advisor import advise, proposed_policy_text, trace_history
from gpucommons.planning.whatif import Comparison, Variant, compare, summary_rows, team_rows
from gpucommons.policy import PolicyError
from gpucommons.server.services import policies
from gpucommons.server.services.convert import utc, utc_or_none
from gpucommons.sim import SimConfig, SimJob, SimulationError
from gpucommons.store.db import Database
from gpucommons.store.history_models import PlanningRunRow
from gpucommons.store.models import TaskRow, UsageIntervalRow

log = logging.getLogger(__name__)

#: Runs the planning page lists.
LIST_LIMIT = 20
#: Progress is written to the store at most this often (seconds).
PROGRESS_EVERY_S = 0.5
STALE_MESSAGE = "the server stopped while this run was under way; start it again"


def last_complete_month(now: float) -> str:
    moment = datetime.fromtimestamp(now, tz=UTC)
    year, month = (moment.year, moment.month - 1) if moment.month > 1 else (moment.year - 1, 12)
    return f"{year:04d}-{month:02d}"


def month_window(month: str, now: float) -> tuple[float, float]:
    try:
        period = Period.parse(month)
    except ValueError as exc:
        raise BadRequest(str(exc), {"month": month}) from None
    start, end = period.start.timestamp(), min(period.end.timestamp(), now)
    if end <= start:
        raise BadRequest(f"{month} has not started yet: there is nothing to replay", {"month": month})
    return start, end


# --- the trace --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MonthTrace:
    jobs: list[SimJob]
    never_ran: int


def month_trace(db: Database, start: float, end: float, policy: Policy) -> MonthTrace:
    """One job per task submitted in `[start, end)` that held GPUs; times relative to `start`."""
    with db.session() as session:
        tasks = session.scalars(
            select(TaskRow)
            .where(TaskRow.submitted_at >= start, TaskRow.submitted_at < end)
            .order_by(TaskRow.seq)
        ).all()
        ids = [t.id for t in tasks]
        held: dict[str, float] = {}
        lost: dict[str, float] = {}
        for first in range(0, len(ids), 500):
            chunk = ids[first : first + 500]
            for task_id, s, e, gpus, lost_s in session.execute(
                select(
                    UsageIntervalRow.task_id,
                    UsageIntervalRow.start,
                    UsageIntervalRow.end,
                    UsageIntervalRow.gpus,
                    UsageIntervalRow.lost_gpu_seconds,
                ).where(UsageIntervalRow.task_id.in_(chunk))
            ):
                span = max(0.0, (e if e is not None else end) - s)
                held[task_id] = held.get(task_id, 0.0) + span
                lost[task_id] = lost.get(task_id, 0.0) + (lost_s / gpus if gpus else 0.0)
    jobs = []
    never = 0
    for t in tasks:
        work = held.get(t.id, 0.0) - lost.get(t.id, 0.0)
        if work <= 0:
            never += 1
            continue
        if t.checkpoint_mode == "every" and t.checkpoint_interval_s:
            interval: float | None = float(t.checkpoint_interval_s)
        elif t.checkpoint_mode == "on-signal":
            interval = None
        else:
            interval = max(work, 1.0)  # saves nothing before it ends: a preemption loses everything
        jobs.append(
            SimJob(
                job_id=t.id,
                team=t.team,
                submit_s=t.submitted_at - start,
                duration_s=round(work, 3),
                resources=Resources(t.gpus, t.cpu_milli, t.memory_mib),
                priority_class=t.priority_class if _has_class(policy, t.priority_class) else None,
                pool=t.pool_request,
                checkpoint_interval_s=interval,
            )
        )
    return MonthTrace(jobs, never)


def _has_class(policy: Policy, name: str) -> bool:
    try:
        policy.priority_class(name)
    except KeyError:
        return False
    return True


def report_of(comparison: Comparison, trace: MonthTrace) -> dict[str, Any]:
    return {
        "jobs": len(trace.jobs),
        "never_ran": trace.never_ran,
        "variants": [v.label for v in comparison.variants],
        "summary_rows": summary_rows(comparison),
        "team_rows": team_rows(comparison),
        "summaries": comparison.summaries(),
    }


# --- runs in the store ---------------------------------------------------------------------------


def to_wire(row: PlanningRunRow) -> wire.PlanningRun:
    return wire.PlanningRun(
        id=row.id,
        kind=row.kind,  # type: ignore[arg-type]
        status=row.status,  # type: ignore[arg-type]
        title=row.title,
        created_at=utc(row.created_at),
        created_by=row.created_by,
        started_at=utc_or_none(row.started_at),
        finished_at=utc_or_none(row.finished_at),
        window_start=utc(row.window_start),
        window_end=utc(row.window_end),
        phase=row.phase,
        done=row.done,
        total=row.total,
        error=row.error,
        proposed_policy=row.proposed_policy,
        report=row.report or {},
    )


def latest(db: Database, limit: int = LIST_LIMIT) -> list[wire.PlanningRun]:
    with db.session() as session:
        rows = session.scalars(
            select(PlanningRunRow).order_by(PlanningRunRow.created_at.desc(), PlanningRunRow.id).limit(limit)
        ).all()
        return [to_wire(r) for r in rows]


def get(db: Database, run_id: str) -> wire.PlanningRun:
    with db.session() as session:
        row = session.get(PlanningRunRow, run_id)
        if row is None:
            raise NotFound(f"no planning run {run_id!r}", {"id": run_id})
        return to_wire(row)


def fail_stale(db: Database, now: float, statuses: tuple[str, ...] = ("queued", "running")) -> int:
    """Runs a previous server process left queued or running: they will never finish."""
    with db.session() as session:
        rows = session.scalars(select(PlanningRunRow).where(PlanningRunRow.status.in_(list(statuses)))).all()
        for row in rows:
            row.status, row.error, row.finished_at = "failed", STALE_MESSAGE, now
        return len(rows)


class PlanningRunner:
    """Creates runs and works them off, one at a time, in a daemon thread.

    `local`: runs created here are worked off here (one server process). Otherwise only `lead()`
    makes this runner work, off the store's queue (module docstring).
    """

    def __init__(
        self, db: Database, current_policy: Any, clock: Any, *, local: bool = True, poll_s: float = 2.0
    ) -> None:
        self.db = db
        self._current = current_policy
        self.clock = clock
        self._local = local
        self.poll_s = poll_s
        self._leading = False
        self._lock = threading.Lock()
        self._queue: list[str] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()

    def lead(self) -> None:
        """This process became the leader: fail what a dead leader had under way, work the queue."""
        fail_stale(self.db, self.clock.now(), ("running",))
        with self._lock:
            self._leading = True
            self._ensure_thread()

    def _ensure_thread(self) -> None:
        """Caller holds `_lock`."""
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._work, name="commons-planning", daemon=True)
            self._thread.start()

    def create(self, body: wire.PlanningRunCreate, who: str) -> wire.PlanningRun:
        now = self.clock.now()
        month = body.month or last_complete_month(now)
        start, end = month_window(month, now)
        current: tuple[Policy, int] = self._current()
        if body.kind == "replay":
            if not body.policy.strip():
                raise BadRequest("a replay needs the proposed policy (YAML) in `policy`", {"policy": ""})
            policies.parse(body.policy, "the proposed policy")  # 422 policy_invalid, with every issue
            title = f"{month}: current policy #{current[1]} vs the proposed policy"
        else:
            title = f"{month}: current policy #{current[1]} vs the quota advisor's proposal"
        row = PlanningRunRow(
            id=secrets.token_hex(8),
            kind=body.kind,
            status="queued",
            created_at=now,
            created_by=who,
            window_start=start,
            window_end=end,
            title=title,
            proposed_policy=body.policy if body.kind == "replay" else "",
            phase="waiting for the runner",
            done=0,
            total=0,
            error="",
            report={},
        )
        with self.db.session() as session:
            session.add(row)
            session.flush()
            out = to_wire(row)
        with self._lock:
            if self._leading:
                self._wake.set()
            elif self._local:
                self._queue.append(row.id)
                self._ensure_thread()
        return out

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _next_queued(self) -> str | None:
        with self.db.session() as session:
            return session.scalar(
                select(PlanningRunRow.id)
                .where(PlanningRunRow.status == "queued")
                .order_by(PlanningRunRow.created_at, PlanningRunRow.id)
                .limit(1)
            )

    def _work(self) -> None:
        while not self._stop.is_set():
            run_id: str | None
            with self._lock:
                leading = self._leading
                if not leading and not self._queue:
                    self._thread = None
                    return
                run_id = self._queue.pop(0) if self._queue else None
            if run_id is None:
                try:
                    run_id = self._next_queued()
                except Exception:
                    log.exception("cannot read the queued planning runs")
                if run_id is None:
                    self._wake.wait(self.poll_s)
                    self._wake.clear()
                    continue
            try:
                self.run(run_id)
            except Exception as exc:  # the run fails with the reason; the runner goes on
                log.exception("planning run %s failed", run_id)
                self._finish(run_id, "failed", error=f"{type(exc).__name__}: {exc}")

    def _update(self, run_id: str, **fields: Any) -> None:
        with self.db.session() as session:
            row = session.get(PlanningRunRow, run_id)
            if row is not None:
                for key, value in fields.items():
                    setattr(row, key, value)

    def _finish(self, run_id: str, status: str, **fields: Any) -> None:
        self._update(run_id, status=status, finished_at=self.clock.now(), **fields)

    def run(self, run_id: str) -> None:
        """Work one run off (the thread calls it; tests may too)."""
        with self.db.session() as session:
            row = session.get(PlanningRunRow, run_id)
            if row is None:
                return
            kind, start, end, text = row.kind, row.window_start, row.window_end, row.proposed_policy
        self._update(run_id, status="running", started_at=self.clock.now(), phase="reading the month's tasks")
        current, _version = self._current()
        trace = month_trace(self.db, start, end, current)
        if not trace.jobs:
            self._finish(
                run_id,
                "failed",
                error="no task of that month ever ran: there is nothing to replay",
                report={"jobs": 0, "never_ran": trace.never_ran},
            )
            return
        if kind == "advice":
            self._update(run_id, phase="sizing quotas from the month's usage (quota advisor)")
            advice = advise(current, trace_history(current, trace.jobs))
            try:
                text = proposed_policy_text(advice)
            except PolicyError as exc:
                self._finish(run_id, "failed", error=f"the advisor's proposal was refused: {exc}")
                return
            proposed = advice.proposed
            self._update(run_id, proposed_policy=text)
        else:
            proposed = policies.parse(text, "the proposed policy")
        variants = [Variant("current", current, "commons"), Variant("proposed", proposed, "commons")]
        phases = ["static baseline of current", "static baseline of proposed", "current", "proposed"]
        last_write = [0.0]

        def progress(label: str, done: int, total: int) -> None:
            now = time.monotonic()
            if now - last_write[0] < PROGRESS_EVERY_S and done < total:
                return
            last_write[0] = now
            step = phases.index(label) + 1 if label in phases else 0
            self._update(run_id, phase=f"step {step} of {len(phases)}: {label}", done=done, total=total)

        try:
            comparison = compare(variants, trace.jobs, SimConfig(drop_unknown=True), progress)
        except SimulationError as exc:
            self._finish(run_id, "failed", error=f"the replay stopped: {exc}")
            return
        self._finish(
            run_id,
            "succeeded",
            phase="done",
            done=len(trace.jobs),
            total=len(trace.jobs),
            report=report_of(comparison, trace),
        )
