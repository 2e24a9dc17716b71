"""`/api/v1/teams`, `/api/v1/queue`, `/api/v1/usage`, `/api/v1/policy`."""

from __future__ import annotations

import io
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from pydantic import TypeAdapter

from gpucommons.api import schemas
from gpucommons.api.errors import Unavailable
from gpucommons.api.fields import INT32_MAX, Instant
from gpucommons.backends.ports import BackendUnavailable
from gpucommons.identity.authz import Action, authorize, visible_teams
from gpucommons.ledger.csv_io import write_usage_csv
from gpucommons.ledger.interval import UsageInterval
from gpucommons.server import views
from gpucommons.server.auth.audit import audit_note
from gpucommons.server.deps import ContextDep, CurrentPrincipal
from gpucommons.server.routers.caching import (
    NOT_MODIFIED,
    json_answer,
    json_bytes,
    link_header,
    not_modified,
    query_string,
)
from gpucommons.server.routers.queue_answers import QueueAnswersDep
from gpucommons.server.services import ledger, policies
from gpucommons.server.workers.commands import ApplyPolicy

router = APIRouter(prefix="/api/v1", tags=["cluster"])

TeamFilter = Annotated[str | None, Query(max_length=63)]


_TEAMS = TypeAdapter(list[schemas.TeamSummary])
_USAGE = TypeAdapter(list[schemas.UsageInterval])


@router.get("/teams", response_model=list[schemas.TeamSummary], responses=NOT_MODIFIED)
def teams(request: Request, ctx: ContextDep, who: CurrentPrincipal) -> Response:
    """Each team's quota, use, borrowing and queue (only the teams the caller may see)."""
    out = views.teams(ctx.scheduler, visible_teams(who, ctx.policies.policy, Action.TEAM_READ))
    return json_answer(request, _TEAMS, out)


@router.get("/queue", response_model=list[schemas.QueueEntry], responses=NOT_MODIFIED)
def queue(
    request: Request,
    ctx: ContextDep,
    who: CurrentPrincipal,
    answers: QueueAnswersDep,
    team: TeamFilter = None,
    limit: Annotated[
        int | None, Query(ge=1, le=10_000, description="At most this many entries (default: all)")
    ] = None,
    after: Annotated[
        int | None,
        Query(
            ge=0,
            le=INT32_MAX,
            description="Only entries placed after this position: the previous page's "
            "`Link: rel=next` or `X-Next-Cursor`",
        ),
    ] = None,
) -> Response:
    """Pending tasks in the order the engine considers them, each with why it waits.

    The ETag is weak: it leaves out `waiting_seconds`, which grows with every poll, so a queue whose
    order and reasons did not change answers `304`; ages come from `queued_at`. The answer is
    rendered once per published view and visible set (`routers.queue_answers`). With `limit` or
    `after`, a page of it: its own ETag, and `Link: rel=next` / `X-Next-Cursor` when more follow."""
    visible = visible_teams(who, ctx.policies.policy)
    if team is not None:
        visible = visible & {team}
    headers: dict[str, str] = {}
    if limit is None and after is None:
        answer = answers.answer(ctx.scheduler, visible, ctx.db)
    else:
        size = limit or 10_000
        answer, cursor = answers.page(ctx.scheduler, visible, ctx.db, after, size)
        if cursor is not None:
            params = [("after", str(cursor)), ("limit", str(size))]
            params += [("team", team)] if team else []
            headers = {
                "Link": link_header(f"{request.url.path}?{query_string(params)}", "next"),
                "X-Next-Cursor": str(cursor),
            }
    unchanged = not_modified(request, answer.etag, headers)  # before the body is assembled
    if unchanged is not None:
        return unchanged
    return json_bytes(answer.body(ctx.clock.now()), answer.etag, headers)


def _intervals(
    ctx: ContextDep, who: CurrentPrincipal, start: datetime | None, end: datetime | None, team: str | None
) -> list[UsageInterval]:
    visible = visible_teams(who, ctx.policies.policy, Action.USAGE_READ)
    if team is not None:
        authorize(who, Action.USAGE_READ, team)
        visible = visible & {team}
    with ctx.db.session() as session:
        return ledger.usage_intervals(
            session,
            visible,
            start.timestamp() if start else None,
            end.timestamp() if end else None,
            ctx.clock.now(),
        )


FromQ = Annotated[
    Instant | None, Query(alias="from", description="Start of the window (ISO-8601; UTC without an offset)")
]
ToQ = Annotated[Instant | None, Query(alias="to", description="End of the window, exclusive (ISO-8601)")]


@router.get("/usage", response_model=list[schemas.UsageInterval], responses=NOT_MODIFIED)
def usage(
    request: Request,
    ctx: ContextDep,
    who: CurrentPrincipal,
    start: FromQ = None,
    end: ToQ = None,
    team: TeamFilter = None,
) -> Response:
    """Ledger intervals overlapping the window, cut at its edges; open ones end now (`running`)."""
    out = [
        schemas.UsageInterval(
            task_id=i.task_id,
            team=i.team,
            pool=i.pool,
            gpus=i.gpus,
            start=i.start,
            end=i.end,
            priority=i.priority,
            borrowed_gpus=i.borrowed_gpus,
            end_reason=i.end_reason.value,
        )
        for i in _intervals(ctx, who, start, end, team)
    ]
    return json_answer(request, _USAGE, out)


@router.get("/usage.csv", response_class=Response, responses={200: {"content": {"text/csv": {}}}})
def usage_csv(
    ctx: ContextDep, who: CurrentPrincipal, start: FromQ = None, end: ToQ = None, team: TeamFilter = None
) -> Response:
    """The same intervals as the usage ledger CSV (docs/design.md, contract 4; `commons usage export`)."""
    buffer = io.StringIO()
    write_usage_csv(_intervals(ctx, who, start, end, team), buffer)
    return Response(buffer.getvalue(), media_type="text/csv; charset=utf-8")


@router.get("/policy", response_model=schemas.PolicyInfo)
def get_policy(ctx: ContextDep, who: CurrentPrincipal) -> schemas.PolicyInfo:
    authorize(who, Action.POLICY_READ)
    with ctx.db.session() as session:
        row = policies.current(session)
        assert row is not None  # the server does not start without one
        return policies.info(row, ctx.policies.policy, with_text=who.platform_admin)


@router.put("/policy", response_model=schemas.PolicyInfo)
def apply_policy(
    body: schemas.PolicyApply, request: Request, ctx: ContextDep, who: CurrentPrincipal
) -> schemas.PolicyInfo:
    """Validate and apply a policy; running tasks keep running, the next cycle uses the new quotas."""
    audit_note(request, "policy.apply", dry_run=body.dry_run)
    authorize(who, Action.POLICY_APPLY)
    command = ApplyPolicy(body.text, who.subject, ctx.clock.now(), body.dry_run, ctx.policies.replace)
    try:
        return ctx.scheduler.desk.execute(command)
    except BackendUnavailable as exc:  # the cluster refused it: the stored policy stays in force
        raise Unavailable(str(exc)) from None
