"""Who may use a priority class: the policy's `priority_classes[].teams` and `.roles`. Pure.

A class without either is open to every task of every team. Otherwise:
- `teams`: only tasks of these teams may use it — for everyone, platform admins included, since it
  is a rule about the team's share of the cluster (and Kubernetes enforces it per namespace);
- `roles`: the submitter must hold one of them for the task's team: `team_member` (anyone who may
  submit to it), `team_admin` (its admins), `platform_admin`. Platform admins administer every team,
  so they pass any `roles` rule.

`class_denial` says why a submission may not use a class (a sentence naming the class and who may use
it), `usable_teams` which of the caller's teams may; the submit service and the dashboard ask these,
nothing else decides it. `team_denial` is the part that needs no submitter (the `teams` rule), for the
Kubernetes admission check, which sees Jobs but not who created them.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpucommons.domain.model import PriorityClass
from gpucommons.identity.principal import Principal

_ROLE_WORDS = {
    "platform_admin": "platform admins",
    "team_admin": "team admins",
    "team_member": "team members",
}


def _listing(words: Iterable[str]) -> str:
    items = list(words)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def who_may_use(pclass: PriorityClass) -> str:
    """`priority class 'production' is reserved for team admins of teams nlp and vision`."""
    parts = []
    if pclass.roles:
        parts.append(_listing(_ROLE_WORDS.get(r, r) for r in pclass.roles))
    if pclass.teams:
        teams = f"team {pclass.teams[0]}" if len(pclass.teams) == 1 else "teams " + _listing(pclass.teams)
        parts.append(("of " if pclass.roles else "") + teams)
    rule = " ".join(parts) if parts else "everyone"
    return f"priority class {pclass.name!r} is reserved for {rule}"


def _holds(principal: Principal, role: str, team: str) -> bool:
    if role == "platform_admin":
        return principal.platform_admin
    if role == "team_admin":
        return team in principal.admin_of
    if role == "team_member":
        return team in principal.teams
    return False


def team_denial(pclass: PriorityClass, team: str) -> str | None:
    """Why no task of `team` may use `pclass` (its `teams` rule), whoever submits it; None if it may.
    The Kubernetes admission check says this of Jobs that were not submitted through GPU Commons."""
    if pclass.teams and team not in pclass.teams:
        return f"{who_may_use(pclass)}; team {team!r} may not use it"
    return None


def class_denial(principal: Principal, pclass: PriorityClass, team: str) -> str | None:
    """Why `principal` may not submit a task of `team` in `pclass`, or None when they may (the
    caller's right to submit to `team` at all is `authorize`'s business)."""
    denied = team_denial(pclass, team)
    if denied is not None:
        return denied
    held = principal.platform_admin or any(_holds(principal, role, team) for role in pclass.roles)
    if pclass.roles and not held:
        return f"{who_may_use(pclass)}; you are not among them in team {team!r}"
    return None


def usable_teams(principal: Principal, pclass: PriorityClass, teams: Iterable[str]) -> list[str]:
    """Those of `teams` (the ones the caller may submit to) whose tasks the caller may put in `pclass`."""
    return [t for t in teams if class_denial(principal, pclass, t) is None]
