"""Identity migrations, upgrade → check → downgrade on SQLite and PostgreSQL.

0002_identity creates the identity tables (exactly the models' once every later revision is applied);
0004_token_creators (after 0003_history) adds who minted each token and whether it is service-owned,
links existing tokens to the directory user named by `created_by`, and goes away cleanly."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from gpucommons.store.db import Database, sqlite_url
from gpucommons.store.migrate import alembic_config, downgrade, target_metadata, upgrade

IDENTITY_TABLES = {"directory_users", "directory_groups", "group_members", "api_tokens", "audit_events"}
PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def _identity_diffs(db: Database) -> list[object]:
    with db.engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), target_metadata())
    return [d for d in diffs if IDENTITY_TABLES & {getattr(x, "name", "") for x in _tables_of(d)}]


def _tables_of(diff: object) -> list[object]:
    items = diff if isinstance(diff, list) else [diff]
    out: list[object] = []
    for item in items:
        for part in item if isinstance(item, tuple) else (item,):
            table = getattr(part, "table", None)
            out.append(table if table is not None else part)
    return out


def _round_trip(db: Database) -> None:
    upgrade(db, "0001_core")
    assert _identity_diffs(db), "the comparison must see the identity tables missing before 0002"
    upgrade(db, "0002_identity")
    assert set(inspect(db.engine).get_table_names()) >= IDENTITY_TABLES
    upgrade(db)
    assert _identity_diffs(db) == []
    downgrade(db, "0001_core")
    assert not IDENTITY_TABLES & set(inspect(db.engine).get_table_names())
    upgrade(db, "0002_identity")


def _token_creators_round_trip(db: Database) -> None:
    upgrade(db, "0003_history")
    with db.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO directory_users (id, user_name, user_name_key, active, attributes, created_at,"
                " updated_at, version) VALUES ('u1', 'alice', 'alice', true, '{}', 0, 0, 1)"
            )
        )
        for token_id, kind, created_by in (
            ("a" * 16, "api", "alice"),
            ("b" * 16, "api", "commons up"),
            ("c" * 16, "session", "oidc:web"),
            ("d" * 16, "api", "nobody-known"),
        ):
            conn.execute(
                text(
                    "INSERT INTO api_tokens (id, name, kind, subject, secret_hash, created_at, created_by)"
                    " VALUES (:id, 'n', :kind, 's', 'h', 0, :by)"
                ),
                {"id": token_id, "kind": kind, "by": created_by},
            )
    upgrade(db, "0004_token_creators")
    assert _identity_diffs(db) == []
    with db.engine.connect() as conn:
        rows = dict(
            conn.execute(text("SELECT id, created_by_user_id FROM api_tokens WHERE NOT service_owned")).all()
        )
    assert rows == {"a" * 16: "u1", "b" * 16: None, "c" * 16: None, "d" * 16: None}
    downgrade(db, "0003_history")
    columns = {c["name"] for c in inspect(db.engine).get_columns("api_tokens")}
    assert not {"created_by_user_id", "service_owned"} & columns
    upgrade(db)
    # At the head (later migrations touch other tables), the models and the schema agree.
    command.check(alembic_config(db))


def test_identity_migration_round_trips_on_sqlite(tmp_path: Path) -> None:
    db = Database(sqlite_url(tmp_path))
    _round_trip(db)
    db.dispose()


def test_token_creators_migration_links_tokens_and_round_trips_on_sqlite(tmp_path: Path) -> None:
    db = Database(sqlite_url(tmp_path))
    _token_creators_round_trip(db)
    db.dispose()


@pytest.fixture
def pg_database() -> Iterator[Database]:
    try:
        admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            name = f"identity_mig_{uuid.uuid4().hex[:10]}"
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # no server here: say so instead of failing
        pytest.skip(f"PostgreSQL at 127.0.0.1:5432 is not reachable: {exc}")
    db = Database(PG_ADMIN.rsplit("/", 1)[0] + f"/{name}")
    yield db
    db.dispose()
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE "{name}"'))
    admin.dispose()


@pytest.mark.postgres
def test_identity_migration_round_trips_on_postgresql(pg_database: Database) -> None:
    _round_trip(pg_database)


@pytest.mark.postgres
def test_token_creators_migration_links_tokens_and_round_trips_on_postgresql(pg_database: Database) -> None:
    _token_creators_round_trip(pg_database)
