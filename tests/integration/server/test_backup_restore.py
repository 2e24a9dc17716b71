"""`commons backup` / `commons restore` on the store (SQLite and PostgreSQL): a round trip keeps every
row, snapshots move between the engines, and every refusal says what is wrong before anything changes.

The same under a running, loaded server: tests/e2e/server/test_e2e_backup.py."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import text
from tests.integration.server.conftest import SMALL_POLICY, Harness
from tests.integration.server.rows import snapshot_url, table_rows
from typer.testing import CliRunner

from gpucommons.cli.main import app
from gpucommons.server.app import build_context
from gpucommons.server.settings import Settings
from gpucommons.store.backup import backup
from gpucommons.store.db import Database
from gpucommons.store.leadership import leadership_for
from gpucommons.store.migrate import upgrade
from gpucommons.store.restore import restore
from gpucommons.store.snapshot import META_TABLE, SnapshotError, code_head
from gpucommons.testing.postgres import fresh_database


@contextmanager
def another_database(kind: str, tmp_path: Path, name: str = "other") -> Iterator[str]:
    """A second empty database of `kind` ("sqlite" or "postgres")."""
    if kind == "sqlite":
        (tmp_path / name).mkdir()
        yield f"sqlite:///{tmp_path / name / 'commons.db'}"
    else:
        with fresh_database() as url:
            yield url


def kind_of(url: str) -> str:
    return "sqlite" if url.startswith("sqlite") else "postgres"


def populate(make_harness: Callable[..., Harness]) -> Harness:
    """Tasks that ran and ended (events, ledger intervals), one still pending, and a token."""
    harness = make_harness()
    done = [harness.submit(team="a", gpus=1, command=["true"])["id"] for _ in range(3)]
    for task_id in done:
        harness.wait_state(str(task_id), "succeeded")
    harness.submit(team="b", gpus=1, command=["true"])  # no cycle after it: stays pending
    harness.member_token("a")
    return harness


def harness_on(url: str, tmp_path: Path) -> Harness:
    policy = tmp_path / "restored-policy.yaml"
    policy.write_text(SMALL_POLICY)
    settings = Settings(
        home=tmp_path / "restored-home",
        database_url=url,
        policy=policy,
        run_scheduler=False,
        isolation="logical",
    )
    return Harness(build_context(settings))


def test_round_trip_keeps_every_row_and_the_restored_database_serves(
    make_harness: Callable[..., Harness], database_url: str, tmp_path: Path
) -> None:
    harness = populate(make_harness)
    before = table_rows(database_url)
    snap = tmp_path / "snap.db"
    info = backup(harness.ctx.db, snap)
    assert info.revision == code_head()
    assert info.rows["tasks"] == 4 and info.rows["usage_intervals"] >= 3 and info.rows["api_tokens"] == 2
    assert table_rows(snapshot_url(snap)) == before
    assert oct(snap.stat().st_mode & 0o777) == "0o600"
    assert not list(tmp_path.glob(".snap.db.partial-*"))
    with another_database(kind_of(database_url), tmp_path) as other:
        result = restore(Database(other), snap)
        assert result.replaced == {} and result.upgraded_from is None
        assert table_rows(other) == before
        # The restored database is a working one: its tokens authenticate, new rows get new ids.
        restored = harness_on(other, tmp_path)
        try:
            restored.admin_token = harness.admin_token
            restored.admin = harness.admin
            assert restored.http.get("/api/v1/tasks", headers=harness.admin).status_code == 200
            new = restored.submit(team="a", gpus=1, command=["true"])
            assert new["id"] not in {row[0] for row in before["tasks"]}
            assert restored.wait_state(str(new["id"]), "succeeded")["state"] == "succeeded"
        finally:
            restored.close()


@pytest.mark.postgres
def test_a_snapshot_moves_between_sqlite_and_postgresql(
    make_harness: Callable[..., Harness], tmp_path: Path, database_url: str
) -> None:
    harness = populate(make_harness)
    before = table_rows(database_url)
    snap = tmp_path / "snap.db"
    backup(harness.ctx.db, snap)
    other_kind = "postgres" if kind_of(database_url) == "sqlite" else "sqlite"
    with another_database(other_kind, tmp_path) as other:
        restore(Database(other), snap)
        assert table_rows(other) == before
        again = tmp_path / "again.db"
        backup(Database(other), again)
        assert table_rows(snapshot_url(again)) == before


def test_restore_refuses_a_database_that_is_not_empty_unless_forced(
    make_harness: Callable[..., Harness], database_url: str, tmp_path: Path
) -> None:
    harness = populate(make_harness)
    snap = tmp_path / "snap.db"
    backup(harness.ctx.db, snap)
    with another_database(kind_of(database_url), tmp_path) as other:
        target = Database(other)
        restore(target, snap)
        with target.engine.begin() as conn:
            conn.execute(text("DELETE FROM tasks WHERE state = 'pending'"))
        after_change = table_rows(other)
        with pytest.raises(SnapshotError, match=r"is not empty \(.*tasks 3.*\).*pass --force"):
            restore(target, snap)
        assert table_rows(other) == after_change  # nothing written
        result = restore(target, snap, force=True)
        assert result.replaced["tasks"] == 3
        assert table_rows(other) == table_rows(snapshot_url(snap))


def test_restore_refuses_while_a_server_holds_the_database(
    make_harness: Callable[..., Harness], database_url: str, tmp_path: Path
) -> None:
    harness = populate(make_harness)
    snap = tmp_path / "snap.db"
    backup(harness.ctx.db, snap)
    before = table_rows(database_url)
    lock = leadership_for(harness.ctx.db)
    assert lock.try_acquire()
    try:
        with pytest.raises(SnapshotError, match=r"a server is running on .*: stop every `commons up`"):
            restore(Database(database_url), snap, force=True)
    finally:
        lock.release()
    assert table_rows(database_url) == before


@pytest.mark.postgres
def test_restore_refuses_while_a_follower_replica_waits_for_the_lock(tmp_path: Path) -> None:
    import psycopg

    with fresh_database() as url:
        db = Database(url)
        upgrade(db)
        snap = tmp_path / "snap.db"
        backup(db, snap)
        plain = url.replace("postgresql+psycopg", "postgresql")
        name = "gpu-commons leadership gpucommons.server (elsewhere pid 42)"
        with (
            psycopg.connect(plain, application_name=name),
            pytest.raises(SnapshotError, match=r"a follower replica: gpucommons.server \(elsewhere pid 42\)"),
        ):
            restore(db, snap, force=True)
        restore(db, snap, force=True)  # the follower gone, the restore goes on
        db.dispose()


def _sqlite_file(path: Path, sql: str) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(sql)
    conn.close()
    return path


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.db", r"missing.db: no such file"),
        (lambda d: d, r"is not a file"),
        (lambda d: d / "notes.txt", r"not a GPU Commons snapshot: not a SQLite database file"),
        (lambda d: d / "cut.db", r"cannot be read as a GPU Commons snapshot"),
        (
            lambda d: _sqlite_file(d / "other.db", "CREATE TABLE things (x INTEGER);"),
            r"not a GPU Commons snapshot: a SQLite database without an `alembic_version` table"
            r" \(tables: things\)",
        ),
        (
            lambda d: _sqlite_file(
                d / "future.db",
                "CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY);"
                "INSERT INTO alembic_version VALUES ('0099_from_the_future');",
            ),
            r"schema revision 0099_from_the_future, which this version of commons does not know",
        ),
    ],
    ids=["missing", "directory", "text", "truncated", "foreign-sqlite", "future-revision"],
)
def test_restore_says_what_is_wrong_with_the_file(
    make: Callable[[Path], Path], message: str, tmp_path: Path
) -> None:
    files = tmp_path / "files"
    files.mkdir()
    (files / "notes.txt").write_text("not a database\n")
    (files / "cut.db").write_bytes(b"SQLite format 3\x00" + b"\x00" * 40)
    target = tmp_path / "target" / "commons.db"
    target.parent.mkdir()
    with pytest.raises(SnapshotError, match=message):
        restore(Database(f"sqlite:///{target}"), make(files))
    assert not target.exists() or table_rows(f"sqlite:///{target}")["tasks"] == []


def test_an_older_snapshot_is_upgraded_on_the_way_in(tmp_path: Path) -> None:
    old = Database(f"sqlite:///{tmp_path / 'old.db'}")
    upgrade(old, "0004_token_creators")
    with old.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO policies (applied_at, applied_by, cluster_name, text)"
                " VALUES (1.5, 'x', 'old', 'p')"
            )
        )
    snap = tmp_path / "old-snap.db"
    info = backup(old, snap)
    assert info.revision == "0004_token_creators"
    target = Database(f"sqlite:///{tmp_path / 'new.db'}")
    result = restore(target, snap)
    assert result.upgraded_from == "0004_token_creators" and result.snapshot.revision == code_head()
    assert table_rows(target.url)["policies"] == [(1, 1.5, "x", "old", "p")]
    with sqlite3.connect(snap) as conn:  # the snapshot itself is left as it was
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == ("0004_token_creators",)


def test_backup_refuses_what_it_cannot_read_or_write_and_keeps_the_old_file(
    make_harness: Callable[..., Harness], database_url: str, tmp_path: Path
) -> None:
    harness = populate(make_harness)
    with pytest.raises(SnapshotError, match=r"the directory .*nowhere does not exist"):
        backup(harness.ctx.db, tmp_path / "nowhere" / "snap.db")
    with pytest.raises(SnapshotError, match=r"no database at .*absent\.db"):
        backup(Database(f"sqlite:///{tmp_path / 'absent.db'}"), tmp_path / "snap.db")
    assert not (tmp_path / "absent.db").exists()  # not created by looking
    empty = tmp_path / "empty.db"
    _sqlite_file(empty, "CREATE TABLE things (x INTEGER);")
    with pytest.raises(SnapshotError, match="is not a GPU Commons database"):
        backup(Database(f"sqlite:///{empty}"), tmp_path / "snap.db")
    assert not (tmp_path / "snap.db").exists()
    snap = tmp_path / "snap.db"
    backup(harness.ctx.db, snap)
    with sqlite3.connect(snap) as conn:
        meta = dict(conn.execute(f"SELECT key, value FROM {META_TABLE}").fetchall())
    assert meta["format"] == "gpu-commons snapshot 1" and meta["revision"] == code_head()


def test_the_commands_print_what_they_did_and_errors_without_a_traceback(
    make_harness: Callable[..., Harness], database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    populate(make_harness)
    monkeypatch.setenv("COMMONS_DATABASE_URL", database_url)
    runner = CliRunner()
    snap = tmp_path / "snap.db"
    done = runner.invoke(app, ["backup", str(snap), "--quiet"])
    assert done.exit_code == 0, done.output
    assert f"to {snap}: " in done.output and "tasks 4" in done.output and "schema revision" in done.output
    again = runner.invoke(app, ["backup", str(snap)])
    assert again.exit_code == 1 and "exists: pass --force" in again.output
    monkeypatch.delenv("COMMONS_DATABASE_URL")
    (tmp_path / "fresh").mkdir()
    put = runner.invoke(app, ["restore", str(snap), "--home", str(tmp_path / "fresh")])
    assert put.exit_code == 0, put.output
    assert "restored" in put.output and "tasks 4" in put.output and "commons up" in put.output
    for args, message in [
        (["restore", str(snap), "--home", str(tmp_path / "fresh")], "is not empty"),
        (["restore", str(tmp_path / "nope.db"), "--home", str(tmp_path / "fresh")], "nope.db: no such file"),
        (["restore", str(snap), "--home", str(tmp_path / "no" / "home")], "does not exist"),
        (["backup", str(tmp_path / "x.db"), "--database-url", "nosuch://db"], "cannot use the database URL"),
    ]:
        failed = runner.invoke(app, args)
        assert failed.exit_code == 1, failed.output
        assert message in failed.output and "Traceback" not in failed.output


@pytest.mark.postgres
def test_backup_of_postgresql_at_another_revision_says_which(tmp_path: Path) -> None:
    with fresh_database() as url:
        db = Database(url)
        upgrade(db, "0004_token_creators")
        expected = f"is at schema revision 0004_token_creators, this commons writes {code_head()}"
        with pytest.raises(SnapshotError, match=re.escape(expected)):
            backup(db, tmp_path / "snap.db")
        assert not (tmp_path / "snap.db").exists()
        db.dispose()


def test_restore_into_a_database_of_a_newer_version_says_so(tmp_path: Path) -> None:
    source = Database(f"sqlite:///{tmp_path / 'source.db'}")
    upgrade(source)
    snap = tmp_path / "snap.db"
    backup(source, snap)
    newer = tmp_path / "newer.db"
    _sqlite_file(
        newer,
        "CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY);"
        "INSERT INTO alembic_version VALUES ('0099_from_the_future');",
    )
    with pytest.raises(SnapshotError, match=r"newer.db is at schema revision 0099_from_the_future, which"):
        restore(Database(f"sqlite:///{newer}"), snap, force=True)


@pytest.mark.postgres
def test_restore_gives_up_on_a_table_another_session_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    from gpucommons.store import restore as restore_module

    monkeypatch.setattr(restore_module, "LOCK_TIMEOUT_S", 0.5)
    with fresh_database() as url:
        db = Database(url)
        upgrade(db)
        snap = tmp_path / "snap.db"
        backup(db, snap)
        with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as other:
            other.execute("SELECT count(*) FROM usage_intervals")  # its transaction holds the table
            with pytest.raises(SnapshotError, match=r"the tables of .* stay in use"):
                restore(db, snap, force=True)
        restore(db, snap, force=True)
        db.dispose()
