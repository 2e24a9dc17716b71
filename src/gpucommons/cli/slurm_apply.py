"""`commons slurm apply`: bring the Slurm accounting database in line with the policy.

Reads what slurmdbd holds (sacctmgr show), compares it with what the policy asks for, and prints the
plan before writing anything; `--dry-run` stops there. Then runs one `sacctmgr -i` command per change,
in dependency order (QOS, accounts, users, then removals), and stops at the first failure saying how
far it got. `--prune` removes only what GPU Commons owns: users and accounts under its parent account
and QOS with its prefix that the policy no longer has.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape

from gpucommons.cli.slurm import (
    AccountPrefix,
    Cluster,
    GovernedQos,
    MembersFile,
    ParentAccount,
    PolicyFile,
    Qos,
    QosPrefix,
    RunnerPrefix,
    desired_or_exit,
    slurm_app,
)
from gpucommons.cli.tables import Col, print_table

if TYPE_CHECKING:
    from gpucommons.backends.slurm.accounts_plan import Change

console = Console(highlight=False, soft_wrap=True)

_STYLE = {"create": "green", "update": "yellow", "unchanged": "dim", "remove": "red"}
_DONE = {"create": "created", "update": "updated", "unchanged": "unchanged", "remove": "removed"}
_WOULD = {a: w if a == "unchanged" else f"would be {w}" for a, w in _DONE.items()}


#: Kinds and names whole; the note wraps.
PLAN_COLUMNS = (
    Col("KIND", keep=True),
    Col("NAME", keep=True),
    Col("RESULT", keep=True),
    Col("NOTE", wrap=True),
)


def plan_rows(changes: list[Change], *, dry_run: bool) -> list[list[str]]:
    words = _WOULD if dry_run else _DONE
    rows = []
    for change in changes:
        action = change.action.value
        rows.append(
            [change.kind, escape(change.name), f"[{_STYLE[action]}]{words[action]}[/]", escape(change.note)]
        )
    return rows


def counts(changes: list[Change]) -> str:
    """`2 to create, 1 to update, 5 unchanged` (and `N to remove` when there is any)."""
    tally = {action: sum(1 for c in changes if c.action.value == action) for action in _DONE}
    parts = [f"{tally['create']} to create", f"{tally['update']} to update"]
    if tally["remove"]:
        parts.append(f"{tally['remove']} to remove")
    return ", ".join([*parts, f"{tally['unchanged']} unchanged"])


@slurm_app.command("apply")
def apply_command(
    policy_file: PolicyFile,
    members_file: MembersFile = None,
    slurm_conf: Path | None = typer.Option(
        None, "--slurm-conf", help="slurm.conf of the cluster (default: $SLURM_CONF, else Slurm's default)."
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the plan against the database; write nothing."
    ),
    prune: bool = typer.Option(
        False, "--prune", help="Remove GPU Commons' accounts, users and QOS that the policy no longer has."
    ),
    qos: Qos = False,
    parent_account: ParentAccount = "gpucommons",
    account_prefix: AccountPrefix = "",
    qos_prefix: QosPrefix = "commons-",
    governed_qos: GovernedQos = "gpucommons",
    runner_prefix: RunnerPrefix = "commons-",
    cluster: Cluster = None,
) -> None:
    """Compare the policy's accounts, users and QOS with slurmdbd's, print the plan, then apply it."""
    from gpucommons.backends.slurm.accounts_plan import (
        SHOW_ACCOUNTS,
        SHOW_ASSOCIATIONS,
        SHOW_QOS,
        SHOW_USERS,
        AccountingReadError,
        Action,
        parse_current,
        plan,
    )
    from gpucommons.backends.slurm.client import SlurmClient, SlurmError

    desired = desired_or_exit(
        policy_file,
        members_file,
        qos=qos,
        parent_account=parent_account,
        account_prefix=account_prefix,
        qos_prefix=qos_prefix,
        governed_qos=governed_qos,
        runner_prefix=runner_prefix,
        cluster=cluster,
        nothing_done="nothing applied",
    )
    for note in desired.notes:
        typer.echo(f"note: {note}", err=True)
    conf = slurm_conf or (Path(os.environ["SLURM_CONF"]) if os.environ.get("SLURM_CONF") else None)
    client = SlurmClient(conf)
    try:
        qos_text, accounts_text, associations_text, users_text = (
            client.sacctmgr("--noheader", "--parsable2", *show, immediate=False)
            for show in (SHOW_QOS, SHOW_ACCOUNTS, SHOW_ASSOCIATIONS, SHOW_USERS)
        )
        current = parse_current(qos_text, accounts_text, associations_text, users_text, cluster=cluster)
    except (SlurmError, AccountingReadError) as exc:
        typer.echo(f"error: cannot read the accounting database: {exc}\nnothing was applied", err=True)
        raise typer.Exit(1) from None
    changes = plan(desired, current, prune=prune)
    print_table(console, PLAN_COLUMNS, plan_rows(changes, dry_run=True))
    console.print(f"plan against the accounting database: {counts(changes)}")
    if dry_run:
        console.print("dry run: nothing was written")
        return
    todo = [c for c in changes if c.action is not Action.UNCHANGED]
    for done, change in enumerate(todo):
        try:
            client.sacctmgr(*change.args)
        except SlurmError as exc:
            typer.echo(
                f"error: {change.kind} {change.name}: {exc}\n"
                f"applied {done} of {len(todo)} changes; the rest were not applied",
                err=True,
            )
            raise typer.Exit(1) from None
    if todo:
        console.print(f"applied with sacctmgr: {len(todo)} change{'s' if len(todo) != 1 else ''}")
    else:
        console.print("nothing to change: the accounting database already matches the policy")
