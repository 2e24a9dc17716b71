"""Fixtures for identity integration tests: a database, the identity app, a SCIM client with a token.

Every test runs on SQLite and on PostgreSQL (127.0.0.1:5432, one throw-away database per session,
emptied before each test); the PostgreSQL runs are marked `postgres` and skipped, saying why, when
no server answers.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from gpucommons.identity.principal import Role
from gpucommons.store.base import Base
from gpucommons.store.db import Database
from gpucommons.testing.identity import (
    ScimClient,
    identity_app,
    identity_database,
    identity_policy,
    service_token,
)

PG_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    name = f"identity_it_{uuid.uuid4().hex[:10]}"
    try:
        admin = create_engine(f"{PG_SERVER}/test", isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:
        pytest.skip(f"PostgreSQL at 127.0.0.1:5432 is not reachable: {exc}")
    import gpucommons.store.identity_models  # noqa: F401  (registers the tables)

    engine = create_engine(f"{PG_SERVER}/{name}")
    Base.metadata.create_all(engine)
    engine.dispose()
    yield f"{PG_SERVER}/{name}"
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        database = identity_database(tmp_path)
    else:
        database = Database(request.getfixturevalue("postgres_url"))
        tables = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
        with database.engine.begin() as conn:  # empty, not recreate: ten times faster
            conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    yield database
    database.dispose()


@pytest.fixture
def client(db: Database) -> TestClient:
    return TestClient(identity_app(db, identity_policy()))


@pytest.fixture
def scim(db: Database, client: TestClient) -> ScimClient:
    return ScimClient(client, service_token(db, Role.SCIM, name="idp"))
