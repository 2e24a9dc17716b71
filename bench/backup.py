"""Benchmark: `commons backup` / `commons restore` of a large database, SQLite and PostgreSQL.

    python bench/backup.py                  # 100,000 finished tasks: 600,000 rows
    python bench/backup.py --tasks 20000

Builds a SQLite database at the schema's head with `--tasks` finished tasks, each with 4 state events
and 1 ledger interval (6 rows a task), then times, through the same functions the commands call:

  sqlite backup       the online backup API's page copy of the SQLite database into a snapshot
  restore → pg        that snapshot into a fresh PostgreSQL database on 127.0.0.1:5432 (dropped after)
  pg backup           the PostgreSQL database into a snapshot (one REPEATABLE READ transaction)
  restore → sqlite    that snapshot into a fresh SQLite database

and checks every restore holds the source's row counts. Prints wall and CPU seconds and rows per
second of CPU for each, and the last line `backup rows=… sqlite_backup_s=… pg_restore_s=… …`.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from gpucommons.store.backup import backup
from gpucommons.store.db import Database
from gpucommons.store.migrate import upgrade
from gpucommons.store.restore import restore
from gpucommons.store.snapshot import SnapshotInfo
from gpucommons.testing.postgres import PostgresUnavailable, scratch_database

EVENTS = [(None, "pending"), ("pending", "admitted"), ("admitted", "running"), ("running", "succeeded")]


def build(path: Path, tasks: int) -> None:
    db = Database(f"sqlite:///{path}")
    upgrade(db)
    db.dispose()
    conn = sqlite3.connect(path)
    conn.executemany(
        "INSERT INTO tasks (id, seq, name, team, state, priority_class, priority_value, command, gpus,"
        " cpu_milli, memory_mib, checkpoint_mode, submitted_by, submitted_at, queued_at, admitted_at,"
        " started_at, finished_at, restart_count, preemptions, exit_code, cancel_requested,"
        " lost_gpu_seconds, message, assigned_pool, borrowed_gpus, borrowed_cpu_milli, borrowed_memory_mib,"
        " placement, gpu_indices) VALUES (?, ?, '', ?, 'succeeded', 'normal', 100, '[\"sleep\", \"1\"]', 1,"
        " 0, 0, 'none', 'admin', ?, ?, ?, ?, ?, 0, 0, 0, 0, 0.0, '', 'gpu', 0, 0, 0, '[[\"n1\", 1]]', '[0]')",
        (
            (f"t{i:08d}", i + 1, "ab"[i % 2], 1e9 + i, 1e9 + i, 1e9 + i + 0.5, 1e9 + i + 0.6, 1e9 + i + 1.6)
            for i in range(tasks)
        ),
    )
    conn.executemany(
        "INSERT INTO task_events (task_id, at, kind, from_state, to_state, message)"
        " VALUES (?, ?, 'state', ?, ?, '')",
        ((f"t{i:08d}", 1e9 + i + k * 0.1, a, b) for i in range(tasks) for k, (a, b) in enumerate(EVENTS)),
    )
    conn.executemany(
        'INSERT INTO usage_intervals (task_id, team, pool, gpus, start, "end", priority, borrowed_gpus,'
        " end_reason, lost_gpu_seconds) VALUES (?, ?, 'gpu', 1, ?, ?, 'normal', 0, 'succeeded', 0.0)",
        ((f"t{i:08d}", "ab"[i % 2], 1e9 + i + 0.6, 1e9 + i + 1.6) for i in range(tasks)),
    )
    conn.commit()
    conn.close()


@contextmanager
def fresh_postgres() -> Iterator[str]:
    try:
        with scratch_database("commons_backup", connect_timeout=3) as url:
            yield url
    except PostgresUnavailable as exc:
        raise SystemExit(str(exc)) from None


def timed(what: str, rows: int, work: Callable[[], object], results: dict[str, float]) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    results[what] = wall
    print(f"{what:<18}{wall:>9.2f}{cpu:>9.2f}{rows / max(cpu, 1e-9):>14,.0f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="commons-backup-bench-"))
    source = work / "source.db"
    build(source, args.tasks)
    rows = args.tasks * 6
    print(f"{rows:,} rows, SQLite file {source.stat().st_size / 2**20:.0f} MiB")
    print(f"{'':<18}{'wall s':>9}{'CPU s':>9}{'rows/CPU s':>14}")
    results: dict[str, float] = {}
    infos: list[SnapshotInfo] = []
    with fresh_postgres() as pg_url:
        sqlite_db, pg_db = Database(f"sqlite:///{source}"), Database(pg_url)
        timed("sqlite backup", rows, lambda: infos.append(backup(sqlite_db, work / "a.db")), results)
        timed("restore → pg", rows, lambda: restore(pg_db, work / "a.db"), results)
        timed("pg backup", rows, lambda: infos.append(backup(pg_db, work / "b.db")), results)
        target = Database(f"sqlite:///{work / 'copy.db'}")
        timed("restore → sqlite", rows, lambda: restore(target, work / "b.db"), results)
        assert infos[0].rows == infos[1].rows and infos[0].total_rows == rows, (infos[0].rows, infos[1].rows)
        for db in (sqlite_db, pg_db, target):
            db.dispose()
    print(
        f"backup rows={rows} sqlite_backup_s={results['sqlite backup']:.2f}"
        f" pg_restore_s={results['restore → pg']:.2f} pg_backup_s={results['pg backup']:.2f}"
        f" sqlite_restore_s={results['restore → sqlite']:.2f}"
    )


if __name__ == "__main__":
    main()
