"""What the API, the views and the metrics need of the worker that runs tasks, whatever admits them.

Two workers implement it: `scheduler.Scheduler` (our engine admits; the backend starts what it is
told) and `cluster.ClusterWorker` (the cluster's own admission decides; the backend reports). Both
keep the engine's `ClusterState` as the mirror the read models are computed from, so the teams,
queue and metrics views are the same code for every backend.

Nothing outside the workers sees that state or the lock that guards it: readers take the last
published `view` (immutable, swapped whole), writers hand a command to `desk`
(docs/decisions/0013-scheduler-commands-and-read-views.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from gpucommons.backends.ports import QueuePosition
from gpucommons.server.workers.commands import CommandDesk
from gpucommons.server.workers.launching import TaskPaths
from gpucommons.server.workers.outputs import ReadView


class TaskWorker(Protocol):
    #: What readers see: the last published view (read it once per answer, never under a lock).
    view: ReadView
    #: Where changes go: cancel, checkpoint, policy, budget spends (`workers.commands`).
    desk: CommandDesk
    paths: TaskPaths
    last_cycle_at: float | None
    cycles: int

    @property
    def running(self) -> bool:
        """The worker's threads are alive (what /healthz reports)."""

    def start(self) -> None: ...

    def stop(self, timeout: float = 10.0) -> None: ...

    def recover(self) -> None: ...

    def wake(self) -> None: ...

    def task_submitted(self, task_id: str) -> None: ...

    def positions(self) -> Mapping[str, QueuePosition]:
        """Pending tasks' places as the admitting side sees them, by task id (empty: use the
        engine's order)."""

    def refresh_log(self, task_id: str) -> None:
        """Bring the task's log file up to date, when its output lives elsewhere (a cluster)."""
