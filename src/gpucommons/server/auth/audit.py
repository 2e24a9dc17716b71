"""The audit log: every mutating request (POST, PUT, PATCH, DELETE) recorded after it is answered, and
every refused one — a failed authentication (a credential presented and answered 401) or a denial
(403) — whatever its method, so that probing reads leave a trace too.

An ASGI middleware rather than a call in each route, so that no route — present or future, REST, SCIM
or sign-in — can forget it. Refusals cost the refused caller nothing, so their rows are bounded
(`DeniedBudget`): at most a few per client address a minute and a ceiling for all addresses; what is
left out is counted in the next row written for that address (`details.suppressed`). Per row:
who (the principal's subject and the credential id, or the token id presented if it was refused),
what (the route template, or the action a route names with `audit_note`), when, from where (the
client address as the server sees it; no proxy header is trusted), and the outcome (status code).

Routes may add detail: `audit_note(request, "token.create", team=..., target=..., role="scim")`.
A route may instead store its row in the transaction of its own change (`audit_event`, then
`audit_recorded`): the submissions' group commit does, so a submission costs one commit, not two.
Request bodies are never recorded (they may carry secrets or task commands).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from fastapi import FastAPI, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gpucommons.identity.principal import Principal
from gpucommons.identity.tokens import parse_token
from gpucommons.server.auth.throttle import SlidingWindows, client_address, presents_credential
from gpucommons.store.db import Database
from gpucommons.store.identity_models import AuditEvent

log = logging.getLogger(__name__)

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: Requests that change nothing although they POST (reads with a body).
_READS_BY_POST = ("/.search",)
_NOTE_KEY = "audit_note"
_RECORDED_KEY = "audit_recorded"


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


def audit_event(request: Request, status: int) -> AuditEvent:
    """This request's audit row as it will be answered with `status`, for a route that stores it in
    the transaction of its own change (group commit: one commit for both, none after the answer);
    the route then calls `audit_recorded` once that transaction is committed."""
    return build_event(request.scope, status, time.time())


def audit_recorded(request: Request, status: int) -> None:
    """This request's row for an answer of `status` is stored: the middleware writes none (it still
    writes one should the answer turn out otherwise, a failure after the route returned)."""
    setattr(request.state, _RECORDED_KEY, status)


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


#: Refusals recorded per client address a minute, and for all addresses together.
DENIED_PER_ADDRESS = 30
DENIED_IN_ALL = 1000


class DeniedBudget:
    """How many refused requests get an audit row: at most `per_address` per address and `in_all`
    together per `window_s`; the refusals left out are counted and reported with the next row."""

    def __init__(
        self,
        per_address: int = DENIED_PER_ADDRESS,
        in_all: int = DENIED_IN_ALL,
        window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.by_address = SlidingWindows(per_address, window_s, clock=clock)
        self.overall = SlidingWindows(in_all, window_s, clock=clock)
        self._suppressed: dict[str, int] = {}
        self._lock = threading.Lock()

    def admit(self, address: str) -> int | None:
        """None: leave this refusal out (counted); else write it, with how many were left out before."""
        with self._lock:
            if self.by_address.full_for(address) > 0 or self.overall.full_for("*") > 0:
                if address in self._suppressed or len(self._suppressed) < self.by_address.max_keys:
                    self._suppressed[address] = self._suppressed.get(address, 0) + 1
                return None
            self.by_address.add(address)
            self.overall.add("*")
            return self._suppressed.pop(address, 0)


def is_refusal(scope: Scope, status: int, mutating: bool) -> bool:
    """403; or 401 to a request that presented a credential (a failed authentication) or tried to
    change something. A read without any credential (a browser before sign-in) is no refusal."""
    return status == 403 or (status == 401 and (mutating or presents_credential(scope)))


class AuditMiddleware:
    """Writes one `AuditEvent` per mutating or refused request, after the response has been sent."""

    def __init__(self, app: ASGIApp, root: FastAPI, budget: DeniedBudget | None = None) -> None:
        self.app = app
        self.root = root
        self.budget = budget or DeniedBudget()

    def _database(self) -> Database | None:
        state = self.root.state
        db = getattr(state, "db", None) or getattr(getattr(state, "commons", None), "db", None)
        return db if isinstance(db, Database) else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        mutating = scope.get("method") in MUTATING and not scope.get("path", "").endswith(_READS_BY_POST)
        status = 500
        answer = bytearray()

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif mutating and message["type"] == "http.response.body" and len(answer) <= _BODY_PEEK:
                answer.extend(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            suppressed: int | None = 0
            if is_refusal(scope, status, mutating):
                suppressed = self.budget.admit(client_address(scope))
            elif not mutating or (scope.get("state") or {}).get(_RECORDED_KEY) == status:
                suppressed = None
            if suppressed is not None:
                await anyio.to_thread.run_sync(self._record, scope, status, bytes(answer), suppressed)

    def _record(self, scope: Scope, status: int, answer: bytes, suppressed: int = 0) -> None:
        db = self._database()
        if db is None:
            return
        try:
            event = build_event(scope, status, time.time(), answer)
            if suppressed:
                event.details = {**event.details, "suppressed": suppressed}
            with db.session() as session:
                session.add(event)
        except Exception:  # the audit must never turn a done request into a failure
            log.exception("could not write the audit record of %s %s", scope.get("method"), scope.get("path"))
