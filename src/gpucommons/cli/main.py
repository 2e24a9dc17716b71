"""The `commons` command: one typer app; each command group lives in its own module."""

from __future__ import annotations

import sys
from importlib import import_module
from typing import Any

import typer
from typer.core import TyperGroup

from gpucommons import __version__

#: Each command, in the order `commons --help` lists them, and the modules that register it on `app`.
#: A command's module is imported only when that command runs (or `--help` lists them all): every
#: `commons` invocation — including the `commons checkpoint` a task sends inside its grace period —
#: pays for typer and its own command, not for all of them.
COMMANDS: dict[str, tuple[str, ...]] = {
    "up": ("gpucommons.cli.up",),
    "submit": ("gpucommons.cli.tasks",),
    "tasks": ("gpucommons.cli.tasks",),
    "logs": ("gpucommons.cli.tasks",),
    "cancel": ("gpucommons.cli.tasks",),
    "checkpoint": ("gpucommons.cli.tasks",),
    "teams": ("gpucommons.cli.teams",),
    "queue": ("gpucommons.cli.teams",),
    "doctor": ("gpucommons.cli.doctor",),
    "login": ("gpucommons.cli.login",),
    "audit": ("gpucommons.cli.audit",),
    "simulate": ("gpucommons.cli.simulate",),
    "whatif": ("gpucommons.cli.whatif",),
    "invoice": ("gpucommons.cli.invoice",),
    "advise": ("gpucommons.cli.advise",),
    "policy": ("gpucommons.cli.policy", "gpucommons.cli.policy_apply"),
    "k8s": ("gpucommons.cli.k8s", "gpucommons.cli.k8s_apply"),
    "slurm": ("gpucommons.cli.slurm", "gpucommons.cli.slurm_apply"),
    "usage": ("gpucommons.cli.usage",),
    "token": ("gpucommons.cli.token",),
    "chargeback": ("gpucommons.cli.chargeback",),
    "bench": ("gpucommons.cli.bench",),
    "backup": ("gpucommons.cli.backup",),
    "restore": ("gpucommons.cli.backup",),
}


class LazyCommands(TyperGroup):
    """The top-level group: knows every command by name, imports a command's module when asked for it."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS) + [name for name in super().list_commands(ctx) if name not in COMMANDS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            for module in COMMANDS[cmd_name]:
                import_module(module)
            built = _build(cmd_name)
            if built is not None:
                self.add_command(built, cmd_name)
        return super().get_command(ctx, cmd_name)


def _build(name: str) -> Any:
    """The click command of `name` from what its module registered on `app`, built as typer builds
    the whole group (typer.main.get_group), but only this one."""
    from typer import main as typer_main

    short, markup = app.pretty_exceptions_short, app.rich_markup_mode
    for info in app.registered_commands:
        callback = info.callback
        if (info.name or (callback and typer_main.get_command_name(callback.__name__))) == name:
            return typer_main.get_command_from_info(
                info, pretty_exceptions_short=short, rich_markup_mode=markup
            )
    for group in app.registered_groups:
        if group.name == name:
            return typer_main.get_group_from_info(
                group,
                pretty_exceptions_short=short,
                rich_markup_mode=markup,
                suggest_commands=app.suggest_commands,
            )
    return None


def _plain_option_types() -> None:
    """No type beside a flag in the rich help, and a range's type named once.

    typer 0.29 (which carries its own copy of click; the installed click is not used) began to show
    a type beside every option in its rich help: `--help <bool>`, `--wide <bool>`, where its plain
    help and every earlier typer show none (a flag takes no value), and `<float range> [x>=0]`,
    which says "range" twice. At 80 columns that column squeezed every option's help to a few
    characters. Older typers have no `display_type_rich`, and are left alone."""
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "commons_plain", False):
        return

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        _one_space_between_option_columns()
        if self.is_flag or self.count:
            return None
        text: str | None = shown(self, ctx)
        return text.replace(" range>", ">") if text else text

    display_type_rich.commons_plain = True  # type: ignore[attr-defined]
    setattr(TyperOption, "display_type_rich", display_type_rich)  # noqa: B010


def _one_space_between_option_columns() -> None:
    """Rich help tables pad each column by a space on both sides: seven columns (flag, short flag,
    negative flag, ...) spent 14 of 80 characters on padding, and at 80 columns rich cut the negative
    flags themselves (`--no-internet-egr…`). One space after each column reads the same.

    Called while typer draws an options panel (from `display_type_rich`, before the panel's table is
    made), so that `commons --version` never imports typer's rich help (0.1 s)."""
    rich_utils = sys.modules.get("typer.rich_utils")
    if rich_utils is not None and hasattr(rich_utils, "STYLE_OPTIONS_TABLE_PADDING"):
        setattr(rich_utils, "STYLE_OPTIONS_TABLE_PADDING", (0, 1, 0, 0))  # noqa: B010


_plain_option_types()

app = typer.Typer(
    name="commons",
    help="GPU Commons: share one GPU cluster between many ML teams.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    cls=LazyCommands,
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
