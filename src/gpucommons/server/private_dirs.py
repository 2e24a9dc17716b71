"""The server's own directories under the home: `logs/` (every task's output) and `run/` (the exit
files of running attempts). Only the server's user may list or read them (mode 0700).

Teams read their logs through the API, which authorizes each read; their Unix accounts must not
list these directories (every team's task ids) nor read what is in them (every team's output and
exit codes). The executor needs no more: the runner writes exit files as the server's user, and a
task's output reaches its log through a file descriptor the server opened. Directories an older
version created with the umask's 0755 are closed on start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

PRIVATE_DIRS = ("logs", "run")
PRIVATE_MODE = 0o700


def make_private_dirs(home: Path) -> list[Path]:
    """Create (or close) `home/logs` and `home/run` with mode 0700; return those whose mode changed.

    A symbolic link is left as it is (an operator put it there on purpose), and said so in the log."""
    changed = []
    for name in PRIVATE_DIRS:
        path = home / name
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=PRIVATE_MODE)
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            log.warning("%s is a symbolic link: make sure only the server's user can read it", path)
            continue
        if stat.S_IMODE(info.st_mode) != PRIVATE_MODE:
            os.chmod(path, PRIVATE_MODE)
            changed.append(path)
    return changed
