"""`logs/` and `run/` under the home are the server's alone (0700): another account can neither list
every team's task ids nor read their output and exit codes, and the executor still works."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.integration.server.conftest import SMALL_POLICY, Harness

from gpucommons.server.app import build_context
from gpucommons.server.private_dirs import close_home, make_database_private, make_private_dirs
from gpucommons.server.settings import Settings


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_home() -> Iterator[Path]:
    """A home other accounts may cross (as `/var/lib/commons` is when teams have accounts)."""
    root = Path(tempfile.mkdtemp(prefix="commons-home-"))
    os.chmod(root, 0o711)
    yield root / "home"
    shutil.rmtree(root)


@pytest.fixture
def harness(open_home: Path, database_url: str, tmp_path: Path) -> Iterator[Harness]:
    (tmp_path / "policy.yaml").write_text(SMALL_POLICY)
    settings = Settings(
        home=open_home, database_url=database_url, policy=tmp_path / "policy.yaml",
        run_scheduler=False, isolation="logical",
    )  # fmt: skip
    made = Harness(build_context(settings))
    yield made
    made.close()


def test_logs_and_run_are_the_servers_alone_and_tasks_still_run(harness: Harness, open_home: Path) -> None:
    task = harness.submit(team="a", gpus=1, command=[sys.executable, "-c", "print('private words')"])
    harness.wait_state(str(task["id"]), "succeeded")
    assert "private words" in harness.http.get(f"/api/v1/tasks/{task['id']}/logs", headers=harness.admin).text
    for name in ("logs", "run"):
        assert _mode(open_home / name) == 0o700, name
    if os.geteuid() != 0:
        pytest.skip("the check as another account needs root (to run `ls` as nobody)")
    os.chmod(open_home, 0o711)
    for name in ("logs", "run"):
        listing = subprocess.run(["ls", str(open_home / name)], user="nobody", capture_output=True, text=True)
        assert listing.returncode != 0 and "Permission denied" in listing.stderr, listing.stdout
    log = open_home / "logs" / f"{task['id']}.log"
    reading = subprocess.run(["cat", str(log)], user="nobody", capture_output=True, text=True)
    assert reading.returncode != 0


def test_directories_left_open_by_an_older_version_are_closed_on_start(tmp_path: Path) -> None:
    for name in ("logs", "run"):
        (tmp_path / name).mkdir(mode=0o755)
        os.chmod(tmp_path / name, 0o755)
    assert sorted(p.name for p in make_private_dirs(tmp_path)) == ["logs", "run"]
    assert _mode(tmp_path / "logs") == _mode(tmp_path / "run") == 0o700
    assert make_private_dirs(tmp_path) == []


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """The usual umask (022), under which files are made 0644 and directories 0755."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_the_home_and_its_sqlite_files_are_the_servers_alone_without_team_accounts(
    open_home: Path, tmp_path: Path, loose_umask: None
) -> None:
    (tmp_path / "policy.yaml").write_text(SMALL_POLICY)
    settings = Settings(
        home=open_home, policy=tmp_path / "policy.yaml", run_scheduler=False, isolation="logical"
    )
    harness = Harness(build_context(settings))
    try:
        task = harness.submit(team="a", gpus=1, command=[sys.executable, "-c", "pass"])
        harness.wait_state(str(task["id"]), "succeeded")
        files = [open_home / n for n in ("commons.db", "commons.db-wal", "commons.db-shm")]
        assert all(f.exists() for f in files), files
        assert _mode(open_home) == 0o700
        assert {f.name: _mode(f) for f in files} == {f.name: 0o600 for f in files}
    finally:
        harness.close()


def test_files_left_open_by_an_older_version_are_closed_on_start(
    open_home: Path, tmp_path: Path, loose_umask: None
) -> None:
    open_home.mkdir(mode=0o755)
    for name in ("commons.db-wal", "commons.db-shm", "admin-token"):
        (open_home / name).write_bytes(b"")
        os.chmod(open_home / name, 0o644)
    changed = make_database_private(f"sqlite:///{open_home / 'commons.db'}", open_home)
    assert sorted(p.name for p in changed) == ["admin-token", "commons.db-shm", "commons.db-wal"]
    for name in ("commons.db", "commons.db-wal", "commons.db-shm", "admin-token"):
        assert _mode(open_home / name) == 0o600, name
    elsewhere = tmp_path / "db" / "other.db"
    elsewhere.parent.mkdir()
    make_database_private(f"sqlite:///{elsewhere}", open_home)
    assert _mode(elsewhere) == 0o600
    assert make_database_private("postgresql+psycopg://u@h/db", open_home) == []


def test_the_home_stays_crossable_by_team_accounts_but_not_listable(
    open_home: Path, loose_umask: None
) -> None:
    open_home.mkdir(mode=0o755)
    assert close_home(open_home, team_accounts=True)
    assert _mode(open_home) == 0o711
    assert close_home(open_home, team_accounts=False)
    assert _mode(open_home) == 0o700
    assert not close_home(open_home, team_accounts=False)


def test_a_shared_directory_given_as_home_is_left_open(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    assert not close_home(shared, team_accounts=False)
    assert _mode(shared) == 0o1777
