"""Group commit of submissions: many callers, one transaction, one commit.

A submission stored in its own transaction pays a commit (a WAL write on SQLite, an fsync on
PostgreSQL), a connection checkout and a worker-thread hop. Under many concurrent clients that fixed
cost, not the insert, is what the server spends its CPU on. So one thread takes every submission
queued since its last commit, stores each in its own SAVEPOINT of one transaction — a refused one
rolls back alone and its caller gets its own error — commits once, and only then answers each
caller: a 201 still means the row is durable (a crash before the commit answers nobody).

On SQLite there is one such thread (one writer), and numbers (`store.sequence`) are taken in it, so
they are handed out in commit order. On PostgreSQL each statement is a round trip to another
process, and one thread would wait out every one of them in turn: a few threads drain the same
queue, each with its own transaction (numbers then become visible in commit order, not number order,
as with any number of writers: `store.sequence`).

Should a number collide with a row stored past the allocator (`is_seq_collision`), the allocator
catches up and that one submission is stored once more.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from gpucommons.store.db import Database
from gpucommons.store.sequence import SeqAllocator, is_seq_collision

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Most submissions in one transaction: bounds how long the write lock is held and a commit's size.
MAX_BATCH = 256


@dataclass
class _Job(Generic[T]):
    work: Callable[[Session], T]
    future: Future[T]


class GroupCommit:
    """Runs `work(session)` functions for many callers in shared transactions (see the module)."""

    def __init__(
        self, db: Database, seq: SeqAllocator, max_batch: int = MAX_BATCH, committers: int = 1
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        if committers < 1 or (db.is_sqlite and committers != 1):
            raise ValueError(f"committers must be at least 1, and 1 on SQLite (one writer), not {committers}")
        self._committers = committers
        self._db = db
        self._seq = seq
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[_Job[Any] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        #: Transactions committed and submissions they held (for benchmarks and tests).
        self.commits = 0
        self.jobs = 0

    def submit(self, work: Callable[[Session], T]) -> Future[T]:
        """Queue `work`; its future holds what it returned once that is committed, or its error
        (a refusal raised by `work`, or the commit's failure)."""
        future: Future[T] = Future()
        self._started()
        self._queue.put(_Job(work, future))
        return future

    def run(self, work: Callable[[Session], T]) -> T:
        """`submit` and wait: for callers on a worker thread."""
        return self.submit(work).result()

    def stop(self, timeout: float = 10.0) -> None:
        """Store what is queued, then end the thread (a later `submit` starts it again)."""
        with self._lock:
            threads, self._threads = self._threads, []
            for _ in threads:
                self._queue.put(None)
        for thread in threads:
            thread.join(timeout)

    def _started(self) -> None:
        if self._threads:
            return
        with self._lock:
            if not self._threads:
                self._threads = [
                    threading.Thread(target=self._loop, name=f"group-commit-{i}", daemon=True)
                    for i in range(self._committers)
                ]
                for thread in self._threads:
                    thread.start()

    def _loop(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                return
            jobs: list[_Job[Any]] = [first]
            while len(jobs) < self._max_batch:
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    stopping = True
                    break
                jobs.append(job)
            self._commit(jobs)

    def _commit(self, jobs: list[_Job[Any]]) -> None:
        done: list[tuple[_Job[Any], Any]] = []
        try:
            with self._db.session() as session:
                if self._db.is_sqlite:
                    # pysqlite begins a transaction only before a data change, so the first
                    # SAVEPOINT would open one of its own, and releasing it would commit: begin it
                    # here (IMMEDIATE: take the write lock now rather than upgrade it midway).
                    session.execute(text("BEGIN IMMEDIATE"))
                for job in jobs:
                    if not job.future.set_running_or_notify_cancel():
                        continue
                    try:
                        done.append((job, self._store_one(session, job)))
                    except Exception as exc:  # this caller's refusal; the others go on
                        job.future.set_exception(exc)
        except Exception as exc:  # the transaction failed: none of these rows is stored
            log.warning("a group commit of %d submissions failed: %s", len(jobs), exc)
            for job in jobs:
                if not job.future.done():
                    job.future.set_exception(exc)
            return
        with self._lock:
            self.commits += 1
            self.jobs += len(jobs)
        for job, result in done:
            job.future.set_result(result)

    def _store_one(self, session: Session, job: _Job[T]) -> T:
        for attempt in (1, 2):
            try:
                with session.begin_nested():
                    return job.work(session)
            except IntegrityError as exc:
                if attempt == 2 or not is_seq_collision(exc):
                    raise
                self._seq.catch_up(self._db)
        raise AssertionError("unreachable")
