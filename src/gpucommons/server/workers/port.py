"""What the API, the views and the metrics need of the worker that runs tasks, whatever admits them.

Two workers implement it: `scheduler.Scheduler` (our engine admits; the backend starts what it is
told) and `cluster.ClusterWorker` (the cluster's own admission decides; the backend reports). Both
keep the engine's `ClusterState` as the mirror the read models are computed from, so the teams,
queue and metrics views are the same code for every backend.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Protocol

from gpucommons.backends.ports import QueuePosition
from gpucommons.domain.model import Policy
from gpucommons.engine.state import ClusterState
from gpucommons.engine.types import Pending
from gpucommons.server.workers.launching import TaskPaths
from gpucommons.server.workers.outputs import UsageView


class TaskWorker(Protocol):
    lock: threading.RLock
    state: ClusterState
    usage: UsageView
    policy: Policy
    paths: TaskPaths
    #: Why each pending task waits, by task id.
    pending: dict[str, Pending]
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

    def mark_dirty(self, task_id: str) -> None:
        """The API changed a task (cancel, checkpoint): act on it soon."""

    def forget_pending(self, task_id: str) -> None:
        """A pending task was cancelled: drop it from the queues (caller holds `lock`)."""

    def positions(self) -> Mapping[str, QueuePosition]:
        """Pending tasks' places as the admitting side sees them, by task id (empty: use the
        engine's order)."""

    def publish_policy(self, policy: Policy) -> None:
        """A new policy is about to be stored: carry it to where tasks are admitted, if that is
        not us (raises `BackendUnavailable`, and the policy is not stored)."""

    def refresh_log(self, task_id: str) -> None:
        """Bring the task's log file up to date, when its output lives elsewhere (a cluster)."""
