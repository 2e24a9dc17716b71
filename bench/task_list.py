"""Benchmark: one page of `GET /api/v1/tasks` in-process, the way it was built and the way it is.

A fresh SQLite store holds `--tasks` tasks of 8 teams, the first 256 running with an attempt (GPU
indices, borrowing), every one with a command and a message. One page of the newest `--limit` tasks
is built `--repeat` times each way, from reading to JSON bytes (no HTTP, no authentication):

  orm      ORM rows (`TaskRow` with its joined attempt), `convert.task` per row, pydantic's list
           serialiser: the route before `services.task_listing`;
  columns  `services.task_listing`: one select of the columns, one pydantic-core call.

The two must give the same bytes (checked first). Printed: the median CPU time of this process per
page for each, and their ratio. Run: `python bench/task_list.py [--tasks 1200] [--limit 200]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import TypeAdapter
from sqlalchemy import select

from gpucommons.api import schemas
from gpucommons.server.services import convert, task_listing
from gpucommons.store.base import Base
from gpucommons.store.db import Database
from gpucommons.store.models import AttemptRow, TaskRow

RUNNING = 256
TASKS = TypeAdapter(list[schemas.Task])


def fill(db: Database, tasks: int) -> None:
    with db.session() as session:
        for i in range(tasks):
            at = 1_790_000_000.0 + i * 0.37
            running = i < RUNNING
            row = TaskRow(
                id=f"t{i:08d}",
                seq=i + 1,
                name=f"job-{i}",
                team=f"team{i % 8}",
                state="running" if running else "pending",
                priority_class="normal",
                priority_value=100,
                command=["python3", "train.py", f"--seed={i}"],
                gpus=1,
                submitted_by="admin",
                submitted_at=at,
                queued_at=at,
                admitted_at=at + 1 if running else None,
                started_at=at + 2 if running else None,
                message="started" if running else "waiting for GPUs",
            )
            session.add(row)
            if running:
                session.flush()
                attempt = AttemptRow(
                    task_id=row.id, admitted_at=at + 1, pool="gpu", gpu_indices=[i], borrowed_gpus=i % 2
                )
                session.add(attempt)
                session.flush()
                row.attempt_id = attempt.id


def orm_page(db: Database, limit: int) -> bytes:
    with db.session() as session:
        rows = session.scalars(select(TaskRow).order_by(TaskRow.seq.desc()).limit(limit))
        return TASKS.dump_json([convert.task(row, {}) for row in rows])


def columns_page(db: Database, limit: int) -> bytes:
    with db.session() as session:
        rows = list(session.execute(task_listing.listing().order_by(TaskRow.seq.desc()).limit(limit)))
    return task_listing.render(rows, {})


def cpu_ms(page: Callable[[], bytes], repeat: int) -> float:
    page()  # warm: statement caches, imports
    times = []
    for _ in range(repeat):
        start = time.process_time()
        page()
        times.append(time.process_time() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=1200)
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        db = Database(f"sqlite:///{Path(home) / 'commons.db'}")
        Base.metadata.create_all(db.engine)
        fill(db, args.tasks)
        assert orm_page(db, args.limit) == columns_page(db, args.limit), "the two pages differ"
        orm = cpu_ms(lambda: orm_page(db, args.limit), args.repeat)
        columns = cpu_ms(lambda: columns_page(db, args.limit), args.repeat)
        db.dispose()
    print(f"# load average {os.getloadavg()[0]:.2f} (1 min); {args.tasks} tasks, pages of {args.limit}")
    print(f"orm      {orm:.2f} ms CPU per page (median of {args.repeat})")
    print(f"columns  {columns:.2f} ms CPU per page")
    print(f"task_list orm_ms={orm:.2f} columns_ms={columns:.2f} ratio={columns / orm:.2f}")


if __name__ == "__main__":
    main()
