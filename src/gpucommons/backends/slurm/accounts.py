"""The policy as Slurm accounting objects: an account per team, its users, and optional QOS (pure).

- One parent account (`gpucommons`) holds an account per team, so Slurm's own accounting (sacct,
  sreport) groups usage by the same teams as our ledger, and `--prune` only ever touches accounts
  under that parent.
- A team's users are the members of its directory groups (and admin groups), given as a mapping
  group → Unix user names: from the system's group database (LDAP/SSSD groups on most clusters) or
  from a file (`commons slurm render --members`).
- The team's Unix account (`commons-<team>`), which GPU Commons submits the team's tasks as, is a user
  of the team's account too.
- With QOS: each team gets a QOS `commons-<team>` whose `GrpTRES=gres/gpu=N` caps what the team's
  users can hold with plain `sbatch` at the team's nominal quota (N = its nominal GPUs over every
  pool); it is the account's only and default QOS. Jobs GPU Commons submits run under a separate,
  unlimited QOS (`gpucommons`) that only the team's Unix account may use: our engine already keeps them
  within quota and borrowing rules, and a cap would stop the borrowing it allows. Slurm enforces QOS
  limits only with `AccountingStorageEnforce=associations,limits,qos` in slurm.conf.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpucommons.backends.local.accounts import account_name as unix_account_name
from gpucommons.domain.model import Policy, Team

#: Slurm stores account, user and QOS names in lower case; anything but these characters is replaced.
_UNSAFE = re.compile(r"[^a-z0-9_.-]+")


class AccountingError(ValueError):
    """The policy cannot be expressed as Slurm accounts (two teams on one account name, ...)."""


@dataclass(frozen=True, slots=True)
class AccountingOptions:
    """Site settings of `commons slurm render|apply`."""

    #: The account that holds every team account.
    parent: str = "gpucommons"
    #: Team account = prefix + team name (lower case).
    account_prefix: str = ""
    #: A QOS per team that keeps plain `sbatch` jobs within the team's nominal quota.
    qos: bool = False
    qos_prefix: str = "commons-"
    #: The unlimited QOS of the jobs GPU Commons submits (with `qos`).
    governed_qos: str = "gpucommons"
    #: Prefix of the team's Unix account that GPU Commons submits as; None: no such user is added.
    runner_prefix: str | None = "commons-"
    #: Slurm cluster name for `Cluster=` (None: what sacctmgr does by default, every cluster).
    cluster: str | None = None


@dataclass(frozen=True, slots=True)
class QosSpec:
    name: str
    description: str
    #: GrpTRES=gres/gpu=N; None = no limit.
    gpu_limit: int | None


@dataclass(frozen=True, slots=True)
class AccountSpec:
    name: str
    parent: str
    description: str
    organization: str
    #: Allowed QOS (empty: inherited, Slurm's default) and the default one.
    qos: tuple[str, ...] = ()
    default_qos: str | None = None
    #: The team it stands for (None for the parent account).
    team: str | None = None


@dataclass(frozen=True, slots=True)
class UserSpec:
    """One user in one account (a Slurm association)."""

    user: str
    account: str
    #: Only for the team's Unix account with QOS on: the governed QOS. Empty: inherit the account's.
    qos: tuple[str, ...] = ()
    default_qos: str | None = None
    #: Why the user is there: "member of ml-nlp", "GPU Commons runs team nlp's tasks as this user".
    why: str = ""


@dataclass(frozen=True, slots=True)
class SlurmAccounting:
    """Everything `render` prints and `apply` makes true, in creation order."""

    qos: tuple[QosSpec, ...]
    accounts: tuple[AccountSpec, ...]
    users: tuple[UserSpec, ...]
    options: AccountingOptions
    #: Sentences for the operator (a group with no members found, ...).
    notes: tuple[str, ...] = field(default=())

    def account_of(self, team: str) -> str:
        for account in self.accounts:
            if account.team == team:
                return account.name
        raise KeyError(team)


def slurm_name(text: str) -> str:
    """Lower case, unsafe characters → `-` (Slurm lower-cases account and QOS names itself)."""
    return _UNSAFE.sub("-", text.lower()).strip("-") or "team"


def team_account(team: str, options: AccountingOptions = AccountingOptions()) -> str:
    """The Slurm account of `team`: what `sbatch --account` gets for the team's tasks."""
    return slurm_name(options.account_prefix + team)


def team_qos(team: str, options: AccountingOptions = AccountingOptions()) -> str:
    return slurm_name(options.qos_prefix + team)


def team_runner(team: str, options: AccountingOptions = AccountingOptions()) -> str | None:
    """The team's Unix account that GPU Commons submits as (as in the local backend)."""
    if options.runner_prefix is None:
        return None
    return unix_account_name(team, options.runner_prefix)


def nominal_gpus(team: Team) -> int:
    return sum(q.nominal.gpus for q in team.quotas)


def desired_accounting(
    policy: Policy,
    members: Mapping[str, Sequence[str]],
    options: AccountingOptions = AccountingOptions(),
) -> SlurmAccounting:
    """The accounts, users and QOS the policy asks for. `members`: directory group → Unix user names."""
    _check_distinct(policy, options)
    notes: list[str] = []
    qos: list[QosSpec] = []
    if options.qos:
        qos.append(
            QosSpec(
                slurm_name(options.governed_qos),
                "jobs GPU Commons admitted (its engine keeps them within quota)",
                None,
            )
        )
        qos += [
            QosSpec(team_qos(t.name, options), f"plain sbatch jobs of team {t.name}", nominal_gpus(t))
            for t in policy.teams
        ]
    parent = slurm_name(options.parent)
    accounts = [AccountSpec(parent, "root", "GPU Commons teams", "gpucommons")]
    users: list[UserSpec] = []
    missing_groups: dict[str, list[str]] = {}
    for team in policy.teams:
        account = team_account(team.name, options)
        limited = team_qos(team.name, options) if options.qos else None
        accounts.append(
            AccountSpec(
                account,
                parent,
                f"GPU Commons team {team.name}",
                team.cohort,
                qos=(limited,) if limited else (),
                default_qos=limited,
                team=team.name,
            )
        )
        seen: set[str] = set()
        for group in (*team.groups, *team.admin_groups):
            if group not in members:
                missing_groups.setdefault(group, []).append(team.name)
                continue
            for user in members[group]:
                name = user.strip()
                if name and name not in seen:
                    seen.add(name)
                    users.append(UserSpec(name, account, why=f"member of {group}"))
        runner = team_runner(team.name, options)
        if runner is not None:
            governed = slurm_name(options.governed_qos) if options.qos else None
            why = f"GPU Commons runs team {team.name}'s tasks as this user"
            if runner in seen:
                users = [u for u in users if not (u.user == runner and u.account == account)]
            users.append(
                UserSpec(
                    runner,
                    account,
                    qos=(governed,) if governed else (),
                    default_qos=governed,
                    why=why,
                )
            )
    for group, teams in missing_groups.items():
        notes.append(
            f"group {group} (team {', '.join(teams)}) has no members here: its users get no Slurm account"
        )
    return SlurmAccounting(tuple(qos), tuple(accounts), tuple(users), options, tuple(notes))


def _check_distinct(policy: Policy, options: AccountingOptions) -> None:
    """Two teams may not land on one account (`NLP` and `nlp`) or one QOS, nor on GPU Commons' own."""
    _refuse_clashes(
        "account",
        {slurm_name(options.parent): "the parent account"},
        [(t.name, team_account(t.name, options)) for t in policy.teams],
        "rename one, or set another --account-prefix/--parent-account",
    )
    if options.qos:
        _refuse_clashes(
            "QOS",
            {slurm_name(options.governed_qos): "the governed QOS"},
            [(t.name, team_qos(t.name, options)) for t in policy.teams],
            "set another --qos-prefix or --governed-qos",
        )


def _refuse_clashes(kind: str, taken: dict[str, str], wanted: list[tuple[str, str]], advice: str) -> None:
    for team, name in wanted:
        if name in taken:
            raise AccountingError(
                f"team {team} and {taken[name]} would both be Slurm {kind} {name!r} "
                f"(Slurm lower-cases names): {advice}"
            )
        taken[name] = f"team {team}"
