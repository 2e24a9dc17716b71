"""Which backend runs tasks: real processes (`local`), Slurm jobs (`slurm`), or in-process timers for
benchmarks (`timer`).

`make_executor` is the one place that names the engine-admitted backends: the app factory asks it for
an `Executor` and from then on reads only the port (`backends.ports`).
"""

from __future__ import annotations

import heapq
import itertools
import shlex
import signal
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from gpucommons.backends.ports import (
    BackendTraits,
    BackendUnavailable,
    Clock,
    ClusterBackend,
    Executor,
    ExecutorBase,
    ExitStatus,
    Handle,
    Launch,
)
from gpucommons.domain.model import Policy
from gpucommons.server.settings import Settings
from gpucommons.store.db import Database


@dataclass
class _Timer:
    ends_at: float
    status: ExitStatus


class TimerExecutor(ExecutorBase):
    """`ports.Executor` without processes: a task `sleep N` ends N seconds after its start.

    Any other command ends at once with code 0. A signal ends a task at once (as a task that exits on
    SIGTERM would); SIGKILL likewise. A restarted task sleeps its whole time again, as an evicted
    workload runs in Kueue's own benchmark runner. `poll` reports when the attempt ended, as a
    backend that knows it does, so the ledger closes at that time, not when a cycle noticed. One
    thread wakes the scheduler at each end, so benchmarks measure the control plane (HTTP, store,
    engine), not process start-up.
    """

    traits = BackendTraits(name="timer", attempts_outlive_server=False)

    def __init__(self, clock: Clock, on_exit: Callable[[], None] | None = None) -> None:
        self._clock = clock
        self._on_exit = on_exit
        self._timers: dict[str, _Timer] = {}
        self._heap: list[tuple[float, int]] = []
        self._pids = itertools.count(1)
        self._lock = threading.Condition()
        self._thread = threading.Thread(target=self._wake_loop, name="commons-timer-executor", daemon=True)
        self._thread.start()

    def on_exit(self, wake: Callable[[], None]) -> None:
        self._on_exit = wake

    @staticmethod
    def duration(command: tuple[str, ...]) -> float:
        if len(command) == 1:
            command = tuple(shlex.split(command[0]))
        if len(command) >= 2 and command[0].rsplit("/", 1)[-1] == "sleep":
            try:
                return max(0.0, float(command[1]))
            except ValueError:
                return 0.0
        return 0.0

    def start(self, launch: Launch) -> Handle:
        pid = next(self._pids)
        marker = uuid.uuid4().hex
        ends_at = self._clock.now() + self.duration(launch.command)
        with self._lock:
            self._timers[marker] = _Timer(ends_at, ExitStatus(code=0))
            heapq.heappush(self._heap, (ends_at, pid))
            self._lock.notify()
        return Handle(task_id=launch.task_id, pid=pid, start_marker=marker)

    def _end_now(self, handle: Handle, status: ExitStatus) -> None:
        with self._lock:
            timer = self._timers.get(handle.start_marker)
            if timer is not None and timer.ends_at > self._clock.now():
                timer.ends_at = self._clock.now()
                timer.status = status
                heapq.heappush(self._heap, (timer.ends_at, 0))
                self._lock.notify()

    def signal(self, handle: Handle, signum: int) -> None:
        self._end_now(handle, ExitStatus(code=128 + signum))

    def kill(self, handle: Handle) -> None:
        self._end_now(handle, ExitStatus(code=None, signal=int(signal.SIGKILL)))

    def poll(self, handle: Handle) -> ExitStatus | None:
        with self._lock:
            timer = self._timers.get(handle.start_marker)
            if timer is None:
                # Timers do not survive a restart: the attempt is gone as if killed.
                return ExitStatus(code=None, signal=int(signal.SIGKILL))
            if timer.ends_at > self._clock.now():
                return None
            # Its end time, as a backend that knows it reports it (a Slurm job's EndTime): the
            # scheduler settles it at that time, not at whatever instant a cycle decides at.
            return replace(timer.status, ended_at=timer.ends_at)

    def is_alive(self, handle: Handle) -> bool:
        return self.poll(handle) is None

    def release(self, handle: Handle) -> None:
        with self._lock:
            self._timers.pop(handle.start_marker, None)

    def _wake_loop(self) -> None:
        while True:
            with self._lock:
                while not self._heap:
                    self._lock.wait()
                due, _ = self._heap[0]
                delay = due - self._clock.now()
                if delay > 0:
                    self._lock.wait(min(delay, 1.0))
                    continue
                heapq.heappop(self._heap)
            if self._on_exit is not None:
                self._on_exit()


class BackendSetupError(RuntimeError):
    """The backend cannot start as configured; the message says what to do."""


def make_cluster_backend(settings: Settings, policy: Policy, db: Database) -> ClusterBackend:
    """`--backend kubernetes`: a connection to the cluster, Kueue's API checked, the policy applied
    when asked (`--apply-policy`)."""
    if db.is_sqlite:
        raise BackendSetupError(
            "--backend kubernetes needs PostgreSQL (several replicas share it, and SQLite lives on one "
            "pod's disk): set COMMONS_DATABASE_URL=postgresql://USER@HOST/DB"
        )
    from gpucommons.backends.kubernetes.apply import check_kueue
    from gpucommons.backends.kubernetes.backend import KubernetesBackend
    from gpucommons.backends.kubernetes.connection import KubeError, connect

    try:
        api = connect(settings.kubeconfig, settings.kube_context)
        check_kueue(api)
        backend = KubernetesBackend(api, policy, grant_key=grant_key(settings))
        if settings.apply_policy:
            backend.apply_policy(policy)
    except (KubeError, BackendUnavailable) as exc:
        raise BackendSetupError(str(exc)) from None
    return backend


def grant_key(settings: Settings) -> bytes:
    """The key the server signs its Jobs' class grants with (the governance AdmissionCheck checks
    them): COMMONS_GRANT_KEY, which every replica must share; else one kept in HOME/grant-key."""
    if settings.grant_key:
        return settings.grant_key.encode()
    path = settings.home / "grant-key"
    if not path.exists():
        import os
        import secrets

        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
    return path.read_text().strip().encode()


def make_slurm_executor(settings: Settings) -> Executor:
    """`--backend slurm`: Slurm's client commands against `--slurm-conf` (else $SLURM_CONF); the
    controller must answer now, or the server does not start."""
    import os
    from pathlib import Path

    from gpucommons.backends.local.accounts import IsolationMode, TeamAccounts
    from gpucommons.backends.slurm.client import SlurmClient, SlurmError
    from gpucommons.backends.slurm.executor import SlurmExecutor

    conf = settings.slurm_conf or (Path(os.environ["SLURM_CONF"]) if os.environ.get("SLURM_CONF") else None)
    client = SlurmClient(conf)
    # Team accounts only when asked (COMMONS_ISOLATION=accounts): they must exist with the same uid on
    # every node, which this host cannot create for the cluster as it does for itself.
    accounts = (
        TeamAccounts(settings.home, mode=IsolationMode.ACCOUNTS) if settings.isolation == "accounts" else None
    )
    executor = SlurmExecutor(
        client, partition=settings.slurm_partition, accounts=accounts, log_dir=settings.home / "logs"
    )
    try:
        executor.check()
    except SlurmError as exc:
        raise BackendSetupError(f"{exc} (slurm.conf: {client.slurm_conf})") from None
    return executor


def make_executor(settings: Settings, clock: Clock) -> Executor:
    """The backend `settings.executor` names, wired to this machine (accounts, GPU inventory)."""
    if settings.executor == "timer":
        return TimerExecutor(clock)
    if settings.backend == "slurm":
        return make_slurm_executor(settings)
    from gpucommons.backends.local import LocalExecutor
    from gpucommons.backends.local.accounts import TeamAccounts
    from gpucommons.backends.local.inventory import discover_inventory

    return LocalExecutor(
        settings.home / "run",
        accounts=TeamAccounts(settings.home, mode=settings.isolation_mode()),
        inventory=discover_inventory,
    )
