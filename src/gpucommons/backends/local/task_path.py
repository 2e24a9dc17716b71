"""The PATH a task's process gets, and whether a team account can use what it names.

`task_path` is the one answer: the executor gives tasks what it returns, and `commons doctor` reports
what it returns for the same PATH and interpreter, so the two cannot disagree.

A task that runs as the server's own user (logical isolation) gets the server's PATH, then the
directory of the interpreter the platform runs on — its virtualenv's `bin`, where `commons` is — when
that PATH lacks it: a server started without its virtualenv on PATH (`.venv/bin/commons up`) still
gives tasks `commons checkpoint`, as the README has them call it. Appended, not put first, so that a
`python` of the user's own PATH (a conda environment) is still the one a task gets.

Running as root, tasks run under team accounts (`commons-<team>`), which are neither the owner nor
in the group of the server's files: they can use a directory only if every directory above it lets
*other* users cross it (o+x). The server's own PATH often names places they cannot reach — an
interpreter shim in root's home (`/root` is 0700), a virtualenv inside it — so handing it over as
it is gives "Permission denied" on the first `python`. A team account gets the system directories,
then the directory of the interpreter the platform runs on (so `commons checkpoint` and the
platform's Python work in tasks) when other users may run it, then any other entry of the server's
PATH they can reach (never that interpreter's directory when they cannot run it).
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

#: Debian's default PATH for a login shell, sbin included (root's tools are often there).
SYSTEM_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
#: A task's PATH when the server was started with none.
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def _others_may(path: Path, bits: int) -> bool:
    try:
        return bool(path.stat().st_mode & bits)
    except OSError:
        return False


def reachable_by_others(directory: Path) -> bool:
    """True when a user who is neither owner nor group member may cross `directory` and all above it."""
    directory = directory.absolute()
    return all(_others_may(d, stat.S_IXOTH) for d in (*reversed(directory.parents), directory))


def runnable_by_others(executable: Path) -> bool:
    """True when other users may run `executable`: it and its real file (after symlinks) are reachable
    and executable by them — a virtualenv's `python` links to an interpreter that may sit in a
    private home."""
    for candidate in (executable.absolute(), Path(os.path.realpath(executable))):
        if not (reachable_by_others(candidate.parent) and _others_may(candidate, stat.S_IXOTH)):
            return False
    return True


def account_path(server_path: str, interpreter: str) -> str:
    """The PATH of a team account's tasks (see the module's docstring)."""
    entries: list[str] = [d for d in SYSTEM_DIRS if Path(d).is_dir()]
    python = Path(interpreter)
    usable = runnable_by_others(python)
    if usable:
        entries.append(str(python.parent))
    for d in server_path.split(os.pathsep):
        # A virtualenv whose interpreter they cannot run is worse than none: its `python` and
        # scripts would say "Permission denied" instead of "not found".
        if d and reachable_by_others(Path(d)) and (usable or Path(d) != python.parent):
            entries.append(d)
    return os.pathsep.join(dict.fromkeys(entries))  # first occurrence wins, order kept


def own_user_path(server_path: str, interpreter: str) -> str:
    """The PATH of tasks that run as the server's own user (see the module's docstring)."""
    entries = [d for d in (server_path or DEFAULT_PATH).split(os.pathsep) if d]
    entries.append(str(Path(interpreter).parent))
    return os.pathsep.join(dict.fromkeys(entries))


def task_path(server_path: str, interpreter: str, *, team_account: bool) -> str:
    """The PATH of a task's process, given the server's PATH and the interpreter it runs on:
    `account_path` for a task run as a team account, `own_user_path` for one run as the server's user."""
    if team_account:
        return account_path(server_path, interpreter)
    return own_user_path(server_path, interpreter)


def find_program(name: str, path: str) -> Path | None:
    """Where `name` resolves in `path` (as a shell would), or None."""
    found = shutil.which(name, path=path)
    return Path(found) if found else None
