"""What Linux's /proc says about a process: is it still the one we started, and who is in its session.

A pid alone is not an identity: after a server restart (or a long time) the number may belong to
another process. The kernel's boot id plus the process's start time (in clock ticks since boot,
field 22 of /proc/<pid>/stat) is, so that is the start marker a `Handle` carries.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True, slots=True)
class ProcStat:
    """The few fields of /proc/<pid>/stat that the executor needs."""

    pid: int
    state: str
    ppid: int
    pgrp: int
    session: int
    starttime: int

    @property
    def is_zombie(self) -> bool:
        """Exited but not yet reaped by its parent: no longer running anything."""
        return self.state in ("Z", "X", "x")


def parse_stat(text: str) -> ProcStat:
    """Parse one /proc/<pid>/stat line. The command name may hold spaces and parentheses,
    so the fields after it are found from the *last* closing parenthesis."""
    head, _, tail = text.rpartition(")")
    pid = int(head.split("(", 1)[0])
    fields = tail.split()
    # fields[0] is field 3 of proc(5) ("state"); field n is fields[n - 3].
    return ProcStat(
        pid=pid,
        state=fields[0],
        ppid=int(fields[1]),
        pgrp=int(fields[2]),
        session=int(fields[3]),
        starttime=int(fields[19]),
    )


def read_stat(pid: int) -> ProcStat | None:
    """The process's stat, or None when no such process exists (or it vanished while reading)."""
    try:
        return parse_stat((PROC / str(pid) / "stat").read_text())
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return None


def boot_id() -> str:
    """Changes at every boot, so a start marker from before a reboot never matches again."""
    try:
        return (PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
    except OSError:
        return "unknown-boot"


def marker_of(stat: ProcStat) -> str:
    return f"{boot_id()}:{stat.starttime}"


def start_marker(pid: int) -> str | None:
    """The identity of the process that has `pid` now, or None when there is none."""
    stat = read_stat(pid)
    return marker_of(stat) if stat is not None else None


def same_process(pid: int, marker: str) -> ProcStat | None:
    """The process's stat when `pid` is still the process that `marker` was taken from."""
    stat = read_stat(pid)
    if stat is None or marker_of(stat) != marker:
        return None
    return stat


def session_members(sid: int) -> list[int]:
    """Every live process whose session id is `sid` (including ones that left the process group)."""
    members: list[int] = []
    try:
        entries = os.listdir(PROC)
    except OSError:
        return members
    for entry in entries:
        if not entry.isdigit():
            continue
        stat = read_stat(int(entry))
        if stat is not None and stat.session == sid and not stat.is_zombie:
            members.append(stat.pid)
    return members


def signal_each(pids: list[int], signum: int) -> None:
    """Send `signum` to each pid, skipping those that have already gone."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
