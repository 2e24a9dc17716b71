"""`metav1.Status` answers, as the API server writes them.

Shapes from `k8s.io/apimachinery/pkg/apis/meta/v1/types.go` (Status, StatusDetails, StatusCause) and
the constructors and messages of `k8s.io/apimachinery/pkg/api/errors/errors.go`; the ones the first
recorded fake used are replayed from `recordings/status_*.json` (each names its source).
"""

from __future__ import annotations

from typing import Any

from gpucommons.testing.fake_k8s.resources import ResourceType, recording


class ApiError(Exception):
    """Answer the request with this Status (`code` is the HTTP status)."""

    def __init__(self, code: int, body: dict[str, Any]) -> None:
        super().__init__(f"{code}: {body.get('message', '')}")
        self.code = code
        self.body = body


def fill(template: Any, values: dict[str, str]) -> Any:
    if isinstance(template, str):
        for key, value in values.items():
            template = template.replace("{" + key + "}", value)
        return template
    if isinstance(template, dict):
        filled = {k: fill(v, values) for k, v in template.items()}
        return {k: v for k, v in filled.items() if v != ""}  # the API server omits empty strings
    if isinstance(template, list):
        return [fill(v, values) for v in template]
    return template


def recorded(recording_name: str, /, **values: str) -> ApiError:
    code, body = recording(recording_name)
    return ApiError(code, fill(body, values))


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> ApiError:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details:
        body["details"] = details
    body["code"] = code
    return ApiError(code, body)


def _details(resource: ResourceType, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if resource.group:
        details["group"] = resource.group
    details["kind"] = resource.plural
    return details


def not_found(resource: ResourceType, name: str) -> ApiError:
    return recorded(
        "status_not_found",
        resource=resource.qualified,
        name=name,
        group=resource.group,
        plural=resource.plural,
    )


def namespace_not_found(namespace: str) -> ApiError:
    return recorded("status_not_found", resource="namespaces", name=namespace, group="", plural="namespaces")


def already_exists(resource: ResourceType, name: str) -> ApiError:
    """errors.NewAlreadyExists."""
    return status(
        409, "AlreadyExists", f'{resource.qualified} "{name}" already exists', _details(resource, name)
    )


def modified_conflict(resource: ResourceType, name: str) -> ApiError:
    """errors.NewConflict for a stale resourceVersion (optimistic concurrency)."""
    return status(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {resource.qualified} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        _details(resource, name),
    )


def precondition_failed(resource: ResourceType, name: str, what: str) -> ApiError:
    return status(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {resource.qualified} "{name}": {what}',
        _details(resource, name),
    )


def expired(requested: int, current: int) -> ApiError:
    """A watch or list from a compacted resourceVersion: errors.NewResourceExpired (410 Gone,
    reason Expired), message `too old resource version: <requested> (<current>)`."""
    return status(410, "Expired", f"too old resource version: {requested} ({current})")


def bad_request(message: str) -> ApiError:
    return status(400, "BadRequest", message)


def invalid(resource: ResourceType, name: str, field: str, detail: str) -> ApiError:
    """errors.NewInvalid: `<Kind>.<group> "<name>" is invalid: <field>: <detail>`."""
    kind_group = f"{resource.kind}.{resource.group}" if resource.group else resource.kind
    details = {
        "name": name,
        **({"group": resource.group} if resource.group else {}),
        "kind": resource.kind,
        "causes": [{"reason": "FieldValueInvalid", "message": detail, "field": field}],
    }
    return status(422, "Invalid", f'{kind_group} "{name}" is invalid: {field}: {detail}', details)


def unsupported_media_type(content_type: str, accepted: str) -> ApiError:
    return status(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: {accepted}",
    )


def internal_error(message: str) -> ApiError:
    """errors.NewInternalError."""
    return status(
        500, "InternalError", f"Internal error occurred: {message}", {"causes": [{"message": message}]}
    )


def service_unavailable(message: str) -> ApiError:
    return status(503, "ServiceUnavailable", message)


def timeout_error(message: str, retry_after: int = 1) -> ApiError:
    """errors.NewTimeoutError (504)."""
    return status(504, "Timeout", f"Timeout: {message}", {"retryAfterSeconds": retry_after})


def too_many_requests(message: str = "Too many requests, please try again later.") -> ApiError:
    return status(429, "TooManyRequests", message, {"retryAfterSeconds": 1})


def success(resource: ResourceType, name: str, uid: str) -> dict[str, Any]:
    body: dict[str, Any] = fill(
        recording("status_delete_success")[1],
        {"name": name, "group": resource.group, "plural": resource.plural, "uid": uid},
    )
    return body
