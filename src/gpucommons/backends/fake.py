"""A TEST DOUBLE: an in-memory `Executor` whose attempts end when the test script says so.

Unit tests of the server drive the control plane with it: no processes, no sleeping. Each attempt
runs until (a) its scripted run time elapses on the injected clock, (b) the test calls `finish`,
or (c) it is signalled — by default the class's signal ends it as a real process with default
dispositions would (killed by that signal); `ignore_signals` makes it wait for SIGKILL (a task
that ignores SIGTERM), `on_signal` makes it exit with a chosen status (a task that saves its
checkpoint and exits 0). Everything the server did is recorded for assertions.

Never use it outside tests.
"""

from __future__ import annotations

import signal as _signal
from dataclasses import dataclass, field

from gpucommons.backends.ports import BackendTraits, Clock, ExecutorBase, ExitStatus, Handle, Launch

SUCCESS = ExitStatus(code=0)


@dataclass(frozen=True, slots=True)
class Script:
    """How one task's attempts behave."""

    #: Seconds after start at which the attempt exits with `exit`; None = runs until told.
    run_s: float | None = None
    exit: ExitStatus = SUCCESS
    #: Survives every signal except SIGKILL.
    ignore_signals: bool = False
    #: The status it exits with when it receives a (catchable) signal; None = killed by it.
    on_signal: ExitStatus | None = None
    #: start() raises this instead of starting (e.g. a LaunchError).
    fail_start: Exception | None = None
    #: The first this many SIGKILLs are lost (a `scancel` that failed): the attempt runs on.
    lost_kills: int = 0


@dataclass
class FakeAttempt:
    launch: Launch
    handle: Handle
    started_at: float
    script: Script
    signals: list[int] = field(default_factory=list)
    status: ExitStatus | None = None


class FakeExecutor(ExecutorBase):
    """`ports.Executor` in memory. `restarted()` gives a new instance that sees the same attempts,
    as a restarted server sees the processes that survived it."""

    traits = BackendTraits(name="fake")

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.attempts: list[FakeAttempt] = []
        self._scripts: dict[str, Script] = {}
        self._by_pid: dict[int, FakeAttempt] = {}
        self._next_pid = 1000

    # -- scripting (test side) -----------------------------------------------------------------

    def script(self, task_id: str, script: Script) -> None:
        """Every later attempt of `task_id` follows `script`."""
        self._scripts[task_id] = script

    def finish(self, task_id: str, status: ExitStatus = SUCCESS) -> None:
        """End the task's running attempt now with `status`."""
        attempt = self.running(task_id)
        if attempt is None:
            raise KeyError(f"task {task_id!r} has no running attempt")
        attempt.status = status

    def running(self, task_id: str) -> FakeAttempt | None:
        for attempt in reversed(self.attempts):
            if attempt.launch.task_id == task_id and self._advance(attempt) is None:
                return attempt
        return None

    def launches(self, task_id: str) -> list[Launch]:
        return [a.launch for a in self.attempts if a.launch.task_id == task_id]

    def restarted(self) -> FakeExecutor:
        """A fresh executor over the same surviving attempts (a server restart)."""
        other = FakeExecutor(self.clock)
        other.attempts, other._scripts, other._by_pid = self.attempts, self._scripts, self._by_pid
        other._next_pid = self._next_pid
        return other

    # -- ports.Executor ----------------------------------------------------------------------------

    def start(self, launch: Launch) -> Handle:
        script = self._scripts.get(launch.task_id, Script())
        if script.fail_start is not None:
            raise script.fail_start
        self._next_pid += 1
        handle = Handle(task_id=launch.task_id, pid=self._next_pid, start_marker=f"fake:{self._next_pid}")
        attempt = FakeAttempt(launch, handle, self.clock.now(), script)
        self.attempts.append(attempt)
        self._by_pid[handle.pid] = attempt
        return handle

    def signal(self, handle: Handle, signum: int) -> None:
        attempt = self._find(handle)
        if attempt is None or self._advance(attempt) is not None:
            return
        attempt.signals.append(signum)
        if signum == _signal.SIGKILL and attempt.signals.count(signum) <= attempt.script.lost_kills:
            return
        if signum == _signal.SIGKILL:
            attempt.status = ExitStatus(code=None, signal=signum)
        elif not attempt.script.ignore_signals:
            attempt.status = attempt.script.on_signal or ExitStatus(code=None, signal=signum)

    def kill(self, handle: Handle) -> None:
        self.signal(handle, _signal.SIGKILL)

    def poll(self, handle: Handle) -> ExitStatus | None:
        attempt = self._find(handle)
        if attempt is None:
            return ExitStatus(code=None, signal=int(_signal.SIGKILL))
        return self._advance(attempt)

    def is_alive(self, handle: Handle) -> bool:
        return self.poll(handle) is None

    # -- internals ---------------------------------------------------------------------------------

    def _find(self, handle: Handle) -> FakeAttempt | None:
        attempt = self._by_pid.get(handle.pid)
        if attempt is None or attempt.handle.start_marker != handle.start_marker:
            return None
        return attempt

    def _advance(self, attempt: FakeAttempt) -> ExitStatus | None:
        """Let scripted time pass: an attempt whose run time is up has exited."""
        run_s = attempt.script.run_s
        if attempt.status is None and run_s is not None and self.clock.now() >= attempt.started_at + run_s:
            attempt.status = attempt.script.exit
        return attempt.status
