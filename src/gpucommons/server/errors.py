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
from fastapi.routing import iter_route_contexts
from sqlalchemy.exc import DBAPIError
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
    413: ErrorCode.PAYLOAD_TOO_LARGE,
    422: ErrorCode.VALIDATION,
    429: ErrorCode.RATE_LIMITED,
    503: ErrorCode.UNAVAILABLE,
}


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def _printable(value: object) -> str:
    """Text safe to answer with: a lone surrogate (from a JSON key) would not encode as UTF-8."""
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")


def _jsonable_errors(errors: Any) -> list[dict[str, Any]]:
    out = []
    for err in errors:
        loc = [_printable(p) for p in err.get("loc", ())]
        out.append(
            {
                "loc": loc,
                "field": ".".join(loc),
                "message": _printable(err.get("msg", "")),
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


def _allowed_methods(request: Request) -> list[str]:
    """The methods served at the path template the request's path matched first. Starlette's 405
    names only the first route's, but a template often has several (GET and POST /api/v1/tasks)."""
    path = request.scope.get("path", "")
    routes = [r for r in iter_route_contexts(request.app.routes) if getattr(r, "path_regex", None)]
    template = next((r.path for r in routes if r.path_regex.match(path)), None)
    allowed: set[str] = set()
    for route in routes:
        if route.path == template and route.methods:
            allowed |= route.methods
    return sorted(allowed)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _STATUS_CODES.get(exc.status_code, ErrorCode.BAD_REQUEST)
    detail = exc.detail if isinstance(exc.detail, str) else "request refused"
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(_allowed_methods(request)) or headers.get("Allow", "")
    return JSONResponse(error_body(code, detail), status_code=exc.status_code, headers=headers)


#: SQLite's words for a database that cannot serve now, and what to tell the caller.
_SQLITE_UNAVAILABLE = (
    (("locked", "busy"), "the database is busy; retry in a moment"),
    (("readonly", "read-only"), "the database is read-only; the operator must make it writable again"),
    (("disk i/o error", "disk is full", "unable to open"), "the database cannot be written (disk full?)"),
)
#: PostgreSQL SQLSTATE classes and codes of the same situations (connection lost, out of resources,
#: operator intervention, read-only transaction, serialization failure, deadlock, lock not available).
_PG_UNAVAILABLE_CLASSES = ("08", "53", "57")
_PG_UNAVAILABLE_CODES = {
    "25006": "the database is read-only; the operator must make it writable again",
    "40001": "the database is busy; retry in a moment",
    "40P01": "the database is busy; retry in a moment",
    "55P03": "the database is busy; retry in a moment",
}


def database_unavailable(exc: BaseException) -> str | None:
    """Why the database could not serve this request when that is no fault of the request (busy,
    read-only, unreachable, out of disk), as a sentence for a 503; None for anything else (a bug)."""
    if not isinstance(exc, DBAPIError):
        return None
    sqlstate = getattr(exc.orig, "sqlstate", None)
    if isinstance(sqlstate, str):
        if sqlstate in _PG_UNAVAILABLE_CODES:
            return _PG_UNAVAILABLE_CODES[sqlstate]
        if sqlstate[:2] in _PG_UNAVAILABLE_CLASSES:
            return "the database cannot be reached or is out of resources; retry in a moment"
    if exc.connection_invalidated:
        return "the connection to the database was lost; retry in a moment"
    text = str(exc.orig).lower()
    for words, message in _SQLITE_UNAVAILABLE:
        if any(w in text for w in words):
            return message
    return None


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    """A database that cannot serve (busy past its timeout, read-only, unreachable) is no fault of
    the caller, who may retry: 503 with Retry-After, not a 500."""
    message = database_unavailable(exc)
    if message is None:
        return await _unexpected(request, exc)
    log.warning("database unavailable: %s", str(exc).splitlines()[0])
    return JSONResponse(
        error_body(ErrorCode.UNAVAILABLE, message), status_code=503, headers={"Retry-After": "1"}
    )


async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error", exc_info=exc)
    err = InternalError("internal error; see the server log")
    return JSONResponse(err.to_body(), status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(CommonsError, _commons_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(DBAPIError, _database_error)
    app.add_exception_handler(Exception, _unexpected)
