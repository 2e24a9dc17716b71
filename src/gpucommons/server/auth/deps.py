"""FastAPI dependencies that turn a request's credential into a `Principal`.

A request authenticates with `Authorization: Bearer <token>` (API token or CLI sign-in session) or,
from the browser, the `commons_session` cookie that the web sign-in sets (SameSite=Lax, HttpOnly).
The roles are recomputed from the directory on every request (see `credentials.resolve_token`).

What the app factory provides on `app.state`:
- `db`: the `store.db.Database`;
- `policy`: the current `domain.model.Policy`, or a zero-argument callable returning it (or None);
  without one, users hold no team roles and only service tokens (bootstrap admin, scim) work.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from gpucommons.api.errors import Unauthenticated
from gpucommons.domain.model import Policy
from gpucommons.identity.authz import Action, Forbidden
from gpucommons.identity.principal import Principal
from gpucommons.server.auth.credentials import resolve_token
from gpucommons.store.db import Database

SESSION_COOKIE = "commons_session"

_bearer = HTTPBearer(
    auto_error=False, description="An API token (`commons token create`) or a sign-in token."
)


def root_state(request: Request) -> Any:
    """The main app's state, also from a mounted sub-app (SCIM) that points at it as `state.root`."""
    state = request.app.state
    root = getattr(state, "root", None)
    return root.state if root is not None else state


def current_policy(request: Request) -> Policy | None:
    """The policy on `app.state.policy` (a `Policy` or a callable returning one), if any.

    Falls back on the control plane's `app.state.commons.policies.policy` (`server.context`).
    """
    state = root_state(request)
    value: Any = getattr(state, "policy", None)
    if value is None:
        value = getattr(getattr(getattr(state, "commons", None), "policies", None), "policy", None)
    if callable(value):
        value = value()
    return value if isinstance(value, Policy) else None


def database(request: Request) -> Database:
    """`app.state.db`, or the control plane's `app.state.commons.db`."""
    state = root_state(request)
    db = getattr(state, "db", None) or getattr(getattr(state, "commons", None), "db", None)
    if not isinstance(db, Database):
        raise RuntimeError("app.state.db is not set: the app factory must provide a store.db.Database")
    return db


def bearer_or_cookie(request: Request) -> str | None:
    """The credential a request presents: the bearer token, else the web session cookie."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.cookies.get(SESSION_COOKIE)


def _presented_token(request: Request, credentials: HTTPAuthorizationCredentials | None) -> str | None:
    if credentials is not None:
        return credentials.credentials
    return request.cookies.get(SESSION_COOKIE)


def current_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The authenticated caller, or 401 `unauthenticated` (403 for a scim token: SCIM only).

    Also sets `request.state.principal`, which the audit log reads.
    """
    token = _presented_token(request, credentials)
    if not token:
        raise Unauthenticated(
            "sign in: send 'Authorization: Bearer <token>' (commons login or commons token)"
        )
    with database(request).session() as session:
        principal = resolve_token(session, token, current_policy(request), time.time())
    if principal is None:
        raise Unauthenticated("the token is unknown, expired or revoked; sign in again")
    request.state.principal = principal
    if principal.scim and not principal.platform_admin:
        # A directory-sync token reaches /scim/v2 (which has its own dependency) and nothing else.
        raise Forbidden(Action.SCIM_READ, None, "a scim token may only use /scim/v2")
    return principal


#: The caller of a route: `def route(principal: CurrentPrincipal)`.
CurrentPrincipal = Annotated[Principal, Depends(current_principal)]
