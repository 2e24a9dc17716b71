"""Builders for simulator tests: small policies and traces that a person can check by hand."""

from __future__ import annotations

from gpucommons.domain import (
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
from gpucommons.domain.resources import ALL_UNLIMITED
from gpucommons.sim.jobs import SimJob


def team(
    name: str,
    gpus: int,
    *,
    borrow_limit: int | None = None,
    lend_limit: int | None = None,
    reclaim: ReclaimPolicy = ReclaimPolicy.ANY,
    within_team: WithinTeamPolicy = WithinTeamPolicy.LOWER_PRIORITY,
    pool: str = "gpu",
) -> Team:
    """A team with a GPU quota in one pool; limits left out are unlimited."""
    return Team(
        name=name,
        quotas=(
            Quota(
                pool=pool,
                nominal=Resources(gpus=gpus),
                borrow_limit=ALL_UNLIMITED if borrow_limit is None else Resources(gpus=borrow_limit),
                lend_limit=ALL_UNLIMITED if lend_limit is None else Resources(gpus=lend_limit),
            ),
        ),
        preemption=PreemptionPolicy(reclaim=reclaim, within_team=within_team),
    )


def policy(
    *teams: Team,
    nodes: int = 1,
    gpus_per_node: int = 8,
    grace_period_s: int = 0,
    classes: tuple[PriorityClass, ...] | None = None,
) -> Policy:
    """One pool `gpu`; classes `high` (1000) and `low` (100, the default) with the given grace period."""
    return Policy(
        cluster_name="test",
        pools=(Pool("gpu", gpu_type="T4", nodes=nodes, gpus_per_node=gpus_per_node),),
        priority_classes=classes
        or (
            PriorityClass("high", 1000, grace_period_s=grace_period_s, min_runtime_s=0),
            PriorityClass("low", 100, grace_period_s=grace_period_s, min_runtime_s=0),
        ),
        default_priority_class="low",
        teams=teams,
    )


def job(
    job_id: str,
    team: str,
    submit_s: float,
    duration_s: float,
    gpus: int,
    *,
    priority: str | None = None,
    checkpoint_interval_s: float | None = None,
    pool: str | None = None,
) -> SimJob:
    return SimJob(
        job_id=job_id,
        team=team,
        submit_s=submit_s,
        duration_s=duration_s,
        resources=Resources(gpus=gpus),
        priority_class=priority,
        pool=pool,
        checkpoint_interval_s=checkpoint_interval_s,
    )
