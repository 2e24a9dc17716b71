"""Every error leaves the server as `{"error": {"code", "message", "details"}}` (docs/design.md, contract 6).

FastAPI's own 422 for request validation and Starlette's 404/405 are rewritten into the same shape,
so a client parses one format whatever went wrong.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from gpucommons.api.errors import (
    CommonsError,
    ErrorCode,
    InternalError,
)

log = logging.getLogger(__name__)

_STATUS_CODES = {
    400: ErrorCode.BAD_REQUEST,
    401: ErrorCode.UNAUTHENTICATED,
    403: ErrorCode.FORBIDDEN,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    409: ErrorCode.CONFLICT,
    422: ErrorCode.VALIDATION,
    503: ErrorCode.UNAVAILABLE,
}


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def _jsonable_errors(errors: Any) -> list[dict[str, Any]]:
    out = []
    for err in errors:
        loc = [str(p) for p in err.get("loc", ())]
        out.append(
            {
                "loc": loc,
                "field": ".".join(loc),
                "message": str(err.get("msg", "")),
                "type": err.get("type", ""),
            }
        )
    return out


async def _commons_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, CommonsError)
    return JSONResponse(exc.to_body(), status_code=exc.status)


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = _jsonable_errors(exc.errors())
    summary = "; ".join(f"{e['field'] or 'body'}: {e['message']}" for e in errors[:5])
    return JSONResponse(
        error_body(ErrorCode.VALIDATION, f"invalid request: {summary}", {"errors": errors}), status_code=422
    )


async def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _STATUS_CODES.get(exc.status_code, ErrorCode.BAD_REQUEST)
    detail = exc.detail if isinstance(exc.detail, str) else "request refused"
    return JSONResponse(error_body(code, detail), status_code=exc.status_code, headers=exc.headers)


async def _database_busy(_request: Request, exc: Exception) -> JSONResponse:
    """SQLite answers "database is locked" when a writer waited past its busy timeout: the caller
    did nothing wrong and may retry, so 503 with Retry-After, not a 500."""
    if "locked" not in str(exc) and "busy" not in str(exc):
        return await _unexpected(_request, exc)
    log.warning("database busy: %s", str(exc).splitlines()[0])
    body = error_body(ErrorCode.UNAVAILABLE, "the database is busy; retry in a moment")
    return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})


async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error", exc_info=exc)
    err = InternalError("internal error; see the server log")
    return JSONResponse(err.to_body(), status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(CommonsError, _commons_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(OperationalError, _database_busy)
    app.add_exception_handler(Exception, _unexpected)
