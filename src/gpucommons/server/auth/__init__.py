"""Authentication for every route: who is calling, and the credentials behind it.

Stable names (the control plane builds on them):
- `CurrentPrincipal`: `Annotated[Principal, Depends(current_principal)]`; resolves the bearer token (or
  the web session cookie) through `request.app.state.db` and the policy on `request.app.state.policy`;
  401 `{"error": {"code": "unauthenticated", ...}}` otherwise.
- `create_bootstrap_admin_token(db) -> str`: a new platform-admin token for `commons up`.
- `install_auth(app)`: the app factory calls it once: error handlers (identity's `Forbidden` → 403).
Authorization itself is `gpucommons.identity.authz.authorize(principal, Action.X, team)` in each route.
"""

from __future__ import annotations

import time

from fastapi import FastAPI

from gpucommons.server.auth.credentials import create_bootstrap_admin
from gpucommons.server.auth.deps import CurrentPrincipal, current_policy, current_principal
from gpucommons.server.auth.errors import install_error_handlers
from gpucommons.server.auth.throttle import (
    DEFAULT_FAILURE_LIMIT,
    DEFAULT_WINDOW_S,
    FailedAuthThrottle,
    SlidingWindows,
)
from gpucommons.store.db import Database

__all__ = [
    "CurrentPrincipal",
    "create_bootstrap_admin_token",
    "current_policy",
    "current_principal",
    "install_auth",
]


def create_bootstrap_admin_token(db: Database) -> str:
    """Create a platform-admin API token (named `bootstrap-admin`) and return it; only its hash is kept."""
    with db.session() as session:
        return create_bootstrap_admin(session, time.time()).token


def install_auth(
    app: FastAPI,
    *,
    failure_limit: int = DEFAULT_FAILURE_LIMIT,
    failure_window_s: float = DEFAULT_WINDOW_S,
) -> None:
    """Wire identity into the app (the app factory calls this once, after its error handlers).

    Adds: the 401/403 error handlers; the audit middleware (every mutating or refused request); the
    throttle of failed authentications (`failure_limit` per address per `failure_window_s`, 0 = off,
    then 429); sign-in routes
    (`/auth/*`, `/api/v1/auth/*`); `/api/v1/tokens` and `/api/v1/audit`; SCIM 2.0 at /scim/v2.
    OpenID settings come from `app.state.oidc_settings` if set, else `COMMONS_OIDC_*`.
    """
    from gpucommons.server.auth import routes
    from gpucommons.server.auth.audit import AuditMiddleware
    from gpucommons.server.routers import audit, tokens
    from gpucommons.server.scim import mount_scim

    install_error_handlers(app)
    app.add_middleware(AuditMiddleware, root=app)
    # Outside the audit: a blocked address costs no audit row, no credential lookup, no body read.
    app.add_middleware(FailedAuthThrottle, windows=SlidingWindows(failure_limit, failure_window_s))
    app.include_router(routes.web)
    app.include_router(routes.api)
    app.include_router(tokens.router)
    app.include_router(audit.router)
    mount_scim(app)
