"""Who is in each directory group, as Unix user names: what Slurm associations are made of.

Two sources: a file (`group: [user, ...]`, YAML or JSON), for sites whose directory groups are not
Unix groups; or this machine's group database (`getent group`: /etc/group, LDAP or SSSD), where they
are — on most HPC clusters the directory's groups are the Unix groups. A group's members are its
listed members plus the users whose primary group it is.
"""

from __future__ import annotations

import grp
import pwd
import re
from collections.abc import Iterable
from typing import Any

import yaml

from gpucommons.domain.model import Policy

#: A Unix user name as useradd accepts it (and a trailing `$` for machine accounts).
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}\$?$")


class MembersError(ValueError):
    """A members file that does not parse or holds something that is not a user name."""


def members_from_file(text: str, source: str = "members file") -> dict[str, list[str]]:
    """`{group: [user, ...]}` from YAML or JSON text; every problem named with its group."""
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise MembersError(f"{source}: not YAML or JSON ({str(exc).splitlines()[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise MembersError(f"{source}: must map each group to its users (`ml-nlp: [alice, bob]`)")
    problems: list[str] = []
    members: dict[str, list[str]] = {}
    for group, users in data.items():
        if not isinstance(group, str) or not group.strip():
            problems.append(f"{group!r} is not a group name")
            continue
        if users is None:
            members[group] = []
            continue
        if not isinstance(users, list):
            problems.append(f"{group}: must be a list of user names, not {users!r}")
            continue
        bad = [u for u in users if not isinstance(u, str) or not _USER.match(u)]
        if bad:
            problems.append(f"{group}: {', '.join(repr(b) for b in bad)} is not a Unix user name")
            continue
        members[group] = list(dict.fromkeys(users))
    if problems:
        raise MembersError(f"{source}: " + "; ".join(problems))
    return members


def members_from_system(groups: Iterable[str]) -> dict[str, list[str]]:
    """The members of each of `groups` that exists in this machine's group database (others left out)."""
    wanted = list(dict.fromkeys(groups))
    found: dict[str, list[str]] = {}
    gids: dict[int, str] = {}
    for name in wanted:
        try:
            entry = grp.getgrnam(name)
        except KeyError:
            continue
        found[name] = list(entry.gr_mem)
        gids[entry.gr_gid] = name
    if gids:
        for user in pwd.getpwall():
            group = gids.get(user.pw_gid)
            if group is not None and user.pw_name not in found[group]:
                found[group].append(user.pw_name)
    return found


def policy_groups(policy: Policy) -> list[str]:
    """Every directory group the teams name (members and admins), in policy order."""
    return list(dict.fromkeys(g for t in policy.teams for g in (*t.groups, *t.admin_groups)))
