"""CLI tables: ids and names are never cut, optional columns go first, free text wraps, pipes get
plain text with every column."""

from __future__ import annotations

import io

from rich.console import Console

from gpucommons.cli.tables import Col, fit, plain, plain_table, print_table
from gpucommons.cli.tasks import TASK_COLUMNS

ROW = [
    "t0123456789",
    "vision",
    "a-rather-long-task-name-for-testing",
    "[green]running[/]",
    "production",
    "8 (8 borrowed)",
    "h100",
    "3",
    "team nlp uses 24/16 H100 GPUs and has reached its borrow limit of 8; needs 8 GPUs more",
]


def rendered(width: int, wide: bool = False) -> list[str]:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None)
    print_table(console, TASK_COLUMNS, [ROW], wide)
    return out.getvalue().splitlines()


def test_at_80_columns_ids_and_names_are_whole_and_optional_columns_go_first() -> None:
    lines = rendered(80)
    assert all(len(line) <= 80 for line in lines), lines
    header, first = lines[0].split(), lines[1]
    assert header == ["ID", "TEAM", "NAME", "STATE", "MESSAGE"]
    for whole in ("t0123456789", "vision", "a-rather-long-task-name-for-testing", "running"):
        assert whole in first
    assert "…" not in "".join(lines)
    message = " ".join(line[first.index("team nlp") :].strip() for line in lines[1:])
    assert message == ROW[-1]  # wrapped over several lines, every word kept


def test_a_wider_terminal_gets_the_optional_columns_back_in_order() -> None:
    assert rendered(200)[0].split() == [c.header for c in TASK_COLUMNS]
    widths = [max(len(c.header), len(plain(v))) for c, v in zip(TASK_COLUMNS, ROW, strict=True)]
    without_restarts = sum(widths[:-2]) + 24 + 2 * 7  # every column but RESTARTS, 24 for the message
    shown = fit(TASK_COLUMNS, [ROW], without_restarts)
    assert [TASK_COLUMNS[i].header for i in shown] == [
        "ID", "TEAM", "NAME", "STATE", "PRIO", "GPUS", "POOL", "MESSAGE"
    ]  # fmt: skip


def test_wide_shows_every_column_even_when_narrow() -> None:
    assert rendered(60, wide=True)[0].split() == [c.header for c in TASK_COLUMNS]


def test_not_a_terminal_gives_plain_aligned_text_with_every_column() -> None:
    out = io.StringIO()
    print_table(Console(file=out, width=40), TASK_COLUMNS, [ROW, ROW])
    lines = out.getvalue().splitlines()
    assert lines[0].split() == [c.header for c in TASK_COLUMNS]
    assert lines[1] == lines[2] and "[green]" not in lines[1] and lines[1].endswith(ROW[-1])
    assert len(lines) == 3  # one line per row, never wrapped


def test_plain_table_right_justifies_numbers() -> None:
    text = plain_table((Col("N", justify="right"), Col("NAME", keep=True)), [["7", "a"], ["120", "b"]])
    assert text.splitlines() == ["  N  NAME", "  7  a", "120  b"]
