"""cluster tasks: a task's container image, the cluster object it is, and where it came from

On a cluster backend (Kubernetes with Kueue) a task runs in a container `image` as a cluster object
(`cluster_ref`, e.g. `team-nlp/commons-t3f9a2b1c0d`, written once the Job is created), and the
cluster also runs work nobody submitted through GPU Commons (`origin` = `cluster`: a Job made
with kubectl), which is shown and billed to its namespace's team like any other task.

Revision ID: 0006_cluster_tasks
Revises: 0005_task_seq
Create Date: 2026-12-01 20:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_cluster_tasks"
down_revision: str | None = "0005_task_seq"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("image", sa.String(length=512), nullable=True))
        batch_op.add_column(sa.Column("cluster_ref", sa.String(length=320), nullable=True))
        batch_op.add_column(
            sa.Column("origin", sa.String(length=16), server_default="commons", nullable=False)
        )
        batch_op.create_index(batch_op.f("ix_tasks_cluster_ref"), ["cluster_ref"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tasks_cluster_ref"))
        batch_op.drop_column("origin")
        batch_op.drop_column("cluster_ref")
        batch_op.drop_column("image")
