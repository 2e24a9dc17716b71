"""task attempts: each time a task holds resources is a row of its own, kept as history

Until now a task's row held its current attempt too (where it runs, its process, its stop), reset by
hand when the task went back to the queue, so nothing of an earlier attempt survived. Each attempt is
now a `task_attempts` row; `tasks.attempt_id` names the current one (or a finished task's last). The
upgrade makes one attempt of what each task's row holds: the live attempt of an admitted, running or
stopping task, and the last one (where it ran) of a finished task; a waiting task has none.

`tasks.attempt_id` has no foreign key (the attempt's `task_id` has one): with a key each way no order
of inserting a backup's tables would satisfy both.

Revision ID: 0007_task_attempts
Revises: 0006_cluster_tasks
Create Date: 2026-12-02 17:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_task_attempts"
down_revision: str | None = "0006_cluster_tasks"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FINAL = "('succeeded', 'failed', 'cancelled')"
_LIVE = "('admitted', 'running', 'preempting')"
#: The moved columns, by their name on `tasks` → their name on `task_attempts`.
_PLACE = {
    "assigned_pool": "pool",
    "borrowed_gpus": "borrowed_gpus",
    "borrowed_cpu_milli": "borrowed_cpu_milli",
    "borrowed_memory_mib": "borrowed_memory_mib",
    "placement": "placement",
    "gpu_indices": "gpu_indices",
    "log_path": "log_path",
}
_PROCESS: tuple[str, ...] = (
    "pid",
    "start_marker",
    "exit_file",
    "stop_reason",
    "stop_requested_at",
    "stop_deadline",
    "killed_at",
    "preempted_by",
)


def upgrade() -> None:
    op.create_table(
        "task_attempts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("task_id", sa.String(length=32), nullable=False),
        sa.Column("admitted_at", sa.Float(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.Column("end_reason", sa.String(length=16), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("pool", sa.String(length=63), nullable=False),
        sa.Column("borrowed_gpus", sa.Integer(), nullable=False),
        sa.Column("borrowed_cpu_milli", sa.Integer(), nullable=False),
        sa.Column("borrowed_memory_mib", sa.Integer(), nullable=False),
        sa.Column("placement", sa.JSON(), nullable=False),
        sa.Column("gpu_indices", sa.JSON(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("start_marker", sa.String(length=200), nullable=True),
        sa.Column("exit_file", sa.Text(), nullable=True),
        sa.Column("log_path", sa.Text(), nullable=True),
        sa.Column("stop_reason", sa.String(length=32), nullable=True),
        sa.Column("stop_requested_at", sa.Float(), nullable=True),
        sa.Column("stop_deadline", sa.Float(), nullable=True),
        sa.Column("killed_at", sa.Float(), nullable=True),
        sa.Column("kills", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_kill_at", sa.Float(), nullable=True),
        sa.Column("gave_up_at", sa.Float(), nullable=True),
        sa.Column("preempted_by", sa.String(length=32), nullable=True),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name=op.f("fk_task_attempts_task_id_tasks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task_attempts")),
    )
    with op.batch_alter_table("task_attempts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_task_attempts_task_id"), ["task_id"], unique=False)
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("attempt_id", sa.Integer(), nullable=True))

    moved = [*_PLACE.values(), *_PROCESS]
    taken = ["COALESCE(assigned_pool, '')", *list(_PLACE)[1:], *_PROCESS]
    op.execute(
        "INSERT INTO task_attempts (task_id, admitted_at, started_at, ended_at, end_reason, exit_code, "
        + ", ".join(moved)
        + ") SELECT id, COALESCE(admitted_at, queued_at), started_at, "
        + f"CASE WHEN state IN {_FINAL} THEN COALESCE(finished_at, started_at, admitted_at, queued_at) END, "
        + f"CASE WHEN state IN {_FINAL} THEN state END, "
        + f"CASE WHEN state IN {_FINAL} THEN exit_code END, "
        + ", ".join(taken)
        + f" FROM tasks WHERE state IN {_LIVE} OR (state IN {_FINAL} AND assigned_pool IS NOT NULL)"
    )
    op.execute("UPDATE tasks SET attempt_id = (SELECT a.id FROM task_attempts a WHERE a.task_id = tasks.id)")

    with op.batch_alter_table("tasks", schema=None) as batch_op:
        for column in (*_PLACE, *_PROCESS):
            batch_op.drop_column(column)


def downgrade() -> None:
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("assigned_pool", sa.String(length=63), nullable=True))
        for column in ("borrowed_gpus", "borrowed_cpu_milli", "borrowed_memory_mib"):
            batch_op.add_column(sa.Column(column, sa.Integer(), nullable=False, server_default="0"))
        for column in ("placement", "gpu_indices"):
            batch_op.add_column(sa.Column(column, sa.JSON(), nullable=False, server_default="[]"))
        batch_op.add_column(sa.Column("log_path", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("pid", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("start_marker", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("exit_file", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("stop_reason", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("stop_requested_at", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("stop_deadline", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("killed_at", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("preempted_by", sa.String(length=32), nullable=True))

    # The current (or last) attempt back onto its task; an ended one's process and stop were
    # cleared in the old layout, so only a live attempt's go back.
    current = "FROM task_attempts a WHERE a.id = tasks.attempt_id"
    for column, source in _PLACE.items():
        op.execute(f"UPDATE tasks SET {column} = (SELECT a.{source} {current}) WHERE attempt_id IS NOT NULL")
    for column in _PROCESS:
        op.execute(
            f"UPDATE tasks SET {column} = (SELECT a.{column} {current} AND a.ended_at IS NULL) "
            "WHERE attempt_id IS NOT NULL"
        )

    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_column("attempt_id")
        for column in (
            "borrowed_gpus",
            "borrowed_cpu_milli",
            "borrowed_memory_mib",
            "placement",
            "gpu_indices",
        ):
            batch_op.alter_column(column, server_default=None)
    with op.batch_alter_table("task_attempts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_task_attempts_task_id"))
    op.drop_table("task_attempts")
