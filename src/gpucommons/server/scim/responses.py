"""SCIM wire details: the `application/scim+json` media type, error resources, paging parameters."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from scim2_models import Error, InvalidSyntaxException

from gpucommons.identity.scim import DEFAULT_COUNT, MAX_RESULTS

SCIM_MEDIA_TYPE = "application/scim+json"


class ScimResponse(JSONResponse):
    media_type = SCIM_MEDIA_TYPE


def error_response(status: int, detail: str, scim_type: str | None = None) -> ScimResponse:
    """A SCIM Error resource (RFC 7644 §3.12) with its HTTP status."""
    body = Error(status=status, scim_type=scim_type, detail=detail).model_dump()
    headers = {"WWW-Authenticate": 'Bearer realm="scim"'} if status == 401 else None
    return ScimResponse(body, status_code=status, headers=headers)


def error_of(error: Error) -> ScimResponse:
    return error_response(int(error.status or 400), error.detail or "", error.scim_type)


async def json_body(request: Request) -> Any:
    """The request body as JSON (`application/scim+json` or `application/json`); 400 invalidSyntax."""
    raw = await request.body()
    if not raw.strip():
        raise InvalidSyntaxException(detail="the request has no body")
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidSyntaxException(detail=f"the body is not JSON: {exc}") from exc


def page(start_index: int | None, count: int | None) -> tuple[int, int]:
    """RFC 7644 §3.4.2.4: `startIndex` below 1 means 1, `count` below 0 means 0; pages hold at most
    MAX_RESULTS (the `filter.maxResults` we announce), whatever `count` asks."""
    start = 1 if start_index is None or start_index < 1 else start_index
    if count is None:
        return start, DEFAULT_COUNT
    return start, min(max(0, count), MAX_RESULTS)
