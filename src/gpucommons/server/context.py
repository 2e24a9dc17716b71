"""What one running server holds: database, policy, scheduler, executor, clock, metrics.

One `ServerContext` lives on `app.state.commons`; routers reach it through `deps.ContextDep`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import func, select

from gpucommons.domain.model import Policy
from gpucommons.server.settings import Settings
from gpucommons.store.db import Database
from gpucommons.store.models import TaskRow

if TYPE_CHECKING:
    from gpucommons.backends.ports import BackendTraits, Clock
    from gpucommons.server.metrics import Metrics
    from gpucommons.server.workers.port import TaskWorker


class PolicyHolder:
    """The current policy and its version; swapped whole on `policy apply`, never edited."""

    def __init__(self, policy: Policy, version: int) -> None:
        self._lock = threading.Lock()
        self._policy = policy
        self._version = version

    @property
    def policy(self) -> Policy:
        with self._lock:
            return self._policy

    @property
    def version(self) -> int:
        with self._lock:
            return self._version

    def replace(self, policy: Policy, version: int) -> None:
        with self._lock:
            self._policy = policy
            self._version = version


class SeqAllocator:
    """Hands out the global submission sequence (the engine's tie-breaker) without a DB round trip.

    Only one server process writes tasks; the unique index on `tasks.seq` still guards it.
    """

    def __init__(self, db: Database) -> None:
        with db.session() as session:
            last = session.scalar(select(func.max(TaskRow.seq)))
        self._next = (last or 0) + 1
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            seq = self._next
            self._next += 1
            return seq


@dataclass
class ServerContext:
    settings: Settings
    db: Database
    policies: PolicyHolder
    clock: Clock
    seq: SeqAllocator
    #: What the backend is (who admits, how tasks stop): the API asks this, never the class.
    traits: BackendTraits
    executor_name: str
    metrics: Metrics
    #: Runs the tasks: the engine's scheduler, or the mirror of a cluster that admits by itself.
    scheduler: TaskWorker
