"""The audit log: every mutating request (POST, PUT, PATCH, DELETE) recorded after it is answered.

An ASGI middleware rather than a call in each route, so that no mutating route — present or future,
REST, SCIM or sign-in — can forget it, and refused attempts (401, 403) are recorded too. Per row:
who (the principal's subject and the credential id, or the token id presented if it was refused),
what (the route template, or the action a route names with `audit_note`), when, from where (the
client address as the server sees it; no proxy header is trusted), and the outcome (status code).

Routes may add detail: `audit_note(request, "token.create", team=..., target=..., role="scim")`.
Request bodies are never recorded (they may carry secrets or task commands).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
from fastapi import FastAPI, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gpucommons.identity.principal import Principal
from gpucommons.identity.tokens import parse_token
from gpucommons.store.db import Database
from gpucommons.store.identity_models import AuditEvent

log = logging.getLogger(__name__)

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: Requests that change nothing although they POST (reads with a body).
_READS_BY_POST = ("/.search",)
_NOTE_KEY = "audit_note"


@dataclass
class AuditNote:
    action: str
    team: str | None = None
    target: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def audit_note(
    request: Request, action: str, *, team: str | None = None, target: str | None = None, **details: Any
) -> None:
    """Name what this request does, for its audit row (optional; the route template is the default)."""
    setattr(request.state, _NOTE_KEY, AuditNote(action, team, target, details))


def outcome_of(status: int) -> str:
    if status in (401, 403):
        return "denied"
    return "ok" if status < 400 else "error"


def _presented_credential(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            parsed = parse_token(token.strip()) if scheme.lower() == "bearer" else None
            return parsed[0] if parsed else None
    return None


#: Largest answer body read for its `team` and `id` (a task, a token); bigger ones are not parsed.
_BODY_PEEK = 64 * 1024


def _answer_fields(body: bytes) -> tuple[str | None, str | None]:
    """`team` and `id` of a JSON object answer (what a task or a token answer names), if any."""
    if not body or len(body) > _BODY_PEEK:
        return None, None
    try:
        data = json.loads(body)
    except ValueError:
        return None, None
    if not isinstance(data, dict):
        return None, None
    team, ident = data.get("team"), data.get("id")
    return (team if isinstance(team, str) else None), (ident if isinstance(ident, str) else None)


def build_event(scope: Scope, status: int, now: float, answer: bytes = b"") -> AuditEvent:
    """The audit row of a finished request (pure apart from reading the scope).

    Without an `audit_note`, the team and target come from the answer when it is a JSON object with
    `team`/`id` (a submitted task, a cancelled one), so control-plane routes need no audit code."""
    state: dict[str, Any] = scope.get("state") or {}
    principal = state.get("principal")
    note = state.get(_NOTE_KEY)
    route = scope.get("route")
    template = getattr(route, "path", None) or scope.get("path", "")
    method = scope.get("method", "")
    params = scope.get("path_params") or {}
    answer_team, answer_id = _answer_fields(answer) if status < 300 else (None, None)
    target = ",".join(f"{k}={v}" for k, v in sorted(params.items())) or answer_id
    client = scope.get("client")
    user_agent = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"user-agent"), None)
    details: dict[str, Any] = {"user_agent": user_agent[:200]} if user_agent else {}
    if isinstance(note, AuditNote):
        details.update(note.details)
    return AuditEvent(
        at=now,
        actor=principal.subject if isinstance(principal, Principal) else None,
        credential_id=principal.credential_id
        if isinstance(principal, Principal)
        else _presented_credential(scope),
        action=note.action
        if isinstance(note, AuditNote)
        else f"{method} {scope.get('root_path', '')}{template}",
        method=method,
        path=scope.get("path", ""),
        team=note.team if isinstance(note, AuditNote) else answer_team,
        target=(note.target if isinstance(note, AuditNote) and note.target else target),
        outcome=outcome_of(status),
        status_code=status,
        remote_addr=client[0] if client else None,
        details=details,
    )


class AuditMiddleware:
    """Writes one `AuditEvent` per mutating request, after the response has been sent."""

    def __init__(self, app: ASGIApp, root: FastAPI) -> None:
        self.app = app
        self.root = root

    def _database(self) -> Database | None:
        state = self.root.state
        db = getattr(state, "db", None) or getattr(getattr(state, "commons", None), "db", None)
        return db if isinstance(db, Database) else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope.get("method") not in MUTATING
            or scope.get("path", "").endswith(_READS_BY_POST)
        ):
            await self.app(scope, receive, send)
            return
        status = 500
        answer = bytearray()

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body" and len(answer) <= _BODY_PEEK:
                answer.extend(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            await anyio.to_thread.run_sync(self._record, scope, status, bytes(answer))

    def _record(self, scope: Scope, status: int, answer: bytes) -> None:
        db = self._database()
        if db is None:
            return
        try:
            with db.session() as session:
                session.add(build_event(scope, status, time.time(), answer))
        except Exception:  # the audit must never turn a done request into a failure
            log.exception("could not write the audit record of %s %s", scope.get("method"), scope.get("path"))
