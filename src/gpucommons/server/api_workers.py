"""Several API processes behind one port: `commons up --workers N` (PostgreSQL).

One interpreter runs Python on one core at a time, so one process tops out at what one core can
serve. With PostgreSQL, several server processes may already share a database: every replica serves
the whole API, the one holding the leadership lock runs the scheduler, and a task stored by any of
them joins the leader's queue at its next cycle (`workers.election`, docs/operations.md "Several
replicas"). `--workers N` starts N such replicas as one command, on one listening socket:

- The `commons up` process binds the socket, takes the leadership as usual (it is the leader unless
  another `commons up` already leads on this database), then starts N−1 worker processes that inherit
  the socket and serve on it as followers. The kernel hands each new connection to whichever process
  accepts first, as with uvicorn's or gunicorn's workers.
- A worker that exits (a crash, `kill -9`) is started again, after a pause that grows with quick
  repeats (1 s, doubling to 30 s), so a worker that cannot start does not spin.
- Workers do not outlive `commons up`: each asks the kernel for SIGTERM when its parent dies
  (`PR_SET_PDEATHSIG`), and `commons up` stops them (SIGTERM, then SIGKILL after 10 s) when it stops.

A worker is started as `python -m gpucommons.server.api_workers`, with the parent's resolved settings
as JSON in `COMMONS_WORKER_SETTINGS` (so it serves exactly what the parent serves, without reapplying
the policy file) and the socket's descriptor in `COMMONS_WORKER_FD`.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from gpucommons.server.settings import METRICS_DIR_ENV, Settings

log = logging.getLogger(__name__)

SETTINGS_ENV = "COMMONS_WORKER_SETTINGS"
FD_ENV = "COMMONS_WORKER_FD"
PARENT_ENV = "COMMONS_WORKER_PARENT"

#: Pause before starting an exited worker again: doubles with each exit in a row that came within
#: `QUICK_EXIT_S` of its start, up to `MAX_RESTART_DELAY_S`; the first again after a longer run.
FIRST_RESTART_DELAY_S = 1.0
MAX_RESTART_DELAY_S = 30.0
QUICK_EXIT_S = 10.0
STOP_GRACE_S = 10.0

_PR_SET_PDEATHSIG = 1


def share_metrics(home: Path) -> Path:
    """Point prometheus_client at `home/run/metrics-PID`, where every API process of this
    `commons up` writes its counters (`server.metrics`); call it before anything imports
    prometheus_client. Removed at exit; what a killed `commons up` left is removed at the next start
    (replicas on one machine may share the home, so only the directories of dead processes)."""
    run = home / "run"
    run.mkdir(mode=0o700, parents=True, exist_ok=True)
    for old in run.glob("metrics-*"):
        pid = old.name.removeprefix("metrics-")
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    path = run / f"metrics-{os.getpid()}"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(mode=0o700)
    os.environ[METRICS_DIR_ENV] = str(path)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def listening_socket(host: str, port: int) -> socket.socket:
    """The socket every API process accepts on, bound and listening (as uvicorn binds its own)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


@dataclass
class _Slot:
    """One worker's place: its process now, and how quickly it has been exiting."""

    index: int
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    #: Exits in a row that came within `QUICK_EXIT_S` of the start.
    quick_exits: int = 0
    restart_at: float | None = None


@dataclass
class ApiWorkers:
    """Starts and keeps `count` worker processes serving on `sock` (see the module)."""

    settings: Settings
    sock: socket.socket
    count: int
    _slots: list[_Slot] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        self._slots = [_Slot(i + 1) for i in range(self.count)]
        for slot in self._slots:
            self._spawn(slot)
        self._thread = threading.Thread(target=self._watch, name="api-workers", daemon=True)
        self._thread.start()

    def pids(self) -> list[int]:
        with self._lock:
            return [s.process.pid for s in self._slots if s.process is not None and s.process.poll() is None]

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM every worker, wait up to `grace_s` for all, then SIGKILL what is left."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            running = [s.process for s in self._slots if s.process is not None and s.process.poll() is None]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for process in running:
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("API worker pid %d did not stop within %.0f s: killed", process.pid, grace_s)
                process.kill()
                process.wait()

    def _spawn(self, slot: _Slot) -> None:
        env = {
            **os.environ,
            SETTINGS_ENV: self.settings.model_dump_json(),
            FD_ENV: str(self.sock.fileno()),
            PARENT_ENV: str(os.getpid()),
        }
        # A session of its own: Ctrl-C in the terminal reaches `commons up` alone, which then stops
        # the workers itself (they would otherwise exit first and be started again meanwhile).
        # The kernel's parent-death signal follows the thread that started the worker: this one,
        # or the watch thread for a restart, which lives until `stop`.
        process = subprocess.Popen(
            [sys.executable, "-m", "gpucommons.server.api_workers"],
            env=env,
            pass_fds=(self.sock.fileno(),),
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        with self._lock:
            slot.process, slot.started_at, slot.restart_at = process, time.monotonic(), None

    def _watch(self) -> None:
        while not self._stop.wait(0.2):
            now = time.monotonic()
            for slot in self._slots:
                process = slot.process
                if process is not None and process.poll() is not None:
                    self._exited(slot, process, now)
                if slot.process is None and slot.restart_at is not None and now >= slot.restart_at:
                    self._spawn(slot)

    def _exited(self, slot: _Slot, process: subprocess.Popen[bytes], now: float) -> None:
        """Plan the restart: the pause doubles while the worker keeps exiting soon after its start."""
        ran = now - slot.started_at
        slot.quick_exits = slot.quick_exits + 1 if ran < QUICK_EXIT_S else 0
        delay = min(FIRST_RESTART_DELAY_S * 2 ** max(0, slot.quick_exits - 1), MAX_RESTART_DELAY_S)
        log.warning(
            "API worker %d (pid %d) exited with %s after %.1f s; starting it again in %.0f s",
            slot.index,
            process.pid,
            process.returncode,
            ran,
            delay,
        )
        with self._lock:
            slot.process, slot.restart_at = None, now + delay


def _die_with_parent(parent: int) -> None:
    """Ask for SIGTERM when the parent dies; if it already has, stop now (Linux; elsewhere a no-op)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        raise SystemExit(0)


def worker_main() -> None:
    """A worker process: the parent's settings and socket, a follower's role, the same app."""
    from gpucommons.server.app import build_context, create_app
    from gpucommons.server.runtime import log_to_stderr
    from gpucommons.server.serving import commons_server

    _die_with_parent(int(os.environ[PARENT_ENV]))
    settings = Settings.model_validate_json(os.environ[SETTINGS_ENV])
    sock = socket.socket(fileno=int(os.environ[FD_ENV]))
    log_to_stderr(settings.log_level)
    ctx = build_context(settings)
    if ctx.election is not None:
        ctx.election.start()
    server = commons_server(create_app(context=ctx), ctx, settings)
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])


if __name__ == "__main__":
    worker_main()
