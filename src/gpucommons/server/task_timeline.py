"""A task's attempts as a timeline (queued → admitted → running → preempted by whom → requeued →
…) from its events and the preemption records, and an estimated start while it waits.

The estimate replays the live queue on the engine (`planning.start_estimate`) with run times learned
from the ledger: finished attempts of the same team and priority class in the last 30 days, or of the
team, or of the whole cluster when there are too few.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpucommons.api import history as wire
from gpucommons.domain.task import TaskState
from gpucommons.engine.state import queue_key
from gpucommons.identity.authz import Action, visible_teams
from gpucommons.identity.principal import Principal
from gpucommons.ledger.interval import EndReason
from gpucommons.planning.start_estimate import MAX_EVENTS, RunTimes, estimate_start
from gpucommons.server.context import ServerContext
from gpucommons.server.services import preemptions
from gpucommons.server.services.convert import utc, utc_or_none
from gpucommons.server.services.tasks import get_visible
from gpucommons.store.history_models import PreemptionRow
from gpucommons.store.models import TaskEventRow, TaskRow, UsageIntervalRow

#: How far back finished attempts teach run times, and how many are enough to trust a narrower sample.
HISTORY_DAYS = 30
ENOUGH_SAMPLES = 10
MAX_SAMPLES = 5000
#: Pending tasks the replay takes into account (in queue order); later ones are left out.
MAX_PENDING = 2000
#: An estimate is reused this long (seconds): the task page polls every few seconds, and three engine
#: replays of a long queue take about a second (bench/history.py).
ESTIMATE_TTL_S = 30.0
_estimates: dict[str, tuple[float, wire.StartEstimate | None]] = {}
_estimates_lock = threading.Lock()

_END_STATES = {
    TaskState.SUCCEEDED.value: "succeeded",
    TaskState.FAILED.value: "failed",
    TaskState.CANCELLED.value: "cancelled",
}


@dataclass
class _Attempt:
    number: int
    queued_at: float
    admitted_at: float | None = None
    started_at: float | None = None
    preempted_at: float | None = None
    ended_at: float | None = None
    outcome: str = "waiting"
    preemptions: list[PreemptionRow] = field(default_factory=list)


def attempts_of(events: list[TaskEventRow], preempted: list[PreemptionRow], now: float) -> list[_Attempt]:
    """Cut the task's state transitions into attempts; each attempt starts when the task enters the queue."""
    out: list[_Attempt] = []
    current: _Attempt | None = None
    for e in events:
        to = e.to_state
        if to == TaskState.PENDING.value:
            if current is not None and current.ended_at is None and current.admitted_at is not None:
                current.ended_at = e.at
                current.outcome = "preempted" if current.preempted_at is not None else "requeued"
            current = _Attempt(number=len(out) + 1, queued_at=e.at)
            out.append(current)
        elif current is None:
            continue
        elif to == TaskState.ADMITTED.value:
            current.admitted_at = e.at
            current.outcome = "admitted"
        elif to == TaskState.RUNNING.value:
            current.started_at = e.at
            current.outcome = "running"
        elif to == TaskState.PREEMPTING.value:
            current.preempted_at = current.preempted_at or e.at
            current.outcome = "preempting"
        elif to in _END_STATES:
            current.ended_at = e.at
            current.outcome = _END_STATES[to]
    for p in preempted:
        for a in out:
            if (
                a.admitted_at is not None
                and a.admitted_at <= p.at
                and (a.ended_at is None or p.at <= a.ended_at)
            ):
                a.preemptions.append(p)
                if a.preempted_at is None:
                    a.preempted_at = p.at
                break
    return out


def _wire(attempt: _Attempt, readable: frozenset[str], now: float) -> wire.Attempt:
    first = attempt.preemptions[0] if attempt.preemptions else None
    waited_until = attempt.admitted_at if attempt.admitted_at is not None else (attempt.ended_at or now)
    ran_from = attempt.started_at if attempt.started_at is not None else attempt.admitted_at
    ran = 0.0 if ran_from is None else max(0.0, (attempt.ended_at or now) - ran_from)
    return wire.Attempt(
        number=attempt.number,
        queued_at=utc(attempt.queued_at),
        admitted_at=utc_or_none(attempt.admitted_at),
        started_at=utc_or_none(attempt.started_at),
        preempted_at=utc_or_none(attempt.preempted_at),
        ended_at=utc_or_none(attempt.ended_at),
        outcome=attempt.outcome,
        preempted_by=(
            wire.Preemptor(
                team=first.preemptor_team,
                task_id=first.preemptor_task_id if first.preemptor_team in readable else None,
                reason=first.reason,
                at=utc(first.at),
            )
            if first is not None
            else None
        ),
        waited_seconds=round(max(0.0, waited_until - attempt.queued_at), 3),
        ran_seconds=round(ran, 3),
    )


def run_times(session: Session, team: str, priority_class: str, now: float) -> tuple[RunTimes, str]:
    """Durations of finished attempts: the team's class, else the team, else the cluster."""
    since = now - HISTORY_DAYS * 86400
    finished = (EndReason.SUCCEEDED.value, EndReason.FAILED.value)
    base = (
        select(UsageIntervalRow.start, UsageIntervalRow.end)
        .where(
            UsageIntervalRow.end.is_not(None),
            UsageIntervalRow.end >= since,
            UsageIntervalRow.end_reason.in_(finished),
        )
        .order_by(UsageIntervalRow.end.desc())
        .limit(MAX_SAMPLES)
    )
    samples: list[tuple[float, float | None]] = []
    source = "the cluster's tasks"
    for query, what in (
        (
            base.where(UsageIntervalRow.team == team, UsageIntervalRow.priority == priority_class),
            f"team {team}'s {priority_class} tasks",
        ),
        (base.where(UsageIntervalRow.team == team), f"team {team}'s tasks"),
        (base, "the cluster's tasks"),
    ):
        samples = [(row[0], row[1]) for row in session.execute(query)]
        source = what
        if len(samples) >= ENOUGH_SAMPLES:
            break
    return RunTimes.of([end - start for start, end in samples if end is not None]), source


def estimate(ctx: ServerContext, row: TaskRow, session: Session) -> wire.StartEstimate | None:
    """An estimated start for a pending task (None for any other state), at most `ESTIMATE_TTL_S` old."""
    if row.state != TaskState.PENDING.value:
        return None
    now = ctx.clock.now()
    with _estimates_lock:
        for task_id in [k for k, (at, _) in _estimates.items() if now - at >= ESTIMATE_TTL_S]:
            del _estimates[task_id]
        if row.id in _estimates:
            return _estimates[row.id][1]
    found = _estimate(ctx, row, session)
    with _estimates_lock:
        _estimates[row.id] = (now, found)
    return found


def _estimate(ctx: ServerContext, row: TaskRow, session: Session) -> wire.StartEstimate | None:
    view = ctx.scheduler.view
    policy = view.policy
    running = list(view.running)
    pending = sorted(view.pending, key=lambda t: (queue_key(t), t.team))
    now = ctx.clock.now()
    position = next((i for i, t in enumerate(pending, start=1) if t.id == row.id), 0)
    if position == 0:
        return None
    kept = pending[: max(MAX_PENDING, position)]
    times, source = run_times(session, row.team, row.priority_class, now)
    result = estimate_start(policy, running, kept, row.id, times, now)
    basis = (
        f"A replay of the queue on the scheduler's engine, with running tasks ending as {len(times)} "
        f"finished attempts of {source} in the last {HISTORY_DAYS} days suggest (25th, 50th and 75th "
        "percentile of their run times). Tasks submitted later, cancellations and failures can change it."
    )
    if result.likely is None:
        basis = f"No estimate: {result.unknown_because}. " + (basis if times else "")
    elif len(times) < ENOUGH_SAMPLES:
        basis += f" Only {len(times)} past run times: take it as a rough guess."
    if len(pending) > len(kept):
        basis += (
            f" The {len(pending) - len(kept)} tasks after the first {len(kept)} in the queue were left out."
        )
    return wire.StartEstimate(
        likely=utc_or_none(result.likely),
        earliest=utc_or_none(result.earliest),
        latest=utc_or_none(result.latest),
        position=position,
        basis=basis.strip(),
        history_tasks=len(times),
    )


def timeline(ctx: ServerContext, who: Principal, task_id: str) -> wire.TaskTimeline:
    policy = ctx.policies.policy
    now = ctx.clock.now()
    with ctx.db.session() as session:
        row = get_visible(session, policy, task_id, who)
        events = list(
            session.scalars(
                select(TaskEventRow)
                .where(TaskEventRow.task_id == row.id)
                .order_by(TaskEventRow.at, TaskEventRow.id)
            )
        )
        attempts = attempts_of(events, preemptions.of_victim(session, row.id), now)
        readable = visible_teams(who, policy, Action.TASK_READ)
        return wire.TaskTimeline(
            task_id=row.id,
            state=row.state,
            attempts=[_wire(a, readable, now) for a in attempts],
            estimate=estimate(ctx, row, session),
        )


__all__ = ["MAX_EVENTS", "attempts_of", "estimate", "run_times", "timeline"]
