"""The cluster worker's reports thread: what the watches report, applied in order, many per
transaction.

The watch threads only queue (`report`, `synced`) and go straight back to their streams. Applying a
report costs database round trips; done on the watch threads, one transaction per report, the
ledger fell a minute behind at 170 watch events/s on PostgreSQL (bench/k8s_watch.py,
docs/benchmarks.md). Here one thread takes up to `REPORT_BATCH` reports, loads their tasks and
ledger rows in two queries, applies them (`ReportApplier`, `cluster_ledger`) and commits once; a
batch that fails is retried one report at a time, so one bad report costs only itself. The end of
the watches' first look (`synced`) is queued too, behind the reports that came before it.
"""

from __future__ import annotations

import collections
import logging
import threading
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import select

from gpucommons.backends.ports import Clock, TaskReport
from gpucommons.server.workers.cluster_ledger import TaskIntervals, write_holds
from gpucommons.server.workers.cluster_reports import ReportApplier
from gpucommons.server.workers.cluster_steps import external_task_id
from gpucommons.store.db import Database
from gpucommons.store.models import TaskRow

log = logging.getLogger(__name__)

#: Reports applied in one transaction at most (one commit instead of one per report).
REPORT_BATCH = 500


@dataclass(frozen=True)
class _Synced:
    """The watches' first look is complete; `refs` are the objects it found."""

    refs: frozenset[str]


class InboxHost(Protocol):
    """The worker the reports are applied for."""

    db: Database
    lock: threading.RLock
    clock: Clock
    applier: ReportApplier
    tick_s: float

    def mirror_changed(self, reports: int) -> None: ...
    def rebuild_mirror(self) -> None: ...
    def settle_vanished(self, refs: frozenset[str]) -> None: ...


class ReportInbox:
    """Reports queued by the watch threads, applied by `run` (module docstring)."""

    def __init__(self, host: InboxHost) -> None:
        self.host = host
        self.tick_s = host.tick_s
        self._inbox: collections.deque[TaskReport | _Synced] = collections.deque()
        self._ready = threading.Event()

    def synced(self, refs: frozenset[str]) -> None:
        """The watches' first look is complete (called on a watch thread): queued behind the reports
        that came before it."""
        self._inbox.append(_Synced(refs))
        self._ready.set()

    def report(self, report: TaskReport) -> None:
        """A report from a watch thread: queued, so the watch goes straight back to its stream."""
        self._inbox.append(report)
        self._ready.set()

    def wake(self) -> None:
        self._ready.set()

    def run(self, stop: threading.Event) -> None:
        """The reports thread: until `stop`, apply what arrived, in order."""
        while not stop.is_set():
            self._ready.wait(self.tick_s)
            self._ready.clear()
            while self._inbox and not stop.is_set():
                batch: list[TaskReport] = []
                while self._inbox and len(batch) < REPORT_BATCH:
                    item = self._inbox.popleft()
                    if isinstance(item, _Synced):
                        self._apply_batch(batch)
                        batch = []
                        self._settle(item.refs)
                    else:
                        batch.append(item)
                self._apply_batch(batch)

    def _rebuild(self) -> None:
        try:
            self.host.rebuild_mirror()
        except Exception:  # the store is unreachable too: the next failure or recovery rebuilds
            log.exception("cluster worker: cannot rebuild the mirror from the store")

    def _settle(self, refs: frozenset[str]) -> None:
        try:
            self.host.settle_vanished(refs)
        except Exception:  # the thread must go on: the next first look (a re-list) settles it
            log.exception("cluster worker: cannot settle the tasks the first look did not find")
            self._rebuild()

    def _apply_batch(self, reports: list[TaskReport]) -> None:
        """Apply `reports` in order in one transaction; if it fails, one transaction each, so that
        one bad report costs only itself (and says so in the log)."""
        if not reports:
            return
        try:
            self._apply_in_one(reports)
            return
        except Exception:
            if len(reports) == 1:
                log.exception("cluster worker: cannot apply the report of %s", reports[0].ref)
                self._rebuild()
                return
            log.warning("cluster worker: a batch of %d reports failed; one at a time now", len(reports))
        self._rebuild()
        for report in reports:
            try:
                self._apply_in_one([report])
            except Exception:
                log.exception("cluster worker: cannot apply the report of %s", report.ref)
                self._rebuild()

    def _apply_in_one(self, reports: list[TaskReport]) -> None:
        host = self.host
        now = host.clock.now()
        with host.lock:
            with host.db.session() as session:
                ids = sorted({r.task_id or external_task_id(r.uid or r.ref) for r in reports})
                # Held here: the session's identity map keeps unchanged rows only weakly.
                rows = {row.id: row for row in session.scalars(select(TaskRow).where(TaskRow.id.in_(ids)))}
                intervals = TaskIntervals(session, ids)
                for report in reports:
                    log.debug(
                        "report %s %s attempt %d at %s: %s",
                        report.ref,
                        report.state,
                        report.attempt,
                        report.at,
                        report.message,
                    )
                    row = host.applier.row_for(session, report, now, rows)
                    if row is None:
                        continue
                    host.applier.apply(session, row, report, now)
                    write_holds(intervals, row, report, now)
            host.mirror_changed(len(reports))
