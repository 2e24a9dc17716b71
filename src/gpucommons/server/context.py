"""What one running server holds: database, policy, scheduler, executor, clock, metrics.

One `ServerContext` lives on `app.state.commons`; routers reach it through `deps.ContextDep`.
It sits above the workers and the metrics it carries (docs/design.md, "The server's layers"): what
lies below takes the parts it needs (`workers.budgets.BudgetSources`), not this class.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpucommons.domain.election import Role, Sharing
from gpucommons.server.event_feed import EventFeed
from gpucommons.server.group_commit import GroupCommit
from gpucommons.server.policy_holder import PolicyHolder
from gpucommons.server.settings import Settings
from gpucommons.store.db import Database
from gpucommons.store.sequence import SeqAllocator

if TYPE_CHECKING:
    from gpucommons.backends.ports import BackendTraits, Clock
    from gpucommons.server.metrics import Metrics
    from gpucommons.server.workers.election import ElectionWorker
    from gpucommons.server.workers.port import TaskWorker


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
    #: New task events for the `GET /api/v1/events` streams (`server.event_feed`).
    events: EventFeed = field(init=False)

    def __post_init__(self) -> None:
        self.submissions = GroupCommit(self.db, self.seq, committers=1 if self.db.is_sqlite else 4)
        self.events = EventFeed(self.db)

    @property
    def role(self) -> Role:
        """This process's role; without an election it is the only one, so it leads."""
        return self.election.role if self.election is not None else Role.LEADER

    def add_duty(self, name: str, start: Callable[[], None], stop: Callable[[], None]) -> None:
        """Leader-only work (a watcher, a worker): runs while this process leads. Without an
        election (tests that drive the scheduler by hand) it never starts."""
        if self.election is not None:
            self.election.add_duty(name, start, stop)
