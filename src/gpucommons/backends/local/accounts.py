"""Team accounts and workspaces: what keeps one team's files away from another's on one machine.

Running as root, each team gets its own Unix account (`commons-<team>`, a system account with no
login shell, created with useradd when missing) and a workspace `<home>/workspaces/<team>` owned
by that account, mode 0770. The team's tasks run under that account, in that workspace, with a
per-task checkpoint directory inside it; the runner gives them umask 007, so what they create is
never readable by other accounts. Another team's task gets "Permission denied".

Not running as root, the server cannot switch accounts: every task runs as the server's own user,
and teams are separated only by the API's roles (logical isolation). `isolation_mode` says which,
and `commons doctor` tells people.
"""

from __future__ import annotations

import contextlib
import grp
import hashlib
import os
import pwd
import re
import shutil
import stat
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from gpucommons.backends.ports import LaunchError

DEFAULT_PREFIX = "commons-"
#: Linux (useradd, utmp) refuses longer user names.
MAX_ACCOUNT_LENGTH = 32
WORKSPACE_MODE = 0o770
#: Tries when useradd finds /etc/passwd locked by another account tool.
USERADD_ATTEMPTS = 5
#: The home and workspaces root may be crossed to reach one's own workspace, never listed.
TRAVERSE_ONLY = 0o711
#: Files of the server's home that only the server's user may read (database, bootstrap token).
PRIVATE_FILES = ("commons.db", "commons.db-wal", "commons.db-shm", "admin-token")
_UNSAFE = re.compile(r"[^a-z0-9_-]+")


class AccountError(LaunchError):
    """A team account or workspace could not be set up; the message says what to do."""


class IsolationMode(StrEnum):
    #: Each team its own Unix account and a 0770 workspace (the server runs as root).
    ACCOUNTS = "accounts"
    #: One Unix user for every task; teams are kept apart by the API alone.
    LOGICAL = "logical"


def isolation_mode() -> IsolationMode:
    return IsolationMode.ACCOUNTS if os.geteuid() == 0 else IsolationMode.LOGICAL


def account_name(team: str, prefix: str = DEFAULT_PREFIX) -> str:
    """`commons-<team>`: lower case letters, digits, `_` and `-`, at most 32 characters.

    A team name that had to be changed to fit (upper case, dots, length) gets a short hash of the
    original appended, so two teams never map to one account (`NLP` and `nlp` stay apart).
    """
    cleaned = _UNSAFE.sub("-", team.lower()).strip("-") or "team"
    name = prefix + cleaned
    if cleaned == team and len(name) <= MAX_ACCOUNT_LENGTH:
        return name
    digest = hashlib.sha256(team.encode()).hexdigest()[:6]
    return f"{name[: MAX_ACCOUNT_LENGTH - 7]}-{digest}"


@dataclass(frozen=True, slots=True)
class TaskPlace:
    """Where and as whom a task runs: what the control plane puts into its `Launch`."""

    workdir: Path
    checkpoint_dir: Path
    #: The team's account when teams are isolated by accounts; None = the server's own user.
    run_as: str | None


Runner = Callable[[Sequence[str]], subprocess.CompletedProcess[str]]


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=60)


class TeamAccounts:
    """Creates (when root) and finds each team's account and workspace under `home`."""

    def __init__(
        self,
        home: Path,
        *,
        prefix: str = DEFAULT_PREFIX,
        mode: IsolationMode | None = None,
        run: Runner = _run,
    ) -> None:
        self.home = home
        self.prefix = prefix
        self.mode = mode if mode is not None else isolation_mode()
        self._run = run

    # -- paths -----------------------------------------------------------------------------------

    @property
    def workspaces_root(self) -> Path:
        return self.home / "workspaces"

    def workspace(self, team: str) -> Path:
        return self.workspaces_root / team

    def checkpoint_dir(self, team: str, task_id: str) -> Path:
        return self.workspace(team) / ".commons" / "checkpoints" / task_id

    def account(self, team: str) -> str:
        return account_name(team, self.prefix)

    # -- setting up --------------------------------------------------------------------------------

    def prepare_task(self, team: str, task_id: str) -> TaskPlace:
        """The team's account and workspace (created if missing) and the task's checkpoint dir."""
        run_as = self.ensure_team(team)
        ckpt = self.checkpoint_dir(team, task_id)
        _make_private_dirs(self.workspaces_root, ckpt.relative_to(self.workspaces_root).parts, run_as)
        return TaskPlace(self.workspace(team), ckpt, run_as)

    def ensure_team(self, team: str) -> str | None:
        """Make sure the team's workspace (and, when root, account) exist; return the account."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.workspaces_root.mkdir(exist_ok=True)
        run_as: str | None = None
        if self.mode is IsolationMode.ACCOUNTS:
            blocked = blocking_ancestor(self.home)
            if blocked is not None:
                raise AccountError(
                    f"team accounts cannot reach their workspaces under {self.home}: {blocked} is closed "
                    "to other users; start the server with a home they may cross (e.g. --home "
                    f"/var/lib/commons) or allow it with chmod o+x {blocked}"
                )
            run_as = self.ensure_account(team)
            # Team accounts must cross these to reach their workspace, but not list them...
            for path in (self.home, self.workspaces_root):
                os.chmod(path, TRAVERSE_ONLY)
            # ... and once they can, the server's own files must be closed to them.
            protect_server_files(self.home)
        _make_private_dirs(self.workspaces_root, (team,), run_as)
        return run_as

    def ensure_account(self, team: str) -> str:
        """Create the team's system account (no login shell, home = its workspace) if missing."""
        name = self.account(team)
        if _exists(name):
            return name
        if shutil.which("useradd") is None:
            raise AccountError(
                f"cannot create the Unix account {name!r} for team {team!r}: useradd is not installed "
                "(install the 'passwd' package, or create the account yourself)"
            )
        nologin = shutil.which("nologin") or "/usr/sbin/nologin"
        argv = ["useradd", "--system", "--user-group", "--no-create-home"]
        argv += ["--home-dir", str(self.workspace(team)), "--shell", nologin]
        argv += ["--comment", f"GPU Commons team {team}", name]
        for attempt in range(USERADD_ATTEMPTS):
            done = self._run(argv)
            if done.returncode == 0 or _exists(name):  # another process may have created it meanwhile
                return name
            # useradd locks /etc/passwd; another useradd (or adduser, passwd) holding it is transient.
            if "lock" not in done.stderr.lower():
                break
            time.sleep(0.1 * (attempt + 1))
        raise AccountError(
            f"useradd could not create the account {name!r} for team {team!r}: {done.stderr.strip()}"
        )

    def remove_account(self, team: str) -> None:
        """Delete the team's account and its group (workspace files stay; for tests and teardown)."""
        name = self.account(team)
        if _exists(name):
            self._run(["userdel", name])
        try:
            grp.getgrnam(name)
        except KeyError:
            return
        self._run(["groupdel", name])


def protect_server_files(home: Path) -> list[Path]:
    """Make the server's database and admin token readable by the server's user only; return the
    files that were open to others. SQLite creates its -wal and -shm files with the database's mode
    (0644 under the usual umask), and any account that can cross the home could read every team's
    tasks from them."""
    changed = []
    for name in PRIVATE_FILES:
        path = home / name
        with contextlib.suppress(FileNotFoundError):
            if stat.S_IMODE(path.lstat().st_mode) & 0o077 and not path.is_symlink():
                os.chmod(path, 0o600)
                changed.append(path)
    return changed


#: Root's default home: team accounts must be able to cross every directory above their workspaces,
#: and root's own home (/root, mode 0700) forbids that.
ROOT_DEFAULT_HOME = Path("/var/lib/commons")


def default_home(env: Mapping[str, str] | None = None) -> Path:
    """`$COMMONS_HOME` if set (when `env` is given), else /var/lib/commons for root, else ~/.commons."""
    if env is not None and env.get("COMMONS_HOME"):
        return Path(env["COMMONS_HOME"])
    return ROOT_DEFAULT_HOME if os.geteuid() == 0 else Path.home() / ".commons"


def blocking_ancestor(home: Path) -> Path | None:
    """The first directory above `home` that other users may not cross (no o+x), if any.

    Team accounts reach `<home>/workspaces/<team>` only if they may cross every directory above it;
    the default home of root, /root/.commons, fails this (/root is 0700).
    """
    for ancestor in reversed(home.absolute().parents):
        try:
            if not ancestor.stat().st_mode & stat.S_IXOTH:
                return ancestor
        except OSError:
            return ancestor
    return None


def _make_private_dirs(root: Path, parts: Sequence[str], owner: str | None) -> None:
    """Create `root/parts[0]/parts[1]/...` as 0770 directories owned by `owner`, never following a
    symlink: a team owns its workspace, so it could plant one (`.commons -> ../other-team`) to make
    the root server chown another team's files to it. Each step is opened with O_NOFOLLOW and
    changed through its file descriptor."""
    uid, gid = -1, -1
    if owner is not None:
        entry = pwd.getpwnam(owner)
        uid, gid = entry.pw_uid, entry.pw_gid
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for depth, part in enumerate(parts, start=1):
            if part in ("", ".", "..") or "/" in part:
                raise AccountError(f"{part!r} cannot name a directory in {root}")
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, WORKSPACE_MODE, dir_fd=fd)
            try:
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                where = root.joinpath(*parts[:depth])
                raise AccountError(
                    f"{where} is not a plain directory (a symlink?): refusing to use it ({exc.strerror})"
                ) from None
            os.close(fd)
            fd = child
            os.fchmod(fd, WORKSPACE_MODE)  # mkdir's mode is masked by the umask; fchmod is not
            if owner is not None:
                os.fchown(fd, uid, gid)
    finally:
        os.close(fd)


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
