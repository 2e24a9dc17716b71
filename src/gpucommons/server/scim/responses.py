"""SCIM wire details: the `application/scim+json` media type, error resources, paging parameters."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from scim2_models import Error, InvalidSyntaxException, InvalidValueException

from gpucommons.api.fields import has_unstorable_text
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


#: Deepest nesting of objects and arrays a SCIM body may have (real resources nest three levels).
MAX_JSON_DEPTH = 32
#: The largest `startIndex` looked up; any larger one is past the last resource anyway.
MAX_START_INDEX = 2**31 - 1


def _unstorable(value: Any, where: str, depth: int = 0) -> str | None:
    """The path of the first string (or key) no database can store (NUL, lone surrogate), if any."""
    if depth > MAX_JSON_DEPTH:
        raise InvalidValueException(detail=f"the body nests deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, str):
        return where if has_unstorable_text(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if has_unstorable_text(key):
                return path.encode("unicode_escape").decode()
            found = _unstorable(item, path, depth + 1)
            if found:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _unstorable(item, f"{where}[{index}]", depth + 1)
            if found:
                return found
    return None


async def json_body(request: Request) -> Any:
    """The request body as JSON (`application/scim+json` or `application/json`); 400 invalidSyntax,
    or 400 invalidValue for text no database stores (a NUL character, a lone surrogate)."""
    raw = await request.body()
    if not raw.strip():
        raise InvalidSyntaxException(detail="the request has no body")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidSyntaxException(detail=f"the body is not JSON: {exc}") from exc
    where = _unstorable(data, "")
    if where is not None:
        raise InvalidValueException(
            detail=f"{where or 'the body'}: holds a NUL character or a lone surrogate, which cannot be stored"
        )
    return data


def page(start_index: int | None, count: int | None) -> tuple[int, int]:
    """RFC 7644 §3.4.2.4: `startIndex` below 1 means 1, `count` below 0 means 0; pages hold at most
    MAX_RESULTS (the `filter.maxResults` we announce), whatever `count` asks. A `startIndex` past
    MAX_START_INDEX is past every resource: it is read as MAX_START_INDEX (an empty page) rather than
    handed to the database, whose integers it may overflow."""
    start = 1 if start_index is None or start_index < 1 else min(start_index, MAX_START_INDEX)
    if count is None:
        return start, DEFAULT_COUNT
    return start, min(max(0, count), MAX_RESULTS)
