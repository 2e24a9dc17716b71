"""Revision 0007 moves each task's current attempt into `task_attempts`: a running task's process and
stop, a finished task's placement (where it ran) become an attempt; a waiting task gets none; and the
downgrade puts them back. On SQLite and PostgreSQL, from rows written in the 0006 layout."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from gpucommons.store.db import Database
from gpucommons.store.migrate import downgrade, upgrade

BEFORE = "0006_cluster_tasks"
CHILDREN = ("task_events", "usage_intervals")
COMMON: dict[str, Any] = dict(
    name="n",
    team="a",
    priority_class="normal",
    priority_value=100,
    command='["true"]',
    gpus=2,
    cpu_milli=0,
    memory_mib=0,
    checkpoint_mode="none",
    submitted_by="x",
    submitted_at=100.0,
    queued_at=100.0,
    restart_count=0,
    preemptions=0,
    cancel_requested=False,
    lost_gpu_seconds=0.0,
    message="",
    origin="commons",
    borrowed_cpu_milli=0,
    borrowed_memory_mib=0,
)
ROWS: list[dict[str, Any]] = [
    # running, being stopped: its process and stop move with it
    dict(
        id="trun",
        seq=1,
        state="preempting",
        admitted_at=110.0,
        started_at=111.0,
        assigned_pool="gpu",
        borrowed_gpus=1,
        placement="[[0, [0, 1]]]",
        gpu_indices="[0, 1]",
        pid=4242,
        start_marker="m1",
        exit_file="/x/run/trun.exit",
        log_path="/x/logs/trun.log",
        stop_reason="preempted",
        stop_requested_at=150.0,
        stop_deadline=180.0,
        killed_at=None,
        preempted_by="town",
    ),
    # finished: its last placement stays as an ended attempt
    dict(
        id="tdone",
        seq=2,
        state="succeeded",
        admitted_at=120.0,
        started_at=121.0,
        finished_at=130.0,
        exit_code=0,
        assigned_pool="gpu",
        borrowed_gpus=0,
        placement="[[0, [2]]]",
        gpu_indices="[2]",
    ),
    # waiting: no attempt
    dict(id="twait", seq=3, state="pending", borrowed_gpus=0, placement="[]", gpu_indices="[]"),
]


def _insert(db: Database) -> None:
    with db.engine.begin() as conn:
        for row in ROWS:
            values = {**COMMON, **row}
            names = ", ".join(values)
            marks = ", ".join(f":{k}" for k in values)
            conn.execute(text(f"INSERT INTO tasks ({names}) VALUES ({marks})"), values)
        conn.execute(
            text("INSERT INTO task_events (task_id, at, kind, message) VALUES ('tdone', 130.0, 'state', 'x')")
        )
        conn.execute(
            text(
                'INSERT INTO usage_intervals (task_id, team, pool, gpus, start, "end", priority, '
                "borrowed_gpus, end_reason, lost_gpu_seconds) "
                "VALUES ('tdone', 'a', 'gpu', 1, 121.0, 130.0, 'normal', 0, 'succeeded', 0.0)"
            )
        )


def test_the_upgrade_makes_an_attempt_of_each_live_or_finished_task_and_the_downgrade_undoes_it(
    database_url: str,
) -> None:
    db = Database(database_url)
    try:
        upgrade(db, BEFORE)
        _insert(db)
        upgrade(db)
        with db.engine.connect() as conn:
            got = {
                r.task_id: r
                for r in conn.execute(
                    text(
                        "SELECT t.id AS task_id, a.* FROM tasks t JOIN task_attempts a ON a.id = t.attempt_id"
                    )
                )
            }
            attempts = conn.execute(text("SELECT count(*) FROM task_attempts")).scalar_one()
            waiting = conn.execute(text("SELECT attempt_id FROM tasks WHERE id = 'twait'")).scalar_one()
            kept = [conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in CHILDREN]
        assert attempts == 2 and waiting is None
        # SQLite copies `tasks` to drop its columns: with foreign keys on, dropping the old table
        # would have deleted every task's events and ledger rows by cascade.
        assert kept == [1, 1]
        run, done = got["trun"], got["tdone"]
        assert (run.pool, run.borrowed_gpus, run.pid, run.start_marker) == ("gpu", 1, 4242, "m1")
        assert (run.stop_reason, run.stop_requested_at, run.stop_deadline) == ("preempted", 150.0, 180.0)
        assert (run.preempted_by, run.ended_at, run.end_reason, run.admitted_at) == (
            "town",
            None,
            None,
            110.0,
        )
        assert (run.log_path, run.kills) == ("/x/logs/trun.log", 0)
        assert (done.pool, done.ended_at, done.end_reason, done.exit_code) == ("gpu", 130.0, "succeeded", 0)

        downgrade(db, BEFORE)
        with db.engine.connect() as conn:
            back = {
                r.id: r
                for r in conn.execute(
                    text("SELECT id, assigned_pool, pid, stop_reason, preempted_by, borrowed_gpus FROM tasks")
                )
            }
        assert (back["trun"].assigned_pool, back["trun"].pid, back["trun"].stop_reason) == (
            "gpu",
            4242,
            "preempted",
        )
        assert (back["trun"].preempted_by, back["trun"].borrowed_gpus) == ("town", 1)
        assert (back["tdone"].assigned_pool, back["tdone"].pid) == ("gpu", None)
        assert (back["twait"].assigned_pool, back["twait"].borrowed_gpus) == (None, 0)
    finally:
        db.dispose()
