"""Every row of every GPU Commons table, for comparing two databases (backup and restore tests)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, select

from gpucommons.store.snapshot import tables


def table_rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Each table's rows in primary-key order, values through the tables' own types (JSON parsed)."""
    engine = create_engine(url, future=True)
    try:
        with engine.connect() as conn:
            return {
                table.name: [
                    tuple(row) for row in conn.execute(select(table).order_by(*table.primary_key.columns))
                ]
                for table in tables()
            }
    finally:
        engine.dispose()


def snapshot_url(path: object) -> str:
    """A read-only URL of a snapshot file."""
    return f"sqlite:///file:{path}?mode=ro&uri=true"
