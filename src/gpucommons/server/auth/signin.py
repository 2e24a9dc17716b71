"""A verified sign-in becomes a directory user and a short-lived, revocable session token.

Linking: the user whose `oidc_subject` is the token's `iss#sub`; else, the first time, the directory
user with the same userName (case-insensitive) or, failing that, the same e-mail, which is then
linked for good; else a new user created from the claims — the only case where the groups claim
seeds memberships (rule in `identity.oidc`). A deactivated user cannot sign in.
"""

from __future__ import annotations

import uuid

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpucommons.api.errors import Forbidden
from gpucommons.identity.oidc import SignInIdentity
from gpucommons.identity.scim import GROUP_SCHEMA, USER_SCHEMA, comparison_key
from gpucommons.server.auth.credentials import SESSION_KIND, IssuedToken, issue_token
from gpucommons.store.identity_models import DirectoryGroup, DirectoryUser, GroupMember


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


def _new_user(session: Session, who: SignInIdentity, now: float) -> DirectoryUser:
    attributes: dict[str, object] = {"schemas": [USER_SCHEMA], "userName": who.user_name, "active": True}
    if who.display_name:
        attributes["displayName"] = who.display_name
    if who.email:
        attributes["emails"] = [{"value": who.email, "primary": True}]
    user = DirectoryUser(
        id=uuid.uuid4().hex,
        user_name=who.user_name,
        user_name_key=comparison_key(who.user_name),
        display_name=who.display_name,
        email=who.email,
        active=True,
        oidc_subject=who.subject_key,
        attributes=attributes,
        created_at=now,
        updated_at=now,
        version=1,
    )
    session.add(user)
    session.flush()
    return user


def _seed_memberships(session: Session, user: DirectoryUser, groups: tuple[str, ...], now: float) -> None:
    """Put a user created by this sign-in into the groups its claim names (creating missing groups)."""
    for name in dict.fromkeys(groups):
        group = session.scalar(
            select(DirectoryGroup).where(DirectoryGroup.display_name_key == comparison_key(name))
        )
        if group is None:
            group = DirectoryGroup(
                id=uuid.uuid4().hex,
                display_name=name,
                display_name_key=comparison_key(name),
                attributes={"schemas": [GROUP_SCHEMA], "displayName": name, "members": []},
                created_at=now,
                updated_at=now,
                version=1,
            )
            session.add(group)
            session.flush()
        members = [*group.attributes.get("members", []), {"value": user.id, "display": user.user_name}]
        group.attributes = {**group.attributes, "members": members}
        group.updated_at = now
        group.version += 1
        session.add(GroupMember(group_id=group.id, member_id=user.id, added_at=now))
    session.flush()


def sign_in(
    session: Session, who: SignInIdentity, now: float, *, ttl_s: int, seed_groups: bool, via: str
) -> IssuedToken:
    """The session token a verified sign-in ends in (`via`: "web" or "cli", shown in token lists)."""
    user = _linked_user(session, who)
    if user is None:
        user = _new_user(session, who, now)
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
