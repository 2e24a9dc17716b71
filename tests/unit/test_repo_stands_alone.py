"""The repository stands on its own: no tracked file sends a reader to a document or a folder that a
person who clones it does not have (a workshop folder beside the checkout, a path of the machine it
was written on, the design notes by their old name instead of docs/design.md)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

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


#: "contract 4", "Trap 3": the numbered contracts and traps of docs/design.md.
CITATION = re.compile(r"\b(contract|trap) [0-9]+\b", re.IGNORECASE)
#: A citation must say where the contracts are within this many characters (the same sentence or
#: the line before: "docs/design.md, contract 4", "[contract 4](design.md#…)").
NEARBY = 160
DESIGN = "docs/design.md"


def bare_citations(text: str) -> list[int]:
    """Offsets of the citations with no "design.md" close enough to tell the reader where to look."""
    return [
        m.start()
        for m in CITATION.finditer(text)
        if "design.md" not in text[max(0, m.start() - NEARBY) : m.end() + NEARBY]
    ]


def test_bare_citations_are_found_and_cited_ones_pass() -> None:
    assert bare_citations("json (contract 5), csv") == [6]
    assert bare_citations("Trap 3 made worse on purpose") == [0]
    assert bare_citations("the ledger (docs/design.md, contract 4)") == []
    assert bare_citations("[contract 4](design.md#contract-4-the-usage-ledger-csv)") == []


def test_every_contract_or_trap_cited_says_where_it_is() -> None:
    """A user has docs/design.md, which numbers the contracts and traps; "contract 5" alone, in the
    docs, the code or its help text, sends them nowhere."""
    found = []
    for name in tracked_files():
        if name == DESIGN:
            continue  # where they are numbered
        try:
            text = (REPO / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        for offset in bare_citations(text):
            number = text.count("\n", 0, offset) + 1
            found.append(f"{name}:{number}: {text.splitlines()[number - 1].strip()[:120]}")
    assert not found, "cite docs/design.md beside these:\n" + "\n".join(found)


def test_links_into_design_md_name_headings_it_has() -> None:
    """`[contract 4](design.md#contract-4-the-usage-ledger-csv)`: the anchor is a heading's
    GitHub slug, so a renamed heading breaks the link and this test says which."""
    headings = re.findall(r"^#+ (.+)$", (REPO / DESIGN).read_text(encoding="utf-8"), re.MULTILINE)
    anchors = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}
    broken = []
    for name in tracked_files():
        if not name.endswith(".md"):
            continue
        text = (REPO / name).read_text(encoding="utf-8")
        for anchor in re.findall(r"design\.md#([\w\-]+)", text):
            if anchor not in anchors:
                broken.append(f"{name}: design.md#{anchor}")
    assert not broken, "no such heading in docs/design.md:\n" + "\n".join(broken)


def _commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and group below `command`, as the words that name it (`("k8s", "apply")`)."""
    found = [path]
    if hasattr(command, "list_commands"):  # a group (typer's own click: no isinstance check)
        for name in command.list_commands(None):
            found += _commands(command.get_command(None, name), (*path, name))
    return found


def test_cli_help_explains_formats_without_contract_numbers() -> None:
    """`commons invoice --help` said "json (contract 5)": help text names what a thing is instead."""
    import typer
    from typer.testing import CliRunner

    from gpucommons.cli.main import app

    runner = CliRunner()
    offending = []
    for path in _commands(typer.main.get_command(app)):
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (path, result.output)
        for match in CITATION.finditer(result.output):
            offending.append(f"commons {' '.join(path)} --help: {match.group()}")
    assert not offending, "\n".join(offending)
