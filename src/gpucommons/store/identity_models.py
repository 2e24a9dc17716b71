"""Identity tables: the directory (users, groups, memberships), credentials and the audit log.

- `DirectoryUser`, `DirectoryGroup`: what SCIM pushes (or an OIDC sign-in seeds). `id` is ours (the
  SCIM `id`); `user_name_key` is the case-folded userName, unique, so `userName` is unique
  case-insensitively as SCIM requires.
- `GroupMember` rows name a member by id *without* a foreign key: an IdP may push a membership before
  the user (or a test pushes `fake-member-id`). Such a membership is *pending*: it grants nothing because
  roles come from joining it with existing users; it starts to count when a user with that id exists.
- `ApiToken` holds both API tokens (`kind="api"`) and sign-in sessions (`kind="session"`, short-lived,
  issued by web or CLI login). Only a SHA-256 of the secret is stored (`identity.tokens`). A token with a
  `user_id` acts as that user with the user's *current* roles (optionally narrowed by `role`/`team`); a
  token without one is a service token holding exactly `role` (bootstrap admin, scim, finance...).
  `created_by_user_id` is the person the token's authority comes from (who minted it, or the person
  behind the token that minted it); their deactivation, deletion or loss of the platform-admin role
  revokes it, unless a platform admin made it `service_owned`.
- `AuditEvent`: append-only record of every mutating request (who, what, when, from where, outcome).

Times are float seconds since the epoch (UTC), like the control plane's tables (`store.models`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Integer, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column

from gpucommons.store.base import Base


class DirectoryUser(Base):
    __tablename__ = "directory_users"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_name: Mapped[str] = mapped_column(String(256))
    #: `user_name.casefold()`: the unique key (SCIM's userName is case-insensitive).
    user_name_key: Mapped[str] = mapped_column(String(256), unique=True)
    external_id: Mapped[str | None] = mapped_column(String(256), index=True, default=None)
    display_name: Mapped[str | None] = mapped_column(String(256), default=None)
    email: Mapped[str | None] = mapped_column(String(320), default=None)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    #: The OIDC `iss`+`sub` that signs in as this user (set at first sign-in).
    oidc_subject: Mapped[str | None] = mapped_column(String(512), unique=True, default=None)
    #: The SCIM resource as last written (name, emails, extensions...), minus what has columns.
    attributes: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    version: Mapped[int] = mapped_column(Integer, default=1)


class DirectoryGroup(Base):
    __tablename__ = "directory_groups"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    display_name: Mapped[str] = mapped_column(String(256))
    #: `display_name.casefold()`: unique, and what policy `groups`/`admin_groups` are matched against.
    display_name_key: Mapped[str] = mapped_column(String(256), unique=True)
    external_id: Mapped[str | None] = mapped_column(String(256), index=True, default=None)
    attributes: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    version: Mapped[int] = mapped_column(Integer, default=1)


class GroupMember(Base):
    """One membership. `member_id` is a user id that may not exist (yet): then it is pending."""

    __tablename__ = "group_members"

    group_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("directory_groups.id", ondelete="CASCADE"), primary_key=True
    )
    member_id: Mapped[str] = mapped_column(String(256), primary_key=True, index=True)
    added_at: Mapped[float] = mapped_column(Float)


class ApiToken(Base):
    """An API token or a sign-in session; the secret itself is never stored."""

    __tablename__ = "api_tokens"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    #: "api" (created by `commons token create`) or "session" (issued by a sign-in).
    kind: Mapped[str] = mapped_column(String(16), default="api")
    user_id: Mapped[str | None] = mapped_column(
        String(64), ForeignKey("directory_users.id", ondelete="CASCADE"), index=True, default=None
    )
    #: Who the token speaks for, as shown in the audit log: a userName, or the service name.
    subject: Mapped[str] = mapped_column(String(256))
    #: A `Role` value: the service token's role, or the narrowing of a user token (None = all of it).
    role: Mapped[str | None] = mapped_column(String(32), default=None)
    team: Mapped[str | None] = mapped_column(String(128), default=None)
    secret_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[float] = mapped_column(Float)
    created_by: Mapped[str | None] = mapped_column(String(256), default=None)
    #: The directory user whose authority minted the token (no foreign key: the id outlives the user,
    #: as the audit does); None for tokens minted by the bootstrap admin or a service-owned token.
    created_by_user_id: Mapped[str | None] = mapped_column(String(64), index=True, default=None)
    #: Set by a platform admin at creation: the token belongs to the service, not to the person who
    #: minted it, and survives that person's deprovisioning (listed as such).
    service_owned: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    expires_at: Mapped[float | None] = mapped_column(Float, default=None)
    revoked_at: Mapped[float | None] = mapped_column(Float, default=None)
    last_used_at: Mapped[float | None] = mapped_column(Float, default=None)


class AuditEvent(Base):
    """One mutating request. Append-only: nothing updates or deletes these rows."""

    __tablename__ = "audit_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[float] = mapped_column(Float, index=True)
    actor: Mapped[str | None] = mapped_column(String(256), index=True, default=None)
    credential_id: Mapped[str | None] = mapped_column(String(32), default=None)
    #: The `Action` (or "METHOD /route/template" when the route named none).
    action: Mapped[str] = mapped_column(String(128))
    method: Mapped[str] = mapped_column(String(8))
    path: Mapped[str] = mapped_column(Text)
    team: Mapped[str | None] = mapped_column(String(128), default=None)
    target: Mapped[str | None] = mapped_column(String(256), default=None)
    #: "ok", "denied" (401/403) or "error" (any other failure).
    outcome: Mapped[str] = mapped_column(String(16))
    status_code: Mapped[int] = mapped_column(Integer)
    remote_addr: Mapped[str | None] = mapped_column(String(64), default=None)
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
