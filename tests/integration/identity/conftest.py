"""Fixtures for identity integration tests: a database, the identity app, a SCIM client with a token."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from gpucommons.identity.principal import Role
from gpucommons.store.db import Database
from gpucommons.testing.identity import (
    ScimClient,
    identity_app,
    identity_database,
    identity_policy,
    service_token,
)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = identity_database(tmp_path)
    yield database
    database.dispose()


@pytest.fixture
def client(db: Database) -> TestClient:
    return TestClient(identity_app(db, identity_policy()))


@pytest.fixture
def scim(db: Database, client: TestClient) -> ScimClient:
    return ScimClient(client, service_token(db, Role.SCIM, name="idp"))
