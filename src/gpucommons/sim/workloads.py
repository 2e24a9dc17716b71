"""Generated workloads: Kueue's own scheduler benchmark, as a policy and a job list.

Kueue's `test/performance/scheduler/configs/baseline/generator.yaml`: 5 cohorts × 6 ClusterQueues,
each with a nominal quota of 20 CPU, a borrowing limit of 100, `reclaimWithinCohort: Any`,
`withinClusterQueue: LowerPriority`; each queue receives 350 small workloads (1 CPU, 200 ms,
priority 50, one every 100 ms), 100 medium (5 CPU, 500 ms, priority 100, one every 500 ms) and 50
large (20 CPU, 1 s, priority 200, one every 1.2 s): 15,000 workloads. The only resource is CPU,
600 CPUs in all, so the capacity bound on the makespan is 39,600 CPU-s / 600 CPU = 66 s.

Pure functions (no clock, no randomness), so the same generator can drive the simulator here and,
later, the live server (submit each job at `submit_s` after the start).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gpucommons.domain import (
    Cohort,
    Policy,
    Pool,
    PreemptionPolicy,
    PriorityClass,
    Quota,
    ReclaimPolicy,
    Resources,
    Team,
    WithinTeamPolicy,
)
from gpucommons.sim.jobs import SimJob


class JobRunLike(Protocol):
    """What the figures read of a finished run (`sim.simulator.JobRun` has it)."""

    job: SimJob
    first_start_s: float | None
    finish_s: float | None
    preemptions: int


@dataclass(frozen=True, slots=True)
class WorkloadClass:
    name: str
    count: int
    interval_s: float
    runtime_s: float
    priority: int
    cpus: int


#: Kueue's published figures for this benchmark (rangespec.yaml averages over 5 trial runs, and the
#: issue's summary of them): wall time, average time to admission per class, ClusterQueue usage.
KUEUE_PUBLISHED = {
    "makespan_s": 351.0,
    "time_to_admission_s": {"large": 16.5, "medium": 77.0, "small": 215.0},
    "quota_usage": 0.559,
    "capacity_bound_s": 66.0,
}

KUEUE_BASELINE_CLASSES = (
    WorkloadClass("small", count=350, interval_s=0.1, runtime_s=0.2, priority=50, cpus=1),
    WorkloadClass("medium", count=100, interval_s=0.5, runtime_s=0.5, priority=100, cpus=5),
    WorkloadClass("large", count=50, interval_s=1.2, runtime_s=1.0, priority=200, cpus=20),
)
COHORTS = 5
TEAMS_PER_COHORT = 6
NOMINAL_CPUS = 20
BORROW_LIMIT_CPUS = 100
POOL = "cpu"


def team_name(cohort: int, queue: int) -> str:
    return f"cohort{cohort}-cq{queue}"


def kueue_baseline_policy(grace_period_s: int = 0, cohorts: int = COHORTS) -> Policy:
    """The benchmark's cluster: one CPU-only pool holding exactly the sum of the nominal quotas.

    Kueue's benchmark has no nodes (quota is the only limit), so the pool is one node of 600 CPUs:
    node placement never fragments it. Grace periods are 0: Kueue's runner stops evicted workloads
    at once.
    """
    teams = []
    for c in range(cohorts):
        for q in range(TEAMS_PER_COHORT):
            teams.append(
                Team(
                    name=team_name(c, q),
                    cohort=f"cohort{c}",
                    quotas=(
                        Quota(
                            pool=POOL,
                            nominal=Resources(cpu_milli=NOMINAL_CPUS * 1000),
                            borrow_limit=Resources(cpu_milli=BORROW_LIMIT_CPUS * 1000),
                        ),
                    ),
                    preemption=PreemptionPolicy(
                        reclaim=ReclaimPolicy.ANY, within_team=WithinTeamPolicy.LOWER_PRIORITY
                    ),
                )
            )
    total_cpus = cohorts * TEAMS_PER_COHORT * NOMINAL_CPUS
    return Policy(
        cluster_name="kueue-baseline",
        pools=(Pool(POOL, gpu_type="none", nodes=1, gpus_per_node=0, cpu_milli_per_node=total_cpus * 1000),),
        priority_classes=tuple(
            PriorityClass(w.name, w.priority, grace_period_s=grace_period_s, min_runtime_s=0)
            for w in KUEUE_BASELINE_CLASSES
        ),
        default_priority_class="small",
        teams=tuple(teams),
        cohorts=tuple(Cohort(f"cohort{c}") for c in range(cohorts)),
    )


def kueue_baseline_jobs(cohorts: int = COHORTS) -> list[SimJob]:
    """15,000 jobs (3,000 per cohort) in submission order; job ids `<team>-<class>-<n>`.

    Fewer `cohorts` give a proportionally smaller run with the same capacity bound (cohorts do not
    lend to each other), for quick checks.
    """
    jobs: list[SimJob] = []
    for c in range(cohorts):
        for q in range(TEAMS_PER_COHORT):
            team = team_name(c, q)
            for w in KUEUE_BASELINE_CLASSES:
                for n in range(w.count):
                    jobs.append(
                        SimJob(
                            job_id=f"{team}-{w.name}-{n}",
                            team=team,
                            # Rounded to the millisecond: 0.1 × n in floats drifts (0.30000000000000004).
                            submit_s=round(n * w.interval_s, 3),
                            duration_s=w.runtime_s,
                            resources=Resources(cpu_milli=w.cpus * 1000),
                            priority_class=w.name,
                        )
                    )
    jobs.sort(key=lambda j: j.submit_s)
    return jobs


def kueue_baseline_figures(
    runs: Sequence[JobRunLike], capacity_cpus: float, held_cpu_s: float
) -> dict[str, Any]:
    """The figures Kueue's benchmark reports, from a simulated run of `kueue_baseline_jobs()`.

    - makespan: last finish − first submission (Kueue: wall time of the whole run);
    - average time to admission per class (first admission − creation);
    - quota usage: CPU-seconds held ÷ (nominal CPUs × makespan) — Kueue's recorder divides CPU used by
      each ClusterQueue's monitoring window, which is close to the run's span.
    """
    first_submit = min(r.job.submit_s for r in runs)
    last_finish = max((r.finish_s for r in runs if r.finish_s is not None), default=first_submit)
    makespan = last_finish - first_submit
    admission: dict[str, list[float]] = {w.name: [] for w in KUEUE_BASELINE_CLASSES}
    for r in runs:
        if r.first_start_s is not None and r.job.priority_class in admission:
            admission[r.job.priority_class].append(r.first_start_s - r.job.submit_s)
    return {
        "makespan_s": round(makespan, 3),
        "time_to_admission_s": {
            name: round(sum(waits) / len(waits), 3) if waits else None for name, waits in admission.items()
        },
        "quota_usage": round(held_cpu_s / (capacity_cpus * makespan), 4) if makespan > 0 else 0.0,
        "capacity_bound_s": round(
            sum(r.job.duration_s * r.job.resources.cpu_milli / 1000 for r in runs) / capacity_cpus, 3
        ),
        "unfinished": sum(1 for r in runs if r.finish_s is None),
        "preemptions": sum(r.preemptions for r in runs),
    }
