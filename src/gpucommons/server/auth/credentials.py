"""Credentials in the database: issue, resolve and revoke API tokens and sign-in sessions.

Resolution happens on every request and reads the directory afresh, so a user made inactive, deleted or
removed from a group loses the matching rights on their very next request, whatever token they hold.

A token also carries the person its authority comes from (`created_by_user_id`: who minted it). When
that person is deactivated or deleted, or loses the platform-admin role that let them mint it, the
token is revoked with theirs (`revoke_user_credentials`, `revoke_tokens_minted_by_former_admins`), and
until then a token whose creator no longer holds that role is refused — unless a platform admin made
it `service_owned`: then it belongs to the service and outlives its creator.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.orm import Session

from gpucommons.domain.model import Policy
from gpucommons.identity.principal import Principal, Role
from gpucommons.identity.roles import principal_from_groups, scope_principal, service_principal
from gpucommons.identity.tokens import hash_secret, new_token, parse_token, verify_secret
from gpucommons.store.identity_models import ApiToken, DirectoryGroup, DirectoryUser, GroupMember

#: How stale `last_used_at` may get before a request refreshes it (a write per request is too many).
LAST_USED_RESOLUTION_S = 60.0
BOOTSTRAP_TOKEN_NAME = "bootstrap-admin"
API_KIND = "api"
SESSION_KIND = "session"


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A token just created: `token` is shown once and never again."""

    row: ApiToken
    token: str


def issue_token(
    session: Session,
    *,
    name: str,
    now: float,
    subject: str,
    user_id: str | None = None,
    role: Role | None = None,
    team: str | None = None,
    expires_at: float | None = None,
    kind: str = API_KIND,
    created_by: str | None = None,
    created_by_user_id: str | None = None,
    service_owned: bool = False,
) -> IssuedToken:
    """Store a new token (its hash only) and return it with its one-time secret."""
    if user_id is None and role is None:
        raise ValueError("a token bound to no user needs a role")
    if role in (Role.TEAM_ADMIN, Role.TEAM_MEMBER) and user_id is None and team is None:
        raise ValueError(f"a {role} service token needs a team")
    token_id, token = new_token()
    parsed = parse_token(token)
    assert parsed is not None
    row = ApiToken(
        id=token_id,
        name=name,
        kind=kind,
        user_id=user_id,
        subject=subject,
        role=role.value if role is not None else None,
        team=team,
        secret_hash=hash_secret(parsed[1]),
        created_at=now,
        created_by=created_by,
        created_by_user_id=created_by_user_id,
        service_owned=service_owned,
        expires_at=expires_at,
    )
    session.add(row)
    session.flush()
    return IssuedToken(row, token)


def user_group_names(session: Session, user_id: str) -> list[str]:
    """Display names of the groups the user is a member of (pending memberships of others excluded)."""
    stmt = (
        select(DirectoryGroup.display_name)
        .join(GroupMember, GroupMember.group_id == DirectoryGroup.id)
        .where(GroupMember.member_id == user_id)
    )
    return list(session.scalars(stmt))


def user_principal(
    session: Session, user: DirectoryUser, policy: Policy | None, *, credential_id: str | None = None
) -> Principal:
    """A user's current roles, from their groups in the directory and the policy."""
    return principal_from_groups(
        user.user_name,
        user_group_names(session, user.id),
        policy,
        display_name=user.display_name or user.user_name,
        user_id=user.id,
        credential_id=credential_id,
    )


def creator_may_still_mint(session: Session, row: ApiToken, policy: Policy | None) -> bool:
    """Whether the person `row`'s authority comes from still stands behind it: active, and a platform
    admin (the role that mints tokens) under `policy`. Service-owned tokens and tokens without a
    person behind them (minted by the bootstrap admin) answer True. Without a policy no role can be
    known, so only the creator's existence and activity are checked."""
    if row.service_owned or row.created_by_user_id is None:
        return True
    creator = session.get(DirectoryUser, row.created_by_user_id)
    if creator is None or not creator.active:
        return False
    return policy is None or user_principal(session, creator, policy).platform_admin


def resolve_token(session: Session, token: str, policy: Policy | None, now: float) -> Principal | None:
    """The principal a bearer token stands for right now, or None if it is not a live token."""
    parsed = parse_token(token.strip())
    if parsed is None:
        return None
    token_id, secret = parsed
    row = session.get(ApiToken, token_id)
    if row is None or not verify_secret(secret, row.secret_hash):
        return None
    if row.revoked_at is not None or (row.expires_at is not None and row.expires_at <= now):
        return None
    if not creator_may_still_mint(session, row, policy):
        return None
    role = Role(row.role) if row.role is not None else None
    if row.user_id is None:
        assert role is not None
        principal = service_principal(row.subject, role, row.team, credential_id=row.id)
    else:
        user = session.get(DirectoryUser, row.user_id)
        if user is None or not user.active:
            return None
        principal = scope_principal(
            user_principal(session, user, policy, credential_id=row.id), role, row.team
        )
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_RESOLUTION_S:
        row.last_used_at = now
    return principal


def _revoke_where(session: Session, now: float, *conditions: ColumnElement[bool]) -> int:
    stmt = update(ApiToken).where(ApiToken.revoked_at.is_(None), *conditions)
    result = session.execute(stmt.values(revoked_at=now).execution_options(synchronize_session="fetch"))
    return int(getattr(result, "rowcount", 0) or 0)


def revoke_user_credentials(
    session: Session, user_ids: Iterable[str], now: float, *, sessions_only: bool = False
) -> int:
    """Revoke every live token and session of these users (only sign-in sessions if asked), and —
    unless only sessions go — every token they minted that is not service-owned; how many."""
    ids = list(user_ids)
    if not ids:
        return 0
    if sessions_only:
        return _revoke_where(session, now, ApiToken.user_id.in_(ids), ApiToken.kind == SESSION_KIND)
    return _revoke_where(session, now, ApiToken.user_id.in_(ids)) + revoke_tokens_minted_by(session, ids, now)


def revoke_tokens_minted_by(session: Session, user_ids: Iterable[str], now: float) -> int:
    """Revoke the live tokens these people minted, service-owned ones excepted; how many."""
    ids = list(user_ids)
    if not ids:
        return 0
    return _revoke_where(
        session, now, ApiToken.created_by_user_id.in_(ids), ApiToken.service_owned.is_(False)
    )


def revoke_tokens_minted_by_former_admins(
    session: Session, user_ids: Iterable[str], policy: Policy | None, now: float
) -> int:
    """After a directory change took groups from these users: revoke the tokens minted by those of
    them who are no longer platform admins (the role that minted them). Without a policy nobody's
    role is known, and nothing is revoked here (resolution still refuses them; see
    `creator_may_still_mint`)."""
    if policy is None:
        return 0
    former = [
        user.id
        for user in session.scalars(select(DirectoryUser).where(DirectoryUser.id.in_(list(user_ids))))
        if not user_principal(session, user, policy).platform_admin
    ]
    return revoke_tokens_minted_by(session, former, now)


def revoke_token(session: Session, token_id: str, now: float) -> ApiToken | None:
    """Revoke one token by id (idempotent); None when there is no such token."""
    row = session.get(ApiToken, token_id)
    if row is not None and row.revoked_at is None:
        row.revoked_at = now
    return row


def create_bootstrap_admin(session: Session, now: float) -> IssuedToken:
    """A platform-admin service token for embedded mode, where no directory exists yet."""
    return issue_token(
        session,
        name=BOOTSTRAP_TOKEN_NAME,
        now=now,
        subject=BOOTSTRAP_TOKEN_NAME,
        role=Role.PLATFORM_ADMIN,
        created_by="commons up",
    )
