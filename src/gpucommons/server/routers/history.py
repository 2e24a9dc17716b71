"""`/api/v1/history/gpus`, `/api/v1/history/waits`, `/api/v1/teams/{team}`, `/api/v1/tasks/{id}/timeline`.

Each filters by what the caller may see exactly as the rest of the API does: GPU history by
`usage.read`, waits by `team.read`, a team by `team.read` (its costs by `costs.read`), a task by
`task.read` (another team's task in it is named by its team only).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from gpucommons.api import history as wire
from gpucommons.api.errors import NotFound
from gpucommons.identity.authz import Action, authorize, visible_teams
from gpucommons.server import task_timeline, team_view
from gpucommons.server.deps import ContextDep, CurrentPrincipal
from gpucommons.server.routers.responses import errors
from gpucommons.server.services import history

router = APIRouter(prefix="/api/v1", tags=["history"])


def _shown(ctx: ContextDep, who: CurrentPrincipal, action: Action, team: str | None) -> frozenset[str]:
    """The teams the caller may see for `action`, narrowed to `team` (403 if that one is not theirs)."""
    visible = visible_teams(who, ctx.policies.policy, action)
    if team is None:
        return visible
    authorize(who, action, team)
    return visible & {team}


TeamName = Annotated[str, Path(max_length=63)]


@router.get("/history/gpus", response_model=wire.GpuHistory, responses=errors(401, 403, 422))
def gpu_history(
    ctx: ContextDep,
    who: CurrentPrincipal,
    window: Annotated[wire.Window, Query(description="24h, 7d or 30d")] = "24h",
    team: Annotated[str | None, Query(max_length=63)] = None,
) -> wire.GpuHistory:
    """GPUs each visible team held over the window (average per bucket, from the ledger), the part
    above its nominal quota, and the quota line (the policy in force at each time)."""
    visible = _shown(ctx, who, Action.USAGE_READ, team)
    with ctx.db.session() as session:
        return history.gpu_history(session, ctx.policies.policy, visible, window, ctx.clock.now())


@router.get("/history/waits", response_model=wire.WaitHistory, responses=errors(401, 403, 422))
def wait_history(
    ctx: ContextDep,
    who: CurrentPrincipal,
    days: Annotated[int, Query(ge=1, le=history.MAX_WAIT_DAYS)] = 14,
    team: Annotated[str | None, Query(max_length=63)] = None,
) -> wire.WaitHistory:
    """p50 / p95 of the time from entering the queue to admission, per visible team and UTC day."""
    visible = _shown(ctx, who, Action.TEAM_READ, team)
    with ctx.db.session() as session:
        return history.wait_history(session, visible, days, ctx.clock.now())


@router.get("/teams/{team}", response_model=wire.TeamDetail, responses=errors(401, 403, 404, 422))
def team_detail(team: TeamName, ctx: ContextDep, who: CurrentPrincipal) -> wire.TeamDetail:
    """One team: members, quota and limits, this month's use and cost against its budget (with the
    burn-down projection), and preemptions suffered and caused in the last 30 days."""
    if not ctx.scheduler.view.policy.has_team(team):
        raise NotFound(f"no team {team!r} in the policy", {"team": team})
    authorize(who, Action.TEAM_READ, team)
    return team_view.team_detail(ctx, who, team)


@router.get(
    "/tasks/{task_id}/timeline", response_model=wire.TaskTimeline, responses=errors(401, 403, 404, 422)
)
def timeline(
    task_id: Annotated[str, Path(max_length=64)], ctx: ContextDep, who: CurrentPrincipal
) -> wire.TaskTimeline:
    """The task's attempts (queued, admitted, running, preempted by whom, requeued) and, while it
    waits, an estimated start with its range."""
    return task_timeline.timeline(ctx, who, task_id)
