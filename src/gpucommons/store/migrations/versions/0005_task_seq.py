"""task_seq: the submission sequence as a PostgreSQL sequence, so that several replicas may store tasks

Until now one server process handed out `tasks.seq` from memory. With several replicas sharing a
PostgreSQL database each of them stores tasks, so the numbers come from a database sequence, started
after the largest number in use. SQLite keeps one server process per database and needs nothing.

Revision ID: 0005_task_seq
Revises: 0004_token_creators
Create Date: 2026-12-01 19:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005_task_seq"
down_revision: str | None = "0004_token_creators"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("CREATE SEQUENCE IF NOT EXISTS task_seq AS integer")
    op.execute("SELECT setval('task_seq', COALESCE((SELECT max(seq) FROM tasks), 0) + 1, false)")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP SEQUENCE IF EXISTS task_seq")
