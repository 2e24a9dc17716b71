"""Who may use /scim/v2: a bearer token whose principal `authorize()` lets do `scim.read`/`scim.write`.

In practice that is a `--role scim` token an admin creates for the IdP (or a platform admin). Errors
are SCIM Error resources (401 with `WWW-Authenticate`, 403), not the REST API's error JSON.
"""

from __future__ import annotations

import time

from fastapi import Request
from scim2_models import ForbiddenException, UnauthorizedException

from gpucommons.identity.authz import Action, Forbidden, authorize
from gpucommons.identity.principal import Principal
from gpucommons.server.auth.credentials import resolve_token
from gpucommons.server.auth.deps import current_policy, database


def _caller(request: Request, action: Action) -> Principal:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise UnauthorizedException(
            detail="send 'Authorization: Bearer <token>' (commons token create --role scim)"
        )
    with database(request).session() as session:
        principal = resolve_token(session, token, current_policy(request), time.time())
    if principal is None:
        raise UnauthorizedException(detail="the token is unknown, expired or revoked")
    request.state.principal = principal
    try:
        authorize(principal, action)
    except Forbidden as exc:
        raise ForbiddenException(detail=str(exc)) from exc
    return principal


def scim_reader(request: Request) -> Principal:
    return _caller(request, Action.SCIM_READ)


def scim_writer(request: Request) -> Principal:
    return _caller(request, Action.SCIM_WRITE)
