"""The global submission sequence (`tasks.seq`, the engine's tie-breaker), for one writer or many.

SQLite has one server process per database (`store.leadership`), so the sequence is handed out from
memory: no round trip on the hot submission path. On PostgreSQL every replica stores tasks, so the
numbers come from the database sequence `task_seq` (migration 0005), taken in the submitting
transaction: unique across processes, without retries. Sequence numbers are not rolled back, so a
refused or failed submission leaves a gap, and numbers become visible in commit order, not number
order; `domain.intake.SeqWatermark` is how the leader copes with both.
"""

from __future__ import annotations

import threading
from typing import Protocol

from sqlalchemy import func, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from gpucommons.store.db import Database
from gpucommons.store.models import TaskRow

#: The PostgreSQL sequence behind `tasks.seq`.
TASK_SEQ = "task_seq"


class SeqAllocator(Protocol):
    def next(self, session: Session) -> int:
        """The next submission number, for a task stored in `session`'s transaction."""
        ...

    def take(self, session: Session, count: int) -> list[int]:
        """`count` numbers at once, rising (a batch of submissions: one round trip, not `count`)."""
        ...

    def catch_up(self, db: Database) -> None:
        """Continue after the largest number stored (rows written past this allocator)."""
        ...


class MemorySeq:
    """Numbers from memory: right only while this process is the one writer (SQLite)."""

    def __init__(self, db: Database) -> None:
        self._lock = threading.Lock()
        self._next = 1
        self.catch_up(db)

    def catch_up(self, db: Database) -> None:
        with db.session() as session:
            last = session.scalar(select(func.max(TaskRow.seq)))
        with self._lock:
            self._next = max(self._next, (last or 0) + 1)

    def next(self, session: Session) -> int:
        with self._lock:
            seq = self._next
            self._next += 1
            return seq

    def take(self, session: Session, count: int) -> list[int]:
        with self._lock:
            first = self._next
            self._next += count
        return list(range(first, first + count))


class DatabaseSeq:
    """Numbers from the database sequence: any number of writers."""

    def next(self, session: Session) -> int:
        return int(session.execute(text(f"SELECT nextval('{TASK_SEQ}')")).scalar_one())

    def take(self, session: Session, count: int) -> list[int]:
        if count == 0:
            return []
        numbers = session.scalars(
            text(f"SELECT nextval('{TASK_SEQ}') FROM generate_series(1, :count)"), {"count": count}
        )
        return sorted(int(n) for n in numbers)

    def catch_up(self, db: Database) -> None:
        """Moves the sequence forward only, and only past rows stored without it (which the
        server never writes): it cannot hand a number out twice."""
        with db.session() as session:
            session.execute(
                text(
                    f"SELECT setval('{TASK_SEQ}', t.m) FROM (SELECT max(seq) AS m FROM tasks) AS t,"
                    f" {TASK_SEQ} AS s WHERE t.m > s.last_value OR (t.m = s.last_value AND NOT s.is_called)"
                )
            )


def is_seq_collision(error: IntegrityError) -> bool:
    text_ = str(error.orig)
    return "uq_tasks_seq" in text_ or "tasks.seq" in text_


def seq_allocator(db: Database) -> SeqAllocator:
    return MemorySeq(db) if db.is_sqlite else DatabaseSeq()
