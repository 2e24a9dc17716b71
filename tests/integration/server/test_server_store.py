"""The store: migrations round-trip on SQLite and PostgreSQL, and the DB itself refuses to hand one
GPU to two tasks."""

from __future__ import annotations

import io
import time
from decimal import Decimal

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.exc import IntegrityError

from gpucommons.ledger import EndReason, read_usage_csv, write_usage_csv
from gpucommons.server.services.ledger import usage_intervals
from gpucommons.store.db import Database
from gpucommons.store.migrate import alembic_config, downgrade, target_metadata, upgrade
from gpucommons.store.models import GpuAllocationRow, TaskRow, UsageIntervalRow


def test_migrations_upgrade_match_the_models_and_downgrade_to_nothing(database_url: str) -> None:
    db = Database(database_url)
    try:
        upgrade(db)
        with db.engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), target_metadata()) == []
        command.check(alembic_config(db))  # alembic's own "no new upgrade operations" check
        assert {"tasks", "task_events", "gpu_allocations", "usage_intervals", "policies"} <= set(
            inspect(db.engine).get_table_names()
        )
        downgrade(db, "base")
        assert set(inspect(db.engine).get_table_names()) <= {"alembic_version"}
        upgrade(db)
    finally:
        db.dispose()


def test_core_revision_id_is_stable_for_later_revisions(database_url: str) -> None:
    db = Database(database_url)
    try:
        scripts = ScriptDirectory.from_config(alembic_config(db))
        assert scripts.get_revision("0001_core").down_revision is None
    finally:
        db.dispose()


def _task(task_id: str, seq: int) -> TaskRow:
    now = time.time()
    return TaskRow(
        id=task_id,
        seq=seq,
        team="a",
        state="admitted",
        priority_class="normal",
        priority_value=1,
        command=["true"],
        gpus=1,
        submitted_at=now,
        queued_at=now,
    )


def test_the_database_refuses_one_gpu_for_two_tasks(database_url: str) -> None:
    db = Database(database_url)
    try:
        upgrade(db)
        with db.session() as session:
            session.add_all([_task("t1", 1), _task("t2", 2)])
        with db.session() as session:
            session.add(GpuAllocationRow(pool="gpu", gpu_index=0, task_id="t1", allocated_at=time.time()))
        with pytest.raises(IntegrityError), db.session() as session:
            session.add(GpuAllocationRow(pool="gpu", gpu_index=0, task_id="t2", allocated_at=time.time()))
        with pytest.raises(IntegrityError), db.session() as session:
            session.add(_task("t3", 1))  # the submission sequence is unique too
    finally:
        db.dispose()


def test_an_export_cut_inside_a_preempted_interval_carries_no_lost_work_and_reads_back(
    database_url: str,
) -> None:
    """The preemption (and the work it lost) happens after `--to`: it belongs to the next period."""
    db = Database(database_url)
    try:
        upgrade(db)
        with db.session() as session:
            session.add(_task("t1", 1))
        with db.session() as session:
            session.add(
                UsageIntervalRow(
                    task_id="t1", team="a", pool="gpu", gpus=1, start=1_000.0, end=5_000.0,
                    priority="normal", borrowed_gpus=0, end_reason=EndReason.PREEMPTED.value,
                    lost_gpu_seconds=1_800.0,
                )
            )  # fmt: skip
        with db.session() as session:
            cut = usage_intervals(session, ["a"], None, 3_000.0, now=10_000.0)
            whole = usage_intervals(session, ["a"], None, None, now=10_000.0)
        assert [(i.end_reason, i.lost_gpu_hours) for i in cut] == [(EndReason.RUNNING, 0)]
        assert [(i.end_reason, i.lost_gpu_hours) for i in whole] == [(EndReason.PREEMPTED, Decimal("0.5"))]
        for intervals in (cut, whole):
            out = io.StringIO()
            write_usage_csv(intervals, out)
            assert len(read_usage_csv(io.StringIO(out.getvalue()))) == 1
    finally:
        db.dispose()
