"""How authentication and authorization failures travel: the API's error JSON, 401 and 403.

`identity.authz.Forbidden` is pure (identity knows nothing of HTTP); this handler turns it into the
`forbidden` error of `api.errors`, so routes call `authorize()` directly and let it raise.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from gpucommons.api.errors import Forbidden as ForbiddenError
from gpucommons.api.errors import Unauthenticated
from gpucommons.identity.authz import Forbidden


async def _forbidden(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Forbidden)
    error = ForbiddenError(str(exc), {"action": exc.action.value, "team": exc.team})
    return JSONResponse(error.to_body(), status_code=error.status)


async def _unauthenticated(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Unauthenticated)
    return JSONResponse(exc.to_body(), status_code=exc.status, headers={"WWW-Authenticate": "Bearer"})


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(Forbidden, _forbidden)
    app.add_exception_handler(Unauthenticated, _unauthenticated)
