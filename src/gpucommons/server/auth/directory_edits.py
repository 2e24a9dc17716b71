"""Directory changes made by the server itself (sign-in seeding, demo users), not by SCIM.

They keep the same two records SCIM keeps: the group's stored SCIM resource (its `members`) and the
`group_members` rows that roles are read from.
"""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpucommons.identity.scim import GROUP_SCHEMA, USER_SCHEMA, comparison_key
from gpucommons.store.identity_models import DirectoryGroup, DirectoryUser, GroupMember


def new_user(
    session: Session,
    user_name: str,
    now: float,
    *,
    display_name: str | None = None,
    email: str | None = None,
    oidc_subject: str | None = None,
) -> DirectoryUser:
    """A new active user, stored as the SCIM resource an IdP would have pushed for them."""
    attributes: dict[str, object] = {"schemas": [USER_SCHEMA], "userName": user_name, "active": True}
    if display_name:
        attributes["displayName"] = display_name
    if email:
        attributes["emails"] = [{"value": email, "primary": True}]
    user = DirectoryUser(
        id=uuid.uuid4().hex,
        user_name=user_name,
        user_name_key=comparison_key(user_name),
        display_name=display_name,
        email=email,
        active=True,
        oidc_subject=oidc_subject,
        attributes=attributes,
        created_at=now,
        updated_at=now,
        version=1,
    )
    session.add(user)
    session.flush()
    return user


def ensure_group(session: Session, name: str, now: float) -> DirectoryGroup:
    """The group with this display name (case-insensitive), created empty if there is none."""
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
    return group


def add_member(session: Session, group: DirectoryGroup, user: DirectoryUser, now: float) -> None:
    """Make `user` a member of `group` (no-op if already)."""
    if session.get(GroupMember, (group.id, user.id)) is not None:
        return
    session.add(GroupMember(group_id=group.id, member_id=user.id, added_at=now))
    members = [*group.attributes.get("members", []), {"value": user.id, "display": user.user_name}]
    group.attributes = {**group.attributes, "members": members}
    group.updated_at = now
    group.version += 1
    session.flush()
