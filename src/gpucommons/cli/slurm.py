"""`commons slurm render`: the policy as Slurm accounting (pure file-in/file-out: prints sacctmgr commands
or a `sacctmgr load` file). `slurm_app` and the shared options are exported for `commons slurm apply`
(cli/slurm_apply.py), so both compute the same objects.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpucommons.cli.k8s import load_policy_or_exit
from gpucommons.cli.main import app

if TYPE_CHECKING:
    from gpucommons.backends.slurm.accounts import SlurmAccounting

slurm_app = typer.Typer(
    name="slurm",
    help="Compile the policy to Slurm accounting: an account per team with its users, optional QOS.",
    no_args_is_help=True,
)
app.add_typer(slurm_app, name="slurm")

# Site settings shared by `render` and `apply`: both must compute the same objects.
PolicyFile = Annotated[Path, typer.Option("--policy", "-p", help="The policy file (commons.yaml).")]
MembersFile = Annotated[
    Path | None,
    typer.Option(
        "--members",
        help="YAML/JSON file mapping each directory group to its Unix user names. "
        "Default: this machine's group database (getent group).",
    ),
]
Qos = Annotated[
    bool,
    typer.Option(
        "--qos/--no-qos",
        help="A QOS per team capping plain sbatch jobs at its nominal GPUs (slurm.conf must enforce "
        "limits and QOS: docs/slurm.md); GPU Commons' own jobs use an unlimited QOS.",
    ),
]
ParentAccount = Annotated[str, typer.Option(help="The account that holds every team account.")]
AccountPrefix = Annotated[str, typer.Option(help="Team accounts are PREFIX + team name (lower case).")]
QosPrefix = Annotated[str, typer.Option(help="Team QOS are PREFIX + team name (with --qos).")]
GovernedQos = Annotated[
    str, typer.Option(help="The unlimited QOS of the jobs GPU Commons submits (with --qos).")
]
RunnerPrefix = Annotated[
    str,
    typer.Option(
        help="GPU Commons submits a team's tasks as the Unix user PREFIX + team; empty: add no such user."
    ),
]
Cluster = Annotated[
    str | None,
    typer.Option(help="The Slurm cluster name (ClusterName); default: every cluster of the database."),
]


class Format(StrEnum):
    COMMANDS = "commands"
    LOAD = "load"


def desired_or_exit(
    policy_file: Path,
    members_file: Path | None,
    *,
    qos: bool,
    parent_account: str,
    account_prefix: str,
    qos_prefix: str,
    governed_qos: str,
    runner_prefix: str,
    cluster: str | None,
    nothing_done: str,
) -> SlurmAccounting:
    """The accounting objects the policy asks for, or every problem on stderr and exit 1."""
    from gpucommons.backends.slurm.accounts import AccountingError, AccountingOptions, desired_accounting
    from gpucommons.backends.slurm.members import (
        MembersError,
        members_from_file,
        members_from_system,
        policy_groups,
    )

    policy = load_policy_or_exit(policy_file, nothing_done)
    try:
        if members_file is None:
            members = members_from_system(policy_groups(policy))
        else:
            members = members_from_file(members_file.read_text(encoding="utf-8"), str(members_file))
    except OSError as exc:
        typer.echo(f"{members_file}: cannot read the members file: {exc.strerror}; {nothing_done}", err=True)
        raise typer.Exit(1) from None
    except MembersError as exc:
        typer.echo(f"{exc}; {nothing_done}", err=True)
        raise typer.Exit(1) from None
    options = AccountingOptions(
        parent=parent_account,
        account_prefix=account_prefix,
        qos=qos,
        qos_prefix=qos_prefix,
        governed_qos=governed_qos,
        runner_prefix=runner_prefix or None,
        cluster=cluster,
    )
    try:
        return desired_accounting(policy, members, options)
    except AccountingError as exc:
        typer.echo(f"{exc}; {nothing_done}", err=True)
        raise typer.Exit(1) from None


@slurm_app.command("render")
def render_command(
    policy_file: PolicyFile,
    members_file: MembersFile = None,
    fmt: Format = typer.Option(
        Format.COMMANDS,
        "--format",
        help="commands: a shell script of sacctmgr commands; load: a sacctmgr load file.",
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write to this file instead of printing."),
    qos: Qos = False,
    parent_account: ParentAccount = "gpucommons",
    account_prefix: AccountPrefix = "",
    qos_prefix: QosPrefix = "commons-",
    governed_qos: GovernedQos = "gpucommons",
    runner_prefix: RunnerPrefix = "commons-",
    cluster: Cluster = None,
) -> None:
    """Print what creates the policy's accounts, users and QOS on a Slurm accounting database."""
    from gpucommons.backends.slurm.accounts_render import render_commands, render_load_file

    accounting = desired_or_exit(
        policy_file,
        members_file,
        qos=qos,
        parent_account=parent_account,
        account_prefix=account_prefix,
        qos_prefix=qos_prefix,
        governed_qos=governed_qos,
        runner_prefix=runner_prefix,
        cluster=cluster,
        nothing_done="nothing rendered",
    )
    for note in accounting.notes:
        typer.echo(f"note: {note}", err=True)
    if fmt is Format.LOAD:
        if not cluster:
            typer.echo(
                "a sacctmgr load file names its cluster: give --cluster (slurm.conf ClusterName)", err=True
            )
            raise typer.Exit(1)
        try:
            text = render_load_file(accounting, cluster, source=str(policy_file))
        except ValueError as exc:
            typer.echo(f"{exc}; nothing rendered", err=True)
            raise typer.Exit(1) from None
    else:
        text = render_commands(accounting, source=str(policy_file))
    if out is None:
        typer.echo(text, nl=False)
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        typer.echo(f"{out}: cannot write: {exc.strerror}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"wrote {out}")
