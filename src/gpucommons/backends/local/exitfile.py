"""The exit file: how an attempt's end is known even when the server was down when it ended.

The runner writes it once, atomically (temporary file, fsync, rename), so a reader sees either
nothing or the whole record. The format is a small JSON object, tolerant of extra keys.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from gpucommons.backends.ports import ExitStatus


def encode(status: ExitStatus, finished_at: float) -> str:
    return json.dumps({"code": status.code, "signal": status.signal, "finished_at": finished_at})


def write_exit_file(path: Path, status: ExitStatus, finished_at: float) -> None:
    """Write the record so that it appears whole or not at all."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, encode(status, finished_at).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    # Make the rename itself durable, so a power cut after exit does not forget the status.
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_exit_file(path: Path) -> ExitStatus | None:
    """The recorded status, or None when the file is absent or not a valid record."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    code, signum = data.get("code"), data.get("signal")
    if not (code is None or isinstance(code, int)) or not (signum is None or isinstance(signum, int)):
        return None
    if code is None and signum is None:
        return None
    return ExitStatus(code=code, signal=signum)


def status_from_returncode(returncode: int) -> ExitStatus:
    """subprocess's convention (negative = killed by that signal) as an `ExitStatus`."""
    if returncode < 0:
        return ExitStatus(code=None, signal=-returncode)
    return ExitStatus(code=returncode)
