"""Alembic environment: runs against the engine `store.migrate` hands over (or the configured URL)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Engine, create_engine, text

from gpucommons.store.migrate import target_metadata

#: The advisory-lock key that serialises migrations (any fixed 64-bit number; see store.leadership).
MIGRATION_LOCK_KEY = 0x636F6D6D6F6E73  # "commons"

config = context.config
metadata = target_metadata()


def run_migrations_online() -> None:
    engine = config.attributes.get("engine")
    if not isinstance(engine, Engine):
        engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # Batch mode copies a table and drops the old one; with foreign keys on, SQLite's DROP
            # TABLE deletes the rows first and cascades that to every child table (a task's
            # events, attempts, ledger intervals). The pragma is ignored inside a transaction.
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()
        context.configure(
            connection=connection,
            target_metadata=metadata,
            # SQLite cannot ALTER most things; batch mode copies the table instead.
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
        )
        with context.begin_transaction():
            if connection.dialect.name == "postgresql":
                # Replicas starting together: one migrates, the others wait here and then find the
                # database at head (the lock ends with the transaction).
                connection.execute(text(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})"))
            context.run_migrations()
            if sqlite:
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
                if broken:
                    raise RuntimeError(f"the migration left rows whose parent is gone: {broken[:5]}")
        connection.commit()
        if sqlite:
            connection.exec_driver_sql("PRAGMA foreign_keys=ON")
            connection.commit()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run against a database")
run_migrations_online()
