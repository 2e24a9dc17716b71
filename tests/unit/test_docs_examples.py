"""The shell examples of the how-to pages can be pasted as written: every ```bash block is valid
bash and holds no synopsis (`[--engine commons|kueue|static]` is valid bash too — a command in
brackets piped into others — which is why the brackets are looked for, not only the syntax).
A synopsis goes in a ```text block, optional flags in prose."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = ("simulator.md", "advisor.md", "operations.md")
BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
#: `[--flag ...]`, or a word like P, DIR, ID, FILE standing for what the reader must put there.
SYNOPSIS = re.compile(r"\[--|(?:^|\s)(?:P|DIR|ID|FILE)(?:\s|$)")


def _code(line: str) -> str:
    return line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""


@pytest.mark.parametrize("page", PAGES)
def test_every_bash_block_can_be_pasted(page: str) -> None:
    blocks = BLOCK.findall((DOCS / page).read_text(encoding="utf-8"))
    assert blocks, page
    for block in blocks:
        checked = subprocess.run(["bash", "-n"], input=block, capture_output=True, text=True)
        assert checked.returncode == 0, (page, block, checked.stderr)
        placeholders = [line for line in block.splitlines() if SYNOPSIS.search(_code(line))]
        assert placeholders == [], (page, placeholders)
