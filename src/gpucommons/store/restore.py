"""`commons restore`: put a snapshot's rows into a database no server runs on (see `store.snapshot`).

Order of checks, each refusing with a sentence before anything is written:

1. the file is a snapshot this version can restore: a SQLite file with `alembic_version` at a revision
   this version knows (an older one is upgraded in a temporary copy first; a newer one is refused);
2. no server runs on the target: restore takes the server's own leadership lock (`store.leadership`;
   a running leader holds it) and holds it until the end, so no `commons up` starts meanwhile; on
   PostgreSQL a follower replica (its election connection is open) is refused too;
3. the target is migrated to this version's head and must be empty (no row in any table) unless
   `force`, which replaces whatever is there.

Then one transaction: every table emptied, the snapshot's rows inserted, PostgreSQL's sequences moved
past the restored ids (and `task_seq` past the largest submission number). A failure rolls it all
back: the target is as it was.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, delete, text
from sqlalchemy.exc import SQLAlchemyError

from gpucommons.store import migrate
from gpucommons.store.db import Database
from gpucommons.store.leadership import SERVER, Leadership, leadership_for, lock_key
from gpucommons.store.sequence import TASK_SEQ
from gpucommons.store.snapshot import (
    Progress,
    SnapshotError,
    SnapshotInfo,
    code_head,
    copy_rows,
    count_rows,
    describe_url,
    inspect_snapshot,
    known_revisions,
    no_progress,
    open_snapshot,
    read_revision,
    tables,
)

#: How long a PostgreSQL restore waits for another session to let go of a table.
LOCK_TIMEOUT_S = 15


@dataclass
class RestoreResult:
    snapshot: SnapshotInfo
    #: The revision the snapshot was taken at, when it was upgraded to this version's on the way.
    upgraded_from: str | None
    #: Rows that were in the target before (all replaced; only with `force`).
    replaced: dict[str, int]


def restore(
    db: Database, snapshot: Path, *, force: bool = False, progress: Progress = no_progress
) -> RestoreResult:
    """Replace the contents of `db` with the snapshot in `snapshot` (refusing as the module says)."""
    info = inspect_snapshot(snapshot)
    head = code_head()
    known = known_revisions()
    if info.revision not in known:
        raise SnapshotError(
            f"{snapshot} is at schema revision {info.revision}, which this version of commons does not know "
            f"(it knows {known[0]} … {head}): restore it with the version that took it, or a newer one"
        )
    with _upgraded(info) as (source_path, upgraded_from):
        source_info = inspect_snapshot(source_path) if upgraded_from else info
        with _no_server(db):
            replaced = _load(db, source_path, source_info, force, progress)
    return RestoreResult(
        snapshot=source_info if upgraded_from else info, upgraded_from=upgraded_from, replaced=replaced
    )


@contextmanager
def _upgraded(info: SnapshotInfo) -> Iterator[tuple[Path, str | None]]:
    """The snapshot itself when it is at this version's head, else an upgraded temporary copy."""
    if info.revision == code_head():
        yield info.path, None
        return
    with tempfile.TemporaryDirectory(prefix="commons-restore-") as work:
        copy = Path(work) / "snapshot.db"
        shutil.copyfile(info.path, copy)
        upgrade = Database(f"sqlite:///{copy}")
        try:
            migrate.upgrade(upgrade)
        except Exception as exc:
            raise SnapshotError(
                f"cannot upgrade {info.path} from revision {info.revision} to {code_head()}: {_reason(exc)}"
            ) from None
        finally:
            upgrade.dispose()
        yield copy, info.revision


@contextmanager
def _no_server(db: Database) -> Iterator[None]:
    """Hold the server's leadership lock for the whole restore; refuse when a server has it."""
    where = describe_url(db.url)
    try:
        lock: Leadership = leadership_for(db, SERVER)
        acquired = lock.try_acquire()
    except Exception as exc:  # PostgreSQL unreachable, a lock file that cannot be created
        raise SnapshotError(f"cannot reach {where}: {_reason(exc)}") from None
    if not acquired:
        holder = lock.holder()
        lock.release()
        raise SnapshotError(
            f"a server is running on {where} ({holder or 'it holds the ' + lock.describe()}): stop every "
            "`commons up` on it before restoring (restore replaces what the server works on)"
        )
    try:
        if not db.is_sqlite:
            _refuse_followers(db, where)
        yield
    finally:
        lock.release()


def _refuse_followers(db: Database, where: str) -> None:
    """A follower replica keeps an election connection (application_name "gpu-commons leadership …")
    open while it waits for the lock: any such session other than ours is a server running."""
    with db.engine.connect() as conn:
        _refuse_followers_on(conn, where)


def _refuse_followers_on(conn: Connection, where: str) -> None:
    others = (
        conn.execute(
            text(
                "SELECT application_name FROM pg_stat_activity WHERE datname = current_database()"
                " AND application_name LIKE 'gpu-commons leadership%'"
                " AND pid NOT IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = :key)"
            ),
            {"key": lock_key(SERVER)},
        )
        .scalars()
        .all()
    )
    if others:
        who = "; ".join(str(name).removeprefix("gpu-commons leadership ") for name in others)
        raise SnapshotError(
            f"a server is running on {where} (a follower replica: {who}): stop every `commons up` on it "
            "before restoring"
        )


def _load(
    db: Database, source_path: Path, info: SnapshotInfo, force: bool, progress: Progress
) -> dict[str, int]:
    where = describe_url(db.url)
    try:
        with db.engine.connect() as conn:
            current = read_revision(conn)
        if current is not None and current not in known_revisions():
            raise SnapshotError(
                f"{where} is at schema revision {current}, which this version of commons does not know: "
                "restore with the version of commons that database belongs to"
            )
        migrate.upgrade(db)
        with db.engine.connect() as conn, conn.begin():
            if not db.is_sqlite:
                _lock_tables(conn, where)
            existing = {name: n for name, n in count_rows(conn).items() if n}
            if existing and not force:
                what = ", ".join(f"{name} {n}" for name, n in existing.items())
                raise SnapshotError(
                    f"{where} is not empty ({what} rows): restore replaces everything in it; pass --force "
                    "to do that (or restore into a new database)"
                )
            for table in reversed(tables()):
                conn.execute(delete(table))
            with open_snapshot(source_path) as snap, snap.connect() as source:
                copy_rows(source, conn, info.rows, progress)
            if not db.is_sqlite:
                _move_sequences(conn)
            restored = count_rows(conn)
            if restored != info.rows:
                raise SnapshotError(
                    f"restored rows {restored} differ from the snapshot's {info.rows}; nothing was changed"
                )
    except SnapshotError:
        raise
    except SQLAlchemyError as exc:
        raise SnapshotError(f"the restore into {where} failed, nothing was changed: {_reason(exc)}") from None
    return existing


def _lock_tables(conn: Connection, where: str) -> None:
    """Every table locked for the transaction: a replica started meanwhile (it would come up as a
    follower, the lock being ours, and serve submissions) waits for the restore instead of writing
    beside it; and the follower check is repeated under the lock, closing the window since the first."""
    names = ", ".join(table.name for table in tables())
    conn.execute(text(f"SET LOCAL lock_timeout = '{int(LOCK_TIMEOUT_S * 1000)}ms'"))
    try:
        conn.execute(text(f"LOCK TABLE {names} IN ACCESS EXCLUSIVE MODE"))
    except SQLAlchemyError as exc:
        raise SnapshotError(
            f"the tables of {where} stay in use (another session holds them: {_reason(exc)}); stop what "
            "uses the database and try again"
        ) from None
    _refuse_followers_on(conn, where)


def _move_sequences(conn: Connection) -> None:
    """Serial ids and the submission sequence continue after the restored rows."""
    for table in tables():
        keys = [c for c in table.primary_key.columns if c.autoincrement is True]
        for column in keys:
            conn.execute(
                text(
                    "SELECT setval(pg_get_serial_sequence(:table, :column),"
                    f" COALESCE(MAX({column.name}), 0) + 1, false) FROM {table.name}"
                ),
                {"table": table.name, "column": column.name},
            )
    conn.execute(
        text(
            f"SELECT setval('{TASK_SEQ}', COALESCE((SELECT MAX(seq) FROM tasks), 0) + 1, false)"
            f" WHERE to_regclass('{TASK_SEQ}') IS NOT NULL"
        )
    )


def _reason(exc: BaseException) -> str:
    text_ = str(getattr(exc, "orig", None) or exc).strip()
    return text_.splitlines()[0] if text_ else type(exc).__name__
