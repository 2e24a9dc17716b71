"""One watcher of the task-events table for every `GET /api/v1/events` stream of a server process.

A stream must not hold a database session or the scheduler's lock while it waits, and a hundred open
dashboards must not mean a hundred pollers. So one thread, running only while a stream is open,
reads the ids of new events every `poll_s` in a short transaction of its own (an index range on the
primary key, nothing when nothing happened), moves the horizon over them
(`domain.event_horizon`: on PostgreSQL an id can commit after a larger one) and wakes the streams
that wait. Each stream then reads its own caller's events up to the horizon, in a short transaction
too. Polling the table, rather than a hook in the scheduler, also sees what other server processes
on a shared PostgreSQL database wrote (their submissions, their leader's transitions).

`close()` ends every stream at its next wake-up: `serving.CommonsServer` calls it when the server
starts to shut down, because uvicorn waits for open responses before the app's lifespan ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import func, select

from gpucommons.domain.event_horizon import Horizon, advance
from gpucommons.store.db import Database
from gpucommons.store.models import TaskEventRow

log = logging.getLogger(__name__)

#: How often the watcher reads new ids while a stream is open (seconds).
POLL_S = 0.25
#: How long a hole in the ids may hold the horizon on PostgreSQL before it is stepped over (a
#: transaction still committing fills it; a rolled-back insert never does).
GAP_WAIT_S = 2.0
#: At most this many new ids are read per poll; the rest on the next one.
IDS_PER_POLL = 10_000


@dataclass(eq=False)
class _Waiter:
    loop: asyncio.AbstractEventLoop
    event: asyncio.Event = field(default_factory=asyncio.Event)

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # its loop has closed: the stream is gone
            self.loop.call_soon_threadsafe(self.event.set)


class EventFeed:
    def __init__(
        self,
        db: Database,
        poll_s: float = POLL_S,
        gap_wait_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.db = db
        self.poll_s = poll_s
        # SQLite inserts and commits one writer at a time: its ids appear in order.
        self.gap_wait_s = (0.0 if db.is_sqlite else GAP_WAIT_S) if gap_wait_s is None else gap_wait_s
        self.clock = clock
        self._lock = threading.Lock()
        self._horizon = Horizon(0)
        self._streams = 0
        self._waiters: set[_Waiter] = set()
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()

    # --- what a stream calls ----------------------------------------------------------------------

    @property
    def horizon(self) -> int:
        return self._horizon.up_to

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    @property
    def streams(self) -> int:
        """Open streams (what the tests check a disconnect gives back)."""
        return self._streams

    def open(self) -> None:
        """A stream opens (count it before anything can cancel it: `unsubscribe` in its `finally`)."""
        with self._lock:
            self._streams += 1

    def start(self) -> int:
        """Start the watcher if it is not running; the horizon now. Blocking (it may read the table):
        call it in a thread."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._horizon = Horizon(self._max_id())
                self._thread = threading.Thread(target=self._run, name="event-feed", daemon=True)
                self._thread.start()
            return self._horizon.up_to

    def close_stream(self) -> None:
        with self._lock:
            self._streams -= 1

    async def wait_past(self, seen: int, timeout: float) -> None:
        """Return once the horizon is past `seen`, the feed closes, or `timeout` seconds pass."""
        if self._horizon.up_to > seen or self.closed:
            return
        waiter = _Waiter(asyncio.get_running_loop())
        with self._lock:
            self._waiters.add(waiter)
        try:
            if self._horizon.up_to > seen or self.closed:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter.event.wait(), max(0.0, timeout))
        finally:
            with self._lock:
                self._waiters.discard(waiter)

    def reopen(self) -> None:
        """Serve streams again after `close` (an app's lifespan starting on this context anew)."""
        self._closed.clear()

    def close(self) -> None:
        """End every stream (at its next wake-up) and the watcher; new streams end at once."""
        self._closed.set()
        self._wake_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)

    # --- the watcher ------------------------------------------------------------------------------

    def _max_id(self) -> int:
        with self.db.session() as session:
            return int(session.scalar(select(func.max(TaskEventRow.id))) or 0)

    def _new_ids(self, after: int) -> list[int]:
        with self.db.session() as session:
            query = (
                select(TaskEventRow.id)
                .where(TaskEventRow.id > after)
                .order_by(TaskEventRow.id)
                .limit(IDS_PER_POLL)
            )
            return list(session.scalars(query))

    def _wake_all(self) -> None:
        with self._lock:
            waiters = list(self._waiters)
        for waiter in waiters:
            waiter.wake()

    def _run(self) -> None:
        while not self._closed.wait(self.poll_s):
            with self._lock:
                if self._streams <= 0:
                    self._thread = None
                    return
            try:
                ids = self._new_ids(self._horizon.up_to)
            except Exception as exc:  # the database is away for a moment: try again on the next poll
                log.warning("reading new task events failed (retrying): %s", exc)
                continue
            before = self._horizon.up_to
            self._horizon = advance(self._horizon, ids, self.clock(), self.gap_wait_s)
            if self._horizon.up_to != before:
                self._wake_all()
