"""Authorization: the one place that decides who may do what to which team. Pure; deny by default.

Every route asks `authorize(principal, action, team)` before acting (it raises `Forbidden`) and filters
every list with `visible_teams(principal, policy, action)`. Nothing else in the code base decides access.

Roles (see `Role` in `principal.py`):
- platform admin: everything, on every team;
- team admin of T: every team action on T, including cancelling other members' tasks;
- team member of T: submit to T; read T's tasks, events, logs, workspace, usage and costs; cancel or
  checkpoint only the tasks they submitted (pass `owner=`);
- finance: usage, costs and team summaries of every team — never task contents, events, logs or
  workspaces;
- scim: the directory-sync client; `scim.*` only, nothing else (and nobody but it and platform admins
  may use SCIM).
Cluster-wide reads (`cluster.read`, `policy.read`) are open to every signed-in caller except scim.
Tokens, audit, policy changes and the user directory are platform-admin only.

`team=None` on a team action means "across every team" (e.g. an unfiltered usage report): only
roles that cover every team (platform admin; finance for its actions) pass it.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from gpucommons.domain.model import Policy
from gpucommons.identity.principal import Principal


class Action(StrEnum):
    """What a caller wants to do. Stable wire names: they appear in the audit log and in errors."""

    # Team actions: checked against the team that owns the resource.
    TASK_SUBMIT = "task.submit"
    TASK_READ = "task.read"
    TASK_CANCEL = "task.cancel"
    TASK_CHECKPOINT = "task.checkpoint"
    EVENTS_READ = "events.read"
    LOGS_READ = "logs.read"
    WORKSPACE_READ = "workspace.read"
    USAGE_READ = "usage.read"
    COSTS_READ = "costs.read"
    TEAM_READ = "team.read"
    # Cluster-wide reads, open to every signed-in person.
    CLUSTER_READ = "cluster.read"
    POLICY_READ = "policy.read"
    # Platform administration.
    POLICY_APPLY = "policy.apply"
    TOKEN_CREATE = "token.create"
    TOKEN_READ = "token.read"
    TOKEN_REVOKE = "token.revoke"
    AUDIT_READ = "audit.read"
    DIRECTORY_READ = "directory.read"
    #: Replay history under a proposed policy, or run the quota advisor, on the server.
    PLANNING_RUN = "planning.run"
    # Directory sync (SCIM 2.0).
    SCIM_READ = "scim.read"
    SCIM_WRITE = "scim.write"


TEAM_ACTIONS: frozenset[Action] = frozenset(
    {
        Action.TASK_SUBMIT,
        Action.TASK_READ,
        Action.TASK_CANCEL,
        Action.TASK_CHECKPOINT,
        Action.EVENTS_READ,
        Action.LOGS_READ,
        Action.WORKSPACE_READ,
        Action.USAGE_READ,
        Action.COSTS_READ,
        Action.TEAM_READ,
    }
)
#: What a member may do in their own team (the owner-bound ones only on their own tasks).
MEMBER_ACTIONS: frozenset[Action] = TEAM_ACTIONS
#: Member actions that touch one task: a member may do them only to tasks they submitted.
OWNER_BOUND_ACTIONS: frozenset[Action] = frozenset({Action.TASK_CANCEL, Action.TASK_CHECKPOINT})
#: What a team admin may do in their team: everything a member may, on anyone's tasks.
TEAM_ADMIN_ACTIONS: frozenset[Action] = TEAM_ACTIONS
#: Finance reads money and usage of every team, never what a task is or prints.
FINANCE_ACTIONS: frozenset[Action] = frozenset({Action.USAGE_READ, Action.COSTS_READ, Action.TEAM_READ})
SIGNED_IN_ACTIONS: frozenset[Action] = frozenset({Action.CLUSTER_READ, Action.POLICY_READ})
SCIM_ACTIONS: frozenset[Action] = frozenset({Action.SCIM_READ, Action.SCIM_WRITE})


class Forbidden(PermissionError):
    """The caller is authenticated but may not do `action` (on `team`). The server answers 403."""

    def __init__(self, action: Action, team: str | None, reason: str) -> None:
        self.action = action
        self.team = team
        self.reason = reason
        where = f" on team {team!r}" if team is not None else ""
        super().__init__(f"not allowed to {action.value}{where}: {reason}")


def _denial(principal: Principal, action: Action, team: str | None, owner: str | None) -> str | None:
    """Why `principal` may not do `action`, or None when it may. The rules of the module docstring."""
    if principal.platform_admin:
        return None
    if action in SCIM_ACTIONS:
        return None if principal.scim else "directory sync needs a scim token"
    if principal.scim:
        return "a scim token may only use /scim/v2"
    if action in SIGNED_IN_ACTIONS:
        return None
    if action not in TEAM_ACTIONS:
        return "platform admins only"
    if principal.finance and action in FINANCE_ACTIONS:
        return None
    if team is None:
        return "needs a team, or a role that covers every team"
    if team in principal.admin_of and action in TEAM_ADMIN_ACTIONS:
        return None
    if team in principal.teams and action in MEMBER_ACTIONS:
        if action in OWNER_BOUND_ACTIONS and owner != principal.subject:
            return "members may do this only to their own tasks; ask a team admin"
        return None
    return "not a member of this team"


def is_allowed(
    principal: Principal, action: Action, team: str | None = None, *, owner: str | None = None
) -> bool:
    """`authorize` as a boolean, for templates and filters."""
    return _denial(principal, action, team, owner) is None


def authorize(
    principal: Principal, action: Action, team: str | None = None, *, owner: str | None = None
) -> None:
    """Return if `principal` may do `action` on `team`'s resource, else raise `Forbidden`.

    `owner` is the subject that submitted the task, for `task.cancel` and `task.checkpoint`.
    """
    reason = _denial(principal, action, team, owner)
    if reason is not None:
        raise Forbidden(action, team, reason)


def visible_teams(
    principal: Principal, policy: Policy | Iterable[str], action: Action = Action.TASK_READ
) -> frozenset[str]:
    """The teams whose resources of kind `action` the caller may see: filter every query with it.

    The default, `task.read`, is the strictest read (finance sees no team's tasks); pass
    `action=Action.USAGE_READ` (or `COSTS_READ`, `TEAM_READ`) for usage and cost listings.
    """
    names = policy.team_names if isinstance(policy, Policy) else tuple(policy)
    return frozenset(t for t in names if _denial(principal, action, t, principal.subject) is None)
