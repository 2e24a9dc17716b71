"""SCIM 2.0 resources as GPU Commons keeps them: models, the tolerance policy, mapping to our columns.

Pure: no I/O. The server (`server/scim`) validates requests with these models, applies PATCH with
`SCIM_POLICY`, stores `stored_user()`/`stored_group()` and indexes `index_user()`/`index_group()`.

What real identity providers send, and what we do about it (each has a replay test in
`tests/unit/identity/test_identity_scim_quirks.py`):
- Entra ID capitalises PATCH ops (`"Replace"`) — accepted (scim2-models compares ops case-insensitively);
- Entra ID (without the `aadOptscim062020` flag) sends booleans as strings (`"value": "False"`) —
  accepted (pydantic reads "True"/"False");
- Okta and Entra ID send a path-less `replace` whose value is an object (`{"active": false}`,
  `{"name.givenName": ...}`), Okta with the read-only `id` inside — applied attribute by attribute,
  `id` ignored;
- Entra ID removes group members with `path: "members"` and a value list — each listed member is
  removed (`remove_value_as_filter=apply`);
- Entra ID patches `emails[type eq "work"].value` on a user that has no work email — the entry is
  created (`unmatched_path_filter=create`);
- Okta updates users and groups by whole-resource PUT, with `id`, `meta` and `groups` in the body;
- Entra ID adds schema URIs nobody defines (`http://schemas.microsoft.com/2006/11/ResourceManagement/
  ADSCIM/2.0/Group`) — `normalise_resource` drops unknown URIs from `schemas`, unknown attributes are
  ignored;
- directories use private mail domains (`user@corp.local`; Okta's own examples use `okta.local`),
  which e-mail syntax checks refuse as "special use" — `allow_private_mail_domains()` accepts them.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

import email_validator
from scim2_models import (
    AuthenticationScheme,
    Bulk,
    ChangePassword,
    EnterpriseUser,
    ETag,
    Filter,
    Group,
    GroupMember,
    Patch,
    ResourceType,
    ScimPolicy,
    ScimProvider,
    ServiceProviderConfig,
    Sort,
    User,
)

#: The User resource we serve: core User with the enterprise extension (Entra ID and Okta send it).
ScimUser = User[EnterpriseUser]
ScimGroup = Group

USER_SCHEMA = str(User.__schema__)
ENTERPRISE_SCHEMA = str(EnterpriseUser.__schema__)
GROUP_SCHEMA = str(Group.__schema__)
KNOWN_RESOURCE_SCHEMAS = frozenset({USER_SCHEMA, ENTERPRISE_SCHEMA, GROUP_SCHEMA})

#: Largest page a list request gets, whatever `count` asks (announced as `filter.maxResults`).
MAX_RESULTS = 200
DEFAULT_COUNT = 100

#: How much of the spec's strictness we relax, and why (see the module docstring).
SCIM_POLICY = ScimPolicy(
    unknown=ScimPolicy.Unknown.ignore,
    remove_value_as_filter=ScimPolicy.RemoveValue.apply,
    unmatched_path_filter=ScimPolicy.UnmatchedPathFilter.create,
)

SERVICE_PROVIDER_CONFIG = ServiceProviderConfig(
    documentation_uri=None,
    patch=Patch(supported=True),
    bulk=Bulk(supported=False, max_operations=0, max_payload_size=0),
    filter=Filter(supported=True, max_results=MAX_RESULTS),
    change_password=ChangePassword(supported=False),
    sort=Sort(supported=False),
    etag=ETag(supported=False),
    authentication_schemes=[
        AuthenticationScheme(
            type="oauthbearertoken",
            name="Bearer token",
            description="A GPU Commons API token of role scim: commons token create --role scim --name okta",
            primary=True,
        )
    ],
)

PROVIDER = ScimProvider(
    models=[User, EnterpriseUser, Group],
    resource_types=[ResourceType.from_resource(ScimUser), ResourceType.from_resource(Group)],
    config=SERVICE_PROVIDER_CONFIG,
    policy=SCIM_POLICY,
)

_PRIVATE_MAIL_DOMAINS = ("local", "localhost", "test")


def allow_private_mail_domains() -> None:
    """Let e-mail values use private top-level domains (`corp.local`), as directories do.

    email-validator refuses the RFC 6761 special-use names by default and documents
    `SPECIAL_USE_DOMAIN_NAMES` as the list to edit. Idempotent.
    """
    names = email_validator.SPECIAL_USE_DOMAIN_NAMES
    for name in _PRIVATE_MAIL_DOMAINS:
        if name in names:
            names.remove(name)


def comparison_key(value: str) -> str:
    """How case-insensitive SCIM strings (userName, group displayName) compare: NFC, lower case.

    The same mapping as scim2-models' default comparison key, so filters, uniqueness and PATCH agree.
    """
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", value).lower())


def normalise_resource(payload: Any) -> Any:
    """A User or Group request body with the schema URIs nobody defines dropped from `schemas`."""
    if not isinstance(payload, dict):
        return payload
    schemas = payload.get("schemas")
    if isinstance(schemas, list):
        kept = [s for s in schemas if isinstance(s, str) and s in KNOWN_RESOURCE_SCHEMAS]
        payload = {**payload, "schemas": kept or schemas}
    return payload


def normalise_patch(payload: Any) -> Any:
    """A PatchOp body with `operations` spelled as the spec's `Operations` (some clients lower-case it)."""
    if isinstance(payload, dict) and "Operations" not in payload and "operations" in payload:
        payload = {k: v for k, v in payload.items() if k != "operations"} | {
            "Operations": payload["operations"]
        }
    return payload


@dataclass(frozen=True, slots=True)
class UserIndex:
    """The columns of `directory_users` that queries and roles use, read from a SCIM User."""

    user_name: str
    user_name_key: str
    external_id: str | None
    display_name: str | None
    email: str | None
    active: bool


@dataclass(frozen=True, slots=True)
class GroupIndex:
    display_name: str
    display_name_key: str
    external_id: str | None
    member_ids: tuple[str, ...]


def _primary_email(user: ScimUser) -> str | None:
    emails = user.emails or []
    for email in emails:
        if email.primary and email.value:
            return str(email.value)
    for email in emails:
        if email.value:
            return str(email.value)
    return None


def index_user(user: ScimUser) -> UserIndex:
    user_name = user.user_name or ""
    return UserIndex(
        user_name=user_name,
        user_name_key=comparison_key(user_name),
        external_id=user.external_id,
        display_name=user.display_name,
        email=_primary_email(user),
        # SCIM leaves `active` optional; a user pushed without it is active.
        active=user.active is not False,
    )


def index_group(group: ScimGroup) -> GroupIndex:
    name = group.display_name or ""
    seen: dict[str, None] = {}
    for member in group.members or []:
        if member.value:
            seen.setdefault(str(member.value), None)
    return GroupIndex(
        display_name=name,
        display_name_key=comparison_key(name),
        external_id=group.external_id,
        member_ids=tuple(seen),
    )


def dedupe_members(group: ScimGroup) -> None:
    """Keep the first entry of each member id (IdPs re-send members that are already there)."""
    if not group.members:
        return
    seen: set[str] = set()
    kept = []
    for member in group.members:
        key = str(member.value)
        if key not in seen:
            seen.add(key)
            kept.append(member)
    group.members = kept


#: Attributes the server owns or never keeps: identity and metadata are columns, the password is
#: never stored (sign-in is the IdP's job), a user's `groups` are computed from memberships.
_NOT_STORED = ("id", "meta", "password", "groups")


def stored_resource(resource: ScimUser | ScimGroup) -> dict[str, Any]:
    """The JSON we keep for a resource: everything it says, minus what `_NOT_STORED` names."""
    data = resource.model_dump(scim_ctx=None, by_alias=True, exclude_none=True, mode="json")
    for key in _NOT_STORED:
        data.pop(key, None)
    return data


# ------------------------------------------------------------------------------------------------
# Membership PATCHes, the bulk of what an IdP sends: applied without rebuilding the whole group.

_MEMBER_FILTER = re.compile(r'^\s*members\s*\[\s*value\s+eq\s+"((?:[^"\\]|\\.)*)"\s*\]\s*$', re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class MemberEdit:
    """One membership operation: `add` entries, `remove` ids, `remove_all`, or `replace` by entries."""

    op: str
    entries: tuple[dict[str, Any], ...] = ()
    ids: tuple[str, ...] = ()


def _member_entry(raw: Any) -> dict[str, Any] | None:
    """A member as we keep it (value, display, type, $ref without nulls), or None if it is not one."""
    if not isinstance(raw, dict) or not isinstance(raw.get("value"), str) or not raw["value"]:
        return None
    try:
        member = GroupMember.model_validate(raw, scim_policy=SCIM_POLICY)
    except ValueError:
        return None
    dumped: dict[str, Any] = member.model_dump(scim_ctx=None, by_alias=True, exclude_none=True, mode="json")
    return dumped


def members_only_patch(payload: Any) -> list[MemberEdit] | None:
    """The membership edits of a PatchOp that touches nothing but `members`, in the shapes Okta and
    Entra ID send (add a list; remove `members[value eq "x"]`; remove with a value list; replace a
    list); None for anything else, which then takes the general scim2-models path."""
    if (
        not isinstance(payload, dict)
        or not isinstance(payload.get("Operations"), list)
        or not payload["Operations"]
    ):
        return None
    edits: list[MemberEdit] = []
    for operation in payload["Operations"]:
        if not isinstance(operation, dict):
            return None
        op = str(operation.get("op", "")).lower()
        path = operation.get("path")
        value = operation.get("value")
        if not isinstance(path, str):
            return None
        selected = _MEMBER_FILTER.match(path)
        if selected and op == "remove" and value is None:
            edits.append(MemberEdit("remove", ids=(json.loads(f'"{selected.group(1)}"'),)))
            continue
        if path.strip().lower() != "members":
            return None
        if op == "remove" and value is None:
            edits.append(MemberEdit("remove_all"))
            continue
        items = value if isinstance(value, list) else [value]
        entries = [_member_entry(item) for item in items]
        if any(e is None for e in entries) or op not in ("add", "remove", "replace"):
            return None
        kept = tuple(e for e in entries if e is not None)
        if op == "remove":
            edits.append(MemberEdit("remove", ids=tuple(e["value"] for e in kept)))
        else:
            edits.append(MemberEdit(op, entries=kept))
    return edits


def apply_member_edits(members: list[dict[str, Any]], edits: list[MemberEdit]) -> list[dict[str, Any]]:
    """The members after the edits, in order; an id is listed once (the first entry for it wins)."""
    current = {str(m.get("value")): m for m in members}
    for edit in edits:
        if edit.op == "add":
            for entry in edit.entries:
                current.setdefault(entry["value"], entry)
        elif edit.op == "remove":
            for member_id in edit.ids:
                current.pop(member_id, None)
        elif edit.op == "remove_all":
            current = {}
        else:
            current = {}
            for entry in edit.entries:
                current.setdefault(entry["value"], entry)
    return list(current.values())
