"""What the scheduler hands out: per-cycle stats, the hooks metrics listen on, and the usage view
the API reads without taking the scheduler's lock."""

from __future__ import annotations

from dataclasses import dataclass

from gpucommons.domain.resources import Resources
from gpucommons.engine.state import ClusterState
from gpucommons.engine.types import Decisions


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

    @classmethod
    def of(cls, state: ClusterState) -> UsageView:
        policy = state.policy
        pending_gpus: dict[str, int] = {t: 0 for t in policy.team_names}
        for task in state.iter_pending():
            pending_gpus[task.team] = pending_gpus.get(task.team, 0) + task.resources.gpus
        return cls(
            usage={(t.name, q.pool): state.usage(t.name, q.pool) for t in policy.teams for q in t.quotas},
            pending_tasks={t: state.pending_count(t) for t in policy.team_names},
            pending_gpus=pending_gpus,
            running_tasks={t: state.running_count(t) for t in policy.team_names},
            free_gpus={p.name: state.free_gpus(p.name) for p in policy.pools},
        )


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
