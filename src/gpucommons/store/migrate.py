"""Alembic, driven from code: `commons up` upgrades the database to head before serving.

The migration scripts ship inside the package (`store/migrations`), so no alembic.ini is needed.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import MetaData

from gpucommons.store.base import Base
from gpucommons.store.db import Database

MIGRATIONS_DIR = Path(__file__).parent / "migrations"

#: Modules whose tables live on `Base.metadata`; identity's may not exist in every checkout yet.
MODEL_MODULES = (
    "gpucommons.store.models",
    "gpucommons.store.identity_models",
    "gpucommons.store.history_models",
)


def target_metadata() -> MetaData:
    """The metadata of every table, with every model module imported."""
    for name in MODEL_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
    return Base.metadata


def alembic_config(db: Database) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    # `%` is ConfigParser interpolation; a password may contain one.
    cfg.set_main_option("sqlalchemy.url", db.url.replace("%", "%%"))
    cfg.attributes["engine"] = db.engine
    return cfg


def upgrade(db: Database, revision: str = "heads") -> None:
    command.upgrade(alembic_config(db), revision)


def downgrade(db: Database, revision: str = "base") -> None:
    command.downgrade(alembic_config(db), revision)
