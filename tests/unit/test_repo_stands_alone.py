"""The repository stands on its own: no tracked file sends a reader to a document or a folder that a
person who clones it does not have (a workshop folder beside the checkout, a path of the machine it
was written on, the design notes by their old name instead of docs/design.md)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = re.compile(r"\.\./shared|/work/|DESIGN\.md|DESIGN (contract|trap)|DESIGN, (contract|trap)")
#: This file names the patterns it forbids.
SELF = Path(__file__).resolve().relative_to(REPO).as_posix()


def tracked_files() -> list[str]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    return [name for name in out.decode().split("\0") if name and name != SELF]


def test_no_tracked_file_names_a_place_outside_the_repository() -> None:
    found = []
    for name in tracked_files():
        try:
            text = (REPO / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary files (images, PDFs) and files deleted in the work tree
        for number, line in enumerate(text.splitlines(), start=1):
            if FORBIDDEN.search(line):
                found.append(f"{name}:{number}: {line.strip()[:120]}")
    assert not found, "\n".join(found)
