"""identity: directory users and groups, memberships, API tokens and sessions, audit log

The tables of `store.identity_models`. `group_members.member_id` has no foreign key on purpose: a
membership may name a user that does not exist yet (pending; it grants nothing).

Revision ID: 0002_identity
Revises: 0001_core
Create Date: 2026-11-30 15:22:33.505374
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_identity"
down_revision: str | None = "0001_core"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("actor", sa.String(length=256), nullable=True),
        sa.Column("credential_id", sa.String(length=32), nullable=True),
        sa.Column("action", sa.String(length=128), nullable=False),
        sa.Column("method", sa.String(length=8), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("team", sa.String(length=128), nullable=True),
        sa.Column("target", sa.String(length=256), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("remote_addr", sa.String(length=64), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
    )
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_events_actor"), ["actor"], unique=False)
        batch_op.create_index(batch_op.f("ix_audit_events_at"), ["at"], unique=False)

    op.create_table(
        "directory_groups",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("display_name", sa.String(length=256), nullable=False),
        sa.Column("display_name_key", sa.String(length=256), nullable=False),
        sa.Column("external_id", sa.String(length=256), nullable=True),
        sa.Column("attributes", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_directory_groups")),
        sa.UniqueConstraint("display_name_key", name=op.f("uq_directory_groups_display_name_key")),
    )
    with op.batch_alter_table("directory_groups", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_directory_groups_external_id"), ["external_id"], unique=False)

    op.create_table(
        "directory_users",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("user_name", sa.String(length=256), nullable=False),
        sa.Column("user_name_key", sa.String(length=256), nullable=False),
        sa.Column("external_id", sa.String(length=256), nullable=True),
        sa.Column("display_name", sa.String(length=256), nullable=True),
        sa.Column("email", sa.String(length=320), nullable=True),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("oidc_subject", sa.String(length=512), nullable=True),
        sa.Column("attributes", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_directory_users")),
        sa.UniqueConstraint("oidc_subject", name=op.f("uq_directory_users_oidc_subject")),
        sa.UniqueConstraint("user_name_key", name=op.f("uq_directory_users_user_name_key")),
    )
    with op.batch_alter_table("directory_users", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_directory_users_external_id"), ["external_id"], unique=False)

    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=True),
        sa.Column("subject", sa.String(length=256), nullable=False),
        sa.Column("role", sa.String(length=32), nullable=True),
        sa.Column("team", sa.String(length=128), nullable=True),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("created_by", sa.String(length=256), nullable=True),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.Column("revoked_at", sa.Float(), nullable=True),
        sa.Column("last_used_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["directory_users.id"],
            name=op.f("fk_api_tokens_user_id_directory_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
    )
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_tokens_user_id"), ["user_id"], unique=False)

    op.create_table(
        "group_members",
        sa.Column("group_id", sa.String(length=64), nullable=False),
        sa.Column("member_id", sa.String(length=256), nullable=False),
        sa.Column("added_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["group_id"],
            ["directory_groups.id"],
            name=op.f("fk_group_members_group_id_directory_groups"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("group_id", "member_id", name=op.f("pk_group_members")),
    )
    with op.batch_alter_table("group_members", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_group_members_member_id"), ["member_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("group_members", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_group_members_member_id"))

    op.drop_table("group_members")
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_tokens_user_id"))

    op.drop_table("api_tokens")
    with op.batch_alter_table("directory_users", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_directory_users_external_id"))

    op.drop_table("directory_users")
    with op.batch_alter_table("directory_groups", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_directory_groups_external_id"))

    op.drop_table("directory_groups")
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_events_at"))
        batch_op.drop_index(batch_op.f("ix_audit_events_actor"))

    op.drop_table("audit_events")
