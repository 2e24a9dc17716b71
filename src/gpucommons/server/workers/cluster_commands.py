"""What the cluster worker owes the cluster: tasks to create, cancelled tasks' objects to delete.

Both are retried while the API server is unavailable (`BackendUnavailable`): a creation every
`RETRY_S`, a deletion at the next round. A task the cluster refuses fails with the cluster's
sentence; a cancelled task's object is deleted once (not asked again at each reconcile).
"""

from __future__ import annotations

import collections
import logging
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import select

from gpucommons.backends.ports import BackendUnavailable, Clock, ClusterBackend, ClusterTask, LaunchError
from gpucommons.domain.task import CheckpointMode, CheckpointSpec, TaskState
from gpucommons.server.services.lifecycle import record_event, switch_task_state
from gpucommons.server.services.tasks import hash_task_token
from gpucommons.store.db import Database
from gpucommons.store.models import TaskRow

log = logging.getLogger(__name__)

#: Seconds between attempts to create a task the API server did not take.
RETRY_S = 2.0


@dataclass
class _Creation:
    task_id: str
    not_before: float = 0.0


class CommandHost(Protocol):
    """The worker the commands are for."""

    db: Database
    lock: threading.RLock
    clock: Clock
    backend: ClusterBackend
    default_image: str
    server_url: str

    def forget_pending(self, task_id: str) -> None: ...


class ClusterCommands:
    """Creations and deletions queued by the worker, carried out by `run_once` (module docstring)."""

    def __init__(self, host: CommandHost) -> None:
        self.host = host
        self._creations: collections.deque[_Creation] = collections.deque()
        self._cancels: set[str] = set()
        #: Cluster objects already deleted for a cancel.
        self._deleted_refs: set[str] = set()

    def create(self, *task_ids: str) -> None:
        self._creations.extend(_Creation(task_id) for task_id in task_ids)

    def cancel(self, *task_ids: str) -> None:
        self._cancels.update(task_ids)

    def queued(self) -> set[str]:
        """The tasks waiting to be created."""
        return {c.task_id for c in self._creations}

    def deleted(self, ref: str | None) -> bool:
        return ref in self._deleted_refs

    def run_once(self) -> None:
        self._delete_cancelled()
        self._create_due()

    def _create_due(self) -> None:
        now = time.monotonic()
        for _ in range(len(self._creations)):
            command = self._creations.popleft()
            if command.not_before > now:
                self._creations.append(command)
                continue
            try:
                self._create_one(command.task_id)
            except BackendUnavailable as exc:
                log.warning("creating %s on the cluster: %s; again in %.0fs", command.task_id, exc, RETRY_S)
                self._creations.append(_Creation(command.task_id, now + RETRY_S))

    def _create_one(self, task_id: str) -> None:
        with self.host.db.session() as session:
            row = session.get(TaskRow, task_id)
            if row is None or row.state != TaskState.PENDING.value or row.cluster_ref is not None:
                return
            token = secrets.token_urlsafe(24)
            url = self.host.server_url
            task = ClusterTask(
                task_id=row.id,
                team=row.team,
                command=tuple(row.command),
                image=row.image or self.host.default_image,
                gpus=row.gpus,
                priority_class=row.priority_class,
                pool=row.pool_request,
                checkpoint=CheckpointSpec(CheckpointMode(row.checkpoint_mode), row.checkpoint_interval_s),
                restart_count=row.restart_count,
                cpu_milli=row.cpu_milli,
                memory_mib=row.memory_mib,
                env={"COMMONS_URL": url, "COMMONS_TOKEN": token} if url else None,
            )
        try:
            ref = self.host.backend.submit(task)
        except LaunchError as exc:
            with self.host.lock, self.host.db.session() as session:
                row = session.get(TaskRow, task_id)
                if row is not None and row.state == TaskState.PENDING.value:
                    now = self.host.clock.now()
                    row.finished_at = now
                    switch_task_state(session, row, TaskState.FAILED, now, f"could not start: {exc}")
                    self.host.forget_pending(task_id)
            return
        with self.host.db.session() as session:
            row = session.get(TaskRow, task_id)
            if row is not None:
                row.cluster_ref = ref
                row.task_token_hash = hash_task_token(token)
                record_event(session, row, "created", self.host.clock.now(), f"created the Job {ref}")

    def _delete_cancelled(self) -> None:
        dirty, self._cancels = self._cancels, set()
        if not dirty:
            return
        with self.host.db.session() as session:
            rows = session.scalars(select(TaskRow).where(TaskRow.id.in_(sorted(dirty)))).all()
            wanted = [
                r.cluster_ref
                for r in rows
                if r.cluster_ref and (r.cancel_requested or r.state == TaskState.CANCELLED.value)
            ]
        for ref in wanted:
            if ref in self._deleted_refs:
                continue
            try:
                self.host.backend.delete(ref)
                self._deleted_refs.add(ref)
            except BackendUnavailable:
                self._cancels.update(r.id for r in rows if r.cluster_ref == ref)
            except LaunchError as exc:
                log.warning("cancel: %s", exc)
