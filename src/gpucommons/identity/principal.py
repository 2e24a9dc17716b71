"""Who is making a request, and in which roles. Pure: built by the server from tokens and the directory."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    PLATFORM_ADMIN = "platform_admin"
    FINANCE = "finance"
    TEAM_ADMIN = "team_admin"
    TEAM_MEMBER = "team_member"
    #: A directory-sync client (an IdP pushing SCIM): may use /scim/v2 only.
    SCIM = "scim"


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller: a user (or a service token) with the teams it belongs to.

    `member_of` and `admin_of` are team names; `platform_admin` and `finance` are cluster-wide roles.
    """

    subject: str
    display_name: str = ""
    platform_admin: bool = False
    finance: bool = False
    scim: bool = False
    member_of: frozenset[str] = frozenset()
    admin_of: frozenset[str] = frozenset()
    #: Id of the API token or session that authenticated this request (for revocation and audit).
    credential_id: str | None = None
    #: The directory user behind the request (None for a service token such as the bootstrap admin).
    user_id: str | None = None

    @property
    def teams(self) -> frozenset[str]:
        """Every team the caller belongs to, as member or admin."""
        return self.member_of | self.admin_of

    def roles_in(self, team: str) -> frozenset[Role]:
        roles: set[Role] = set()
        if team in self.admin_of:
            roles.add(Role.TEAM_ADMIN)
        if team in self.member_of or team in self.admin_of:
            roles.add(Role.TEAM_MEMBER)
        return frozenset(roles)
