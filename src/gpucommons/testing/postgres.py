"""A fresh PostgreSQL database per test, on the machine's server (127.0.0.1:5432, trust auth).

Tests that need PostgreSQL skip with a sentence when no server answers, so the suite still passes
on a machine without one.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


@contextmanager
def fresh_database() -> Iterator[str]:
    """Create `commons_test_<random>`, yield its SQLAlchemy URL, drop it afterwards."""
    try:
        import psycopg

        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=2)
    except Exception as exc:
        pytest.skip(f"PostgreSQL does not answer at 127.0.0.1:5432 ({exc}); the postgres variant is skipped")
    name = f"commons_test_{secrets.token_hex(4)}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
