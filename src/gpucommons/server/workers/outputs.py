"""What the scheduler hands out: per-cycle stats, the hooks metrics listen on, and the read views
the API reads without taking the scheduler's lock."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from gpucommons.domain.model import Policy
from gpucommons.domain.resources import Resources
from gpucommons.engine.state import ClusterState
from gpucommons.engine.types import Decisions, Pending, RunningTask, TaskRequest


@dataclass
class CycleStats:
    admitted: int = 0
    preempted: int = 0
    ended: int = 0


@dataclass(frozen=True, slots=True)
class UsageView:
    """What each team holds and waits for, as of the end of the last cycle.

    Read by the API without the scheduler's lock, so that reads never wait for a cycle to finish.
    """

    usage: dict[tuple[str, str], Resources]
    pending_tasks: dict[str, int]
    pending_gpus: dict[str, int]
    running_tasks: dict[str, int]
    free_gpus: dict[str, int]
    #: Pending tasks and GPUs by (team, pool asked for); pool "" = any of the team's pools.
    pending_by_pool: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    #: GPUs each live task borrows *now* (see `borrowed_now`); absent = none.
    borrowed_by_task: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, state: ClusterState) -> UsageView:
        policy = state.policy
        by_pool = state.pending_totals()
        pending_gpus: dict[str, int] = {t: 0 for t in policy.team_names}
        for (team, _pool), (_n, gpus) in by_pool.items():
            pending_gpus[team] = pending_gpus.get(team, 0) + gpus
        return cls(
            usage={(t.name, q.pool): state.usage(t.name, q.pool) for t in policy.teams for q in t.quotas},
            pending_tasks={t: state.pending_count(t) for t in policy.team_names},
            pending_gpus=pending_gpus,
            running_tasks={t: state.running_count(t) for t in policy.team_names},
            free_gpus={p.name: state.free_gpus(p.name) for p in policy.pools},
            pending_by_pool=by_pool,
            borrowed_by_task=borrowed_now(state),
        )


@dataclass(frozen=True, slots=True)
class ReadView:
    """Everything the API, the views and the metrics read of a worker, as of its last publication.

    A worker builds a new one at the end of each cycle (and after each command) and swaps it in with
    one assignment, so a reader takes `worker.view` once and sees one consistent moment without the
    worker's lock (docs/decisions/0013-scheduler-commands-and-read-views.md). Everything in it is
    immutable: the tasks are frozen engine values, the mappings read-only copies.
    """

    policy: Policy
    usage: UsageView
    #: Pending tasks, each team's in queue order (`ClusterState.iter_pending`).
    pending: tuple[TaskRequest, ...]
    #: Admitted tasks (running or being preempted), in admission order.
    running: tuple[RunningTask, ...]
    #: Why each pending task waits, from the last cycle, by task id.
    reasons: Mapping[str, Pending]

    @classmethod
    def of(cls, state: ClusterState, reasons: Mapping[str, Pending]) -> ReadView:
        return cls(
            policy=state.policy,
            usage=UsageView.of(state),
            pending=tuple(state.iter_pending()),
            running=tuple(state.iter_running()),
            reasons=MappingProxyType(dict(reasons)),
        )


def borrowed_now(state: ClusterState) -> dict[str, int]:
    """Which live tasks hold a team's GPUs above its nominal quota right now.

    Borrowing belongs to the team (use above nominal, as the ledger integrates it), not to the task
    that happened to be admitted while the team was above its quota: when the team's other tasks end,
    nothing is borrowed any more. The team's current excess in a pool is attributed to its most
    recently admitted tasks there, the ones a reclaim would take first.
    """
    out: dict[str, int] = {}
    for team in state.policy.teams:
        for quota in team.quotas:
            excess = state.usage(team.name, quota.pool).gpus - quota.nominal.gpus
            if excess <= 0:
                continue
            held = [r for r in state.iter_running(team.name) if r.admission.pool == quota.pool]
            for run in sorted(held, key=lambda r: (r.admitted_at, r.task.seq), reverse=True):
                take = min(excess, run.task.resources.gpus)
                out[run.task.id] = take
                excess -= take
                if excess <= 0:
                    break
    return out


class SchedulerHooks:
    """What the scheduler reports (metrics); the default does nothing."""

    def cycle_done(self, seconds: float, decisions: Decisions) -> None:
        pass

    def admitted(
        self,
        team: str,
        pool: str,
        borrowed_gpus: int,
        *,
        waited_s: float | None = None,
        priority_class: str = "",
    ) -> None:
        """A task was admitted after waiting `waited_s` seconds since it (re)entered its queue."""

    def preempted(self, team: str, reason: str, *, preempting_team: str = "") -> None:
        """A task of `team` was chosen as a victim for a task of `preempting_team`."""
