"""Task use cases: submit, read, cancel, report a checkpoint.

Anything that changes a task holding (or about to hold) resources runs under the scheduler's lock,
so it never races the scheduling cycle; the scheduler is then woken to act on it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from gpucommons.api import schemas
from gpucommons.api.errors import Conflict, NotFound, ValidationFailed
from gpucommons.api.errors import Forbidden as ForbiddenError
from gpucommons.domain.model import Policy, Team
from gpucommons.domain.resources import Resources
from gpucommons.domain.task import TaskState
from gpucommons.identity.authz import Action, authorize, visible_teams
from gpucommons.identity.classes import class_denial
from gpucommons.identity.principal import Principal
from gpucommons.server.services import task_listing
from gpucommons.server.services.checkpoints import parse_checkpoint, require_declaration
from gpucommons.server.services.lifecycle import record_event, switch_task_state
from gpucommons.store.models import AttemptRow, TaskEventRow, TaskRow

LIVE_STATES = (TaskState.ADMITTED.value, TaskState.RUNNING.value, TaskState.PREEMPTING.value)


def _invalid(field: str, message: str) -> ValidationFailed:
    return ValidationFailed(message, {"errors": [{"field": field, "message": message}]})


def _check_fits_somewhere(policy: Policy, team: Team, pools: Sequence[str], want: Resources) -> None:
    """Refuse a request that no admission could ever satisfy (beyond capacity or the team's limit)."""
    limits = []
    for name in pools:
        quota = team.quota(name)
        if quota is None:
            continue
        most = quota.max_usage.min(policy.pool(name).capacity)
        if want.fits_in(most):
            return
        limits.append(f"{most.describe()} in {name}")
    raise _invalid(
        "gpus",
        f"team {team.name!r} may never hold {want.describe()}: the most it may hold is "
        + ("; ".join(limits) or "nothing (no quota in any pool)"),
    )


def submit(
    session: Session,
    policy: Policy,
    body: schemas.TaskSubmit,
    who: Principal,
    now: float,
    next_seq: Callable[[], int],
) -> TaskRow:
    """Check the request and store the task; its sequence number is taken only once it is accepted
    (`next_seq`, in this transaction), so refused submissions leave no gap."""
    accepted = accept(policy, body, who, now)
    row, event = submission_rows(accepted, next_seq())
    session.add(row)
    session.flush()  # the event row references the task
    session.add(event)
    return row


def accept(policy: Policy, body: schemas.TaskSubmit, who: Principal, now: float) -> dict[str, Any]:
    """Check the request against the policy and the caller's rights, without the store: the task's
    columns but its number (`submission_rows`), or the refusal. Group commit (`server.group_commit`)
    checks a whole batch this way before it takes their numbers and inserts them in bulk."""
    if not policy.has_team(body.team):
        raise _invalid("team", f"unknown team {body.team!r}; teams: {', '.join(policy.team_names)}")
    authorize(who, Action.TASK_SUBMIT, body.team)
    team = policy.team(body.team)
    try:
        pclass = policy.priority_class(body.priority)
    except KeyError:
        names = ", ".join(c.name for c in policy.priority_classes)
        raise _invalid("priority", f"unknown priority class {body.priority!r}; classes: {names}") from None
    denial = class_denial(who, pclass, team.name)
    if denial is not None:
        raise ForbiddenError(
            f"not allowed to {Action.TASK_SUBMIT.value} on team {team.name!r}: {denial}",
            {
                "action": Action.TASK_SUBMIT.value,
                "team": team.name,
                "priority_class": pclass.name,
                "teams": list(pclass.teams),
                "roles": list(pclass.roles),
            },
        )
    if body.pool is not None:
        if not policy.has_pool(body.pool):
            raise _invalid(
                "pool", f"unknown pool {body.pool!r}; pools: {', '.join(p.name for p in policy.pools)}"
            )
        if team.quota(body.pool) is None:
            raise _invalid("pool", f"team {team.name!r} has no quota in pool {body.pool!r}")
    want = Resources(body.gpus, body.cpu_milli, body.memory_mib)
    if not want.any_positive():
        raise _invalid("gpus", "a task must request at least one GPU, CPU or some memory")
    pools = [body.pool] if body.pool else [q.pool for q in team.quotas]
    _check_fits_somewhere(policy, team, pools, want)
    spec = parse_checkpoint(body.checkpoint)
    require_declaration(spec, pclass)
    return {
        "id": "t" + secrets.token_hex(5),
        "name": body.name or body.command[0].rsplit("/", 1)[-1][:200],
        "team": team.name,
        "state": TaskState.PENDING.value,
        "priority_class": pclass.name,
        "priority_value": pclass.value,
        "command": list(body.command),
        "gpus": body.gpus,
        "cpu_milli": body.cpu_milli,
        "memory_mib": body.memory_mib,
        "pool_request": body.pool,
        "checkpoint_mode": spec.mode.value,
        "checkpoint_interval_s": spec.interval_s,
        "image": body.image,
        "submitted_by": who.subject,
        "submitted_at": now,
        "queued_at": now,
        "restart_count": 0,
        "preemptions": 0,
        "cancel_requested": False,
        "lost_gpu_seconds": 0.0,
        "message": "waiting for the scheduler",
        "origin": "commons",  # the column's default, set here: the answer is built before the insert
    }


def submission_rows(accepted: dict[str, Any], seq: int) -> tuple[TaskRow, TaskEventRow]:
    """A new task's row, numbered `seq`, and its "submitted" event: fresh objects at each call (a
    batch stored again after a number collision builds them again)."""
    row = TaskRow(seq=seq, **accepted)
    event = TaskEventRow(
        task_id=row.id,
        at=row.submitted_at,
        kind="submitted",
        from_state=None,
        to_state=TaskState.PENDING.value,
        message=f"submitted by {row.submitted_by}",
    )
    return row, event


def get_visible(
    session: Session, policy: Policy, task_id: str, who: Principal, action: Action = Action.TASK_READ
) -> TaskRow:
    """The task, or NotFound — also when it exists but belongs to a team the caller may not see."""
    row = session.get(TaskRow, task_id)
    if row is None or row.team not in visible_teams(who, policy, Action.TASK_READ):
        raise NotFound(f"no task {task_id!r}")
    authorize(who, action, row.team, owner=row.submitted_by)
    return row


def list_tasks(
    session: Session,
    policy: Policy,
    who: Principal,
    team: str | None = None,
    states: Sequence[str] = (),
    limit: int = 500,
    before_seq: int | None = None,
) -> list[Row[Any]]:
    """Newest first, as rows of `task_listing.listing` (for `task_listing.render`); `before_seq`
    continues a listing after the row with that seq (keyset paging). Only the teams `who` may see."""
    teams = visible_teams(who, policy)
    if team is not None:
        if team not in teams:
            return []
        teams = frozenset({team})
    query = task_listing.listing().where(TaskRow.team.in_(sorted(teams)))
    if states:
        query = query.where(TaskRow.state.in_(list(states)))
    if before_seq is not None:
        query = query.where(TaskRow.seq < before_seq)
    query = query.order_by(TaskRow.seq.desc()).limit(limit)
    return list(session.execute(query))


def attempts(session: Session, task_id: str) -> list[AttemptRow]:
    """The task's attempts, oldest first (ids rise with each admission)."""
    return list(
        session.scalars(select(AttemptRow).where(AttemptRow.task_id == task_id).order_by(AttemptRow.id))
    )


def events(session: Session, task_id: str, after_id: int = 0) -> list[TaskEventRow]:
    query = (
        select(TaskEventRow)
        .where(TaskEventRow.task_id == task_id, TaskEventRow.id > after_id)
        .order_by(TaskEventRow.id)
    )
    return list(session.scalars(query))


def events_of_teams(
    session: Session, teams: Iterable[str], after_id: int, up_to: int, limit: int
) -> list[tuple[TaskEventRow, str]]:
    """Events of the teams' tasks with `after_id < id <= up_to`, oldest first, with each task's team
    (what `GET /api/v1/events` sends)."""
    names = sorted(teams)
    if not names or up_to <= after_id:
        return []
    query = (
        select(TaskEventRow, TaskRow.team)
        .join(TaskRow, TaskRow.id == TaskEventRow.task_id)
        .where(TaskEventRow.id > after_id, TaskEventRow.id <= up_to, TaskRow.team.in_(names))
        .order_by(TaskEventRow.id)
        .limit(limit)
    )
    return [(event, team) for event, team in session.execute(query)]


def cancel(session: Session, row: TaskRow, who: Principal, now: float) -> None:
    """Pending tasks end at once; running ones are signalled by the scheduler and end when they exit."""
    state = TaskState(row.state)
    if state.is_terminal:
        raise Conflict(f"task {row.id} has already ended ({state.value})", {"state": state.value})
    if state is TaskState.PENDING:
        row.finished_at = now
        switch_task_state(session, row, TaskState.CANCELLED, now, f"cancelled by {who.subject}")
        return
    if not row.cancel_requested:
        row.cancel_requested = True
        record_event(session, row, "cancel_requested", now, f"cancel requested by {who.subject}")


def hash_task_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def is_task_token(row: TaskRow, token: str | None) -> bool:
    """True when `token` is the one handed to this task's current attempt."""
    if not token or not row.task_token_hash:
        return False
    return hmac.compare_digest(hash_task_token(token), row.task_token_hash)


def report_checkpoint(session: Session, row: TaskRow, body: schemas.CheckpointReport, now: float) -> None:
    # Admitted counts: the process may report before the server has recorded that it started.
    if row.state not in (TaskState.ADMITTED.value, TaskState.RUNNING.value, TaskState.PREEMPTING.value):
        raise Conflict(
            f"task {row.id} is {row.state}: only a running task can report a checkpoint", {"state": row.state}
        )
    row.last_checkpoint_at = now
    row.checkpoint_warned_at = None
    where = f" at {body.path}" if body.path else ""
    note = f" ({body.note})" if body.note else ""
    record_event(session, row, "checkpoint", now, f"checkpoint saved{where}{note}")
