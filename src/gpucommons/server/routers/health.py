"""`/healthz` (open, for load balancers) and `/metrics` (Prometheus text format).

`/metrics` labels GPU use by team, so it needs a token that may read every team's usage (a platform
admin's or finance's): Prometheus sends it with `authorization: {credentials_file: ...}`.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from gpucommons import __version__
from gpucommons.api import schemas
from gpucommons.domain.election import Role
from gpucommons.identity.authz import Action, authorize
from gpucommons.server.deps import ContextDep, CurrentPrincipal
from gpucommons.server.services.convert import utc_or_none

router = APIRouter(tags=["health"])


#: A stall is judged against at least this many scheduler ticks (a healthy scheduler cycles each tick).
STALL_TICKS = 4


def stalled_for(
    last_cycle_at: float | None, leader_since: float | None, now: float, limit_s: float
) -> float | None:
    """Seconds since the scheduler last showed progress, when more than `limit_s`; else None.

    Progress is its last finished cycle, or becoming the leader (a leader's first cycle comes after
    its recovery, and a follower's mirrored cycles say nothing of the scheduler it now runs). With
    neither (a process whose scheduler is driven by hand) there is nothing to judge."""
    marks = [t for t in (last_cycle_at, leader_since) if t is not None]
    if not marks:
        return None
    age = now - max(marks)
    return age if age > limit_s else None


@router.get(
    "/healthz",
    response_model=schemas.Health,
    responses={503: {"model": schemas.Health, "description": "This process does not do its part (`detail`)"}},
)
def healthz(ctx: ContextDep, response: Response) -> schemas.Health:
    """Ok when this process does its part: a leader runs its scheduler and that scheduler finishes
    cycles, a follower runs its election. 503 when it does not (a liveness probe should restart it),
    and `degraded` with 200 while a new leader's scheduler has not started yet (it recovers first)."""
    sched, election, role = ctx.scheduler, ctx.election, ctx.role
    settings = ctx.settings
    scheduler = "running" if sched.running else "stopped"
    status, detail, code = "ok", None, 200
    if election is not None and not election.running:
        status, detail, code = "degraded", "the election has stopped", 503
    elif role is Role.LEADER and (election is not None or sched.running):
        limit = max(settings.scheduler_stall_s, STALL_TICKS * settings.scheduler_tick_s)
        since = election.leader_since if election is not None else None
        age = stalled_for(sched.last_cycle_at, since, ctx.clock.now(), limit)
        if age is not None:
            scheduler = "stalled" if sched.running else "stopped"
            if sched.last_cycle_at is not None and (since is None or sched.last_cycle_at >= since):
                what = f"last cycle {age:.0f} s ago"
            else:
                what = f"no cycle in the {age:.0f} s since this process became the leader"
            status, detail, code = "degraded", f"scheduler {scheduler}: {what} (limit {limit:g} s)", 503
        elif not sched.running:
            status, detail = "degraded", "the scheduler has not started yet"
    elif role is Role.LEADER and settings.run_scheduler:
        status, detail = "degraded", "the scheduler is not running"
    response.status_code = code
    return schemas.Health(
        status=status,
        version=__version__,
        scheduler=scheduler,
        executor=ctx.executor_name,
        last_cycle_at=utc_or_none(sched.last_cycle_at),
        role=role.value,
        leader_since=utc_or_none(election.leader_since if election is not None else None),
        detail=detail,
    )


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
def metrics(ctx: ContextDep, who: CurrentPrincipal) -> Response:
    authorize(who, Action.USAGE_READ)
    return Response(ctx.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")
