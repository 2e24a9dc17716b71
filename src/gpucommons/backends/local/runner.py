"""The wrapper every attempt runs in: `python -m gpucommons.backends.local.runner`.

Why a wrapper: the server may die (kill -9) while tasks run. The runner is the leader of the
attempt's own session and process group, independent of the server; it runs the command, waits
for it, kills whatever the command left behind in its session, and records the command's exit code
or terminating signal in the exit file — atomically — so a restarted server learns how the attempt
ended even if nobody was watching when it did.

The runner itself stays as the user that started it (root when teams are isolated), so a team's
processes can neither kill it nor forge their exit file; only the command drops to the team's
account. It survives the catchable signals sent to its process group (those are meant for the
command); only SIGKILL ends it early.

Stdlib only, and quick to start: it runs once per attempt.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pwd
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from gpucommons.backends.local.exitfile import status_from_returncode, write_exit_file
from gpucommons.backends.local.procfs import session_members, signal_each
from gpucommons.backends.ports import ExitStatus

#: Exit codes a shell uses when a command cannot be started (POSIX: not found / not executable).
NOT_FOUND = 127
NOT_EXECUTABLE = 126
#: Files the team creates in its workspace stay private to the team (no "other" permissions).
TEAM_UMASK = 0o007

#: Signals a task may be sent (preemption's configurable signal among them). The runner catches
#: them with a no-op handler rather than SIG_IGN: caught signals reset to default at exec, ignored
#: ones would stay ignored in the command.
_SURVIVED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGALRM,
    signal.SIGPIPE,
)


def _ignore(_signum: int, _frame: object) -> None:
    """The signal was for the command; the runner keeps waiting."""


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gpucommons-runner", description=__doc__.splitlines()[0])
    parser.add_argument("--exit-file", required=True, type=Path)
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--user", default=None, help="run the command as this Unix account")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        parser.error("no command given (put it after --)")
    return args


def _account_options(user: str | None) -> dict[str, object]:
    """Popen options that make the command run as `user` (setgid, initgroups, setuid)."""
    if user is None:
        return {}
    entry = pwd.getpwnam(user)
    return {
        "user": entry.pw_uid,
        "group": entry.pw_gid,
        "extra_groups": os.getgrouplist(user, entry.pw_gid),
        "umask": TEAM_UMASK,
    }


def _searched(user: str | None) -> str:
    """Where the program was looked for, and as whom, so that a log says why it could not start."""
    who = user or pwd.getpwuid(os.geteuid()).pw_name
    return f" (as {who}, PATH={os.environ.get('PATH', '')})"


def run_command(command: Sequence[str], workdir: Path, user: str | None) -> ExitStatus:
    """Run the command to its end and return how it ended (127/126 when it could not start)."""
    try:
        options = _account_options(user)
        proc = subprocess.Popen(list(command), cwd=workdir, close_fds=False, **options)  # type: ignore[call-overload]
    except KeyError:
        print(f"commons: no Unix account named {user!r}", file=sys.stderr, flush=True)
        return ExitStatus(code=NOT_EXECUTABLE)
    except OSError as exc:
        why = exc.strerror or str(exc)
        print(f"commons: cannot start {command[0]!r}: {why}{_searched(user)}", file=sys.stderr, flush=True)
        return ExitStatus(code=NOT_FOUND if isinstance(exc, FileNotFoundError) else NOT_EXECUTABLE)
    return status_from_returncode(proc.wait())


def reap_leftovers(own_pid: int, attempts: int = 50) -> None:
    """SIGKILL what the command left running in the attempt's session, until nothing is left.

    An attempt holds its GPUs until it ends; background processes it forgot would keep using
    them after the server handed them to someone else.
    """
    sid = os.getsid(0)
    for _ in range(attempts):
        others = [pid for pid in session_members(sid) if pid != own_pid]
        if not others:
            return
        signal_each(others, signal.SIGKILL)
        time.sleep(0.02)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    for signum in _SURVIVED:
        signal.signal(signum, _ignore)
    if os.getsid(0) != os.getpid():
        # Started by hand rather than by the executor: become a session leader so the group is ours
        # (impossible for a process group leader, e.g. a shell's foreground job).
        with contextlib.suppress(OSError):
            os.setsid()
    status = run_command(args.command, args.workdir, args.user)
    if os.getsid(0) == os.getpid():
        # Only a session of our own may be swept: otherwise it is the caller's (a shell's) session.
        reap_leftovers(os.getpid())
    try:
        write_exit_file(args.exit_file, status, time.time())
    except OSError as exc:
        # The executor still learns the status from our own exit code while it is our parent.
        print(f"commons: cannot record the exit status in {args.exit_file}: {exc}", file=sys.stderr)
    return status.code if status.code is not None else 128 + (status.signal or 0)


if __name__ == "__main__":
    sys.exit(main())
