"""Team account names, workspace layout and the refusal to follow planted symlinks."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpucommons.backends.local.accounts import (
    MAX_ACCOUNT_LENGTH,
    AccountError,
    IsolationMode,
    TeamAccounts,
    account_name,
    blocking_ancestor,
    isolation_mode,
    protect_server_files,
)


@pytest.mark.parametrize(
    ("team", "expected"),
    [
        ("nlp", "commons-nlp"),
        ("vision_2", "commons-vision_2"),
        ("ml-infra", "commons-ml-infra"),
    ],
)
def test_plain_team_names_map_to_commons_prefixed_accounts(team: str, expected: str) -> None:
    assert account_name(team) == expected


@pytest.mark.parametrize("team", ["NLP", "nlp.v2", "a" * 40, "Speech.Team-" + "x" * 50])
def test_changed_or_long_names_get_a_hash_and_fit_the_system_limit(team: str) -> None:
    name = account_name(team)
    assert len(name) <= MAX_ACCOUNT_LENGTH
    assert name.startswith("commons-")
    assert all(c.islower() or c.isdigit() or c in "-_" for c in name)
    assert name != account_name(team + "z")


def test_names_that_differ_only_in_case_get_different_accounts() -> None:
    assert account_name("NLP") != account_name("nlp")


def test_logical_mode_makes_a_0770_workspace_and_checkpoint_dir_and_no_account(tmp_path: Path) -> None:
    teams = TeamAccounts(tmp_path / "home", mode=IsolationMode.LOGICAL)
    place = teams.prepare_task("nlp", "t42")
    assert place.run_as is None
    assert place.workdir == tmp_path / "home" / "workspaces" / "nlp"
    assert place.checkpoint_dir == place.workdir / ".commons" / "checkpoints" / "t42"
    for path in (place.workdir, place.checkpoint_dir):
        assert path.is_dir()
        assert stat.S_IMODE(path.stat().st_mode) == 0o770


def test_a_symlink_planted_in_a_workspace_is_refused(tmp_path: Path) -> None:
    teams = TeamAccounts(tmp_path / "home", mode=IsolationMode.LOGICAL)
    teams.ensure_team("alpha")
    teams.ensure_team("beta")
    os.symlink(teams.workspace("beta"), teams.workspace("alpha") / ".commons")
    with pytest.raises(AccountError, match=r"\.commons is not a plain directory"):
        teams.prepare_task("alpha", "t1")
    assert not (teams.workspace("beta") / "checkpoints").exists()


def test_a_task_id_cannot_climb_out_of_the_workspace(tmp_path: Path) -> None:
    teams = TeamAccounts(tmp_path / "home", mode=IsolationMode.LOGICAL)
    with pytest.raises(AccountError, match="cannot name a directory"):
        teams.prepare_task("alpha", "..")


def test_useradd_failure_is_reported_with_its_message(tmp_path: Path) -> None:
    def failing(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(list(argv), 9, "", "useradd: group 'x' already exists")

    teams = TeamAccounts(tmp_path, prefix="zz-no-such-", mode=IsolationMode.ACCOUNTS, run=failing)
    if shutil.which("useradd") is None:
        pytest.skip("useradd is not installed")
    with pytest.raises(AccountError, match="already exists"):
        teams.ensure_account("team")


def test_isolation_mode_follows_the_effective_user() -> None:
    assert isolation_mode() is (IsolationMode.ACCOUNTS if os.geteuid() == 0 else IsolationMode.LOGICAL)


def test_a_home_other_users_cannot_reach_is_refused_before_any_account_is_made(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    calls: list[Sequence[str]] = []

    def record(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(list(argv), 0, "", "")

    assert blocking_ancestor(closed / "home") is not None
    teams = TeamAccounts(closed / "home", mode=IsolationMode.ACCOUNTS, run=record)
    with pytest.raises(AccountError, match=r"closed to other users.*--home /var/lib/commons"):
        teams.prepare_task("nlp", "t1")
    assert calls == []


def test_a_home_under_open_directories_is_reachable() -> None:
    assert blocking_ancestor(Path("/usr/share/doc/example")) is None


def test_server_files_open_to_others_are_made_private(tmp_path: Path) -> None:
    for name, mode in (("commons.db", 0o644), ("commons.db-wal", 0o644), ("admin-token", 0o600)):
        (tmp_path / name).write_text("x")
        (tmp_path / name).chmod(mode)
    changed = protect_server_files(tmp_path)
    assert sorted(p.name for p in changed) == ["commons.db", "commons.db-wal"]
    for name in ("commons.db", "commons.db-wal", "admin-token"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600


def test_useradd_is_retried_while_the_password_file_is_locked(tmp_path: Path) -> None:
    answers = iter(
        [
            (10, "useradd: cannot lock /etc/passwd; try again later."),
            (10, "useradd: cannot lock /etc/passwd; try again later."),
            (0, ""),
        ]
    )
    calls: list[Sequence[str]] = []

    def locked_twice(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        code, err = next(answers)
        return subprocess.CompletedProcess(list(argv), code, "", err)

    teams = TeamAccounts(tmp_path, prefix="zz-no-such-", mode=IsolationMode.ACCOUNTS, run=locked_twice)
    if shutil.which("useradd") is None:
        pytest.skip("useradd is not installed")
    assert teams.ensure_account("team") == "zz-no-such-team"
    assert len(calls) == 3
    assert calls[0][:4] == ["useradd", "--system", "--user-group", "--no-create-home"]
