"""`commons backup`: a consistent snapshot of a live database into one file (see `store.snapshot`).

The snapshot is written beside its destination under a temporary name and renamed into place when it
is complete and checked, so FILE is never half a snapshot (a failed or interrupted backup leaves the
previous FILE as it was).
"""

from __future__ import annotations

import os
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import create_engine
from sqlalchemy.exc import SQLAlchemyError

from gpucommons import __version__
from gpucommons.store import migrate
from gpucommons.store.db import Database
from gpucommons.store.snapshot import (
    FORMAT,
    Progress,
    SnapshotError,
    SnapshotInfo,
    code_head,
    copy_rows,
    count_rows,
    describe_url,
    no_progress,
    read_revision,
    write_meta,
)


def backup(db: Database, out: Path, *, progress: Progress = no_progress) -> SnapshotInfo:
    """Write a consistent snapshot of `db` to `out` while servers keep running on it."""
    out = out.expanduser().absolute()
    if not out.parent.is_dir():
        raise SnapshotError(f"cannot write {out}: the directory {out.parent} does not exist")
    if out.is_dir():
        raise SnapshotError(f"cannot write {out}: it is a directory (name the snapshot file)")
    partial = out.with_name(f".{out.name}.partial-{os.getpid()}")
    partial.unlink(missing_ok=True)
    started = time.time()
    try:
        if db.is_sqlite:
            revision, rows = _from_sqlite(db, partial, progress)
        else:
            revision, rows = _from_postgres(db, partial, progress)
        meta = {
            "format": FORMAT,
            "taken_at": datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds"),
            "source": describe_url(db.url),
            "commons_version": __version__,
            "revision": revision,
        }
        write_meta(partial, meta)
        partial.chmod(0o600)  # token hashes and the audit trail are in it
        os.replace(partial, out)
    except OSError as exc:
        raise SnapshotError(f"cannot write {out}: {exc.strerror or exc}") from None
    finally:
        partial.unlink(missing_ok=True)
    return SnapshotInfo(path=out, revision=revision, meta=meta, rows=rows)


def _sqlite_path(db: Database) -> Path:
    from sqlalchemy.engine import make_url

    database = make_url(db.url).database
    if not database or database == ":memory:":
        raise SnapshotError("an in-memory SQLite database cannot be backed up from another process")
    path = Path(database)
    if not path.is_file():
        raise SnapshotError(f"no database at {path} (is --home, COMMONS_HOME or COMMONS_DATABASE_URL right?)")
    return path


def _from_sqlite(db: Database, partial: Path, progress: Progress) -> tuple[str, dict[str, int]]:
    """The online backup API, in one step: one read transaction over the whole copy (a stepped
    copy restarts whenever the server writes between steps, which a busy server always does)."""
    path = _sqlite_path(db)
    try:
        # mode=rw: never create a database that is not there; the busy timeout rides out a
        # checkpoint of the server's.
        source = sqlite3.connect(f"file:{quote(str(path))}?mode=rw", uri=True, timeout=30)
    except sqlite3.Error as exc:
        raise SnapshotError(f"cannot open {path}: {exc}") from None
    try:
        tables = {name for (name,) in source.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "alembic_version" not in tables:
            raise SnapshotError(f"{path} is not a GPU Commons database (no `alembic_version` table)")
        pages = int(source.execute("PRAGMA page_count").fetchone()[0])
        progress("pages", 0, pages)
        dest = sqlite3.connect(partial)
        try:
            source.backup(
                dest, pages=-1, progress=lambda _status, left, total: progress("pages", total - left, total)
            )
        finally:
            dest.close()
    except sqlite3.Error as exc:
        raise SnapshotError(f"the backup of {path} failed: {exc}") from None
    finally:
        source.close()
    progress("pages", pages, pages)
    engine = create_engine(f"sqlite:///{partial}", future=True)
    try:
        with engine.connect() as conn:
            revision = read_revision(conn)
            assert revision is not None  # checked on the source, copied with it
            rows = count_rows(conn) if revision == code_head() else {}
    finally:
        engine.dispose()
    return revision, rows


def _from_postgres(db: Database, partial: Path, progress: Progress) -> tuple[str, dict[str, int]]:
    """Every table in one REPEATABLE READ READ ONLY transaction: all rows as of one instant, without
    blocking a writer (PostgreSQL's MVCC: the transaction reads its snapshot, writers go on)."""
    head = code_head()
    try:
        with db.engine.connect() as raw:
            source = raw.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
            with source.begin():
                revision = read_revision(source)
                if revision is None:
                    raise SnapshotError(
                        f"{describe_url(db.url)} is not a GPU Commons database (no `alembic_version` table)"
                    )
                if revision != head:
                    raise SnapshotError(
                        f"{describe_url(db.url)} is at schema revision {revision}, this commons writes "
                        f"{head}: "
                        "back it up with the version of commons its servers run"
                    )
                rows = count_rows(source)
                target = Database(f"sqlite:///{partial}")
                try:
                    migrate.upgrade(target, revision)
                    with target.engine.begin() as dest:
                        copy_rows(source, dest, rows, progress)
                finally:
                    target.dispose()
    except SnapshotError:
        raise
    except SQLAlchemyError as exc:
        raise SnapshotError(f"the backup of {describe_url(db.url)} failed: {_reason(exc)}") from None
    for suffix in ("-wal", "-shm"):
        Path(f"{partial}{suffix}").unlink(missing_ok=True)
    return revision, rows


def _reason(exc: SQLAlchemyError) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
