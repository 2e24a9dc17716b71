"""The error answers a route may give, for the OpenAPI document (`responses=` of each route).

Every error has the one body of docs/api.md (`{"error": {"code", "message", "details"}}`); listing
them per route lets a client generator and a reader see which ones to expect.
"""

from __future__ import annotations

from typing import Any

from gpucommons.api.history import ErrorBody

_WHY = {
    400: "Bad request (`bad_request`): e.g. a month that has not started",
    401: "No, unknown, expired or revoked credentials (`unauthenticated`)",
    403: "The caller's role does not allow it (`forbidden`)",
    404: "No such resource, or one the caller may not see (`not_found`)",
    409: "The resource's state does not allow it now (`conflict`)",
    422: "A field or parameter is wrong (`validation_error`, `policy_invalid`)",
    503: "The service cannot answer now (`unavailable`)",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": ErrorBody, "description": _WHY[status]} for status in statuses}
