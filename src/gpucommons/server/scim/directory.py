"""The directory in the database: SCIM Users and Groups stored, found, changed, removed.

Each SCIM resource is kept whole as JSON (`attributes`) beside the columns that queries and roles
need (`identity.scim.index_user`/`index_group`). Memberships live in `group_members`, keyed by the
member id the IdP sent, whether or not such a user exists (a pending membership grants nothing).

Revocation happens here, in the same transaction as the change that causes it:
- a user set `active=false` or deleted loses every API token and session at once, and so do the
  tokens they minted (service-owned ones excepted);
- a user removed from a group (or whose group is deleted) loses their sign-in sessions; their API
  tokens stay but carry only the roles the directory still gives (recomputed on each request); if
  the removal ends their platform-admin role, the tokens they minted are revoked too.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from scim2_models import NotFoundException, UniquenessException
from sqlalchemy import ColumnElement, delete, func, select
from sqlalchemy.orm import Session

from gpucommons.domain.model import Policy
from gpucommons.identity.scim import (
    SCIM_POLICY,
    MemberEdit,
    ScimGroup,
    ScimUser,
    apply_member_edits,
    comparison_key,
    index_group,
    index_user,
    stored_resource,
)
from gpucommons.identity.scim_filter import Equals, FilterError, FilterValue
from gpucommons.server.auth.credentials import (
    revoke_tokens_minted_by_former_admins,
    revoke_user_credentials,
)
from gpucommons.store.identity_models import DirectoryGroup, DirectoryUser, GroupMember

_Row = TypeVar("_Row", DirectoryUser, DirectoryGroup)


def _iso(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def _text(value: FilterValue) -> str:
    return "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _user_condition(eq: Equals) -> ColumnElement[bool] | None:
    """The SQL for an equality on an indexed User attribute; None if it must be checked on the JSON."""
    v = eq.value
    match eq.attribute:
        case "username":
            return DirectoryUser.user_name_key == comparison_key(_text(v))
        case "externalid":
            return DirectoryUser.external_id == _text(v)
        case "id":
            return DirectoryUser.id == _text(v)
        case "displayname":
            return func.lower(DirectoryUser.display_name) == _text(v).lower()
        case "active":
            if not isinstance(v, bool):
                raise FilterError("active compares with true or false")
            return DirectoryUser.active.is_(v)
    return None


def _group_condition(eq: Equals) -> ColumnElement[bool] | None:
    v = eq.value
    match eq.attribute:
        case "displayname":
            return DirectoryGroup.display_name_key == comparison_key(_text(v))
        case "externalid":
            return DirectoryGroup.external_id == _text(v)
        case "id":
            return DirectoryGroup.id == _text(v)
        case "members" | "members.value":
            # Entra ID asks "is this user a member?" as `id eq "g" and members eq "u"`.
            return DirectoryGroup.id.in_(
                select(GroupMember.group_id).where(GroupMember.member_id == _text(v))
            )
    return None


def _json_values(data: Any, path: str) -> list[Any]:
    """Values at a dotted path (with an optional `[type eq "x"]` selector) of a stored resource."""
    current: list[Any] = [data]
    for part in path.split("."):
        selector: tuple[str, str] | None = None
        if "[" in part and part.endswith("]"):
            part, _, cond = part[:-1].partition("[")
            key, op, raw = cond.split(" ", 2) if cond.count(" ") >= 2 else ("", "", "")
            if op.lower() != "eq":
                raise FilterError(f"only eq selectors are supported in {path!r}")
            selector = (key.lower(), raw.strip().strip('"').lower())
        found: list[Any] = []
        for node in current:
            if not isinstance(node, dict):
                continue
            value = next((v for k, v in node.items() if k.lower() == part), None)
            items = value if isinstance(value, list) else [value]
            for item in items:
                if item is None:
                    continue
                if selector is not None:
                    if not isinstance(item, dict):
                        continue
                    sub = next((v for k, v in item.items() if k.lower() == selector[0]), None)
                    if str(sub).lower() != selector[1]:
                        continue
                found.append(item)
        current = found
    return current


def _json_match(data: dict[str, Any], eq: Equals) -> bool:
    wanted = _text(eq.value).lower()
    return any(
        not isinstance(v, dict | list) and _text(v).lower() == wanted
        for v in _json_values(data, eq.attribute)
    )


class Directory:
    """Directory operations inside one database session (one request)."""

    def __init__(self, session: Session, now: float, policy: Policy | None = None) -> None:
        self.session = session
        self.now = now
        #: The current policy, to know whose platform-admin role a group change ends.
        self.policy = policy

    # ------------------------------------------------------------------ users

    def user(self, user_id: str) -> DirectoryUser:
        row = self.session.get(DirectoryUser, user_id)
        if row is None:
            raise NotFoundException(detail=f"no user with id {user_id!r}")
        return row

    def query_users(self, where: Sequence[Equals], start: int, count: int) -> tuple[int, list[DirectoryUser]]:
        return self._query(DirectoryUser, _user_condition, where, start, count)

    def groups_of(self, user_ids: Iterable[str]) -> dict[str, list[DirectoryGroup]]:
        ids = list(user_ids)
        out: dict[str, list[DirectoryGroup]] = {i: [] for i in ids}
        if not ids:
            return out
        rows = self.session.execute(
            select(GroupMember.member_id, DirectoryGroup)
            .join(DirectoryGroup, DirectoryGroup.id == GroupMember.group_id)
            .where(GroupMember.member_id.in_(ids))
            .order_by(DirectoryGroup.display_name_key)
        )
        for member_id, group in rows:
            out[member_id].append(group)
        return out

    def user_resource(self, row: DirectoryUser, groups: Sequence[DirectoryGroup], base_url: str) -> ScimUser:
        data: dict[str, Any] = dict(row.attributes)
        data["id"] = row.id
        data["meta"] = self._meta(
            "User", row.created_at, row.updated_at, row.version, f"{base_url}Users/{row.id}"
        )
        if groups:
            data["groups"] = [
                {
                    "value": g.id,
                    "display": g.display_name,
                    "$ref": f"{base_url}Groups/{g.id}",
                    "type": "direct",
                }
                for g in groups
            ]
        return ScimUser.model_validate(data, scim_policy=SCIM_POLICY)

    def save_user(self, row: DirectoryUser | None, resource: ScimUser) -> DirectoryUser:
        """Create (`row` None) or replace a user with `resource`; revokes credentials on deactivation."""
        index = index_user(resource)
        self._refuse_clash(
            DirectoryUser.user_name_key == index.user_name_key, DirectoryUser, row,
            f"userName {index.user_name!r} is already taken",
        )  # fmt: skip
        was_active = row.active if row is not None else True
        row = row or self._new(DirectoryUser)
        row.user_name = index.user_name
        row.user_name_key = index.user_name_key
        row.external_id = index.external_id
        row.display_name = index.display_name
        row.email = index.email
        row.active = index.active
        self._stored(row, resource)
        if was_active and not index.active:
            revoke_user_credentials(self.session, [row.id], self.now)
        return row

    def delete_user(self, row: DirectoryUser) -> None:
        revoke_user_credentials(self.session, [row.id], self.now)
        for group in self.session.scalars(
            select(DirectoryGroup).join(GroupMember).where(GroupMember.member_id == row.id)
        ):
            members = [m for m in group.attributes.get("members", []) if m.get("value") != row.id]
            group.attributes = {**group.attributes, "members": members}
            group.updated_at = self.now
            group.version += 1
        self.session.execute(delete(GroupMember).where(GroupMember.member_id == row.id))
        self.session.delete(row)

    # ----------------------------------------------------------------- groups

    def group(self, group_id: str) -> DirectoryGroup:
        row = self.session.get(DirectoryGroup, group_id)
        if row is None:
            raise NotFoundException(detail=f"no group with id {group_id!r}")
        return row

    def query_groups(
        self, where: Sequence[Equals], start: int, count: int
    ) -> tuple[int, list[DirectoryGroup]]:
        return self._query(DirectoryGroup, _group_condition, where, start, count)

    def group_resource(self, row: DirectoryGroup, base_url: str, *, members: bool = True) -> ScimGroup:
        """The stored group as a SCIM resource; `members=False` leaves them out (an answer that
        excludes them need not pay for reading thousands of members)."""
        data: dict[str, Any] = dict(row.attributes)
        if not members:
            data.pop("members", None)
        data["id"] = row.id
        data["meta"] = self._meta(
            "Group", row.created_at, row.updated_at, row.version, f"{base_url}Groups/{row.id}"
        )
        return ScimGroup.model_validate(data, scim_policy=SCIM_POLICY)

    def save_group(self, row: DirectoryGroup | None, resource: ScimGroup) -> DirectoryGroup:
        """Create or replace a group; memberships follow its `members`, removed members lose sessions."""
        index = index_group(resource)
        self._refuse_clash(
            DirectoryGroup.display_name_key == index.display_name_key, DirectoryGroup, row,
            f"a group named {index.display_name!r} already exists",
        )  # fmt: skip
        row = row or self._new(DirectoryGroup)
        row.display_name = index.display_name
        row.display_name_key = index.display_name_key
        row.external_id = index.external_id
        self._stored(row, resource)
        self._set_members(row.id, index.member_ids)
        return row

    def edit_members(self, row: DirectoryGroup, edits: list[MemberEdit]) -> DirectoryGroup:
        """Apply membership edits straight to the stored group (the common PATCH, kept cheap)."""
        before = list(row.attributes.get("members", []))
        after = apply_member_edits(before, edits)
        if after == before:
            return row
        row.attributes = {**row.attributes, "members": after}
        row.updated_at = self.now
        row.version += 1
        old, new = {m["value"] for m in before}, {m["value"] for m in after}
        self._change_members(
            row.id, added=[m["value"] for m in after if m["value"] not in old], removed=old - new
        )
        return row

    def delete_group(self, row: DirectoryGroup) -> None:
        self._set_members(row.id, ())
        self.session.delete(row)

    def _set_members(self, group_id: str, member_ids: Sequence[str]) -> None:
        before = set(
            self.session.scalars(select(GroupMember.member_id).where(GroupMember.group_id == group_id))
        )
        self._change_members(
            group_id, added=[m for m in member_ids if m not in before], removed=before - set(member_ids)
        )

    def _change_members(self, group_id: str, added: Sequence[str], removed: set[str]) -> None:
        if removed:
            self.session.execute(
                delete(GroupMember).where(
                    GroupMember.group_id == group_id, GroupMember.member_id.in_(removed)
                )
            )
            revoke_user_credentials(self.session, removed, self.now, sessions_only=True)
        for member_id in added:
            self.session.add(GroupMember(group_id=group_id, member_id=member_id, added_at=self.now))
        self.session.flush()
        if removed:
            revoke_tokens_minted_by_former_admins(self.session, removed, self.policy, self.now)

    # ----------------------------------------------------------------- shared

    def _refuse_clash(
        self, same_key: ColumnElement[bool], model: type[_Row], row: _Row | None, detail: str
    ) -> None:
        """409 `uniqueness` when another row (not `row` itself) already holds the unique key."""
        clash = self.session.scalar(select(model.id).where(same_key))
        if clash is not None and (row is None or clash != row.id):
            raise UniquenessException(detail=detail)

    def _new(self, model: type[_Row]) -> _Row:
        row = model(id=uuid.uuid4().hex, created_at=self.now, version=0)
        self.session.add(row)
        return row

    def _stored(self, row: DirectoryUser | DirectoryGroup, resource: ScimUser | ScimGroup) -> None:
        row.attributes = stored_resource(resource)
        row.updated_at = self.now
        row.version = (row.version or 0) + 1
        self.session.flush()

    @staticmethod
    def _meta(kind: str, created: float, updated: float, version: int, location: str) -> dict[str, Any]:
        return {
            "resourceType": kind,
            "created": _iso(created),
            "lastModified": _iso(updated),
            "location": location,
            "version": f'W/"{version}"',
        }

    def _query(
        self,
        model: type[_Row],
        to_sql: Callable[[Equals], ColumnElement[bool] | None],
        where: Sequence[Equals],
        start: int,
        count: int,
    ) -> tuple[int, list[_Row]]:
        """Rows matching every equality, in a stable order (created, id), page `[start, start+count)`."""
        stmt = select(model)
        in_json: list[Equals] = []
        for eq in where:
            condition = to_sql(eq)
            if condition is None:
                in_json.append(eq)
            else:
                stmt = stmt.where(condition)
        stmt = stmt.order_by(model.created_at, model.id)
        if in_json:
            rows = [
                r for r in self.session.scalars(stmt) if all(_json_match(r.attributes, e) for e in in_json)
            ]
            return len(rows), rows[start - 1 : start - 1 + count]
        total = self.session.scalar(select(func.count()).select_from(stmt.order_by(None).subquery())) or 0
        page = list(self.session.scalars(stmt.offset(start - 1).limit(count))) if count > 0 else []
        return int(total), page
