"""What one running server holds: database, policy, scheduler, executor, clock, metrics.

One `ServerContext` lives on `app.state.commons`; routers reach it through `deps.ContextDep`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpucommons.domain.election import Role, Sharing
from gpucommons.domain.model import Policy
from gpucommons.server.group_commit import GroupCommit
from gpucommons.server.settings import Settings
from gpucommons.store.db import Database
from gpucommons.store.sequence import SeqAllocator

if TYPE_CHECKING:
    from gpucommons.backends.ports import BackendTraits, Clock
    from gpucommons.server.metrics import Metrics
    from gpucommons.server.workers.election import ElectionWorker
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

    def replace_if_newer(self, policy: Policy, version: int) -> bool:
        with self._lock:
            if version <= self._version:
                return False
            self._policy, self._version = policy, version
            return True


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
    #: Whether other server processes may share the database (`domain.election.Sharing`).
    sharing: Sharing = Sharing.SINGLE
    #: Who leads; None when nothing is elected (tests that drive the scheduler by hand).
    election: ElectionWorker | None = None
    #: Stores submissions many to a transaction (`server.group_commit`).
    submissions: GroupCommit = field(init=False)

    def __post_init__(self) -> None:
        self.submissions = GroupCommit(self.db, self.seq, committers=1 if self.db.is_sqlite else 4)

    @property
    def role(self) -> Role:
        """This process's role; without an election it is the only one, so it leads."""
        return self.election.role if self.election is not None else Role.LEADER

    def add_duty(self, name: str, start: Callable[[], None], stop: Callable[[], None]) -> None:
        """Leader-only work (a watcher, a worker): runs while this process leads. Without an
        election (tests that drive the scheduler by hand) it never starts."""
        if self.election is not None:
            self.election.add_duty(name, start, stop)
