"""The ports the control plane drives: where tasks run, who admits them, and what time it is.

A backend says what it is in `BackendTraits`, so the server never asks which class it holds:

- who admits: `Admitter.ENGINE` — our engine decides who runs where and the backend starts what
  it is told (`Executor`: local processes, Slurm jobs, in-process timers); `Admitter.CLUSTER` — the
  cluster's own admission decides (Kueue on Kubernetes) and the backend reports what happened
  (`ClusterBackend`, in `backends.kubernetes.backend`);
- how an attempt stops: `StopStyle.SIGNAL` — the control plane sends the class's signal, waits out
  the grace period and kills; `StopStyle.DELETE` — it deletes, and the cluster enforces the grace;
- whether attempts outlive the server (then each handle is stored before the next start).

`backends.local` implements `Executor` with real processes, `server.executors` with timers,
`backends.fake` in memory for tests. Nothing here imports an implementation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gpucommons.domain.task import CheckpointSpec, TaskState

if TYPE_CHECKING:
    from gpucommons.domain.model import Policy


class Admitter(StrEnum):
    """Who decides that a task may hold GPUs."""

    ENGINE = "engine"
    CLUSTER = "cluster"


class StopStyle(StrEnum):
    """How the control plane stops an attempt (preemption, cancel, max_runtime)."""

    SIGNAL = "signal"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class BackendTraits:
    """What a backend is, stated rather than guessed from its class."""

    #: `local`, `timer`, `kubernetes`, `slurm`, `fake`: shown by /healthz and `commons up`.
    name: str
    admits: Admitter = Admitter.ENGINE
    stops: StopStyle = StopStyle.SIGNAL
    #: True when an attempt keeps running if the server dies (processes, cluster jobs): its handle
    #: is stored before the next start, so a crash never leaves a running attempt nobody knows.
    #: False for attempts that die with the server (timers): a cycle's starts are stored at once.
    attempts_outlive_server: bool = True
    #: Attempts the scheduler may start at once. Above 1 only for a backend whose starts are slow
    #: remote calls (sbatch) and whose `find_attempt` finds an attempt started but not yet stored, so
    #: a crash in the middle of a batch of starts leaves no attempt unknown.
    concurrent_starts: int = 1


class LaunchError(RuntimeError):
    """An attempt could not be started; the message says why (it becomes the task's failure)."""


@dataclass(frozen=True, slots=True)
class Workplace:
    """Where and as whom an attempt runs: its working directory, checkpoint directory, account."""

    workdir: Path
    checkpoint_dir: Path
    #: The team's account when teams are isolated by accounts; None = the server's own user.
    run_as: str | None = None


@dataclass(frozen=True, slots=True)
class Launch:
    """Everything needed to start one attempt of a task."""

    task_id: str
    team: str
    command: tuple[str, ...]
    #: Extra environment: CUDA_VISIBLE_DEVICES, COMMONS_TASK_ID, COMMONS_TEAM,
    #: COMMONS_CHECKPOINT_DIR, COMMONS_RESTART_COUNT (docs/design.md, contract 6).
    env: Mapping[str, str]
    workdir: Path
    log_path: Path
    gpu_indices: tuple[int, ...] = ()
    #: Unix account to run as (only when the server runs as root); None = the server's own user.
    run_as: str | None = None
    #: The pool the engine placed the attempt in, and where: (node index in the pool, GPUs on that
    #: node) per node. A backend that starts work on named machines (Slurm: `--nodelist`,
    #: `--gres=gpu:N`) needs the nodes, not only the pool-wide GPU numbers of `gpu_indices`.
    pool: str = ""
    placement: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Handle:
    """What must be stored to find a running attempt again after a server restart."""

    task_id: str
    pid: int
    #: Process start time as the OS reports it, so a recycled pid is not mistaken for the task.
    start_marker: str
    #: File the attempt's wrapper writes the exit status to (survives the server's death).
    exit_file: Path | None = None


@dataclass(frozen=True, slots=True)
class ExitStatus:
    """How an attempt ended: `code` for a normal exit, `signal` when killed by one."""

    code: int | None
    signal: int | None = None
    #: When the attempt ended, if the backend knows it better than "now" (a Slurm job's EndTime):
    #: an attempt that ended while the server was down is then charged up to its real end.
    ended_at: float | None = None
    #: Why the attempt's work was lost to the machine (its node failed), not to the task: the task is
    #: requeued if it declared a checkpoint, failed otherwise. None: the attempt ended by itself.
    lost: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.code == 0 and self.lost is None


class Executor(Protocol):
    """A backend whose attempts our engine admits: starts, signals and watches them.

    Subclass `ExecutorBase` for the optional parts' defaults.
    """

    traits: BackendTraits

    def use_policy(self, policy: Policy) -> None:
        """The policy changed (and with it, perhaps, the pools): find the inventory again."""

    def workplace(self, team: str, task_id: str) -> Workplace | None:
        """Prepare where the attempt runs (the team's account and workspace); None: the server's
        default place (its home, its own user). Raises `LaunchError` saying what is wrong."""

    def device_indices(self, pool: str, gpu_indices: tuple[int, ...]) -> tuple[int, ...]:
        """The engine's pool-wide GPU numbers as the backend's devices (CUDA_VISIBLE_DEVICES)."""

    def on_exit(self, wake: Callable[[], None]) -> None:
        """Call `wake` when an attempt ends, if the backend can tell at once; otherwise the
        scheduler notices at its next poll."""

    def start(self, launch: Launch) -> Handle: ...

    def signal(self, handle: Handle, signum: int) -> None:
        """Send a signal to the attempt's whole process group (no error if it has exited)."""

    def kill(self, handle: Handle) -> None:
        """SIGKILL the attempt's whole process group (no error if it has exited)."""

    def poll(self, handle: Handle) -> ExitStatus | None:
        """None while the attempt runs; its exit status once it has ended."""

    def is_alive(self, handle: Handle) -> bool:
        """True when the attempt's process still runs (used to re-adopt after a restart)."""

    def release(self, handle: Handle) -> None:
        """The end of the attempt is recorded (committed): forget it, delete what told of it."""

    def find_attempt(self, task_id: str) -> Handle | None:
        """After a crash: the attempt of `task_id` that was started but never recorded (the server
        died between the launch and storing its handle), if the backend can find it; None: none."""

    def out_of_service(self) -> Mapping[str, Mapping[int, str]]:
        """Nodes that may take no new work now, by pool: node index (as the engine numbers the
        pool's nodes) → why (`n2 down`). Empty when every node is usable, or the backend cannot tell."""

    def foreign_work(self) -> tuple[ForeignWork, ...]:
        """Work on the cluster that GPU Commons did not start (plain `sbatch` jobs): it holds GPUs the
        engine must count. Empty when the backend runs everything itself."""


@dataclass(frozen=True, slots=True)
class ForeignWork:
    """A job someone started on the cluster directly: running, unpreemptible usage of `team`."""

    #: The cluster's id for it (`slurm:1234`), stable while it runs.
    ref: str
    team: str
    pool: str
    #: (node index in the pool, GPUs on that node) per node.
    placement: tuple[tuple[int, int], ...]
    started_at: float
    name: str = ""
    user: str = ""


class ExecutorBase:
    """Defaults for `Executor`'s optional parts: no preparation, devices numbered as the engine
    numbers them, no exit notifications, nothing to release."""

    traits: BackendTraits

    def use_policy(self, policy: Policy) -> None:
        return None

    def workplace(self, team: str, task_id: str) -> Workplace | None:
        return None

    def device_indices(self, pool: str, gpu_indices: tuple[int, ...]) -> tuple[int, ...]:
        return gpu_indices

    def on_exit(self, wake: Callable[[], None]) -> None:
        return None

    def release(self, handle: Handle) -> None:
        return None

    def find_attempt(self, task_id: str) -> Handle | None:
        return None

    def out_of_service(self) -> Mapping[str, Mapping[int, str]]:
        return {}

    def foreign_work(self) -> tuple[ForeignWork, ...]:
        return ()


class Clock(Protocol):
    """Time as seconds since the epoch; injected so that logic never reads the wall clock itself."""

    def now(self) -> float: ...


# --- clusters that admit by themselves (Kueue) ------------------------------------------------------


class BackendUnavailable(RuntimeError):
    """The cluster did not answer (or answered 5xx); the call may be retried later."""


@dataclass(frozen=True, slots=True)
class ClusterTask:
    """What a cluster backend needs to create one task (its Job)."""

    task_id: str
    team: str
    command: tuple[str, ...]
    image: str
    gpus: int
    priority_class: str
    #: None: any of the team's pools, in the team's order.
    pool: str | None
    checkpoint: CheckpointSpec
    restart_count: int = 0
    cpu_milli: int = 0
    memory_mib: int = 0
    #: COMMONS_URL, COMMONS_TOKEN: how the task reports its checkpoints.
    env: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class HoldReport:
    """GPUs a task holds or held on the cluster: one ledger interval (`end` None while open)."""

    start: float
    end: float | None
    pool: str
    gpus: int
    priority: str
    #: `running` while open; then succeeded | failed | cancelled | preempted.
    end_reason: str = "running"


@dataclass(frozen=True, slots=True)
class TaskReport:
    """What the cluster says of one task now (a `ClusterBackend` → the server)."""

    #: The cluster object the task is: `team-nlp/commons-t3f9a2b1c0d` (namespace/Job).
    ref: str
    team: str
    #: Our task id, or None for work someone started on the cluster directly (kubectl).
    task_id: str | None
    state: TaskState
    #: When the cluster says this state began (None: not known; the server uses its clock).
    at: float | None
    pool: str | None = None
    gpus: int = 0
    priority: str = ""
    message: str = ""
    exit_code: int | None = None
    #: Evictions so far: the task's restart count.
    attempt: int = 0
    started_at: float | None = None
    #: `ref` of the task whose admission evicted this one, when the cluster says.
    preempted_by: str | None = None
    #: Why, in the engine's words: within_team | reclaim | borrow_within_cohort | fair_share.
    preempt_reason: str | None = None
    #: The cluster object's uid (a Job name may be reused; its uid never is).
    uid: str = ""
    #: Every hold of the task this report opens or closes.
    holds: tuple[HoldReport, ...] = ()


@dataclass(frozen=True, slots=True)
class QueuePosition:
    """A pending task's place in the cluster's own queues (1 = next)."""

    position: int
    team_position: int


class ClusterBackend(Protocol):
    """A backend whose cluster admits by itself: it creates and deletes tasks and reports what the
    cluster did with them; the server mirrors that into its store, ledger and views."""

    traits: BackendTraits

    def use_policy(self, policy: Policy) -> None: ...

    def use_spend(self, spend: Callable[[], Mapping[str, int]]) -> None:
        """Each team's spend this month in cents, for the budget rules the cluster enforces."""

    def apply_policy(self, policy: Policy) -> None:
        """Write the policy's quotas, queues and namespaces to the cluster (all or nothing).
        Raises `BackendUnavailable` with the cluster's reason when it cannot."""

    def submit(self, task: ClusterTask) -> str:
        """Create the task on the cluster (idempotent); returns its `ref`. Raises `LaunchError`
        when the cluster refuses it for good, `BackendUnavailable` when it may be retried."""

    def delete(self, ref: str) -> None:
        """Stop and remove the task (cancel): the cluster gives it its grace period."""

    def request_checkpoint(self, ref: str, at: float) -> None:
        """Tell the task's running containers to save their state now (best effort)."""

    def run(
        self,
        report: Callable[[TaskReport], None],
        stop: threading.Event,
        synced: Callable[[frozenset[str]], None] | None = None,
    ) -> None:
        """Watch the cluster until `stop`; call `report` for every change of every task (one at a
        time, in the order the cluster made them), and `synced` once with every `ref` the first
        look found, so tasks whose objects vanished while nobody watched can be ended."""

    def positions(self) -> Mapping[str, QueuePosition]:
        """Pending tasks' positions by `ref` (empty when the cluster cannot say)."""

    def read_log(self, ref: str) -> bytes | None:
        """The task's output so far (every pod), or None when there is none yet."""
