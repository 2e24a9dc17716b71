"""Kueue-style gauges and counters for `/metrics`, computed at scrape time from the scheduler's
published state and the store (so they cannot drift from what the engine decides on, and the
counters that come from the store survive a restart of the server).

Names follow Kueue's metrics with a `commons_` prefix; a Kueue ClusterQueue is a team, a flavor a
pool, and the one resource reported is `gpu`:

| ours | Kueue's |
|---|---|
| `commons_pending_tasks{team, priority_class, reason}` | `kueue_pending_workloads{cluster_queue, status}` |
| `commons_team_nominal_quota{cohort, team, pool, resource}` | `kueue_cluster_queue_nominal_quota` |
| `commons_team_borrowing_limit{...}` (where the policy sets one) | `kueue_cluster_queue_borrowing_limit` |
| `commons_team_resource_usage{...}` | `kueue_cluster_queue_resource_usage` |
| `commons_team_resource_borrowed{...}` | (usage above nominal) |
| `commons_preempted_tasks_total{team, preempting_team, reason}` | `kueue_preempted_workloads_total` |
| `commons_finished_tasks_total{team, outcome}` | `kueue_finished_workloads_total` |

plus what the alert rules need: the longest current wait per team, GPUs a team waits for within its
guaranteed quota (`commons_team_guarantee_shortfall_gpus`), and tasks preempted again and again
(`commons_preemption_loop_tasks`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from gpucommons.backends.ports import Clock
from gpucommons.domain.resources import UNLIMITED, ZERO
from gpucommons.domain.task import TaskState
from gpucommons.engine.types import PendingCode
from gpucommons.server.services import preemptions
from gpucommons.store.db import Database
from gpucommons.store.models import TaskRow

if TYPE_CHECKING:
    from gpucommons.server.workers.port import TaskWorker

log = logging.getLogger(__name__)

RESOURCE = "gpu"
TERMINAL = (TaskState.SUCCEEDED.value, TaskState.FAILED.value, TaskState.CANCELLED.value)
#: A task preempted this many times within `LOOP_WINDOW_S` counts as caught in a preemption loop.
LOOP_PREEMPTIONS = 3
LOOP_WINDOW_S = 3600.0
#: Reasons that are no shortfall of guaranteed quota: the team's own budget, a request that can never
#: fit, a pool the team has no quota in.
_NOT_A_SHORTFALL = frozenset({PendingCode.BUDGET_EXHAUSTED, PendingCode.NEVER_FITS, PendingCode.UNKNOWN_POOL})
NOT_CONSIDERED = "not_considered"


@dataclass(frozen=True, slots=True)
class PendingSample:
    team: str
    priority_class: str
    reason: str
    gpus: int
    queued_at: float
    pools: tuple[str, ...]


def pending_samples(scheduler: TaskWorker) -> list[PendingSample]:
    """Every pending task with the engine's last reason, from the scheduler's published view."""
    view = scheduler.view
    return [
        PendingSample(
            team=t.team,
            priority_class=t.priority_class,
            reason=reason.code.value if (reason := view.reasons.get(t.id)) is not None else NOT_CONSIDERED,
            gpus=t.resources.gpus,
            queued_at=t.queued_at,
            pools=t.pools,
        )
        for t in view.pending
    ]


class ClusterCollector(Collector):
    def __init__(self, db: Database, scheduler: TaskWorker, clock: Clock) -> None:
        self.db = db
        self.scheduler = scheduler
        self.clock = clock

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield from self._quota()
        yield from self._queue()
        try:
            yield from self._from_store()
        except Exception:  # a busy or broken store must not take the other metrics down with it
            log.exception("metrics: could not read the store")

    def _quota(self) -> Iterator[GaugeMetricFamily]:
        published = self.scheduler.view
        policy, view = published.policy, published.usage
        labels = ["cohort", "team", "pool", "resource"]
        nominal = GaugeMetricFamily(
            "commons_team_nominal_quota", "GPUs the team is guaranteed in the pool", labels=labels
        )
        limit = GaugeMetricFamily(
            "commons_team_borrowing_limit", "GPUs the team may borrow above its nominal quota", labels=labels
        )
        usage = GaugeMetricFamily("commons_team_resource_usage", "GPUs the team's tasks hold", labels=labels)
        borrowed = GaugeMetricFamily(
            "commons_team_resource_borrowed", "GPUs the team holds above its nominal quota", labels=labels
        )
        for team in policy.teams:
            for quota in team.quotas:
                key = [team.cohort, team.name, quota.pool, RESOURCE]
                used = view.usage.get((team.name, quota.pool), ZERO).gpus
                nominal.add_metric(key, quota.nominal.gpus)
                if quota.borrow_limit.gpus < UNLIMITED:
                    limit.add_metric(key, quota.borrow_limit.gpus)
                usage.add_metric(key, used)
                borrowed.add_metric(key, max(0, used - quota.nominal.gpus))
        yield from (nominal, limit, usage, borrowed)

    def _queue(self) -> Iterator[GaugeMetricFamily]:
        published = self.scheduler.view
        policy, view = published.policy, published.usage
        now = self.clock.now()
        samples = pending_samples(self.scheduler)
        counts: dict[tuple[str, str, str], int] = defaultdict(int)
        oldest: dict[str, float] = {t: 0.0 for t in policy.team_names}
        wanted: dict[tuple[str, str], int] = defaultdict(int)
        for s in samples:
            counts[(s.team, s.priority_class, s.reason)] += 1
            oldest[s.team] = max(oldest.get(s.team, 0.0), now - s.queued_at)
            if s.reason in _NOT_A_SHORTFALL or not policy.has_team(s.team):
                continue
            team = policy.team(s.team)
            for pool in s.pools or tuple(q.pool for q in team.quotas):
                free_nominal = team.nominal(pool).gpus - view.usage.get((s.team, pool), ZERO).gpus
                if 0 < s.gpus <= free_nominal:
                    wanted[(s.team, pool)] += s.gpus
        pending = GaugeMetricFamily(
            "commons_pending_tasks",
            "Tasks waiting, per team, priority class and the engine's reason code",
            labels=["team", "priority_class", "reason"],
        )
        for key, n in sorted(counts.items()):
            pending.add_metric(list(key), n)
        wait = GaugeMetricFamily(
            "commons_pending_task_max_wait_seconds",
            "How long the team's longest-waiting task has waited (0 when none waits)",
            labels=["team"],
        )
        for team_name, seconds in sorted(oldest.items()):
            wait.add_metric([team_name], round(max(0.0, seconds), 3))
        shortfall = GaugeMetricFamily(
            "commons_team_guarantee_shortfall_gpus",
            "GPUs the team's waiting tasks could use within its unused nominal quota but do not have",
            labels=["team", "pool"],
        )
        for team in policy.teams:
            for quota in team.quotas:
                free_nominal = quota.nominal.gpus - view.usage.get((team.name, quota.pool), ZERO).gpus
                short = min(max(0, free_nominal), wanted.get((team.name, quota.pool), 0))
                shortfall.add_metric([team.name, quota.pool], short)
        yield from (pending, wait, shortfall)

    def _from_store(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        now = self.clock.now()
        with self.db.session() as session:
            finished_rows = session.execute(
                select(TaskRow.team, TaskRow.state, func.count())
                .where(TaskRow.state.in_(TERMINAL))
                .group_by(TaskRow.team, TaskRow.state)
            ).all()
            preempted_rows = preemptions.counts(session)
            loops = preemptions.repeated_victims(session, now - LOOP_WINDOW_S, LOOP_PREEMPTIONS)
        finished = CounterMetricFamily(
            "commons_finished_tasks", "Tasks that ended, per team and outcome", labels=["team", "outcome"]
        )
        for team, state, n in sorted(finished_rows):
            finished.add_metric([team, state], int(n))
        preempted = CounterMetricFamily(
            "commons_preempted_tasks",
            "Preemptions issued, per victim team, preempting team and the engine's reason",
            labels=["team", "preempting_team", "reason"],
        )
        for c in preempted_rows:
            preempted.add_metric([c.victim_team, c.preemptor_team, c.reason], c.count)
        loop = GaugeMetricFamily(
            "commons_preemption_loop_tasks",
            f"Tasks of the team preempted {LOOP_PREEMPTIONS} times or more in the last hour",
            labels=["team"],
        )
        for team in self.scheduler.view.policy.team_names:
            loop.add_metric([team], loops.get(team, 0))
        yield from (finished, preempted, loop)
