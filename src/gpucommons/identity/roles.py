"""From directory groups to a Principal: which teams and cluster roles a person holds. Pure.

The rule (docs/design.md, "Identity"):
- a member of any of a team's `groups` is a member of the team;
- a member of any of its `admin_groups` is the team's admin (and so also a member);
- `identity.admin_groups` make platform admins, `identity.finance_groups` finance.
Group names match the directory group's displayName case-insensitively (IdPs differ in case).

API tokens may narrow this (`scope_principal`) but never widen it: a token of a user carries at most
the user's current directory roles, recomputed on each request, so a group removal takes effect on the
next request. Service tokens (no user: the bootstrap admin, a scim token) carry exactly their role.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from gpucommons.domain.model import Policy
from gpucommons.identity.principal import Principal, Role


def _fold(names: Iterable[str]) -> frozenset[str]:
    return frozenset(n.casefold() for n in names)


def principal_from_groups(
    subject: str,
    groups: Iterable[str],
    policy: Policy | None,
    *,
    display_name: str = "",
    user_id: str | None = None,
    credential_id: str | None = None,
) -> Principal:
    """The roles that membership of `groups` (directory group names) gives under `policy`."""
    held = _fold(groups)
    if policy is None:
        return Principal(subject, display_name, user_id=user_id, credential_id=credential_id)
    member_of = frozenset(t.name for t in policy.teams if held & _fold(t.groups))
    admin_of = frozenset(t.name for t in policy.teams if held & _fold(t.admin_groups))
    return Principal(
        subject=subject,
        display_name=display_name,
        platform_admin=bool(held & _fold(policy.identity.admin_groups)),
        finance=bool(held & _fold(policy.identity.finance_groups)),
        member_of=member_of | admin_of,
        admin_of=admin_of,
        user_id=user_id,
        credential_id=credential_id,
    )


def service_principal(subject: str, role: Role, team: str | None, *, credential_id: str | None) -> Principal:
    """The principal of a token bound to no user: exactly its role (a team role needs `team`)."""
    teams = frozenset({team}) if team is not None else frozenset()
    is_team_role = role in (Role.TEAM_ADMIN, Role.TEAM_MEMBER)
    return Principal(
        subject=subject,
        display_name=subject,
        platform_admin=role is Role.PLATFORM_ADMIN,
        finance=role is Role.FINANCE,
        scim=role is Role.SCIM,
        member_of=teams if is_team_role else frozenset(),
        admin_of=teams if role is Role.TEAM_ADMIN else frozenset(),
        credential_id=credential_id,
    )


def scope_principal(principal: Principal, role: Role | None, team: str | None) -> Principal:
    """`principal` narrowed to what a token scoped to `role` (and `team`) may use. Never widens:
    every flag and team kept is one the principal already holds, and a scim confinement stays."""
    keep = frozenset({team}) if team is not None else None

    def within(teams: frozenset[str]) -> frozenset[str]:
        return teams if keep is None else teams & keep

    if role is None:
        return _with(principal, member_of=within(principal.member_of), admin_of=within(principal.admin_of))
    none: frozenset[str] = frozenset()
    return _with(
        principal,
        platform_admin=principal.platform_admin and role is Role.PLATFORM_ADMIN,
        finance=principal.finance and role is Role.FINANCE,
        member_of=within(principal.admin_of if role is Role.TEAM_ADMIN else principal.teams)
        if role in (Role.TEAM_ADMIN, Role.TEAM_MEMBER)
        else none,
        admin_of=within(principal.admin_of) if role is Role.TEAM_ADMIN else none,
    )


def _with(p: Principal, **changes: object) -> Principal:
    return replace(p, **changes)  # type: ignore[arg-type]
