"""`/api/v1/tasks`: submit, list, get, cancel, checkpoint, events, attempts, logs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import AfterValidator

from gpucommons.api import schemas
from gpucommons.api.errors import BadRequest, CommonsError, NotFound
from gpucommons.api.fields import INT32_MAX
from gpucommons.backends.ports import Admitter
from gpucommons.domain.election import Sharing
from gpucommons.domain.task import TaskState
from gpucommons.identity.authz import Action, authorize
from gpucommons.server.auth import current_principal
from gpucommons.server.auth.audit import audit_event, audit_note, audit_recorded
from gpucommons.server.context import ServerContext
from gpucommons.server.deps import ContextDep, CurrentPrincipal, bearer_token
from gpucommons.server.group_commit import Staged
from gpucommons.server.routers.caching import NOT_MODIFIED, body_answer, link_header, query_string
from gpucommons.server.services import convert, task_listing
from gpucommons.server.services import tasks as service
from gpucommons.server.views import WaitingMessages
from gpucommons.server.workers.commands import Cancel, RecordCheckpoint
from gpucommons.store.models import TaskRow

router = APIRouter(prefix="/api/v1/tasks", tags=["tasks"])

StateName = Annotated[
    str, Query(pattern="^(pending|admitted|running|preempting|succeeded|failed|cancelled)$")
]


@router.post("", status_code=201, response_model=schemas.Task)
async def submit(
    body: schemas.TaskSubmit, request: Request, ctx: ContextDep, who: CurrentPrincipal
) -> schemas.Task:
    """Async: the row is stored by the group commit (`server.group_commit`) with many others, and
    this waits for that commit on the event loop instead of holding a worker thread."""
    audit_note(request, "task.submit", team=body.team)
    _require_image(ctx, body)
    now = ctx.clock.now()

    def prepare() -> Staged[schemas.Task]:
        accepted = service.accept(ctx.policies.policy, body, who, now)

        def build(numbers: list[int]) -> tuple[list[list[object]], schemas.Task]:
            row, event = service.submission_rows(accepted, numbers[0])
            out = convert.task(row)
            audit_note(request, "task.submit", team=out.team, target=out.id)
            return [[row], [event, audit_event(request, 201)]], out

        return Staged(1, build)

    out = await asyncio.wrap_future(ctx.submissions.stage(prepare))
    audit_recorded(request, 201)
    ctx.scheduler.task_submitted(out.id)
    return out


@router.post("/batch", status_code=201, response_model=list[schemas.Task])
async def submit_batch(
    body: schemas.TaskSubmitBatch, request: Request, ctx: ContextDep, who: CurrentPrincipal
) -> list[schemas.Task]:
    """Submit up to 1,000 tasks in one transaction: all are queued, or none (the error names the
    index of the refused one in `details.index`)."""
    audit_note(request, "task.submit", count=len(body.tasks))
    now = ctx.clock.now()

    def prepare() -> Staged[list[schemas.Task]]:
        accepted = []
        policy = ctx.policies.policy
        for index, item in enumerate(body.tasks):
            try:
                _require_image(ctx, item)
                accepted.append(service.accept(policy, item, who, now))
            except CommonsError as exc:
                exc.details["index"] = index
                exc.message = f"tasks[{index}]: {exc.message}"
                raise

        def build(numbers: list[int]) -> tuple[list[list[object]], list[schemas.Task]]:
            pairs = [service.submission_rows(a, n) for a, n in zip(accepted, numbers, strict=True)]
            events: list[object] = [event for _, event in pairs]
            return [[row for row, _ in pairs], [*events, audit_event(request, 201)]], [
                convert.task(row) for row, _ in pairs
            ]

        return Staged(len(accepted), build)

    out = await asyncio.wrap_future(ctx.submissions.stage(prepare))
    audit_recorded(request, 201)
    for task in out:
        ctx.scheduler.task_submitted(task.id)
    return out


def _cursor(value: str | None) -> str | None:
    """A cursor is a task's submission number, which fits its integer column: a larger one was never
    given out (and PostgreSQL would refuse to compare it with the column)."""
    if value is not None and int(value) > INT32_MAX:
        raise ValueError(f"not a cursor of this server: task numbers end at {INT32_MAX}")
    return value


def _require_image(ctx: ServerContext, body: schemas.TaskSubmit) -> None:
    """On a cluster backend a task runs in a container: it needs an image (its own or the default)."""
    if ctx.traits.admits is Admitter.CLUSTER and not (body.image or ctx.settings.default_image):
        raise BadRequest(
            f"tasks on {ctx.traits.name} run in containers: give the task an image (--image in the "
            "CLI, `image` in the API), or start the server with a default image (--image)",
            {"field": "image"},
        )


@router.get("", response_model=list[schemas.Task], responses=NOT_MODIFIED)
def list_tasks(
    request: Request,
    ctx: ContextDep,
    who: CurrentPrincipal,
    team: Annotated[str | None, Query(max_length=63)] = None,
    state: Annotated[list[StateName] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 500,
    after: Annotated[
        str | None,
        Query(
            pattern="^[0-9]{1,18}$",
            description="The cursor of the previous page (its `Link: rel=next` or `X-Next-Cursor`)",
        ),
        AfterValidator(_cursor),
    ] = None,
) -> Response:
    """Newest first. When more tasks follow, the answer's `Link` header (`rel="next"`) and
    `X-Next-Cursor` name the next page; the body stays a plain list."""
    with ctx.db.session() as session:
        rows = service.list_tasks(
            session, ctx.policies.policy, who, team, state or (), limit + 1, int(after) if after else None
        )
    headers = {}
    if len(rows) > limit:
        cursor = str(rows[limit - 1].seq)
        params = [("after", cursor), ("limit", str(limit))]
        params += [("team", team)] if team else []
        params += [("state", s) for s in state or ()]
        headers = {
            "Link": link_header(f"{request.url.path}?{query_string(params)}", "next"),
            "X-Next-Cursor": cursor,
        }
    published = ctx.scheduler.view
    waiting = _waiting(request).of(published)
    body = task_listing.render(rows[:limit], published.usage.borrowed_by_task, waiting)
    return body_answer(request, body, headers=headers)


def _waiting(request: Request) -> WaitingMessages:
    """The app's pending tasks' reasons, resolved once per published view (`create_app`)."""
    waiting = request.app.state.waiting_messages
    assert isinstance(waiting, WaitingMessages)
    return waiting


@router.get("/{task_id}", response_model=schemas.Task)
def get_task(task_id: str, request: Request, ctx: ContextDep, who: CurrentPrincipal) -> schemas.Task:
    published = ctx.scheduler.view
    with ctx.db.session() as session:
        row = service.get_visible(session, ctx.policies.policy, task_id, who)
        return convert.task(row, published.usage.borrowed_by_task, _waiting(request).of(published))


@router.post("/{task_id}/cancel", response_model=schemas.Task)
def cancel(task_id: str, request: Request, ctx: ContextDep, who: CurrentPrincipal) -> schemas.Task:
    audit_note(request, "task.cancel", target=task_id)
    with ctx.db.session() as session:
        row = service.get_visible(session, ctx.policies.policy, task_id, who, Action.TASK_CANCEL)
        audit_note(request, "task.cancel", team=row.team, target=task_id)
    # The worker applies it under its own lock and transaction (`workers.commands`).
    command = Cancel(task_id, who, ctx.clock.now(), lock_row=ctx.sharing is Sharing.SHARED)
    return ctx.scheduler.desk.execute(command)


@router.post("/{task_id}/checkpoint", response_model=schemas.Task)
def checkpoint(
    task_id: str, request: Request, ctx: ContextDep, body: schemas.CheckpointReport | None = None
) -> schemas.Task:
    """Report a saved checkpoint. The task itself may call this with the token in its environment."""
    token = bearer_token(request)
    with ctx.db.session() as session:
        row = session.get(TaskRow, task_id)
        if row is None or not service.is_task_token(row, token):
            creds = HTTPAuthorizationCredentials(scheme="Bearer", credentials=token) if token else None
            who = current_principal(request, creds)
            row = service.get_visible(session, ctx.policies.policy, task_id, who, Action.TASK_CHECKPOINT)
        audit_note(request, "task.checkpoint", team=row.team, target=task_id)
    report = body or schemas.CheckpointReport()
    return ctx.scheduler.desk.execute(RecordCheckpoint(task_id, report, ctx.clock.now()))


@router.get("/{task_id}/events", response_model=list[schemas.TaskEvent])
def events(
    task_id: str,
    ctx: ContextDep,
    who: CurrentPrincipal,
    after: Annotated[int, Query(ge=0, le=INT32_MAX, description="Only events with a larger id")] = 0,
) -> list[schemas.TaskEvent]:
    with ctx.db.session() as session:
        row = service.get_visible(session, ctx.policies.policy, task_id, who)
        authorize(who, Action.EVENTS_READ, row.team)
        return [convert.event(e) for e in service.events(session, task_id, after)]


@router.get("/{task_id}/attempts", response_model=list[schemas.TaskAttempt])
def attempts(task_id: str, ctx: ContextDep, who: CurrentPrincipal) -> list[schemas.TaskAttempt]:
    """Every time the task held resources, oldest first: where it ran, how it was stopped and ended."""
    with ctx.db.session() as session:
        row = service.get_visible(session, ctx.policies.policy, task_id, who)
        authorize(who, Action.EVENTS_READ, row.team)
        return [convert.attempt(n, a) for n, a in enumerate(service.attempts(session, task_id), start=1)]


@router.get(
    "/{task_id}/logs", response_class=StreamingResponse, responses={200: {"content": {"text/plain": {}}}}
)
def logs(
    task_id: str,
    ctx: ContextDep,
    who: CurrentPrincipal,
    follow: bool = False,
    offset: Annotated[int, Query(ge=0, le=1 << 50)] = 0,
) -> StreamingResponse:
    """The task's output (every attempt, in order). With `follow`, streams until the task ends."""
    with ctx.db.session() as session:
        row = service.get_visible(session, ctx.policies.policy, task_id, who)
        authorize(who, Action.LOGS_READ, row.team)
    path = ctx.scheduler.paths.log(task_id)
    worker = ctx.scheduler

    def ended() -> bool:
        with ctx.db.session() as session:
            current = session.get(TaskRow, task_id)
            if current is None:
                raise NotFound(f"no task {task_id!r}")
            return TaskState(current.state).is_terminal

    async def stream() -> AsyncIterator[bytes]:
        position = offset
        while True:
            finished = await asyncio.to_thread(ended) if follow else True
            await asyncio.to_thread(worker.refresh_log, task_id)
            chunk = await asyncio.to_thread(_read_from, path, position)
            while chunk:
                position += len(chunk)
                yield chunk
                chunk = await asyncio.to_thread(_read_from, path, position)
            if finished:
                return
            await asyncio.sleep(0.25)

    return StreamingResponse(stream(), media_type="text/plain; charset=utf-8")


def _read_from(path: Path, position: int, size: int = 1 << 16) -> bytes:
    try:
        with path.open("rb") as f:
            f.seek(position)
            return f.read(size)
    except FileNotFoundError:
        return b""
