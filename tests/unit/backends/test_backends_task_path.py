"""The PATH tasks get. A team account's: system directories, the platform's interpreter when other
users may run it, and nothing they cannot reach. The server's own user's: the server's PATH, then
the platform's bin directory (where `commons` is)."""

from __future__ import annotations

import os
from pathlib import Path

from gpucommons.backends.local.task_path import (
    DEFAULT_PATH,
    SYSTEM_DIRS,
    account_path,
    own_user_path,
    reachable_by_others,
    runnable_by_others,
    task_path,
)


def make_interpreter(where: Path) -> Path:
    where.mkdir(parents=True)
    python = where / "python3"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    return python


def open_tree(path: Path) -> None:
    """o+x on `path` and everything above it that we own (tmp_path's parents are 0700)."""
    for d in (path, *path.parents):
        try:
            d.chmod(d.stat().st_mode | 0o711)
        except PermissionError:
            break


def test_a_directory_under_a_private_one_is_not_reachable(tmp_path: Path) -> None:
    private = tmp_path / "home"
    python = make_interpreter(private / "venv" / "bin")
    open_tree(python.parent)
    private.chmod(0o700)
    assert not reachable_by_others(python.parent)
    assert not runnable_by_others(python)
    private.chmod(0o755)
    assert reachable_by_others(python.parent) and runnable_by_others(python)


def test_a_venv_linking_to_a_private_interpreter_is_not_runnable(tmp_path: Path) -> None:
    real = make_interpreter(tmp_path / "private" / "bin")
    open_tree(real.parent)
    (tmp_path / "private").chmod(0o700)
    venv_bin = tmp_path / "public" / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    open_tree(venv_bin)
    (venv_bin / "python").symlink_to(real)
    assert reachable_by_others(venv_bin)
    assert not runnable_by_others(venv_bin / "python")


def test_team_accounts_get_system_dirs_then_a_usable_interpreter(tmp_path: Path) -> None:
    python = make_interpreter(tmp_path / "opt" / "commons" / "bin")
    open_tree(python.parent)
    path = account_path("", str(python)).split(os.pathsep)
    assert path == [*(d for d in SYSTEM_DIRS if Path(d).is_dir()), str(python.parent)]


def test_private_entries_of_the_server_path_are_dropped(tmp_path: Path) -> None:
    shim = tmp_path / "root-home" / ".pyenv" / "shims"
    shim.mkdir(parents=True)
    open_tree(shim)
    (tmp_path / "root-home").chmod(0o700)
    public = tmp_path / "tools" / "bin"
    public.mkdir(parents=True)
    open_tree(public)
    python = make_interpreter(tmp_path / "root-home" / "venv" / "bin")
    path = account_path(os.pathsep.join([str(shim), str(public), str(python.parent)]), str(python))
    entries = path.split(os.pathsep)
    assert str(public) in entries
    assert str(shim) not in entries and str(python.parent) not in entries
    assert entries[: len(entries) - 1] == [d for d in SYSTEM_DIRS if Path(d).is_dir()]


def test_the_servers_own_user_gets_its_path_then_the_platforms_bin_directory(tmp_path: Path) -> None:
    """`.venv/bin/commons up` from a shell without the virtualenv on PATH: tasks still find `commons`,
    after the user's own programs (a conda `python` first on PATH stays the one tasks get)."""
    python = make_interpreter(tmp_path / "repo" / ".venv" / "bin")
    server = "/opt/conda/bin:/usr/local/bin:/usr/bin:/bin:/usr/games"
    assert own_user_path(server, str(python)) == f"{server}:{python.parent}"
    # an activated virtualenv is already on it: nothing moves, nothing repeats
    activated = f"{python.parent}:/usr/bin:/bin"
    assert own_user_path(activated, str(python)) == activated
    assert own_user_path("", str(python)) == f"{DEFAULT_PATH}:{python.parent}"


def test_task_path_is_the_account_path_for_team_accounts_and_the_own_path_otherwise(tmp_path: Path) -> None:
    python = make_interpreter(tmp_path / "opt" / "commons" / "bin")
    open_tree(python.parent)
    server = f"/usr/bin:/bin:{tmp_path / 'nowhere'}"
    assert task_path(server, str(python), team_account=True) == account_path(server, str(python))
    assert task_path(server, str(python), team_account=False) == own_user_path(server, str(python))
