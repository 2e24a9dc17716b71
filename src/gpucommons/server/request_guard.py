"""What every request must satisfy before any route, credential check or body read: an ASGI middleware.

- **Size.** A body larger than `max_body_bytes` (`COMMONS_MAX_BODY_BYTES`, 1 MiB by default) is
  refused with 413: at once when `Content-Length` says so (nothing is read, and no credential is
  looked up), and while it streams otherwise (a chunked body is cut off as soon as it passes the
  limit, so a client cannot make the server buffer more than the limit).
- **Text the store can hold.** A path or query parameter holding NUL (`%00`) is refused with 422
  naming it: PostgreSQL refuses NUL in text, so it would otherwise surface as a database error.
  Bodies get the same rule from their schemas (`api.fields.TEXT_PATTERN`) and, for SCIM, from
  `scim.responses.json_body`.

REST answers carry the API's error JSON; SCIM answers are SCIM Error resources.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gpucommons.api.errors import ErrorCode

SCIM_PREFIX = "/scim/v2"
#: The default of `Settings.max_body_bytes`.
DEFAULT_MAX_BODY_BYTES = 1 << 20


def too_large_message(limit: int) -> str:
    return f"the request body is larger than {limit} bytes (COMMONS_MAX_BODY_BYTES)"


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _nul_parameter(scope: Scope) -> str | None:
    """The first path or query parameter holding a NUL character, as `path` or `query.<name>`."""
    path: str = scope.get("path", "")
    if "\x00" in path:
        return "path"
    query: bytes = scope.get("query_string", b"")
    if b"%00" not in query and b"\x00" not in query:
        return None
    for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if "\x00" in name or "\x00" in value:
            return "query." + name.replace("\x00", "\\x00")
    return None


def _body(scope: Scope, status: int, code: ErrorCode, message: str, details: dict[str, Any]) -> bytes:
    if scope.get("path", "").startswith(SCIM_PREFIX):
        scim_type = "invalidValue" if status < 413 else None
        error: dict[str, Any] = {
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:Error"],
            "status": str(status),
            "detail": message,
        }
        if scim_type:
            error["scimType"] = scim_type
        return json.dumps(error).encode()
    return json.dumps({"error": {"code": str(code), "message": message, "details": details}}).encode()


async def _answer(
    scope: Scope, send: Send, status: int, code: ErrorCode, message: str, details: dict[str, Any]
) -> None:
    scim = scope.get("path", "").startswith(SCIM_PREFIX)
    if scim and status == 422:
        status = 400  # SCIM says 400 invalidValue for a bad parameter
    body = _body(scope, status, code, message, details)
    media = b"application/scim+json" if scim else b"application/json"
    headers = [(b"content-type", media), (b"content-length", str(len(body)).encode())]
    if status == 413:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class RequestGuard:
    """Refuses oversized bodies and NUL in parameters before the app sees the request."""

    def __init__(self, app: ASGIApp, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            details: dict[str, Any] = {"limit_bytes": limit, "content_length": declared}
            await _answer(scope, send, 413, ErrorCode.PAYLOAD_TOO_LARGE, too_large_message(limit), details)
            return
        where = _nul_parameter(scope)
        if where is not None:
            message = f"invalid request: {where}: contains a NUL character (\\x00), which cannot be stored"
            details = {"errors": [{"loc": where.split("."), "field": where, "message": "contains NUL"}]}
            await _answer(scope, send, 422, ErrorCode.VALIDATION, message, details)
            return
        received = 0

        async def capped() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # Raised inside the app's body read: FastAPI passes an HTTPException through,
                    # so the app's (or SCIM's) own handler answers 413 in its format.
                    raise HTTPException(413, too_large_message(limit))
            return message

        await self.app(scope, capped, send)
