"""The OpenAPI document lists every status a route can answer, each error with the one error body.

Most of them follow from what the route is, so they are derived here rather than repeated on each
route (a new route gets them too):
- every route: 422 (a path or query parameter holding NUL, `server.request_guard`) and 429 (an
  address over its failed-authentication limit, `server.auth.throttle`) — but `/healthz`, which the
  throttle leaves open;
- a route that takes credentials (its operation has `security`): 401, 403 and 503 (the database
  cannot serve the credential lookup);
- a route with path parameters: 404 (no such resource, or one the caller may not see);
- a route with a body: 400 (a body that cannot be parsed), 413 (`COMMONS_MAX_BODY_BYTES`), 422.
What only some routes answer (a conflict, a bad month, sign-in not configured) is `ROUTE_ERRORS`
below, or the route's own `responses=errors(...)`. FastAPI's own 422 schema is replaced by the error
body, which is what the server sends. String parameters are documented with the pattern the input
guard enforces (no NUL), so a client generator and a fuzzer know it. A route that creates a resource
(POST answering 201 or 202 with its `id`) links to the routes under its path that take that id
(OpenAPI `links`), so a client — or schemathesis' stateful phase — can follow them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from gpucommons.api.fields import TEXT_PATTERN
from gpucommons.api.history import ErrorBody

ERROR_SCHEMA = "ErrorBody"
_REF = {"$ref": f"#/components/schemas/{ERROR_SCHEMA}"}

WHY = {
    400: "Bad request (`bad_request`): a body that cannot be parsed, a month that has not started, ...",
    401: "No, unknown, expired or revoked credentials (`unauthenticated`)",
    403: "The caller's role does not allow it (`forbidden`)",
    404: "No such resource, or one the caller may not see (`not_found`)",
    409: "The resource's state does not allow it now (`conflict`)",
    413: "The body is larger than COMMONS_MAX_BODY_BYTES (`payload_too_large`)",
    422: "A field or parameter is wrong (`validation_error`; also `policy_invalid`, `checkpoint_required`)",
    429: "Too many failed authentications from this address (`rate_limited`); see Retry-After",
    503: "The database or the OpenID provider cannot answer now (`unavailable`); see Retry-After",
}
_RETRY_AFTER = {
    "Retry-After": {"description": "Seconds to wait before trying again", "schema": {"type": "integer"}}
}

#: Statuses only some routes answer, beyond what `derived_statuses` gives them.
ROUTE_ERRORS: dict[tuple[str, str], tuple[int, ...]] = {
    ("GET", "/auth/login"): (404,),
    ("GET", "/auth/callback"): (400, 401, 403, 404, 503),
    ("POST", "/api/v1/auth/token"): (401, 403, 404, 503),
    ("POST", "/api/v1/tokens"): (404, 409),
    ("POST", "/api/v1/tasks/{task_id}/cancel"): (409,),
    ("POST", "/api/v1/tasks/{task_id}/checkpoint"): (401, 403, 409, 503),
    ("PUT", "/api/v1/policy"): (409,),
    ("GET", "/api/v1/invoices"): (400, 404),
}


def derived_statuses(path: str, operation: dict[str, Any]) -> set[int]:
    """The error statuses an operation can answer because of what it is (see the module docstring)."""
    statuses = {422}
    if path != "/healthz":
        statuses.add(429)
    if operation.get("security"):
        statuses |= {401, 403, 503}
    if any(p.get("in") == "path" for p in operation.get("parameters", [])):
        statuses.add(404)
    if "requestBody" in operation:
        statuses |= {400, 413, 422}
    return statuses


def _error_response(status: int) -> dict[str, Any]:
    response: dict[str, Any] = {"description": WHY[status], "content": {"application/json": {"schema": _REF}}}
    if status in (429, 503):
        response["headers"] = _RETRY_AFTER
    return response


def _with_text_pattern(schema: dict[str, Any]) -> None:
    """`pattern` on a string parameter schema (or each string member of an anyOf) that has none."""
    for member in [schema, *schema.get("anyOf", [])]:
        free_text = "pattern" not in member and "enum" not in member and "format" not in member
        if member.get("type") == "string" and free_text:
            member["pattern"] = TEXT_PATTERN


def _link_created_resources(paths: dict[str, Any]) -> None:
    """`POST /x` answering 201/202 links to `/x/{x_id}...` with `x_id` = the created resource's id."""
    for path, operations in paths.items():
        create = operations.get("post", {})
        created = next(
            (create["responses"][s] for s in ("201", "202") if s in create.get("responses", {})), None
        )
        if created is None:
            continue
        links = {}
        for sub, sub_operations in paths.items():
            if not sub.startswith(path + "/{"):
                continue
            name = sub[len(path) + 2 :].split("}", 1)[0]
            for sub_method, operation in sub_operations.items():
                if "operationId" in operation:
                    links[f"{sub_method.upper()} {sub}"] = {
                        "operationId": operation["operationId"],
                        "parameters": {name: "$response.body#/id"},
                    }
        if links:
            created["links"] = links


def document_errors(document: dict[str, Any]) -> dict[str, Any]:
    """Add every route's error statuses, with the error body, to an OpenAPI document (in place)."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}").pop("$defs", {}))
    schemas.setdefault(ERROR_SCHEMA, ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}"))
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            statuses = derived_statuses(path, operation) | set(ROUTE_ERRORS.get((method.upper(), path), ()))
            responses = operation.setdefault("responses", {})
            for status in sorted(statuses):
                if str(status) not in responses or status == 422:
                    responses[str(status)] = _error_response(status)
                else:
                    responses[str(status)].setdefault("headers", _error_response(status).get("headers", {}))
            for parameter in operation.get("parameters", []):
                _with_text_pattern(parameter.get("schema", {}))
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    _link_created_resources(document.get("paths", {}))
    return document


def install_openapi(app: FastAPI) -> None:
    """Make `app.openapi()` return the document with every route's errors (built once, on first use)."""
    generate: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document_errors(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
