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

Staged jobs (`stage`, what the submit routes use) go further: each first checks its request without
the store and says how many numbers it needs (`Staged`); the committer then takes the numbers of
the whole batch in one go (`SeqAllocator.take`: one statement on PostgreSQL) and inserts every
staged row of the batch wave by wave (the tasks, then the rows that reference them), one
executemany per table, under one SAVEPOINT — instead of a SAVEPOINT, a number and two ORM flushes
per submission. A refusal is raised by the check, before anything is written, so it fails alone.
Should the bulk insert fail, it is undone and the batch's staged jobs are stored one by one, each
in its own SAVEPOINT, so a row that cannot be stored fails only its own caller, as before (a number
collision first makes the allocator catch up, once).
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import insert, inspect, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from gpucommons.store.db import Database
from gpucommons.store.sequence import SeqAllocator, is_seq_collision

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Most submissions in one transaction: bounds how long the write lock is held and a commit's size.
MAX_BATCH = 256

#: A column attribute a new row object was not given (its column default applies at the insert).
_UNSET = object()


@dataclass(frozen=True)
class Staged(Generic[T]):
    """A checked request: it needs `numbers` submission numbers; `build(numbers)` gives fresh rows
    to insert, in waves (a wave's rows may reference the earlier waves'), and the caller's answer."""

    numbers: int
    build: Callable[[list[int]], tuple[Sequence[Sequence[object]], T]]


@dataclass
class _Job(Generic[T]):
    future: Future[T]
    work: Callable[[Session], T] | None = None
    prepare: Callable[[], Staged[T]] | None = None


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
        self._queue.put(_Job(future, work=work))
        return future

    def stage(self, prepare: Callable[[], Staged[T]]) -> Future[T]:
        """Queue a staged job (module docstring): `prepare` checks the request in the committer's
        thread and raises its refusal, or says what to store; the future holds the answer once
        the rows are committed, or the error."""
        future: Future[T] = Future()
        self._started()
        self._queue.put(_Job(future, prepare=prepare))
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
                staged: list[tuple[_Job[Any], Staged[Any]]] = []
                for job in jobs:
                    if not job.future.set_running_or_notify_cancel():
                        continue
                    try:
                        if job.prepare is not None:
                            staged.append((job, job.prepare()))
                        else:
                            done.append((job, self._store_one(session, job)))
                    except Exception as exc:  # this caller's refusal; the others go on
                        job.future.set_exception(exc)
                if staged:
                    done += self._store_staged(session, staged)
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
        assert job.work is not None
        work = job.work
        return self._with_catch_up(session, lambda: work(session))

    def _with_catch_up(self, session: Session, store: Callable[[], T]) -> T:
        """`store()` in a SAVEPOINT; once more after the allocator caught up, on a number collision."""
        for attempt in (1, 2):
            try:
                with session.begin_nested():
                    return store()
            except IntegrityError as exc:
                if attempt == 2 or not is_seq_collision(exc):
                    raise
                self._seq.catch_up(self._db)
        raise AssertionError("unreachable")

    def _store_staged(
        self, session: Session, staged: list[tuple[_Job[Any], Staged[Any]]]
    ) -> list[tuple[_Job[Any], Any]]:
        """Every staged job's rows in bulk; failing that, each job on its own (module docstring)."""
        try:
            answers = self._with_catch_up(
                session, lambda: _insert(session, self._seq, [s for _, s in staged])
            )
            return list(zip([job for job, _ in staged], answers, strict=True))
        except Exception as exc:
            log.info("a bulk insert of %d submissions failed (%s): storing them one by one", len(staged), exc)
        done: list[tuple[_Job[Any], Any]] = []
        for job, one in staged:
            try:
                done.append(
                    (
                        job,
                        self._with_catch_up(session, functools.partial(_insert_one, session, self._seq, one)),
                    )
                )
            except Exception as exc:  # this row's failure; the others go on
                job.future.set_exception(exc)
        return done


def _insert_one(session: Session, seq: SeqAllocator, staged: Staged[T]) -> T:
    answer: T = _insert(session, seq, [staged])[0]
    return answer


def _insert(session: Session, seq: SeqAllocator, staged: list[Staged[Any]]) -> list[Any]:
    """Take the numbers of every staged job at once, build their rows and insert them wave by wave;
    the answers in the jobs' order."""
    waves, answers = numbered_rows(session, seq, staged)
    for wave in waves:
        _bulk_add(session, wave)
    return answers


def numbered_rows(
    session: Session, seq: SeqAllocator, staged: list[Staged[Any]]
) -> tuple[list[list[object]], list[Any]]:
    """The numbers of every staged job, taken at once, and the rows they build, merged wave by wave
    (every job's first wave, then every job's second, ...); with the answers in the jobs' order."""
    numbers = seq.take(session, sum(s.numbers for s in staged))
    waves: list[list[object]] = []
    answers = []
    at = 0
    for one in staged:
        rows, answer = one.build(numbers[at : at + one.numbers])
        at += one.numbers
        answers.append(answer)
        for i, wave in enumerate(rows):
            if i == len(waves):
                waves.append([])
            waves[i].extend(wave)
    return waves, answers


def _bulk_add(session: Session, rows: list[object]) -> None:
    """Insert `rows` (new mapped objects, never added to a session) with one executemany per table
    and set of columns given: what a flush would write, without the unit of work's bookkeeping per
    object (identity map, events, fetching generated keys), which was most of the committer's time.
    The objects stay transient: nothing reads them back after the commit but their answers, built
    already."""
    groups: dict[tuple[type, tuple[str, ...]], list[dict[str, object]]] = {}
    for row in rows:
        mapper = inspect(row).mapper
        given = {
            attr.key: value
            for attr in mapper.column_attrs
            if (value := row.__dict__.get(attr.key, _UNSET)) is not _UNSET
        }
        groups.setdefault((mapper.class_, tuple(given)), []).append(given)
    for (cls, _), values in groups.items():
        session.execute(insert(cls), values)
