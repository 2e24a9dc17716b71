"""`SlurmAccounting` → text an administrator runs: sacctmgr commands, or a file for `sacctmgr load`.

The commands create everything on a database that has none of it (`sacctmgr -i add` of an existing
object prints "Nothing new added" and exits 1); `commons slurm apply` is the way to bring an existing
database in line. A load file merges into what exists, but cannot create QOS: their commands are
printed as comments at its top, to run first.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from gpucommons.backends.slurm.accounts import AccountSpec, QosSpec, SlurmAccounting, UserSpec


def qos_args(qos: QosSpec) -> tuple[str, ...]:
    args = ["add", "qos", qos.name, f"Description={qos.description}"]
    if qos.gpu_limit is not None:
        args.append(f"GrpTRES=gres/gpu={qos.gpu_limit}")
    return tuple(args)


def account_args(account: AccountSpec, cluster: str | None) -> tuple[str, ...]:
    args = ["add", "account", account.name]
    if cluster:
        args.append(f"Cluster={cluster}")
    if account.parent != "root":
        args.append(f"Parent={account.parent}")
    args += [f"Description={account.description}", f"Organization={account.organization}"]
    if account.qos:
        args.append(f"QOS={','.join(account.qos)}")
    if account.default_qos:
        args.append(f"DefaultQOS={account.default_qos}")
    return tuple(args)


def user_args(user: UserSpec, cluster: str | None) -> tuple[str, ...]:
    args = ["add", "user", user.user, f"Account={user.account}"]
    if cluster:
        args.append(f"Cluster={cluster}")
    if user.qos:
        args.append(f"QOS={','.join(user.qos)}")
    if user.default_qos:
        args.append(f"DefaultQOS={user.default_qos}")
    return tuple(args)


def creation_args(accounting: SlurmAccounting) -> list[tuple[str, ...]]:
    """Every `sacctmgr -i` argument list that creates the accounting objects, in dependency order."""
    cluster = accounting.options.cluster
    return [
        *(qos_args(q) for q in accounting.qos),
        *(account_args(a, cluster) for a in accounting.accounts),
        *(user_args(u, cluster) for u in accounting.users),
    ]


def shell_line(args: Sequence[str]) -> str:
    return shlex.join(["sacctmgr", "-i", *args])


def render_commands(accounting: SlurmAccounting, source: str = "") -> str:
    """A shell script of sacctmgr commands that creates everything on a fresh accounting database."""
    lines = [
        "#!/bin/sh",
        "# GPU Commons → Slurm accounting" + (f" from {source}" if source else "") + ".",
        "# Run as a Slurm administrator on a database that has none of these objects yet;",
        "# `commons slurm apply` brings an existing database in line instead.",
    ]
    lines += [f"# note: {note}" for note in accounting.notes]
    lines += [shell_line(args) for args in creation_args(accounting)]
    return "\n".join(lines) + "\n"


def _quote(value: str) -> str:
    # The load file quotes values with single quotes and has no escape for one inside.
    if "'" in value:
        raise ValueError(f"{value!r} holds a single quote, which a sacctmgr load file cannot carry")
    return f"'{value}'"


def render_load_file(accounting: SlurmAccounting, cluster: str, source: str = "") -> str:
    """A file for `sacctmgr -i load FILE` (cluster, accounts, users); QOS commands as comments on top."""
    lines = [
        "# GPU Commons → Slurm accounting" + (f" from {source}" if source else "") + ".",
        "# Load with: sacctmgr -i load THIS_FILE",
    ]
    if accounting.qos:
        lines.append("# A load file cannot create QOS: run these first.")
        lines += [f"#   {shell_line(qos_args(q))}" for q in accounting.qos]
    lines += [f"# note: {note}" for note in accounting.notes]
    lines.append(f"Cluster - {_quote(cluster)}")
    defaults: dict[str, str] = {}
    for user in accounting.users:
        defaults.setdefault(user.user, user.account)
    by_parent: dict[str, list[AccountSpec]] = {}
    for account in accounting.accounts:
        by_parent.setdefault(account.parent, []).append(account)
    users_by_account: dict[str, list[UserSpec]] = {}
    for user in accounting.users:
        users_by_account.setdefault(user.account, []).append(user)
    # Parents before children: the file format wants each parent to exist before its `Parent -` line.
    order = ["root"]
    for parent in order:
        children = by_parent.get(parent, [])
        if not children:
            continue
        lines.append(f"Parent - {_quote(parent)}")
        for account in children:
            fields = [
                f"Account - {_quote(account.name)}",
                f"Description={_quote(account.description)}",
                f"Organization={_quote(account.organization)}",
            ]
            if account.qos:
                fields.append(f"QOS={_quote(','.join(account.qos))}")
            if account.default_qos:
                fields.append(f"DefaultQOS={_quote(account.default_qos)}")
            lines.append(":".join(fields))
            order.append(account.name)
    for account in accounting.accounts:
        members = users_by_account.get(account.name, [])
        if not members:
            continue
        lines.append(f"Parent - {_quote(account.name)}")
        for user in members:
            fields = [f"User - {_quote(user.user)}", f"DefaultAccount={_quote(defaults[user.user])}"]
            if user.qos:
                fields.append(f"QOS={_quote(','.join(user.qos))}")
            if user.default_qos:
                fields.append(f"DefaultQOS={_quote(user.default_qos)}")
            lines.append(":".join(fields))
    return "\n".join(lines) + "\n"
