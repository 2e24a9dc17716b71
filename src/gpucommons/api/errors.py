"""Error codes and the exceptions that carry them, shared by the server and the client.

The server raises these from its services and turns them into `{"error": {"code", "message",
"details"}}` with the class's HTTP status; the client reads the code back into the same class, so a
caller catches `NotFound` whether it called a service in-process or the server over HTTP.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar


class ErrorCode(StrEnum):
    VALIDATION = "validation_error"
    NOT_FOUND = "not_found"
    UNAUTHENTICATED = "unauthenticated"
    FORBIDDEN = "forbidden"
    CONFLICT = "conflict"
    CHECKPOINT_REQUIRED = "checkpoint_required"
    POLICY_INVALID = "policy_invalid"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    BAD_REQUEST = "bad_request"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    RATE_LIMITED = "rate_limited"
    UNAVAILABLE = "unavailable"
    INTERNAL = "internal_error"


class CommonsError(Exception):
    """Base of every error that crosses the API; `status` is the HTTP status it travels with."""

    code: ClassVar[ErrorCode] = ErrorCode.BAD_REQUEST
    status: ClassVar[int] = 400

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details or {}

    def to_body(self) -> dict[str, Any]:
        return {"error": {"code": str(self.code), "message": self.message, "details": self.details}}


class BadRequest(CommonsError):
    code = ErrorCode.BAD_REQUEST
    status = 400


class ValidationFailed(CommonsError):
    """The request is well-formed JSON but a field is wrong; `details.errors` lists each one."""

    code = ErrorCode.VALIDATION
    status = 422


class Unauthenticated(CommonsError):
    code = ErrorCode.UNAUTHENTICATED
    status = 401


class Forbidden(CommonsError):
    code = ErrorCode.FORBIDDEN
    status = 403


class NotFound(CommonsError):
    code = ErrorCode.NOT_FOUND
    status = 404


class MethodNotAllowed(CommonsError):
    code = ErrorCode.METHOD_NOT_ALLOWED
    status = 405


class Conflict(CommonsError):
    """The request is valid but the resource's state does not allow it now (e.g. cancel a finished task)."""

    code = ErrorCode.CONFLICT
    status = 409


class CheckpointRequired(CommonsError):
    """The task's priority class requires a checkpoint declaration and the task made none."""

    code = ErrorCode.CHECKPOINT_REQUIRED
    status = 422


class PolicyInvalid(CommonsError):
    """A policy file was refused; `details.issues` lists every problem with its path."""

    code = ErrorCode.POLICY_INVALID
    status = 422


class PayloadTooLarge(CommonsError):
    """The request body is larger than the server accepts (`COMMONS_MAX_BODY_BYTES`)."""

    code = ErrorCode.PAYLOAD_TOO_LARGE
    status = 413


class RateLimited(CommonsError):
    """Too many failed sign-ins from this address; `Retry-After` says when to try again."""

    code = ErrorCode.RATE_LIMITED
    status = 429


class Unavailable(CommonsError):
    code = ErrorCode.UNAVAILABLE
    status = 503


class InternalError(CommonsError):
    code = ErrorCode.INTERNAL
    status = 500


ERROR_CLASSES: dict[str, type[CommonsError]] = {
    str(cls.code): cls
    for cls in (
        BadRequest,
        ValidationFailed,
        Unauthenticated,
        Forbidden,
        NotFound,
        MethodNotAllowed,
        Conflict,
        CheckpointRequired,
        PolicyInvalid,
        PayloadTooLarge,
        RateLimited,
        Unavailable,
        InternalError,
    )
}


def error_from_body(status: int, body: Any) -> CommonsError:
    """Rebuild the exception a server response describes (unknown codes become a `CommonsError`)."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        cls = ERROR_CLASSES.get(str(err.get("code")), CommonsError)
        details = err.get("details") if isinstance(err.get("details"), dict) else {}
        return cls(str(err.get("message", "")), details)
    return CommonsError(f"HTTP {status}: {str(body)[:200]}")
