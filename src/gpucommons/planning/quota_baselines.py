"""Simple sizings the search starts from and the report compares against.

- `today`: the policy's quotas as they are.
- `equal`: the same share of each pool for every sized team.
- `proportional`: in proportion to each team's mean demand (GPU-seconds asked for) over the fit window.
- `recent`: the same with the fit window's decay (newer demand weighs more).
- `median rule`: the demand-percentile rule (`gpucommons.planning.advisor`) on the fit window.
- `blend`: half equal, half recent: a floor for small teams with large jobs, the rest by demand.

Each is brought into the search space (Σ = what the pool hands out, units, `--max-change` bounds) by
`QuotaSpace.project`, except `today`, which is replayed as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpucommons.domain import Policy
from gpucommons.planning.advisor import AdvisorRule, advise, default_pool, trace_history
from gpucommons.planning.quota_space import QuotaSpace, QuotaVector
from gpucommons.planning.replay_score import Window
from gpucommons.planning.usage_history import Demand
from gpucommons.sim import SimJob

TODAY, EQUAL, PROPORTIONAL, RECENT, MEDIAN_RULE, BLEND = (
    "today",
    "equal split",
    "proportional to mean demand",
    "proportional to recent demand",
    "median rule",
    "half equal, half recent",
)
#: The baselines every report shows (the issue's list); the others only seed the search.
REPORTED = (TODAY, EQUAL, PROPORTIONAL, MEDIAN_RULE)


def job_pool(policy: Policy, job: SimJob) -> str | None:
    return job.pool if job.pool is not None else default_pool(policy, Demand(job.team, None, ()))


def demand_pools(policy: Policy, jobs: Sequence[SimJob]) -> dict[str, set[str]]:
    pools: dict[str, set[str]] = {}
    for job in jobs:
        pool = job_pool(policy, job)
        if pool is not None and policy.has_team(job.team) and policy.has_pool(pool):
            pools.setdefault(job.team, set()).add(pool)
    return pools


def largest_jobs(policy: Policy, jobs: Sequence[SimJob]) -> dict[tuple[str, str], int]:
    """The largest request (GPUs) of each (team, pool) in the history."""
    out: dict[tuple[str, str], int] = {}
    for job in jobs:
        pool = job_pool(policy, job)
        if pool is not None:
            key = (job.team, pool)
            out[key] = max(out.get(key, 0), job.resources.gpus)
    return out


def demand_gpu_s(policy: Policy, window: Window, *, decayed: bool) -> dict[tuple[str, str], float]:
    """GPU-seconds each (team, pool) asked for in the window, each job weighted by its decay if asked."""
    out: dict[tuple[str, str], float] = {}
    for job in window.jobs:
        pool = job_pool(policy, job)
        if pool is None:
            continue
        weight = window.weight(job.submit_s) if decayed else 1.0
        key = (job.team, pool)
        out[key] = out.get(key, 0.0) + job.resources.gpus * job.duration_s * weight
    return out


def seeds(policy: Policy, space: QuotaSpace, fit: Window) -> dict[str, QuotaVector]:
    """Every named sizing, in the order the report lists them (today first)."""
    equal = space.vector_of({(e.team, e.pool): 1.0 for e in space.entries})
    mean = demand_gpu_s(policy, fit, decayed=False)
    recent = demand_gpu_s(policy, fit, decayed=True)
    recent_vector = space.vector_of(recent)
    rule = advise(policy, trace_history(policy, list(fit.jobs)), AdvisorRule(whole_nodes=space.whole_nodes))
    median = space.vector_of(
        {(t.name, q.pool): float(q.nominal.gpus) for t in rule.proposed.teams for q in t.quotas}
    )
    blend = space.project([(a + b) / 2 for a, b in zip(equal, recent_vector, strict=True)])
    return {
        TODAY: space.today(),
        EQUAL: equal,
        PROPORTIONAL: space.vector_of(mean),
        RECENT: recent_vector,
        MEDIAN_RULE: median,
        BLEND: blend,
    }
