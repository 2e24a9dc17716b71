"""Use cases behind `commons token create|list|revoke` (platform admins only; routes check that).

A token is either bound to a directory user (it acts as the user, with the user's current roles,
optionally narrowed to one role and team) or a service token holding exactly one role: `scim` for an
IdP's provisioning connector, `finance` for a billing export, a team role for a team's CI robot.

Every token records the person its authority comes from: the user who minted it or, when a token
minted it, the person behind that token (so a chain of tokens cannot outlive the person who began
it). A platform admin may instead make a service token `service_owned`: it then belongs to the
service, and tokens it mints have no person behind them.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from gpucommons.api.errors import Conflict, NotFound, ValidationFailed
from gpucommons.api.identity import TokenCreate, TokenInfo
from gpucommons.domain.model import Policy
from gpucommons.identity.principal import Principal, Role
from gpucommons.identity.scim import comparison_key
from gpucommons.server.auth.credentials import IssuedToken, issue_token, revoke_token
from gpucommons.store.identity_models import ApiToken, DirectoryUser

_TEAM_ROLES = (Role.TEAM_ADMIN, Role.TEAM_MEMBER)


def utc_datetime(t: float | None) -> datetime | None:
    return None if t is None else datetime.fromtimestamp(t, UTC)


def token_info(row: ApiToken) -> TokenInfo:
    return TokenInfo(
        id=row.id,
        name=row.name,
        kind="session" if row.kind == "session" else "api",
        subject=row.subject,
        user_id=row.user_id,
        role=row.role,
        team=row.team,
        created_at=datetime.fromtimestamp(row.created_at, UTC),
        created_by=row.created_by,
        created_by_user_id=row.created_by_user_id,
        service_owned=row.service_owned,
        expires_at=utc_datetime(row.expires_at),
        revoked_at=utc_datetime(row.revoked_at),
        last_used_at=utc_datetime(row.last_used_at),
    )


def find_user(session: Session, name_or_id: str) -> DirectoryUser | None:
    return session.scalar(
        select(DirectoryUser).where(
            or_(DirectoryUser.id == name_or_id, DirectoryUser.user_name_key == comparison_key(name_or_id))
        )
    )


def minting_person(session: Session, who: Principal) -> str | None:
    """The directory user a token minted by `who` rests on: `who`'s user, else the person behind the
    token `who` used (None when that token is service-owned or has no person behind it)."""
    if who.user_id is not None:
        return who.user_id
    if who.credential_id is None:
        return None
    minter = session.get(ApiToken, who.credential_id)
    if minter is None or minter.service_owned:
        return None
    return minter.created_by_user_id


def create_token(
    session: Session, policy: Policy | None, who: Principal, body: TokenCreate, now: float
) -> IssuedToken:
    """Check the request against the directory and the policy, then issue the token."""
    role = Role(body.role) if body.role else None
    if body.team is not None and (policy is None or not policy.has_team(body.team)):
        raise ValidationFailed(f"unknown team {body.team!r}", {"field": "team"})
    if body.team is not None and role not in (*_TEAM_ROLES, None):
        raise ValidationFailed(f"--team only goes with a team role, not {role}", {"field": "team"})
    expires_at = now + body.expires_in_s if body.expires_in_s else None
    creator = minting_person(session, who)
    if body.user is not None:
        if body.service_owned:
            raise ValidationFailed(
                "a token acting as a user belongs to that user: only a service token (--role without "
                "--user) can be service-owned",
                {"field": "service_owned"},
            )
        if role is Role.SCIM:
            raise ValidationFailed("a scim token is a service token: leave out --user", {"field": "role"})
        user = find_user(session, body.user)
        if user is None:
            raise NotFound(f"no user {body.user!r} in the directory", {"field": "user"})
        if not user.active:
            raise Conflict(f"user {user.user_name!r} is deactivated")
        return issue_token(
            session, name=body.name, now=now, subject=user.user_name, user_id=user.id, role=role,
            team=body.team, expires_at=expires_at, created_by=who.subject, created_by_user_id=creator,
        )  # fmt: skip
    if role is None:
        raise ValidationFailed("give --user (a token acting as that user) or --role (a service token)")
    if role in _TEAM_ROLES and body.team is None:
        raise ValidationFailed(f"a {role} service token needs --team", {"field": "team"})
    return issue_token(
        session, name=body.name, now=now, subject=body.name, role=role, team=body.team,
        expires_at=expires_at, created_by=who.subject, created_by_user_id=creator,
        service_owned=body.service_owned,
    )  # fmt: skip


def list_tokens(session: Session, include_revoked: bool) -> list[ApiToken]:
    stmt = select(ApiToken).order_by(ApiToken.created_at, ApiToken.id)
    if not include_revoked:
        stmt = stmt.where(ApiToken.revoked_at.is_(None))
    return list(session.scalars(stmt))


def revoke(session: Session, token_id: str, now: float) -> ApiToken:
    row = revoke_token(session, token_id, now)
    if row is None:
        raise NotFound(f"no token with id {token_id!r}")
    return row
