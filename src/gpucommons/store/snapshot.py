"""The snapshot format of `commons backup` / `commons restore`, and what both sides share.

A snapshot is always one SQLite database file, whatever database it was taken from:

- from SQLite it is the sqlite3 online backup (`Connection.backup`) of the live database: a page copy
  taken inside one read transaction, so it is consistent while the server writes (WAL readers do not
  block the writer, and the writer does not disturb the copy);
- from PostgreSQL it is every table's rows, read in one `REPEATABLE READ READ ONLY` transaction (one
  snapshot of the whole database, as `pg_dump` takes) and written into a SQLite file whose schema the
  same Alembic migrations built.

Why not `pg_dump`: one format means one restore path, one validation (the alembic revision is a row
in the file; a wrong file is told by its first 16 bytes), snapshots that move between SQLite and
PostgreSQL (start on SQLite, grow to replicas on PostgreSQL), no client binary whose major version
must match the server's, and a file any `sqlite3` can open to look inside. The price: row copying
is slower than `pg_dump -Fc` for very large databases (the ledger of a big cluster is a few million
rows: minutes, with a progress bar), and only GPU Commons' own tables are in it (which is all the
database holds). Times are float seconds and JSON is text on both engines, so values survive the
trip exactly.

Beside GPU Commons' tables a snapshot has `commons_snapshot` (key, value): the format, when and from
what it was taken, the commons version and the schema revision (also in `alembic_version`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, Table, create_engine, func, insert, select
from sqlalchemy.engine import make_url

from gpucommons.store.migrate import MIGRATIONS_DIR, target_metadata

#: The value of `format` in `commons_snapshot`.
FORMAT = "gpu-commons snapshot 1"
META_TABLE = "commons_snapshot"
SQLITE_MAGIC = b"SQLite format 3\x00"
#: Rows per INSERT batch (and per progress step).
BATCH_ROWS = 2000

#: `progress(step, done, total)`: `step` names what is being copied now (a table, or "pages" for a
#: SQLite page copy); `done` of `total` so far, over the whole copy (rows, or pages).
Progress = Callable[[str, int, int], None]


class SnapshotError(Exception):
    """What is wrong, in a sentence for the person who ran the command (never a traceback)."""


@dataclass
class SnapshotInfo:
    """What a snapshot holds: its revision, where it came from, and the rows per table."""

    path: Path
    revision: str
    meta: dict[str, str] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


def no_progress(_step: str, _done: int, _total: int) -> None:
    """The default `Progress`: say nothing."""


def tables() -> list[Table]:
    """GPU Commons' tables, parents before children (the order rows are inserted in)."""
    return list(target_metadata().sorted_tables)


def describe_url(url: str) -> str:
    """A database URL for messages, without its password."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return f"SQLite database {parsed.database}"
    return f"PostgreSQL database {parsed.database} on {parsed.host or 'localhost'}:{parsed.port or 5432}"


def scripts() -> ScriptDirectory:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return ScriptDirectory.from_config(config)


def code_head() -> str:
    """The schema revision this version of GPU Commons writes (its newest migration)."""
    head = scripts().get_current_head()
    assert head is not None, "no migrations shipped"
    return head


def known_revisions() -> list[str]:
    """Every revision this version knows, oldest first."""
    return [script.revision for script in reversed(list(scripts().walk_revisions()))]


def read_revision(conn: Connection) -> str | None:
    """The revision in `alembic_version`, None when the table is not there (not our database)."""
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(conn).get_current_revision()


def count_rows(conn: Connection) -> dict[str, int]:
    return {
        table.name: int(conn.execute(select(func.count()).select_from(table)).scalar_one())
        for table in tables()
    }


def copy_rows(source: Connection, dest: Connection, rows: dict[str, int], progress: Progress) -> None:
    """Every table's rows from `source` into `dest` (same schema), in key order, in batches.

    `rows` is what `count_rows(source)` said (the progress total). Values go through the tables'
    SQLAlchemy types both ways, so JSON and booleans arrive as they left."""
    total = sum(rows.values())
    done = 0
    for table in tables():
        if not rows.get(table.name):
            continue
        progress(table.name, done, total)
        result = source.execution_options(stream_results=True, max_row_buffer=BATCH_ROWS).execute(
            select(table).order_by(*table.primary_key.columns)
        )
        for batch in result.partitions(BATCH_ROWS):
            dest.execute(insert(table), [dict(row._mapping) for row in batch])
            done += len(batch)
            progress(table.name, done, max(total, done))


def check_file(path: Path) -> None:
    """A readable SQLite file, or a `SnapshotError` saying what it is instead."""
    if not path.exists():
        raise SnapshotError(f"{path}: no such file")
    if not path.is_file():
        raise SnapshotError(f"{path} is not a file (a snapshot is the one file `commons backup` writes)")
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise SnapshotError(f"cannot read {path}: {exc.strerror or exc}") from None
    if head != SQLITE_MAGIC:
        raise SnapshotError(
            f"{path} is not a GPU Commons snapshot: not a SQLite database file (a snapshot is the file "
            "`commons backup` writes)"
        )


@contextmanager
def open_snapshot(path: Path) -> Iterator[Engine]:
    """A read-only engine on a snapshot file (it is never changed by reading it)."""
    engine = create_engine(f"sqlite:///file:{path}?mode=ro&uri=true", future=True)
    try:
        yield engine
    finally:
        engine.dispose()


def inspect_snapshot(path: Path) -> SnapshotInfo:
    """Check that `path` is a snapshot this version can restore and say what it holds."""
    check_file(path)
    with open_snapshot(path) as engine:
        try:
            with engine.connect() as conn:
                names = set(conn.dialect.get_table_names(conn))
                revision = read_revision(conn) if "alembic_version" in names else None
                meta: dict[str, str] = {}
                if META_TABLE in names:
                    meta = {
                        str(k): str(v)
                        for k, v in conn.exec_driver_sql(f"SELECT key, value FROM {META_TABLE}")
                    }
                if revision is None:
                    raise SnapshotError(
                        f"{path} is not a GPU Commons snapshot: a SQLite database without an "
                        "`alembic_version` table (tables: " + (", ".join(sorted(names)) or "none") + ")"
                    )
                rows = count_rows(conn) if revision == code_head() else {}
        except SnapshotError:
            raise
        except Exception as exc:  # a damaged file, a table missing at the revision it claims
            raise SnapshotError(
                f"{path} cannot be read as a GPU Commons snapshot: {_first_line(exc)}"
            ) from None
    return SnapshotInfo(path=path, revision=revision, meta=meta, rows=rows)


def write_meta(path: Path, meta: dict[str, str]) -> None:
    """Add `commons_snapshot` to a snapshot file, and make it one self-contained file (no WAL)."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute(f"CREATE TABLE IF NOT EXISTS {META_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.executemany(f"INSERT OR REPLACE INTO {META_TABLE} (key, value) VALUES (?, ?)", meta.items())
        conn.commit()
        problem = conn.execute("PRAGMA quick_check").fetchone()
        if not problem or problem[0] != "ok":
            raise SnapshotError(f"the snapshot written to {path} fails SQLite's check: {problem}")
    finally:
        conn.close()


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
