"""What every dashboard page needs before it shows anything: who the caller is and the cluster's shape.

`GET /ui/api/context` answers with the caller's roles and teams, the pools with their capacity and
cluster-wide GPUs used / borrowed / idle, and the priority classes. These are cluster-wide reads
(`cluster.read`: any signed-in person but a SCIM client); per-pool totals name no team and no task,
so a member learns how busy the cluster is without seeing whose tasks fill it. Everything team- or
task-specific the dashboard reads from the public API under `/api/v1`, filtered there.
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel

from gpucommons.domain.model import Policy
from gpucommons.identity.authz import Action, authorize, is_allowed
from gpucommons.identity.classes import usable_teams
from gpucommons.identity.principal import Principal
from gpucommons.server.metrics import GaugeSnapshot


class Caller(BaseModel):
    subject: str
    display_name: str
    platform_admin: bool
    finance: bool
    #: Teams the caller belongs to (as member or admin), sorted.
    teams: list[str]
    admin_of: list[str]


class PoolView(BaseModel):
    name: str
    gpu_type: str
    nodes: int
    gpus_per_node: int
    capacity_gpus: int
    used_gpus: int
    #: GPUs held above their team's nominal quota, summed over teams.
    borrowed_gpus: int
    #: GPUs no task holds.
    idle_gpus: int


class PriorityClassView(BaseModel):
    name: str
    value: int
    preemptible: bool
    checkpoint_required: bool
    #: The caller's teams whose tasks the caller may put in this class (the submit form offers the
    #: class only for them; `identity.classes`).
    teams: list[str] = []


class DashboardContext(BaseModel):
    cluster_name: str
    me: Caller
    #: Every team of the policy (names only; what the caller may see of each is the API's business).
    team_names: list[str]
    pools: list[PoolView]
    #: The classes the caller may use in at least one team, highest first.
    priority_classes: list[PriorityClassView]
    default_priority_class: str


def caller(principal: Principal) -> Caller:
    return Caller(
        subject=principal.subject,
        display_name=principal.display_name or principal.subject,
        platform_admin=principal.platform_admin,
        finance=principal.finance,
        teams=sorted(principal.member_of | principal.admin_of),
        admin_of=sorted(principal.admin_of),
    )


def pool_views(policy: Policy, gauges: GaugeSnapshot) -> list[PoolView]:
    """Per pool: capacity from the policy, used and borrowed summed over teams, idle from the engine."""
    used: dict[str, int] = defaultdict(int)
    borrowed: dict[str, int] = defaultdict(int)
    for g in gauges.team_pools:
        used[g.pool] += g.used
        borrowed[g.pool] += g.borrowed
    views = []
    for pool in policy.pools:
        capacity = pool.capacity.gpus
        idle = gauges.free_gpus.get(pool.name, max(0, capacity - used[pool.name]))
        views.append(
            PoolView(
                name=pool.name,
                gpu_type=pool.gpu_type,
                nodes=pool.nodes,
                gpus_per_node=pool.gpus_per_node,
                capacity_gpus=capacity,
                used_gpus=used[pool.name],
                borrowed_gpus=borrowed[pool.name],
                idle_gpus=idle,
            )
        )
    return views


def class_views(principal: Principal, policy: Policy) -> list[PriorityClassView]:
    """The classes the caller may use, each with the teams they may use it in (highest first)."""
    submit_to = [t for t in policy.team_names if is_allowed(principal, Action.TASK_SUBMIT, t)]
    views = []
    for c in sorted(policy.priority_classes, key=lambda c: -c.value):
        teams = usable_teams(principal, c, submit_to)
        if teams:
            views.append(
                PriorityClassView(
                    name=c.name,
                    value=c.value,
                    preemptible=c.preemptible,
                    checkpoint_required=c.checkpoint_required,
                    teams=teams,
                )
            )
    return views


def dashboard_context(principal: Principal, policy: Policy, gauges: GaugeSnapshot) -> DashboardContext:
    authorize(principal, Action.CLUSTER_READ)
    return DashboardContext(
        cluster_name=policy.cluster_name,
        me=caller(principal),
        team_names=list(policy.team_names),
        pools=pool_views(policy, gauges),
        priority_classes=class_views(principal, policy),
        default_priority_class=policy.default_priority_class,
    )
