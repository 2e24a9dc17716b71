"""JSON answers with an ETag, and `304 Not Modified` for a client that already holds them.

The dashboard polls the task list, the queue, the teams and the usage every few seconds; most polls
find nothing changed. Each of these routes serialises its answer once (pydantic's JSON encoder, in
Rust), hashes the bytes, and answers `304` with no body when the request's `If-None-Match` names that
hash — the caller keeps what it has, and neither side spends time on the body. The answer goes out
as a plain `Response`, so FastAPI does not validate and serialise the models a second time.

`Cache-Control: private, no-cache`: a browser may keep the answer but must ask before using it again
(and no shared cache keeps it: it is per caller).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlencode

from fastapi import Request, Response
from pydantic import TypeAdapter

CACHE_CONTROL = "private, no-cache"

#: What a route answering through `json_answer` adds to its OpenAPI responses.
NOT_MODIFIED: dict[int | str, dict[str, Any]] = {
    304: {"description": "Not modified: the answer's ETag is one the request named in If-None-Match"}
}


def etag_of(body: bytes, *, weak: bool = False) -> str:
    tag = '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'
    return "W/" + tag if weak else tag


def _matches(request: Request, etag: str) -> bool:
    """RFC 9110 §13.1.2: weak comparison, any of a list, or `*`."""
    header = request.headers.get("if-none-match")
    if not header:
        return False
    bare = etag.removeprefix("W/")
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == bare:
            return True
    return False


def not_modified(request: Request, etag: str, headers: Mapping[str, str] | None = None) -> Response | None:
    """A 304 answer when the request already holds `etag`, else None."""
    if not _matches(request, etag):
        return None
    return Response(
        status_code=304, headers={"ETag": etag, "Cache-Control": CACHE_CONTROL, **(headers or {})}
    )


def json_answer(
    request: Request,
    adapter: TypeAdapter[Any],
    value: Any,
    *,
    headers: Mapping[str, str] | None = None,
    etag: str | None = None,
) -> Response:
    """`value` as JSON with an ETag (its hash, unless given), or 304 when the caller holds it."""
    return body_answer(request, adapter.dump_json(value), headers=headers, etag=etag)


def body_answer(
    request: Request, body: bytes, *, headers: Mapping[str, str] | None = None, etag: str | None = None
) -> Response:
    """A JSON body already serialised, with an ETag (its hash, unless given), or 304 when the
    caller holds it."""
    tag = etag or etag_of(body)
    unchanged = not_modified(request, tag, headers)
    if unchanged is not None:
        return unchanged
    return json_bytes(body, tag, headers)


def json_bytes(body: bytes, etag: str, headers: Mapping[str, str] | None = None) -> Response:
    """A JSON body already serialised, with its ETag (the caller has checked `not_modified`)."""
    return Response(
        body,
        media_type="application/json",
        headers={"ETag": etag, "Cache-Control": CACHE_CONTROL, **(headers or {})},
    )


def link_header(url: str, rel: str) -> str:
    return f'<{url}>; rel="{rel}"'


def query_string(pairs: Iterable[tuple[str, str]]) -> str:
    return urlencode(list(pairs))
