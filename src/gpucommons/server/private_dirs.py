"""The server's home and its own files: only the server's user may read them.

The home holds the SQLite database (api token hashes, audit events, every team's tasks): it is
closed to other users (0700), or, when team accounts must cross it to reach their workspaces
(`backends.local.accounts`), made crossable but not listable (0711), and the database files are
0600 in either mode. SQLite creates `-wal` and `-shm` with the database file's own mode, so a
database created 0600 keeps them private under any umask; files an older version left 0644 are
closed on start.

`logs/` (every task's output) and `run/` (the exit files of running attempts) are 0700 whatever the
home's mode.

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

from sqlalchemy.engine import make_url

from gpucommons.backends.local.accounts import TRAVERSE_ONLY, protect_server_files

log = logging.getLogger(__name__)

PRIVATE_DIRS = ("logs", "run")
PRIVATE_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


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


def close_home(home: Path, *, team_accounts: bool) -> bool:
    """Give the home mode 0700, or 0711 when team accounts must cross it; return whether it changed.

    A home the server's user does not own, or a sticky one (`--home /tmp`), is shared with others on
    purpose: it is left as it is, and said so in the log."""
    info = home.stat()
    if info.st_uid != os.geteuid() or info.st_mode & stat.S_ISVTX:
        log.warning("%s is not the server's own directory: its mode is left as it is", home)
        return False
    wanted = TRAVERSE_ONLY if team_accounts else PRIVATE_MODE
    if stat.S_IMODE(info.st_mode) == wanted:
        return False
    os.chmod(home, wanted)
    return True


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite database URL; None for another database or one in memory."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def make_database_private(url: str, home: Path) -> list[Path]:
    """Create a missing SQLite database file as 0600 (its `-wal` and `-shm` will follow its mode) and
    close the server's files (database, its `-wal` and `-shm`, the admin token) that are open to
    others; return those whose mode changed. A symbolic link is left as it is."""
    path = sqlite_path(url)
    if path is not None:
        # O_EXCL: never touch what exists; a missing parent is SQLite's error to report.
        with contextlib.suppress(FileExistsError, FileNotFoundError):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE_MODE))
    changed = protect_server_files(home)
    if path is None:
        return changed
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(FileNotFoundError):
            info = file.lstat()
            if not stat.S_ISLNK(info.st_mode) and stat.S_IMODE(info.st_mode) & 0o077:
                os.chmod(file, PRIVATE_FILE_MODE)
                changed.append(file)
    return changed
