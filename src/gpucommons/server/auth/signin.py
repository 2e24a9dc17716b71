"""A verified sign-in becomes a directory user and a short-lived, revocable session token.

Linking: the user whose `oidc_subject` is the token's `iss#sub`; else, the first time, the directory
user with the same userName (case-insensitive) or, failing that, the same e-mail, which is then
linked for good; else a new user created from the claims — the only case where the groups claim
seeds memberships (rule in `identity.oidc`). A deactivated user cannot sign in.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpucommons.api.errors import Forbidden
from gpucommons.identity.oidc import SignInIdentity
from gpucommons.identity.scim import comparison_key
from gpucommons.server.auth.credentials import SESSION_KIND, IssuedToken, issue_token
from gpucommons.server.auth.directory_edits import add_member, ensure_group, new_user
from gpucommons.store.identity_models import DirectoryUser


def _linked_user(session: Session, who: SignInIdentity) -> DirectoryUser | None:
    user = session.scalar(select(DirectoryUser).where(DirectoryUser.oidc_subject == who.subject_key))
    if user is not None:
        return user
    user = session.scalar(
        select(DirectoryUser).where(
            DirectoryUser.user_name_key == comparison_key(who.user_name), DirectoryUser.oidc_subject.is_(None)
        )
    )
    if user is None and who.email:
        user = session.scalar(
            select(DirectoryUser)
            .where(func.lower(DirectoryUser.email) == who.email.lower(), DirectoryUser.oidc_subject.is_(None))
            .order_by(DirectoryUser.created_at)
        )
    if user is not None:
        user.oidc_subject = who.subject_key
    return user


def _seed_memberships(session: Session, user: DirectoryUser, groups: tuple[str, ...], now: float) -> None:
    """Put a user created by this sign-in into the groups its claim names (creating missing groups)."""
    for name in dict.fromkeys(groups):
        add_member(session, ensure_group(session, name, now), user, now)


def sign_in(
    session: Session, who: SignInIdentity, now: float, *, ttl_s: int, seed_groups: bool, via: str
) -> IssuedToken:
    """The session token a verified sign-in ends in (`via`: "web" or "cli", shown in token lists)."""
    user = _linked_user(session, who)
    if user is None:
        user = new_user(
            session, who.user_name, now, display_name=who.display_name, email=who.email,
            oidc_subject=who.subject_key,
        )  # fmt: skip
        if seed_groups:
            _seed_memberships(session, user, who.groups, now)
    if not user.active:
        raise Forbidden(f"user {user.user_name!r} is deactivated in the directory")
    return issue_token(
        session,
        name=f"{via} sign-in",
        now=now,
        subject=user.user_name,
        user_id=user.id,
        expires_at=now + ttl_s,
        kind=SESSION_KIND,
        created_by=f"oidc:{via}",
    )
