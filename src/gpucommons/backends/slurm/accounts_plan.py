"""What `commons slurm apply` must change: the desired accounting against what slurmdbd holds (pure).

The current state comes from four `sacctmgr --noheader --parsable2 show ...` listings (`SHOW_*`);
`plan` compares and returns one `Change` per object, unchanged ones included (for the report), in the
order they must run: QOS, accounts (parents first), users, then removals in reverse. Slurm keeps
descriptions and organisations in lower case, so they compare without case. Removals happen only
with `prune`, and only under the parent account and the QOS prefix GPU Commons owns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from gpucommons.backends.slurm.accounts import AccountSpec, QosSpec, SlurmAccounting, UserSpec, slurm_name
from gpucommons.backends.slurm.accounts_render import account_args, qos_args, user_args
from gpucommons.backends.slurm.tres import TresError, tres_gpus

SHOW_QOS = ("show", "qos", "format=Name,Description,GrpTRES")
SHOW_ACCOUNTS = ("show", "account", "format=Account,Description,Organization")
SHOW_ASSOCIATIONS = ("show", "association", "format=Cluster,Account,ParentName,User,QOS,DefaultQOS")
SHOW_USERS = ("show", "user", "format=User,DefaultAccount")


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    UNCHANGED = "unchanged"
    REMOVE = "remove"


@dataclass(frozen=True, slots=True)
class Change:
    """One object and what happens to it; `args` run as `sacctmgr -i ARGS` (empty when unchanged)."""

    action: Action
    kind: str
    name: str
    args: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True, slots=True)
class CurrentQos:
    name: str
    description: str
    gpu_limit: int | None


@dataclass(frozen=True, slots=True)
class CurrentAssociation:
    cluster: str
    account: str
    parent: str
    user: str
    qos: tuple[str, ...]
    default_qos: str


@dataclass(frozen=True, slots=True)
class CurrentAccounting:
    qos: dict[str, CurrentQos]
    #: account → (description, organization)
    accounts: dict[str, tuple[str, str]]
    associations: tuple[CurrentAssociation, ...]
    #: user → default account
    default_accounts: dict[str, str] = field(default_factory=dict)

    def account_association(self, account: str) -> CurrentAssociation | None:
        return next((a for a in self.associations if a.account == account and not a.user), None)

    def user_association(self, user: str, account: str) -> CurrentAssociation | None:
        return next((a for a in self.associations if a.account == account and a.user == user), None)


class AccountingReadError(ValueError):
    """A sacctmgr listing that does not have the columns asked for."""


def _rows(text: str, columns: int, what: str) -> list[list[str]]:
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = line.split("|")
        # --parsable2 has no trailing '|'; tolerate --parsable's.
        if len(cells) == columns + 1 and cells[-1] == "":
            cells = cells[:-1]
        if len(cells) != columns:
            raise AccountingReadError(f"sacctmgr {what} line {line!r} does not have {columns} fields")
        rows.append(cells)
    return rows


def _qos_list(text: str) -> tuple[str, ...]:
    return tuple(sorted(q for q in (p.strip() for p in text.split(",")) if q))


def parse_current(
    qos_text: str,
    accounts_text: str,
    associations_text: str,
    users_text: str = "",
    cluster: str | None = None,
) -> CurrentAccounting:
    """The four SHOW_* listings (`--noheader --parsable2`) → CurrentAccounting; `cluster` filters
    associations to one cluster."""
    qos: dict[str, CurrentQos] = {}
    for name, description, grp in _rows(qos_text, 3, "show qos"):
        try:
            limit = tres_gpus(grp) if "gres/gpu" in grp else None
        except TresError as exc:
            raise AccountingReadError(f"QOS {name}: {exc}") from None
        qos[name] = CurrentQos(name, description, limit)
    accounts = {a: (d, o) for a, d, o in _rows(accounts_text, 3, "show account")}
    associations = tuple(
        CurrentAssociation(c, a, p, u, _qos_list(q), dq)
        for c, a, p, u, q, dq in _rows(associations_text, 6, "show association")
        if cluster is None or c == cluster
    )
    defaults = {user: account for user, account in _rows(users_text, 2, "show user")}
    return CurrentAccounting(qos, accounts, associations, defaults)


def plan(desired: SlurmAccounting, current: CurrentAccounting, *, prune: bool = False) -> list[Change]:
    """The changes that make `current` what `desired` says, in the order they must run."""
    cluster = desired.options.cluster
    changes = [_qos_change(q, current) for q in desired.qos]
    changes += [_account_change(a, current, cluster) for a in desired.accounts]
    changes += [_user_change(u, current, cluster) for u in desired.users]
    if prune:
        changes += _removals(desired, current, cluster)
    return changes


def _same(a: str, b: str) -> bool:
    return a.strip().lower() == b.strip().lower()


def _qos_change(want: QosSpec, current: CurrentAccounting) -> Change:
    have = current.qos.get(want.name)
    if have is None:
        note = f"GrpTRES=gres/gpu={want.gpu_limit}" if want.gpu_limit is not None else "no limit"
        return Change(Action.CREATE, "qos", want.name, qos_args(want), note)
    settings = []
    if have.gpu_limit != want.gpu_limit:
        # -1 clears a limit in sacctmgr.
        settings.append(f"GrpTRES=gres/gpu={-1 if want.gpu_limit is None else want.gpu_limit}")
    if not _same(have.description, want.description):
        settings.append(f"Description={want.description}")
    if not settings:
        return Change(Action.UNCHANGED, "qos", want.name)
    note = f"GPU limit {have.gpu_limit} → {want.gpu_limit}" if have.gpu_limit != want.gpu_limit else ""
    return Change(Action.UPDATE, "qos", want.name, ("modify", "qos", want.name, "set", *settings), note)


def _account_change(want: AccountSpec, current: CurrentAccounting, cluster: str | None) -> Change:
    have = current.accounts.get(want.name)
    association = current.account_association(want.name)
    if have is None or association is None:
        note = f"under {want.parent}" + (f", QOS {','.join(want.qos)}" if want.qos else "")
        return Change(Action.CREATE, "account", want.name, account_args(want, cluster), note)
    settings, notes = [], []
    if want.team is not None and association.parent != want.parent:
        settings.append(f"Parent={want.parent}")
        notes.append(f"parent {association.parent or 'none'} → {want.parent}")
    if want.team is not None and not _same(have[0], want.description):
        settings.append(f"Description={want.description}")
    if want.team is not None and not _same(have[1], want.organization):
        settings.append(f"Organization={want.organization}")
        notes.append(f"organization {have[1]} → {want.organization}")
    if want.qos and association.qos != tuple(sorted(want.qos)):
        settings.append(f"QOS={','.join(want.qos)}")
        notes.append(f"QOS {','.join(association.qos) or 'none'} → {','.join(want.qos)}")
    if want.default_qos and association.default_qos != want.default_qos:
        settings.append(f"DefaultQOS={want.default_qos}")
    if not settings:
        return Change(Action.UNCHANGED, "account", want.name)
    where = ("where", f"Name={want.name}", *((f"Cluster={cluster}",) if cluster else ()))
    args = ("modify", "account", *where, "set", *settings)
    return Change(Action.UPDATE, "account", want.name, args, "; ".join(notes))


def _user_change(want: UserSpec, current: CurrentAccounting, cluster: str | None) -> Change:
    name = f"{want.user} in {want.account}"
    have = current.user_association(want.user, want.account)
    if have is None:
        return Change(Action.CREATE, "user", name, user_args(want, cluster), want.why)
    settings = []
    if want.qos and have.qos != tuple(sorted(want.qos)):
        settings.append(f"QOS={','.join(want.qos)}")
    if want.default_qos and have.default_qos != want.default_qos:
        settings.append(f"DefaultQOS={want.default_qos}")
    if not settings:
        return Change(Action.UNCHANGED, "user", name)
    where = (
        "where",
        f"Name={want.user}",
        f"Account={want.account}",
        *((f"Cluster={cluster}",) if cluster else ()),
    )
    return Change(Action.UPDATE, "user", name, ("modify", "user", *where, "set", *settings), "QOS")


def _removals(desired: SlurmAccounting, current: CurrentAccounting, cluster: str | None) -> list[Change]:
    """Users and accounts under our parent that the policy no longer has, and our QOS it no longer has.

    Slurm refuses to remove an account that is still some user's default account, so the account's
    users go first, one association at a time; a user who keeps other associations is first given one
    of them as default.
    """
    parent = slurm_name(desired.options.parent)
    wanted_accounts = {a.name for a in desired.accounts}
    wanted_users = {(u.user, u.account) for u in desired.users}
    ours = {a.account for a in current.associations if not a.user and a.parent == parent}
    gone_accounts = sorted(ours - wanted_accounts)
    where_cluster = (f"Cluster={cluster}",) if cluster else ()
    leaving = [
        a
        for a in current.associations
        if a.user
        and (a.account in gone_accounts or (a.account in wanted_accounts - {parent}))
        and (a.user, a.account) not in wanted_users
    ]
    leaving_keys = {(a.user, a.account) for a in leaving}
    out: list[Change] = []
    for assoc in leaving:
        user, account = assoc.user, assoc.account
        kept = sorted(
            a.account
            for a in current.associations
            if a.user == user and (user, a.account) not in leaving_keys
        )
        if kept and current.default_accounts.get(user) == account:
            out.append(
                Change(
                    Action.UPDATE,
                    "user",
                    f"{user} default account",
                    (
                        "modify",
                        "user",
                        "where",
                        f"Name={user}",
                        *where_cluster,
                        "set",
                        f"DefaultAccount={kept[0]}",
                    ),
                    f"{account} → {kept[0]} (Slurm keeps no user without a default account)",
                )
            )
        why = (
            "its team is no longer in the policy"
            if account in gone_accounts
            else "no longer in the team's groups"
        )
        out.append(
            Change(
                Action.REMOVE,
                "user",
                f"{user} in {account}",
                ("remove", "user", "where", f"Name={user}", f"Account={account}", *where_cluster),
                why,
            )
        )
        leaving_keys.discard((user, account))
    for account in gone_accounts:
        out.append(
            Change(
                Action.REMOVE,
                "account",
                account,
                ("remove", "account", "where", f"Name={account}", *where_cluster),
                "its team is no longer in the policy",
            )
        )
    if desired.options.qos:
        prefix = desired.options.qos_prefix.lower()
        wanted_qos = {q.name for q in desired.qos}
        for name in sorted(current.qos):
            if name.startswith(prefix) and name not in wanted_qos:
                out.append(
                    Change(
                        Action.REMOVE, "qos", name, ("remove", "qos", "where", f"Name={name}"), "no such team"
                    )
                )
    return out
