"""`commons --help` lists each command with the first paragraph of its help: typer's rich markup
mode keeps a docstring's line breaks, so a first paragraph split over lines would be printed with
a hard break in the middle of a sentence. Each command's first paragraph is one line."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import typer
from typer.testing import CliRunner

from gpucommons.cli.main import app


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if not hasattr(command, "list_commands"):
        return
    ctx = typer.Context(command)
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        yield (*path, name), sub
        yield from _commands(sub, (*path, name))


def test_every_commands_first_help_paragraph_is_one_line() -> None:
    split = {}
    for path, command in _commands(typer.main.get_command(app)):
        first = inspect.cleandoc(command.short_help or command.help or "").split("\n\n")[0]
        if "\n" in first:
            split[" ".join(path)] = first
    assert split == {}


def test_the_tasks_line_of_the_command_list_reads_as_one_sentence() -> None:
    shown = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200", "NO_COLOR": "1"}).output
    line = next(line for line in shown.splitlines() if "List tasks, newest first" in line)
    assert line.split("│")[1].split() == ["tasks", "List", "tasks,", "newest", "first."], shown
    assert "names are never cut" not in shown


def test_no_commands_help_is_cut_at_80_columns() -> None:
    """Rich cuts a word that does not fit its column with an ellipsis: a flag shown as
    `--no-internet-egr…` cannot be typed from the help."""
    runner, cut = CliRunner(), {}
    for path, _ in _commands(typer.main.get_command(app)):
        shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80", "NO_COLOR": "1"}).output
        lines = [line.strip() for line in shown.splitlines() if "…" in line]
        if lines:
            cut[" ".join(path)] = lines
    assert cut == {}
