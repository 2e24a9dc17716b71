"""Wire identity into an app: auth's error handlers and middleware, sign-in, tokens, audit, SCIM.

Apart from `gpucommons.server.auth` because it mounts routers (`routers.tokens`, `routers.audit`,
`scim`) that themselves import `auth` for `CurrentPrincipal`; one layer up, no circle
(docs/design.md, "The server's layers").
"""

from __future__ import annotations

from fastapi import FastAPI

from gpucommons.server.auth import routes
from gpucommons.server.auth.audit import AuditMiddleware
from gpucommons.server.auth.errors import install_error_handlers
from gpucommons.server.auth.throttle import (
    DEFAULT_FAILURE_LIMIT,
    DEFAULT_WINDOW_S,
    FailedAuthThrottle,
    SlidingWindows,
)
from gpucommons.server.routers import audit, tokens
from gpucommons.server.scim import mount_scim

__all__ = ["install_auth"]


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
    install_error_handlers(app)
    app.add_middleware(AuditMiddleware, root=app)
    # Outside the audit: a blocked address costs no audit row, no credential lookup, no body read.
    app.add_middleware(FailedAuthThrottle, windows=SlidingWindows(failure_limit, failure_window_s))
    app.include_router(routes.web)
    app.include_router(routes.api)
    app.include_router(tokens.router)
    app.include_router(audit.router)
    mount_scim(app)
