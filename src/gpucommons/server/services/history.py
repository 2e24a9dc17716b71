"""History read models: GPUs held over time against the quota line, and waits per team and day.

Both read only what the platform already keeps: the ledger (`usage_intervals`, through
`services.ledger.usage_intervals`), every applied policy (`policies`, so the quota line follows the
policy that was in force), and task events (each entry into the queue and each admission).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpucommons.api import history as wire
from gpucommons.domain.model import Policy
from gpucommons.domain.task import TaskState
from gpucommons.ledger.interval import to_us
from gpucommons.ledger.timeline import Buckets, NominalSteps, bucket_series
from gpucommons.policy import PolicyError, parse_policy
from gpucommons.server.services import ledger
from gpucommons.server.services.convert import utc
from gpucommons.sim.stats import percentile
from gpucommons.store.models import PolicyRow, TaskEventRow, TaskRow

US = 1_000_000


@dataclass(frozen=True, slots=True)
class WindowSpec:
    seconds: int
    step_s: int


#: Each window's length and bucket: about 50-120 points, at round times.
WINDOWS: dict[str, WindowSpec] = {
    "24h": WindowSpec(24 * 3600, 30 * 60),
    "7d": WindowSpec(7 * 86400, 2 * 3600),
    "30d": WindowSpec(30 * 86400, 6 * 3600),
}
#: Days of waits the API gives at most.
MAX_WAIT_DAYS = 90

_parsed: dict[int, Policy | None] = {}
_parsed_lock = threading.Lock()


def _policy_of(row: PolicyRow) -> Policy | None:
    """A stored policy, parsed once per process (rows never change); None if it no longer parses."""
    with _parsed_lock:
        if row.id in _parsed:
            return _parsed[row.id]
    try:
        policy: Policy | None = parse_policy(row.text, f"stored policy #{row.id}")
    except PolicyError:
        policy = None
    with _parsed_lock:
        _parsed[row.id] = policy
    return policy


def quota_steps(
    session: Session, start: float, end: float, current: Policy
) -> dict[tuple[str, str], NominalSteps]:
    """Per (team, pool): the nominal GPUs of each policy in force during `[start, end)`."""
    before = session.scalars(
        select(PolicyRow).where(PolicyRow.applied_at <= start).order_by(PolicyRow.id.desc()).limit(1)
    ).first()
    during = session.scalars(
        select(PolicyRow)
        .where(PolicyRow.applied_at > start, PolicyRow.applied_at < end)
        .order_by(PolicyRow.applied_at, PolicyRow.id)
    ).all()
    applied: list[tuple[int, Policy]] = []
    for row in [r for r in (before,) if r is not None] + list(during):
        policy = _policy_of(row)
        if policy is not None:
            applied.append((int(row.applied_at * US), policy))
    if not applied:
        applied = [(int(start * US), current)]
    keys = {(t.name, q.pool) for _, p in applied for t in p.teams for q in t.quotas}
    steps: dict[tuple[str, str], NominalSteps] = {}
    for team, pool in sorted(keys):
        steps[(team, pool)] = [
            (at, p.team(team).nominal(pool).gpus if p.has_team(team) else 0) for at, p in applied
        ]
    return steps


def gpu_history(
    session: Session, policy: Policy, visible: Collection[str], window: str, now: float
) -> wire.GpuHistory:
    spec = WINDOWS[window]
    last_start = (int(now) // spec.step_s) * spec.step_s
    start = last_start - (spec.seconds // spec.step_s - 1) * spec.step_s
    end = max(now, last_start + 1.0)
    buckets = Buckets(start * US, int(end * US), spec.step_s * US)
    spans = ledger.held_spans(session, visible, float(start), end, now)
    steps = {k: v for k, v in quota_steps(session, start, end, policy).items() if k[0] in visible}
    series = []
    for s in bucket_series(spans, steps, buckets):
        if s.team not in visible:
            continue
        lengths = [buckets.length_us(i) for i in range(buckets.count)]
        series.append(
            wire.TeamPoolHistory(
                team=s.team,
                pool=s.pool,
                held_gpus=[round(h / n, 3) for h, n in zip(s.held_us, lengths, strict=True)],
                borrowed_gpus=[round(b / n, 3) for b, n in zip(s.borrowed_us, lengths, strict=True)],
                nominal_gpus=list(s.nominal),
            )
        )
    return wire.GpuHistory(
        window=window,  # type: ignore[arg-type]
        start=utc(start),
        end=utc(end),
        step_seconds=spec.step_s,
        bucket_starts=[utc(e / US) for e in buckets.edges()[:-1]],
        pools=[
            wire.PoolCapacity(name=p.name, gpu_type=p.gpu_type, capacity_gpus=p.capacity.gpus)
            for p in policy.pools
        ],
        series=series,
    )


# --- waits --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Wait:
    team: str
    task_id: str
    queued_at: float
    admitted_at: float

    @property
    def seconds(self) -> float:
        return max(0.0, self.admitted_at - self.queued_at)


def admissions(session: Session, visible: Collection[str], start: float, end: float) -> list[Wait]:
    """Every admission in `[start, end)` of the visible teams' tasks, with when the task had
    (re)entered its queue: its submission, or its requeue after a preemption."""
    admitted_in_window = (
        select(TaskEventRow.task_id)
        .join(TaskRow, TaskRow.id == TaskEventRow.task_id)
        .where(
            TaskEventRow.to_state == TaskState.ADMITTED.value,
            TaskEventRow.at >= start,
            TaskEventRow.at < end,
            TaskRow.team.in_(sorted(visible)),
        )
        .distinct()
    )
    rows = session.execute(
        select(TaskEventRow.task_id, TaskRow.team, TaskEventRow.to_state, TaskEventRow.at)
        .join(TaskRow, TaskRow.id == TaskEventRow.task_id)
        .where(
            TaskEventRow.task_id.in_(admitted_in_window),
            TaskEventRow.to_state.in_([TaskState.PENDING.value, TaskState.ADMITTED.value]),
            TaskEventRow.at < end,
        )
        .order_by(TaskEventRow.task_id, TaskEventRow.at, TaskEventRow.id)
    ).all()
    out: list[Wait] = []
    queued: dict[str, float] = {}
    for task_id, team, to_state, at in rows:
        if to_state == TaskState.PENDING.value:
            queued[task_id] = at
        elif task_id in queued and at >= start:
            out.append(Wait(team, task_id, queued.pop(task_id), at))
    return out


def _day(ts: float) -> date:
    return datetime.fromtimestamp(ts, tz=UTC).date()


def wait_history(session: Session, visible: Collection[str], days: int, now: float) -> wire.WaitHistory:
    """p50 / p95 / max of the waits of each team's admissions per UTC day, for the last `days` days."""
    today = _day(now)
    first = today - timedelta(days=days - 1)
    start = datetime(first.year, first.month, first.day, tzinfo=UTC).timestamp()
    per_day: dict[str, dict[date, list[float]]] = defaultdict(lambda: defaultdict(list))
    for w in admissions(session, visible, start, now + 1e-6):
        per_day[w.team][_day(w.admitted_at)].append(w.seconds)
    teams = []
    for team in sorted(visible):
        days_out = [
            wire.DayWaits(
                day=day,
                admissions=len(values),
                p50_seconds=round(percentile(values, 50), 1),
                p95_seconds=round(percentile(values, 95), 1),
                max_seconds=round(max(values), 1),
            )
            for day, values in sorted(per_day.get(team, {}).items())
        ]
        teams.append(wire.TeamWaits(team=team, days=days_out))
    return wire.WaitHistory(start=first, end=today, teams=teams)


def bucket_edges_us(history: wire.GpuHistory) -> list[int]:
    """Bucket edges of a history answer, in microseconds (tests rebuild the integrals with them)."""
    return [to_us(t) for t in history.bucket_starts] + [to_us(history.end)]
