"""Alembic environment: runs against the engine `store.migrate` hands over (or the configured URL)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Engine, create_engine

from gpucommons.store.migrate import target_metadata

config = context.config
metadata = target_metadata()


def run_migrations_online() -> None:
    engine = config.attributes.get("engine")
    if not isinstance(engine, Engine):
        engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=metadata,
            # SQLite cannot ALTER most things; batch mode copies the table instead.
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run against a database")
run_migrations_online()
