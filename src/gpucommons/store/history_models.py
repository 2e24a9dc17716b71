"""Tables the history views and planning keep: who preempted whom, and stored planning runs.

- `PreemptionRow`: one row per preemption the scheduler issues, naming both sides (victim task and team,
  preemptor task and team) and the engine's reason. The task's own row keeps only its current
  attempt, and its events only sentences; the team page ("preemptions suffered and caused") and the
  task timeline ("preempted by whom") need the other side as data.
- `PlanningRunRow`: a what-if replay or a quota advice the server ran in the background, with its
  progress while it runs and its report when done, so the planning page shows the latest ones.

Times are float seconds since the epoch (UTC), like every control-plane table.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Float, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from gpucommons.store.base import Base


class PreemptionRow(Base):
    """Append-only: a preemption as issued (the victim then stops within its grace period)."""

    __tablename__ = "preemptions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[float] = mapped_column(Float, index=True)
    victim_task_id: Mapped[str] = mapped_column(String(32), index=True)
    victim_team: Mapped[str] = mapped_column(String(63), index=True)
    victim_gpus: Mapped[int] = mapped_column(Integer, default=0)
    victim_pool: Mapped[str] = mapped_column(String(63), default="")
    preemptor_task_id: Mapped[str] = mapped_column(String(32))
    preemptor_team: Mapped[str] = mapped_column(String(63), index=True)
    #: The engine's `PreemptReason` (`within_team`, `reclaim`, `borrow_within_cohort`, `fair_share`).
    reason: Mapped[str] = mapped_column(String(32))
    message: Mapped[str] = mapped_column(Text, default="")


class PlanningRunRow(Base):
    """A background planning job and, once done, its report."""

    __tablename__ = "planning_runs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    #: `replay` (last month under a proposed policy) or `advice` (the quota advisor, then its replay).
    kind: Mapped[str] = mapped_column(String(16), index=True)
    #: `queued`, `running`, `succeeded` or `failed`.
    status: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[float] = mapped_column(Float, index=True)
    created_by: Mapped[str] = mapped_column(String(256), default="")
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: The replayed window [start, end) in epoch seconds.
    window_start: Mapped[float] = mapped_column(Float)
    window_end: Mapped[float] = mapped_column(Float)
    #: What the run compares, for a person ("current policy #3 vs proposed").
    title: Mapped[str] = mapped_column(Text, default="")
    #: The proposed policy's YAML (for `advice`: the advisor's proposal, once made).
    proposed_policy: Mapped[str] = mapped_column(Text, default="")
    #: Progress while running: a phase ("replaying the current policy") and jobs done of all.
    phase: Mapped[str] = mapped_column(String(200), default="")
    done: Mapped[int] = mapped_column(Integer, default=0)
    total: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str] = mapped_column(Text, default="")
    #: The report once succeeded (see `server.services.planning_runs`).
    report: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
