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

from typing import Any
from urllib.parse import parse_qsl

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gpucommons.api.errors import ErrorCode
from gpucommons.server.asgi_errors import send_error

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
            message = too_large_message(limit)
            await send_error(
                scope, send, 413, ErrorCode.PAYLOAD_TOO_LARGE, message, details, {"Connection": "close"}
            )
            return
        where = _nul_parameter(scope)
        if where is not None:
            message = f"invalid request: {where}: contains a NUL character (\\x00), which cannot be stored"
            details = {"errors": [{"loc": where.split("."), "field": where, "message": "contains NUL"}]}
            await send_error(scope, send, 422, ErrorCode.VALIDATION, message, details)
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
