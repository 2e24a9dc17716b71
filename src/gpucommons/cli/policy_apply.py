"""`commons policy apply FILE`: validate locally, then make it the server's current policy."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpucommons.cli._client import api, fail
from gpucommons.cli.policy import policy_app
from gpucommons.policy import PolicyError


@policy_app.command("apply")
def apply(
    file: Annotated[Path, typer.Argument(help="The new policy file.")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Let the server validate it without applying it.")
    ] = False,
) -> None:
    """Apply a new policy: running tasks keep running; the next scheduling cycle uses the new quotas."""
    from gpucommons.policy import parse_policy  # pydantic + YAML: not at start-up

    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot read {file}: {exc}") from None
    try:
        parse_policy(text, str(file))
    except PolicyError as error:
        for issue in error.issues:
            typer.echo(issue.format(error.source), err=True)
        raise fail(f"{file}: policy refused ({len(error.issues)} problem(s)); nothing was applied") from None
    with api() as client:
        info = client.apply_policy(text, dry_run=dry_run)
    what = f"{info.cluster_name}: teams {', '.join(info.teams)}"
    if dry_run:
        typer.echo(
            f"dry run: the policy is valid and would replace version {info.version} ({what}); "
            "nothing was applied"
        )
    else:
        typer.echo(f"applied policy version {info.version} ({what})")
