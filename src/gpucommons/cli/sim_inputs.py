"""File-in helpers shared by `commons simulate`, `whatif` and `bench`: policy and trace, clear errors.

Bad input ends the command with exit code 1 and a message naming the file and what is wrong
(never a traceback).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from gpucommons.domain import Policy
from gpucommons.policy import PolicyError
from gpucommons.policy.durations import parse_duration

if TYPE_CHECKING:  # the simulator is imported by the commands that read a trace, not at start-up
    from gpucommons.sim.jobs import SimJob

err = Console(stderr=True, highlight=False)


def fail(message: str) -> typer.Exit:
    """Print `message` to stderr; the caller raises the returned Exit(1)."""
    err.print(f"[bold red]error:[/] {message}", soft_wrap=True)
    return typer.Exit(1)


def load_policy_or_exit(path: Path) -> Policy:
    from gpucommons.policy import load_policy  # pydantic + YAML: not at start-up

    try:
        return load_policy(path)
    except PolicyError as exc:
        raise fail(str(exc)) from None


def load_trace_or_exit(path: Path) -> list[SimJob]:
    from gpucommons.sim.trace import TraceError, read_trace

    try:
        with path.open(encoding="utf-8", newline="") as handle:
            return read_trace(handle, source=str(path))
    except FileNotFoundError:
        raise fail(f"{path}: no such trace file") from None
    except IsADirectoryError:
        raise fail(f"{path}: is a directory, not a trace file") from None
    except UnicodeDecodeError:
        raise fail(f"{path}: not a UTF-8 text file (expected a CSV trace)") from None
    except TraceError as exc:
        raise fail(f"the trace was refused:\n{exc}") from None


def parse_interval_or_exit(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        seconds = parse_duration(text)
    except (ValueError, TypeError) as exc:
        raise fail(f"--checkpoint-interval: {exc}") from None
    if seconds <= 0:
        raise fail("--checkpoint-interval must be longer than 0s")
    return seconds
