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


@router.get("/healthz", response_model=schemas.Health)
def healthz(ctx: ContextDep) -> schemas.Health:
    """Ok when this process does its part: a leader runs its scheduler, a follower its election."""
    sched = ctx.scheduler
    election = ctx.election
    role = ctx.role
    if election is None:
        alive = sched.running or not ctx.settings.run_scheduler
    elif role is Role.LEADER:
        alive = sched.running and election.running
    else:
        alive = election.running
    return schemas.Health(
        status="ok" if alive else "degraded",
        version=__version__,
        scheduler="running" if sched.running else "stopped",
        executor=ctx.executor_name,
        last_cycle_at=utc_or_none(sched.last_cycle_at),
        role=role.value,
        leader_since=utc_or_none(election.leader_since if election is not None else None),
    )


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
def metrics(ctx: ContextDep, who: CurrentPrincipal) -> Response:
    authorize(who, Action.USAGE_READ)
    return Response(ctx.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")
