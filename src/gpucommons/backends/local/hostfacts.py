"""What this machine does to keep teams apart, read from the system (for `commons doctor`).

Only reading: nothing here changes the machine. The judgement is in `isolation.py`, which is pure.
"""

from __future__ import annotations

import glob
import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path

from gpucommons.backends.local.accounts import (
    PRIVATE_FILES,
    IsolationMode,
    TeamAccounts,
    blocking_ancestor,
    isolation_mode,
)
from gpucommons.domain.model import Policy


@dataclass(frozen=True, slots=True)
class PathFacts:
    path: str
    exists: bool
    mode: int | None = None
    owner: str | None = None

    @property
    def mode_text(self) -> str:
        return f"{self.mode:04o}" if self.mode is not None else "-"


@dataclass(frozen=True, slots=True)
class TeamFacts:
    team: str
    #: The team's Unix account when teams get accounts, else None.
    account: str | None
    account_exists: bool
    workspace: PathFacts


@dataclass(frozen=True, slots=True)
class HostFacts:
    user: str
    mode: IsolationMode
    teams: tuple[TeamFacts, ...]
    #: /dev/nvidia* device nodes and their modes (0666 = every account may open every GPU).
    gpu_devices: tuple[PathFacts, ...]
    #: /proc mounted with hidepid: accounts cannot see each other's processes and command lines.
    proc_hidepid: bool
    #: Files of the server's home (database, admin token) that other accounts may read.
    exposed_files: tuple[str, ...]
    #: With team accounts: a directory above the home that they cannot cross (tasks cannot start).
    workspaces_blocked_by: str | None = None


def path_facts(path: Path) -> PathFacts:
    try:
        st = path.lstat()
    except OSError:
        return PathFacts(str(path), False)
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    return PathFacts(str(path), True, stat.S_IMODE(st.st_mode), owner)


def _account_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _proc_hidepid(mounts: Path = Path("/proc/self/mounts")) -> bool:
    try:
        lines = mounts.read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        fields = line.split()
        if len(fields) >= 4 and fields[1] == "/proc" and fields[2] == "proc":
            return any(opt.startswith("hidepid=") and opt != "hidepid=0" for opt in fields[3].split(","))
    return False


def _exposed(home: Path) -> tuple[str, ...]:
    exposed = []
    for name in PRIVATE_FILES:
        facts = path_facts(home / name)
        if facts.exists and facts.mode is not None and facts.mode & 0o004:
            exposed.append(facts.path)
    return tuple(exposed)


def gather_host_facts(policy: Policy, home: Path, mode: IsolationMode | None = None) -> HostFacts:
    mode = mode if mode is not None else isolation_mode()
    accounts = TeamAccounts(home, mode=mode)
    teams = []
    for team in policy.teams:
        account = accounts.account(team.name) if mode is IsolationMode.ACCOUNTS else None
        teams.append(
            TeamFacts(
                team.name,
                account,
                account is not None and _account_exists(account),
                path_facts(accounts.workspace(team.name)),
            )
        )
    try:
        user = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        user = str(os.geteuid())
    devices = tuple(path_facts(Path(p)) for p in sorted(glob.glob("/dev/nvidia[0-9]*")))
    blocked = blocking_ancestor(home) if mode is IsolationMode.ACCOUNTS else None
    return HostFacts(
        user,
        mode,
        tuple(teams),
        devices,
        _proc_hidepid(),
        _exposed(home),
        str(blocked) if blocked is not None else None,
    )
