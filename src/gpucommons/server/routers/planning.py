"""`/api/v1/planning/runs`: replays of a past month under a proposed policy (or the quota advisor's),
run in the background, and the latest stored runs.

Reading runs is for those who may read every team's usage (platform admins and finance: a replay
shows every team's waits); starting one is `planning.run` (platform admins).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import APIRouter, FastAPI, Path, Request

from gpucommons.api import history as wire
from gpucommons.identity.authz import Action, authorize
from gpucommons.server.auth.audit import audit_note
from gpucommons.server.deps import ContextDep, CurrentPrincipal
from gpucommons.server.routers.responses import errors
from gpucommons.server.services import planning_runs
from gpucommons.server.services.planning_runs import PlanningRunner


@asynccontextmanager
async def _runner(app: FastAPI) -> AsyncIterator[None]:
    ctx = app.state.commons
    if ctx.election is None:  # one process, nothing elected: runs are worked off here, as created
        planning_runs.fail_stale(ctx.db, ctx.clock.now())
    runner = PlanningRunner(
        ctx.db,
        lambda: (ctx.policies.policy, ctx.policies.version),
        ctx.clock,
        local=ctx.election is None,
    )
    app.state.planning_runner = runner
    ctx.add_duty("the planning runner", runner.lead, runner.stop)
    try:
        yield
    finally:
        runner.stop()


router = APIRouter(prefix="/api/v1/planning", tags=["planning"], lifespan=_runner)


def runner_of(request: Request) -> PlanningRunner:
    runner = getattr(request.app.state, "planning_runner", None)
    if not isinstance(runner, PlanningRunner):  # an app used without its lifespan (a bare test client)
        ctx = request.app.state.commons
        runner = PlanningRunner(ctx.db, lambda: (ctx.policies.policy, ctx.policies.version), ctx.clock)
        request.app.state.planning_runner = runner
    return runner


@router.get("/runs", response_model=list[wire.PlanningRun], responses=errors(401, 403))
def list_runs(ctx: ContextDep, who: CurrentPrincipal) -> list[wire.PlanningRun]:
    """The latest runs, newest first (with their progress while they run)."""
    authorize(who, Action.USAGE_READ)
    return planning_runs.latest(ctx.db)


@router.get("/runs/{run_id}", response_model=wire.PlanningRun, responses=errors(401, 403, 404, 422))
def get_run(
    run_id: Annotated[str, Path(max_length=32)], ctx: ContextDep, who: CurrentPrincipal
) -> wire.PlanningRun:
    authorize(who, Action.USAGE_READ)
    return planning_runs.get(ctx.db, run_id)


@router.post("/runs", status_code=202, response_model=wire.PlanningRun, responses=errors(400, 401, 403, 422))
def create_run(
    body: wire.PlanningRunCreate, request: Request, ctx: ContextDep, who: CurrentPrincipal
) -> wire.PlanningRun:
    """Start a replay (202: it runs in the background; poll `GET /planning/runs/{id}` for progress)."""
    audit_note(request, Action.PLANNING_RUN, kind=body.kind, month=body.month)
    authorize(who, Action.PLANNING_RUN)
    return runner_of(request).create(body, who.subject)
