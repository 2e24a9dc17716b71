"""Scratch PostgreSQL databases on the machine's server (127.0.0.1:5432, trust auth).

`scratch_database` is for benchmarks (it raises `PostgresUnavailable` with a sentence when no server
answers); `fresh_database` is the per-test form: tests that need PostgreSQL skip with that sentence,
so the suite still passes on a machine without one.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server answers at 127.0.0.1:5432."""


def connect_admin(connect_timeout: int = 2) -> Any:
    """An autocommit connection to the `postgres` database, or `PostgresUnavailable`."""
    try:
        import psycopg

        return psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=connect_timeout)
    except Exception as exc:
        raise PostgresUnavailable(f"PostgreSQL does not answer at 127.0.0.1:5432 ({exc})") from None


@contextmanager
def scratch_database(prefix: str, admin: Any = None, connect_timeout: int = 2) -> Iterator[str]:
    """Create `<prefix>_<random>`, yield its SQLAlchemy URL, drop it afterwards. Uses (and closes)
    `admin` when given, else connects (raising `PostgresUnavailable`)."""
    if admin is None:
        admin = connect_admin(connect_timeout)
    name = f"{prefix}_{secrets.token_hex(4)}"
    try:
        admin.execute(f'CREATE DATABASE "{name}"')
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@contextmanager
def fresh_database() -> Iterator[str]:
    """Create `commons_test_<random>`, yield its SQLAlchemy URL, drop it afterwards."""
    import pytest

    try:
        admin = connect_admin()
    except PostgresUnavailable as exc:
        pytest.skip(f"{exc}; the postgres variant is skipped")
    with scratch_database("commons_test", admin) as url:
        yield url
