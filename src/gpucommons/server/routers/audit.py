"""`/api/v1/audit`: the audit log, newest first (platform admins only)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request
from sqlalchemy import select

from gpucommons.api.fields import Instant
from gpucommons.api.identity import AuditEntry
from gpucommons.identity.authz import Action, authorize
from gpucommons.server.auth import CurrentPrincipal
from gpucommons.server.auth.deps import database
from gpucommons.store.identity_models import AuditEvent

router = APIRouter(prefix="/api/v1/audit", tags=["audit"])


def _entry(row: AuditEvent) -> AuditEntry:
    return AuditEntry(
        id=row.id,
        at=datetime.fromtimestamp(row.at, UTC),
        actor=row.actor,
        credential_id=row.credential_id,
        action=row.action,
        method=row.method,
        path=row.path,
        team=row.team,
        target=row.target,
        outcome=row.outcome,  # type: ignore[arg-type]
        status_code=row.status_code,
        remote_addr=row.remote_addr,
        details=row.details or {},
    )


@router.get("", response_model=list[AuditEntry])
def read_audit(
    request: Request,
    who: CurrentPrincipal,
    since: Annotated[Instant | None, Query(description="ISO-8601; UTC without an offset")] = None,
    until: Annotated[Instant | None, Query(description="ISO-8601, exclusive")] = None,
    actor: Annotated[str | None, Query(max_length=256)] = None,
    action: Annotated[
        str | None, Query(max_length=128, description="exact action, or a prefix ending in *")
    ] = None,
    outcome: Annotated[str | None, Query(pattern="^(ok|denied|error)$")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> list[AuditEntry]:
    authorize(who, Action.AUDIT_READ)
    stmt = select(AuditEvent).order_by(AuditEvent.at.desc(), AuditEvent.id.desc()).limit(limit)
    if since is not None:
        stmt = stmt.where(AuditEvent.at >= _epoch(since))
    if until is not None:
        stmt = stmt.where(AuditEvent.at < _epoch(until))
    if actor:
        stmt = stmt.where(AuditEvent.actor == actor)
    if action:
        stmt = stmt.where(
            AuditEvent.action.startswith(action[:-1]) if action.endswith("*") else AuditEvent.action == action
        )
    if outcome:
        stmt = stmt.where(AuditEvent.outcome == outcome)
    with database(request).session() as session:
        return [_entry(row) for row in session.scalars(stmt)]


def _epoch(t: datetime) -> float:
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()
