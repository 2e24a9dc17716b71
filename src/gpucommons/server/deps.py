"""FastAPI dependencies as `Annotated` aliases: the server context and the caller.

The caller is identity's `CurrentPrincipal` (bearer API token or session cookie); routes authorize
with `identity.authz.authorize` and filter lists with `visible_teams`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from gpucommons.server.auth import CurrentPrincipal
from gpucommons.server.context import ServerContext

__all__ = ["ContextDep", "CurrentPrincipal", "bearer_token"]


async def get_context(request: Request) -> ServerContext:
    """Async although it waits for nothing: FastAPI runs a sync dependency in its thread pool, and
    that hop (a thread hand-off and a GIL switch) cost more than the lookup on every request."""
    ctx = request.app.state.commons
    assert isinstance(ctx, ServerContext)
    return ctx


ContextDep = Annotated[ServerContext, Depends(get_context)]


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()
