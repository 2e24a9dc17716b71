"""Error answers sent by ASGI middlewares, before any route runs (size limit, input guard, throttle).

They carry the same shapes the routes' handlers produce: the API's error JSON
(`{"error": {"code", "message", "details"}}`) and, under /scim/v2, a SCIM Error resource (where a bad
parameter is 400 `invalidValue`, as SCIM says, rather than 422).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Scope, Send

from gpucommons.api.errors import ErrorCode

SCIM_PREFIX = "/scim/v2"
SCIM_ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"


async def send_error(
    scope: Scope,
    send: Send,
    status: int,
    code: ErrorCode,
    message: str,
    details: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    """Answer the request with an error in the shape its path expects."""
    if scope.get("path", "").startswith(SCIM_PREFIX):
        status = 400 if status == 422 else status
        error: dict[str, Any] = {"schemas": [SCIM_ERROR], "status": str(status), "detail": message}
        if status == 400:
            error["scimType"] = "invalidValue"
        body, media = json.dumps(error).encode(), "application/scim+json"
    else:
        wire = {"error": {"code": str(code), "message": message, "details": details or {}}}
        body, media = json.dumps(wire).encode(), "application/json"
    raw = [(b"content-type", media.encode()), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
