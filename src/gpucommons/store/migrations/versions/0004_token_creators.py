"""token creators: who minted each API token, and whether it is service-owned

`api_tokens.created_by_user_id` names the person a token's authority comes from, so that their
deprovisioning reaches the tokens they minted; `service_owned` marks the tokens a platform admin
explicitly gave to the service instead. Existing API tokens whose `created_by` is a directory
userName are linked to that user (tokens made by `commons up`, demo users and sign-ins are not).

Revision ID: 0004_token_creators
Revises: 0003_history
Create Date: 2026-12-01 16:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_token_creators"
down_revision: str | None = "0003_history"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: `created_by` values the server writes itself, never a person's userName.
_NOT_A_PERSON = ("commons up", "demo", "oidc:web", "oidc:cli")


def upgrade() -> None:
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("created_by_user_id", sa.String(length=64), nullable=True))
        batch_op.add_column(
            sa.Column("service_owned", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
        batch_op.create_index(
            batch_op.f("ix_api_tokens_created_by_user_id"), ["created_by_user_id"], unique=False
        )
    tokens = sa.table(
        "api_tokens",
        sa.column("kind", sa.String),
        sa.column("created_by", sa.String),
        sa.column("created_by_user_id", sa.String),
    )
    users = sa.table("directory_users", sa.column("id", sa.String), sa.column("user_name", sa.String))
    creator = sa.select(users.c.id).where(users.c.user_name == tokens.c.created_by).limit(1).scalar_subquery()
    op.execute(
        tokens.update()
        .where(tokens.c.kind == "api", tokens.c.created_by.notin_(_NOT_A_PERSON))
        .values(created_by_user_id=creator)
    )


def downgrade() -> None:
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_tokens_created_by_user_id"))
        batch_op.drop_column("service_owned")
        batch_op.drop_column("created_by_user_id")
