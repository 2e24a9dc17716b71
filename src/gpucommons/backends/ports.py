"""The ports the control plane drives: where tasks run, and what time it is.

The server's services talk only to these Protocols; `backends.local` implements them with real
processes, `backends.kubernetes` with Jobs, and tests may use `backends.fake`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Launch:
    """Everything needed to start one attempt of a task."""

    task_id: str
    team: str
    command: tuple[str, ...]
    #: Extra environment: CUDA_VISIBLE_DEVICES, COMMONS_TASK_ID, COMMONS_TEAM,
    #: COMMONS_CHECKPOINT_DIR, COMMONS_RESTART_COUNT (docs/design.md, contract 6).
    env: Mapping[str, str]
    workdir: Path
    log_path: Path
    gpu_indices: tuple[int, ...] = ()
    #: Unix account to run as (only when the server runs as root); None = the server's own user.
    run_as: str | None = None


@dataclass(frozen=True, slots=True)
class Handle:
    """What must be stored to find a running attempt again after a server restart."""

    task_id: str
    pid: int
    #: Process start time as the OS reports it, so a recycled pid is not mistaken for the task.
    start_marker: str
    #: File the attempt's wrapper writes the exit status to (survives the server's death).
    exit_file: Path | None = None


@dataclass(frozen=True, slots=True)
class ExitStatus:
    """How an attempt ended: `code` for a normal exit, `signal` when killed by one."""

    code: int | None
    signal: int | None = None

    @property
    def succeeded(self) -> bool:
        return self.code == 0


class Executor(Protocol):
    """Starts, signals and watches task attempts."""

    def start(self, launch: Launch) -> Handle: ...

    def signal(self, handle: Handle, signum: int) -> None:
        """Send a signal to the attempt's whole process group (no error if it has exited)."""

    def kill(self, handle: Handle) -> None:
        """SIGKILL the attempt's whole process group (no error if it has exited)."""

    def poll(self, handle: Handle) -> ExitStatus | None:
        """None while the attempt runs; its exit status once it has ended."""

    def is_alive(self, handle: Handle) -> bool:
        """True when the attempt's process still runs (used to re-adopt after a restart)."""


class Clock(Protocol):
    """Time as seconds since the epoch; injected so that logic never reads the wall clock itself."""

    def now(self) -> float: ...
