"""Who preempted whom: one `PreemptionRow` per preemption, written in the scheduler's transaction.

The victim's task row keeps only its current attempt and its events only sentences; this table keeps
both sides as data, so the team page can list preemptions suffered and caused with the other team
named, the task timeline can say which team's task took the GPUs, and `/metrics` can count
preemptions by preempting team across restarts.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from gpucommons.engine.types import Preempt
from gpucommons.store.history_models import PreemptionRow
from gpucommons.store.models import TaskRow


def record_preemption(
    session: Session, victim: TaskRow, preempt: Preempt, preemptor_team: str, at: float
) -> None:
    session.add(
        PreemptionRow(
            at=at,
            victim_task_id=victim.id,
            victim_team=victim.team,
            victim_gpus=victim.gpus,
            victim_pool=victim.attempt.pool if victim.attempt is not None else "",
            preemptor_task_id=preempt.preemptor_id,
            preemptor_team=preemptor_team,
            reason=preempt.reason.value,
            message=preempt.message,
        )
    )


@dataclass(frozen=True, slots=True)
class PreemptionCount:
    victim_team: str
    preemptor_team: str
    reason: str
    count: int


def counts(session: Session) -> list[PreemptionCount]:
    """Every preemption ever issued, counted by (victim team, preempting team, reason)."""
    rows = session.execute(
        select(PreemptionRow.victim_team, PreemptionRow.preemptor_team, PreemptionRow.reason, func.count())
        .group_by(PreemptionRow.victim_team, PreemptionRow.preemptor_team, PreemptionRow.reason)
        .order_by(PreemptionRow.victim_team, PreemptionRow.preemptor_team, PreemptionRow.reason)
    )
    return [PreemptionCount(v, p, r, int(n)) for v, p, r, n in rows]


def involving_team(session: Session, team: str, since: float, limit: int = 200) -> list[PreemptionRow]:
    """Preemptions since `since` where `team` lost a task or took GPUs back, newest first."""
    query = (
        select(PreemptionRow)
        .where(
            PreemptionRow.at >= since,
            or_(PreemptionRow.victim_team == team, PreemptionRow.preemptor_team == team),
        )
        .order_by(PreemptionRow.at.desc(), PreemptionRow.id.desc())
        .limit(limit)
    )
    return list(session.scalars(query))


def of_victim(session: Session, task_id: str) -> list[PreemptionRow]:
    """Every preemption the task suffered, oldest first."""
    query = (
        select(PreemptionRow)
        .where(PreemptionRow.victim_task_id == task_id)
        .order_by(PreemptionRow.at, PreemptionRow.id)
    )
    return list(session.scalars(query))


def repeated_victims(
    session: Session, since: float, at_least: int, teams: Collection[str] | None = None
) -> dict[str, int]:
    """Per team: how many of its tasks were preempted `at_least` times since `since` (loops)."""
    per_task = (
        select(PreemptionRow.victim_team, PreemptionRow.victim_task_id)
        .where(PreemptionRow.at >= since)
        .group_by(PreemptionRow.victim_team, PreemptionRow.victim_task_id)
        .having(func.count() >= at_least)
    )
    if teams is not None:
        per_task = per_task.where(PreemptionRow.victim_team.in_(sorted(teams)))
    out: dict[str, int] = {}
    for team, _task in session.execute(per_task):
        out[team] = out.get(team, 0) + 1
    return out
