"""The `commons` command: one typer app; each command group lives in its own module."""

from __future__ import annotations

import typer

from gpucommons import __version__

app = typer.Typer(
    name="commons",
    help="GPU Commons: share one GPU cluster between many ML teams.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"commons {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """GPU Commons: quotas, borrowing, preemption and chargeback for a shared GPU cluster."""


# Command groups register themselves below (one import per module, each adding its commands to `app`).
import gpucommons.cli.policy  # noqa: E402,F401
import gpucommons.cli.k8s  # noqa: E402,F401
import gpucommons.cli.up  # noqa: E402,F401
import gpucommons.cli.tasks  # noqa: E402,F401
import gpucommons.cli.teams  # noqa: E402,F401
import gpucommons.cli.usage  # noqa: E402,F401
import gpucommons.cli.policy_apply  # noqa: E402,F401
import gpucommons.cli.doctor  # noqa: E402,F401
import gpucommons.cli.login  # noqa: E402,F401
import gpucommons.cli.token  # noqa: E402,F401
import gpucommons.cli.audit  # noqa: E402,F401
import gpucommons.cli.chargeback  # noqa: E402,F401
import gpucommons.cli.simulate  # noqa: E402,F401
import gpucommons.cli.whatif  # noqa: E402,F401
import gpucommons.cli.bench  # noqa: E402,F401
import gpucommons.cli.invoice  # noqa: E402,F401
import gpucommons.cli.advise  # noqa: E402,F401
import gpucommons.cli.k8s_apply  # noqa: E402,F401
import gpucommons.cli.slurm  # noqa: E402,F401
import gpucommons.cli.slurm_apply  # noqa: E402,F401
