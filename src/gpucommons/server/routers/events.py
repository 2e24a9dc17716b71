"""`GET /api/v1/events`: the task events a caller may see, as server-sent events.

What the dashboard and `commons tasks --watch` follow instead of polling the task list. Each message
is one task event: `id:` its id, `event:` its kind, `data:` a `StreamEvent` (a `TaskEvent` and the
task's team) as JSON. The stream waits without a database session or any lock of the scheduler's:
one watcher per process (`server.event_feed`) reads new ids and wakes the streams, each of which
then reads its caller's events in a short transaction. Every `events_heartbeat_s` the stream sends
`: keep-alive` and checks its credential again (a revoked token, or roles lost in the directory,
end it or narrow it at once); after `events_max_stream_s` (or the caller's `timeout`) it ends, and
SSE clients reconnect by themselves with `Last-Event-ID`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import AfterValidator
from sqlalchemy.exc import SQLAlchemyError

from gpucommons.api import schemas, sse
from gpucommons.api.fields import INT32_MAX
from gpucommons.identity.authz import Action, visible_teams
from gpucommons.identity.principal import Principal
from gpucommons.server.auth.credentials import resolve_token
from gpucommons.server.auth.deps import bearer_or_cookie
from gpucommons.server.context import ServerContext
from gpucommons.server.deps import ContextDep, CurrentPrincipal
from gpucommons.server.services import convert
from gpucommons.server.services import tasks as service

router = APIRouter(prefix="/api/v1", tags=["events"])

#: Events read per transaction while a stream catches up.
PAGE = 500
#: What a reconnecting client waits (`retry:`, milliseconds).
RETRY_MS = 1000

EVENT_STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "description": (
            "A `text/event-stream` (server-sent events). Each message: `id:` the event's id, `event:` "
            "its kind, `data:` one `StreamEvent` as JSON. Comment lines (`: keep-alive`) are "
            "heartbeats. The stream ends after `timeout` or the server's maximum; reconnect with "
            "`Last-Event-ID`."
        ),
        # Before OpenAPI 3.2 (`itemSchema`), a stream's `schema` describes each of its events.
        "content": {
            "text/event-stream": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "pattern": "^[0-9]+$"},
                        "event": {"type": "string"},
                        "data": {
                            "type": "string",
                            "contentMediaType": "application/json",
                            "contentSchema": schemas.StreamEvent.model_json_schema(mode="serialization"),
                        },
                        "retry": {"type": "integer", "minimum": 0},
                    },
                }
            }
        },
    }
}


def _event_id(value: str | None) -> str | None:
    """An event id fits its integer column: a larger one was never given out."""
    if value is not None and int(value) > INT32_MAX:
        raise ValueError(f"not an event id of this server: event ids end at {INT32_MAX}")
    return value


def readable_teams(who: Principal, ctx: ServerContext, team: str | None) -> frozenset[str]:
    """Teams whose task events `who` may see (the task list's rule, and `events.read`), narrowed to
    `team` when given (a team the caller may not see gives an empty stream, as the list does)."""
    policy = ctx.policies.policy
    teams = visible_teams(who, policy, Action.TASK_READ) & visible_teams(who, policy, Action.EVENTS_READ)
    if team is not None:
        teams &= {team}
    return teams


@router.get("/events", response_class=StreamingResponse, responses=EVENT_STREAM)
async def events(
    request: Request,
    ctx: ContextDep,
    who: CurrentPrincipal,
    team: Annotated[str | None, Query(max_length=63, description="Only this team's events")] = None,
    after: Annotated[
        int | None,
        Query(ge=0, le=INT32_MAX, description="Start after this event id (default: only new events)"),
    ] = None,
    timeout: Annotated[
        float | None,
        Query(
            gt=0,
            le=86_400,
            description="End the stream after this many seconds (at most the server's maximum)",
        ),
    ] = None,
    last_event_id: Annotated[
        str | None,
        Header(
            alias="last-event-id",
            pattern="^[0-9]{1,10}$",
            description="The last event id received; a reconnecting SSE client sends it (wins over `after`)",
        ),
        AfterValidator(_event_id),
    ] = None,
) -> StreamingResponse:
    """Task events of the teams the caller may see, as they happen (server-sent events)."""
    feed = ctx.events
    settings = ctx.settings
    token = bearer_or_cookie(request) or ""
    resume = int(last_event_id) if last_event_id is not None else after
    lifetime = min(timeout or settings.events_max_stream_s, settings.events_max_stream_s)
    heartbeat = settings.events_heartbeat_s

    def read(cursor: int, up_to: int, teams: frozenset[str]) -> list[tuple[int, bytes]]:
        with ctx.db.session() as session:
            rows = service.events_of_teams(session, teams, cursor, up_to, PAGE)
            return [
                (
                    row.id,
                    sse.message(convert.stream_event(row, t).model_dump_json(), event=row.kind, id=row.id),
                )
                for row, t in rows
            ]

    def still_valid() -> Principal | None:
        with ctx.db.session() as session:
            again = resolve_token(session, token, ctx.policies.policy, time.time())
        return None if again is None or (again.scim and not again.platform_admin) else again

    async def stream() -> AsyncIterator[bytes]:
        try:
            async with contextlib.aclosing(follow()) as chunks:  # its `finally` runs when this one ends
                async for chunk in chunks:
                    yield chunk
        except SQLAlchemyError:
            # The answer's status is long sent: end it, and the client reconnects (its retry delay).
            yield sse.comment("the database is unavailable: reconnect")

    async def follow() -> AsyncGenerator[bytes]:
        loop = asyncio.get_running_loop()
        began = checked = loop.time()
        feed.open()
        try:
            horizon = await asyncio.to_thread(feed.start)
            cursor = horizon if resume is None else resume
            teams = readable_teams(who, ctx, team)
            yield sse.retry(RETRY_MS)
            while not feed.closed:
                up_to = feed.horizon
                page = await asyncio.to_thread(read, cursor, up_to, teams) if up_to > cursor else []
                for event_id, chunk in page:
                    yield chunk
                    cursor = event_id
                if len(page) == PAGE:
                    continue
                cursor = max(cursor, up_to)
                now = loop.time()
                if now - began >= lifetime:
                    return
                if now - checked >= heartbeat:
                    again = await asyncio.to_thread(still_valid)
                    if again is None:
                        yield sse.comment("the credential is no longer valid: the stream ends")
                        return
                    teams, checked = readable_teams(again, ctx, team), now
                    yield sse.comment("keep-alive")
                await feed.wait_past(cursor, min(checked + heartbeat, began + lifetime) - now)
        finally:
            feed.close_stream()

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        # No proxy may buffer or transform it (nginx reads X-Accel-Buffering).
        headers={"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"},
    )
