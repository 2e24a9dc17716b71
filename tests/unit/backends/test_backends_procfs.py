"""Reading /proc: stat lines with awkward command names, and process identity."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gpucommons.backends.local.exitfile import read_exit_file, status_from_returncode, write_exit_file
from gpucommons.backends.local.procfs import (
    parse_stat,
    read_stat,
    same_process,
    session_members,
    start_marker,
)
from gpucommons.backends.ports import ExitStatus

# A real line, with a command name holding a space and a closing parenthesis.
STAT = (
    "4242 (my (evil) cmd) S 1 4242 4242 0 -1 4194560 240 0 0 0 1 0 0 0 20 0 1 0 987654 "
    "8585216 920 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
)


def test_parse_stat_finds_fields_after_a_command_name_with_parentheses() -> None:
    stat = parse_stat(STAT)
    assert (stat.pid, stat.state, stat.ppid, stat.pgrp, stat.session, stat.starttime) == (
        4242,
        "S",
        1,
        4242,
        4242,
        987654,
    )
    assert not stat.is_zombie
    assert parse_stat(STAT.replace(") S ", ") Z ")).is_zombie


def test_own_process_is_found_and_identified_by_its_start_marker() -> None:
    marker = start_marker(os.getpid())
    assert marker is not None
    assert same_process(os.getpid(), marker) is not None
    assert same_process(os.getpid(), marker + "1") is None
    assert os.getpid() in session_members(os.getsid(0))


def test_a_process_that_is_gone_has_no_stat() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert read_stat(proc.pid) is None
    assert start_marker(proc.pid) is None


def test_exit_file_round_trips_and_rejects_garbage(tmp_path: Path) -> None:
    path = tmp_path / "a.exit"
    assert read_exit_file(path) is None
    write_exit_file(path, ExitStatus(code=None, signal=15), 12.5)
    assert read_exit_file(path) == ExitStatus(code=None, signal=15)
    assert [p.name for p in path.parent.iterdir()] == ["a.exit"]  # no temporary file left
    for garbage in ("", "{", "[1]", '{"code": "0"}', '{"code": null, "signal": null}'):
        path.write_text(garbage)
        assert read_exit_file(path) is None, garbage
    path.write_text('{"code": 3, "extra": "ignored"}')
    assert read_exit_file(path) == ExitStatus(code=3)


def test_returncode_convention_maps_negative_to_signal() -> None:
    assert status_from_returncode(0) == ExitStatus(code=0)
    assert status_from_returncode(137) == ExitStatus(code=137)
    assert status_from_returncode(-9) == ExitStatus(code=None, signal=9)
