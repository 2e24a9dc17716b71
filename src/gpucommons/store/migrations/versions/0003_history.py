"""history: who preempted whom, and stored planning runs

The tables of `store.history_models`: `preemptions` (both sides of every preemption, for the team
page and the task timeline) and `planning_runs` (background what-if replays and quota advice).

Revision ID: 0003_history
Revises: 0002_identity
Create Date: 2026-12-01 14:56:45.902919
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_history"
down_revision: str | None = "0002_identity"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "planning_runs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("created_by", sa.String(length=256), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.Column("window_start", sa.Float(), nullable=False),
        sa.Column("window_end", sa.Float(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("proposed_policy", sa.Text(), nullable=False),
        sa.Column("phase", sa.String(length=200), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("report", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_planning_runs")),
    )
    with op.batch_alter_table("planning_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_planning_runs_created_at"), ["created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_planning_runs_kind"), ["kind"], unique=False)

    op.create_table(
        "preemptions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("victim_task_id", sa.String(length=32), nullable=False),
        sa.Column("victim_team", sa.String(length=63), nullable=False),
        sa.Column("victim_gpus", sa.Integer(), nullable=False),
        sa.Column("victim_pool", sa.String(length=63), nullable=False),
        sa.Column("preemptor_task_id", sa.String(length=32), nullable=False),
        sa.Column("preemptor_team", sa.String(length=63), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_preemptions")),
    )
    with op.batch_alter_table("preemptions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_preemptions_at"), ["at"], unique=False)
        batch_op.create_index(batch_op.f("ix_preemptions_preemptor_team"), ["preemptor_team"], unique=False)
        batch_op.create_index(batch_op.f("ix_preemptions_victim_task_id"), ["victim_task_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_preemptions_victim_team"), ["victim_team"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("preemptions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_preemptions_victim_team"))
        batch_op.drop_index(batch_op.f("ix_preemptions_victim_task_id"))
        batch_op.drop_index(batch_op.f("ix_preemptions_preemptor_team"))
        batch_op.drop_index(batch_op.f("ix_preemptions_at"))

    op.drop_table("preemptions")
    with op.batch_alter_table("planning_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_planning_runs_kind"))
        batch_op.drop_index(batch_op.f("ix_planning_runs_created_at"))

    op.drop_table("planning_runs")
