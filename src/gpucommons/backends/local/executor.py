"""The local executor: every attempt a real process group on this machine, watched through files.

Each attempt is started as `runner` (see runner.py) in a new session, so the runner's pid is also
the id of the attempt's process group and session: signals go to the whole group, SIGKILL also to
anything that left the group but stayed in the session. The `Handle` (pid, start marker, exit file)
is all a restarted server needs to find the attempt again:

- while this executor started the attempt, its exit is read with waitpid (through Popen);
- otherwise (the server was restarted), from the exit file the runner writes, or from /proc;
- a pid whose start marker differs is somebody else's process: never signalled, never adopted.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gpucommons.backends.local.environment import task_environment
from gpucommons.backends.local.exitfile import read_exit_file, status_from_returncode
from gpucommons.backends.local.procfs import (
    read_stat,
    same_process,
    session_members,
    signal_each,
    start_marker,
)
from gpucommons.backends.local.task_path import task_path
from gpucommons.backends.ports import (
    BackendTraits,
    ExecutorBase,
    ExitStatus,
    Handle,
    Launch,
    Workplace,
)
from gpucommons.backends.ports import LaunchError as PortLaunchError

if TYPE_CHECKING:
    from gpucommons.backends.local.accounts import TeamAccounts
    from gpucommons.backends.local.inventory import Inventory
    from gpucommons.domain.model import Policy

RUNNER_MODULE = "gpucommons.backends.local.runner"
#: Task logs: written by the task through the descriptor it inherits, read by the server only.
LOG_MODE = 0o640


class LaunchError(PortLaunchError):
    """The attempt could not be started; the message says why (for the task's events)."""


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def _safe_name(task_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", task_id)[:80] or "task"


def _status_from_waitstatus(waitstatus: int) -> ExitStatus:
    if os.WIFSIGNALED(waitstatus):
        return ExitStatus(code=None, signal=os.WTERMSIG(waitstatus))
    return ExitStatus(code=os.WEXITSTATUS(waitstatus))


def _recorded(handle: Handle) -> ExitStatus | None:
    return read_exit_file(handle.exit_file) if handle.exit_file is not None else None


#: Reported for an attempt whose wrapper vanished without recording a status (the group was
#: SIGKILLed while no one was watching, or the machine rebooted): it did not finish on its own.
LOST = ExitStatus(code=None, signal=int(signal.SIGKILL))


class LocalExecutor(ExecutorBase):
    """`ports.Executor` with real processes. `run_dir` holds the exit files (not team-writable).

    `accounts`: each team's Unix account and workspace (None: tasks run as the server's user in its
    home); `inventory`: this machine's GPUs for a policy (None: the engine's numbers are the devices).
    """

    traits = BackendTraits(name="local")

    def __init__(
        self,
        run_dir: Path,
        *,
        python: str = sys.executable,
        base_env: Mapping[str, str] | None = None,
        accounts: TeamAccounts | None = None,
        inventory: Callable[[Policy], Inventory] | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.accounts = accounts
        self._discover = inventory
        #: The GPUs of the current policy's pools on this machine (`use_policy`).
        self.inventory: Inventory | None = None
        self._python = python
        self._base_env = dict(os.environ if base_env is None else base_env)
        server_path = self._base_env.get("PATH", "")
        #: The PATH of tasks run as a team account (parts of the server's may be closed to them) and
        #: of tasks run as the server's user: `task_path`, which `commons doctor` reports.
        self._paths = {
            team_account: task_path(server_path, python, team_account=team_account)
            for team_account in (True, False)
        }
        #: Runners this instance started, by (pid, start marker): polled with waitpid.
        self._children: dict[tuple[int, str], subprocess.Popen[bytes]] = {}
        #: Statuses already reported, so a second poll answers the same even if the file is gone.
        self._ended: dict[tuple[int, str], ExitStatus] = {}

    # -- where and on which GPUs ----------------------------------------------------------------

    def use_policy(self, policy: Policy) -> None:
        if self._discover is not None:
            self.inventory = self._discover(policy)

    def workplace(self, team: str, task_id: str) -> Workplace | None:
        if self.accounts is None:
            return None
        place = self.accounts.prepare_task(team, task_id)
        return Workplace(place.workdir, place.checkpoint_dir, place.run_as)

    def device_indices(self, pool: str, gpu_indices: tuple[int, ...]) -> tuple[int, ...]:
        if self.inventory is None or not gpu_indices:
            return gpu_indices
        return self.inventory.device_indices(pool, gpu_indices)

    # -- starting ---------------------------------------------------------------------------

    def start(self, launch: Launch) -> Handle:
        home = self._check(launch)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        exit_file = self.run_dir / f"{_safe_name(launch.task_id)}.{uuid.uuid4().hex[:12]}.exit"
        argv = [self._python, "-I", "-m", RUNNER_MODULE, "--exit-file", str(exit_file)]
        argv += ["--workdir", str(launch.workdir)]
        if launch.run_as is not None:
            argv += ["--user", launch.run_as]
        argv += ["--", *launch.command]
        launch.log_path.parent.mkdir(parents=True, exist_ok=True)
        log_fd = os.open(launch.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, LOG_MODE)
        try:
            # The log may already exist (earlier attempts, the server's own notes): other accounts
            # must not read it; teams read their logs through the API.
            os.fchmod(log_fd, LOG_MODE)
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=subprocess.STDOUT,
                env=task_environment(launch, self._base_env, home, self._paths[launch.run_as is not None]),
                cwd="/",
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise LaunchError(f"cannot start the task runner ({self._python}): {exc}") from exc
        finally:
            os.close(log_fd)
        marker = start_marker(proc.pid)
        if marker is None:  # pragma: no cover - the child exists until we reap it
            raise LaunchError(f"the runner of task {launch.task_id} vanished before it could be watched")
        self._children[(proc.pid, marker)] = proc
        return Handle(task_id=launch.task_id, pid=proc.pid, start_marker=marker, exit_file=exit_file)

    def _check(self, launch: Launch) -> str | None:
        """Refuse a launch that cannot work, with a message naming what is wrong; return HOME."""
        if not launch.command:
            raise LaunchError(f"task {launch.task_id} has an empty command")
        if not launch.workdir.is_dir():
            raise LaunchError(f"task {launch.task_id}: its working directory {launch.workdir} does not exist")
        if launch.run_as is None:
            return None
        if os.geteuid() != 0:
            raise LaunchError(
                f"task {launch.task_id} should run as {launch.run_as!r}: that needs the server to run as root"
            )
        try:
            pwd.getpwnam(launch.run_as)
        except KeyError:
            raise LaunchError(f"task {launch.task_id}: there is no Unix account {launch.run_as!r}") from None
        return str(launch.workdir)

    # -- signalling ----------------------------------------------------------------------------

    def _owns_group(self, handle: Handle) -> bool:
        """May we signal process group `handle.pid`?

        Yes while the runner is the process the marker names (running or a zombie). Yes when the
        pid is free and the runner left no exit file: it was killed, and Linux does not hand out a
        pid that is still some group's id, so what is left of group `pid` is ours. No when the pid
        belongs to another process, or the runner finished (it swept its session; a group with that
        id now would be someone else's)."""
        if handle.pid <= 0:  # an attempt known only by its exit file (`find_attempt`): it has ended
            return False
        if read_stat(handle.pid) is None:
            return not (handle.exit_file is not None and handle.exit_file.exists())
        return same_process(handle.pid, handle.start_marker) is not None

    def signal(self, handle: Handle, signum: int) -> None:
        if not self._owns_group(handle):
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(handle.pid, signum)

    def kill(self, handle: Handle) -> None:
        if not self._owns_group(handle):
            return
        self.signal(handle, signal.SIGKILL)
        # Processes that moved to a process group of their own stay in the runner's session.
        signal_each(session_members(handle.pid), signal.SIGKILL)

    # -- watching ----------------------------------------------------------------------------------

    def poll(self, handle: Handle) -> ExitStatus | None:
        key = (handle.pid, handle.start_marker)
        if key in self._ended:
            return self._ended[key]
        status = self._observe(handle)
        if status is not None:
            self._ended[key] = status
        return status

    def _observe(self, handle: Handle) -> ExitStatus | None:
        child = self._children.get((handle.pid, handle.start_marker))
        if child is not None:
            returncode = child.poll()
            if returncode is None:
                # The runner writes the exit file just before it exits; until it is gone, it runs.
                return None
            self._children.pop((handle.pid, handle.start_marker), None)
            return _recorded(handle) or status_from_returncode(returncode)
        recorded = _recorded(handle)
        if recorded is not None:
            self._reap_if_our_zombie(handle)
            return recorded
        return self._poll_adopted(handle)

    def _poll_adopted(self, handle: Handle) -> ExitStatus | None:
        """An attempt started before a restart: /proc says whether it runs, the exit file how it ended."""
        stat = same_process(handle.pid, handle.start_marker)
        if stat is not None and not stat.is_zombie:
            return None
        reaped = self._reap_if_our_zombie(handle)
        # Read after /proc: the runner may have written the file just before it exited.
        return _recorded(handle) or reaped or LOST

    def _reap_if_our_zombie(self, handle: Handle) -> ExitStatus | None:
        """A runner that is still this process's child (e.g. a second executor in one process)."""
        stat = same_process(handle.pid, handle.start_marker)
        if stat is None or not stat.is_zombie:
            return None
        try:
            pid, waitstatus = os.waitpid(handle.pid, os.WNOHANG)
        except ChildProcessError:
            return None
        return _status_from_waitstatus(waitstatus) if pid == handle.pid else None

    def is_alive(self, handle: Handle) -> bool:
        return self.poll(handle) is None

    def find_attempt(self, task_id: str) -> Handle | None:
        """The attempt of `task_id` a dead server started without recording it: a runner process of
        ours whose exit file names the task, or the exit file such a runner left when it ended.

        The exit file's name is chosen before the runner starts and is in the runner's command line
        from its exec on, so from the instant the process exists it can be found by its `/proc` entry.
        """
        prefix = f"{_safe_name(task_id)}."
        for pid_text in os.listdir("/proc"):
            if not pid_text.isdigit():
                continue
            try:
                argv = (Path("/proc") / pid_text / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if RUNNER_MODULE.encode() not in argv or b"--exit-file" not in argv:
                continue
            exit_file = Path(os.fsdecode(argv[argv.index(b"--exit-file") + 1]))
            if exit_file.parent != self.run_dir or not exit_file.name.startswith(prefix):
                continue
            marker = start_marker(int(pid_text))
            if marker is not None:
                return Handle(task_id=task_id, pid=int(pid_text), start_marker=marker, exit_file=exit_file)
        with contextlib.suppress(OSError):
            for exit_file in sorted(self.run_dir.glob(f"{glob_escape(prefix)}*.exit")):
                return Handle(task_id=task_id, pid=0, start_marker="", exit_file=exit_file)
        return None

    def release(self, handle: Handle) -> None:
        """The server has recorded the attempt's end: forget it and delete its exit file."""
        self._ended.pop((handle.pid, handle.start_marker), None)
        if handle.exit_file is not None:
            handle.exit_file.unlink(missing_ok=True)
