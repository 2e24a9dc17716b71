"""Demo people for embedded mode without an identity provider (`commons up`, on request).

For each team of the policy: `<team>-member` in the team's first group and, if it has admin groups,
`<team>-lead` in the first of them; plus `finance` in the first finance group. They are ordinary
directory users (as if SCIM had pushed them), each with an API token, so the role table can be
tried without an IdP. Existing users and groups of the same names are reused, never duplicated.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpucommons.domain.model import Policy
from gpucommons.identity.scim import comparison_key
from gpucommons.server.auth.credentials import issue_token
from gpucommons.server.auth.directory_edits import add_member, ensure_group, new_user
from gpucommons.store.identity_models import DirectoryUser


@dataclass(frozen=True, slots=True)
class DemoUser:
    user_name: str
    group: str
    token: str


def _user(session: Session, name: str, now: float) -> DirectoryUser:
    user = session.scalar(select(DirectoryUser).where(DirectoryUser.user_name_key == comparison_key(name)))
    return user if user is not None else new_user(session, name, now, display_name=name)


def create_demo_users(session: Session, policy: Policy, now: float) -> list[DemoUser]:
    """Demo users with one fresh API token each (shown once; only hashes are kept)."""
    wanted: list[tuple[str, str]] = []
    for team in policy.teams:
        if team.groups:
            wanted.append((f"{team.name}-member", team.groups[0]))
        if team.admin_groups:
            wanted.append((f"{team.name}-lead", team.admin_groups[0]))
    if policy.identity.finance_groups:
        wanted.append(("finance", policy.identity.finance_groups[0]))
    out = []
    for name, group_name in wanted:
        user = _user(session, name, now)
        add_member(session, ensure_group(session, group_name, now), user, now)
        token = issue_token(session, name="demo", now=now, subject=name, user_id=user.id, created_by="demo")
        out.append(DemoUser(name, group_name, token.token))
    return out
