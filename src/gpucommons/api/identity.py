"""Wire schemas of the identity endpoints: API tokens, the audit log, sign-in, the caller.

Request models forbid unknown fields; response models ignore them (as in `api.schemas`).
Times are UTC datetimes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from gpucommons.api.fields import TEXT_PATTERN

RoleName = Literal["platform_admin", "finance", "team_admin", "team_member", "scim"]
TokenName = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f]+$")]


class _Request(BaseModel):
    #: Strict, as `api.schemas`: a number sent as text is refused, not coerced.
    model_config = ConfigDict(extra="forbid", strict=True)


class _Response(BaseModel):
    model_config = ConfigDict(extra="ignore")


class TokenCreate(_Request):
    """What `commons token create` sends.

    `user` (a userName or user id) makes a token that acts as that user with the user's current
    directory roles, narrowed to `role`/`team` when given. Without `user`, `role` is required and the
    token is a service token holding exactly that role (`scim` for an IdP, `finance`, ...).
    """

    name: TokenName
    user: Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=TEXT_PATTERN)] | None = None
    role: RoleName | None = None
    team: Annotated[str, StringConstraints(min_length=1, max_length=63, pattern=TEXT_PATTERN)] | None = None
    #: Lifetime in seconds; absent = never expires (revoke it with `commons token revoke`).
    expires_in_s: int | None = Field(None, ge=60, le=10 * 365 * 86400)
    #: A service token that belongs to the service rather than to the person minting it: it is not
    #: revoked when that person is deprovisioned or stops being a platform admin.
    service_owned: bool = False


class TokenInfo(_Response):
    """A token as listed: never its secret."""

    id: str
    name: str
    kind: Literal["api", "session"]
    subject: str
    user_id: str | None = None
    role: str | None = None
    team: str | None = None
    created_at: datetime
    created_by: str | None = None
    #: The directory user whose authority the token rests on; their deprovisioning revokes it.
    created_by_user_id: str | None = None
    #: True: owned by the service, it outlives the person who minted it.
    service_owned: bool = False
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None


class TokenCreated(TokenInfo):
    """The answer to a create: the one time the secret is shown."""

    token: str


class AuditEntry(_Response):
    id: int
    at: datetime
    actor: str | None
    credential_id: str | None
    action: str
    method: str
    path: str
    team: str | None = None
    target: str | None = None
    outcome: Literal["ok", "denied", "error"]
    status_code: int
    remote_addr: str | None = None
    details: dict[str, Any] = {}


class WhoAmI(_Response):
    """The caller as the server sees it on this request."""

    subject: str
    display_name: str
    user_id: str | None
    credential_id: str | None
    platform_admin: bool
    finance: bool
    scim: bool
    member_of: list[str]
    admin_of: list[str]


class AuthConfig(_Response):
    """How a client signs in: the OpenID provider and the public (native) client to use."""

    enabled: bool
    issuer: str | None = None
    client_id: str | None = None
    scopes: list[str] = []


class IdTokenExchange(_Request):
    """An ID token the CLI obtained from the OpenID provider, to trade for a GPU Commons session token."""

    id_token: Annotated[str, StringConstraints(min_length=10, max_length=20_000, pattern=TEXT_PATTERN)]


class SessionToken(_Response):
    token: str
    expires_at: datetime
    subject: str
