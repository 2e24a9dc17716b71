"""Check a trace against a policy before replaying it: which jobs can the policy run at all?

A job is *refused* when the policy cannot even name it (unknown team, priority class or pool):
that is a mistake in the inputs and the caller decides (stop, or drop with a warning). A job that
*never fits* is legitimate input the policy cannot serve (more GPUs than the team may ever hold,
or than its pools have): the simulator keeps it, never starts it, and counts it, because "static
partitioning cannot run this job at all" is itself a result.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gpucommons.domain import Policy, PriorityClass, Resources
from gpucommons.engine import ClusterState, EngineConfig, TaskRequest
from gpucommons.engine.context import Cycle
from gpucommons.engine.reasons import never_fits_limit
from gpucommons.sim.jobs import SimJob


@dataclass(frozen=True, slots=True)
class ResolvedJob:
    """A job with the policy's meaning attached: its class, the pools it may use, whether it can ever run."""

    job: SimJob
    priority_class: PriorityClass
    pools: tuple[str, ...]
    never_fits: bool
    #: Submission order (by submit time, then trace order): the engine's tie-breaker.
    seq: int


@dataclass(frozen=True, slots=True)
class Resolution:
    jobs: tuple[ResolvedJob, ...]
    #: Why jobs were refused: reason -> number of jobs, and a few job ids as examples.
    refused: dict[str, int] = field(default_factory=dict)
    refused_examples: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def refused_count(self) -> int:
        return sum(self.refused.values())

    @property
    def never_fit_count(self) -> int:
        return sum(1 for j in self.jobs if j.never_fits)

    def describe_refused(self) -> list[str]:
        return [
            f"{count} job(s): {reason} (e.g. job {', '.join(self.refused_examples[reason])})"
            for reason, count in sorted(self.refused.items())
        ]


class UnknownNamesError(ValueError):
    """Jobs name teams, classes or pools the policy does not have."""

    def __init__(self, resolution: Resolution) -> None:
        self.resolution = resolution
        super().__init__(
            f"{resolution.refused_count} job(s) do not match the policy:\n  "
            + "\n  ".join(resolution.describe_refused())
        )


class _FitCheck:
    """Asks the engine itself whether a request can ever fit a team's pool (never a second copy of
    its quota arithmetic: cohort lending, borrow limits, dedicated nodes and `static` all count)."""

    def __init__(self, policy: Policy, config: EngineConfig) -> None:
        self.cycle = Cycle(ClusterState(policy), 0.0, config)
        self.cache: dict[tuple[str, str, Resources], bool] = {}

    def can_ever_fit(self, job: SimJob, pool: str) -> bool:
        key = (job.team, pool, job.resources)
        if key not in self.cache:
            probe = TaskRequest(job.job_id, job.team, job.resources, 0, "", 0, 0.0, (pool,))
            self.cache[key] = never_fits_limit(self.cycle, probe, pool) is None
        return self.cache[key]


def resolve(
    policy: Policy, jobs: list[SimJob], config: EngineConfig, *, drop_unknown: bool = False
) -> Resolution:
    """Attach the policy to each job, in submission order; raise `UnknownNamesError` unless `drop_unknown`."""
    ordered = sorted(jobs, key=lambda j: j.submit_s)  # stable: trace order breaks ties
    refused: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    resolved: list[ResolvedJob] = []

    def refuse(reason: str, job: SimJob) -> None:
        refused[reason] += 1
        examples.setdefault(reason, [])
        if len(examples[reason]) < 3:
            examples[reason].append(job.job_id)

    fit = _FitCheck(policy, config)
    for job in ordered:
        if not policy.has_team(job.team):
            refuse(f"team {job.team!r} is not in the policy", job)
            continue
        try:
            pclass = policy.priority_class(job.priority_class)
        except KeyError:
            refuse(f"priority class {job.priority_class!r} is not in the policy", job)
            continue
        team = policy.team(job.team)
        if job.pool is not None:
            if not policy.has_pool(job.pool):
                refuse(f"pool {job.pool!r} is not in the policy", job)
                continue
            pools: tuple[str, ...] = (job.pool,)
        else:
            pools = tuple(q.pool for q in team.quotas)
        if not pools or all(team.quota(p) is None for p in pools):
            refuse(f"team {job.team!r} has no quota in pool {job.pool or '(any)'}", job)
            continue
        never_fits = not any(fit.can_ever_fit(job, p) for p in pools)
        resolved.append(ResolvedJob(job, pclass, pools, never_fits, seq=len(resolved)))
    resolution = Resolution(
        tuple(resolved), dict(refused), {reason: tuple(ids) for reason, ids in examples.items()}
    )
    if refused and not drop_unknown:
        raise UnknownNamesError(resolution)
    return resolution
