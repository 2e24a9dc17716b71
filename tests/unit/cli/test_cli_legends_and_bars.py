"""Legends and progress bars in a narrow terminal: a legend breaks between its items, never inside
one, and a progress line keeps its count (`47192/47192`) whole; the description and the bar give
up room instead."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from gpucommons.cli.progress import counting_bar
from gpucommons.cli.tables import SEPARATOR, legend_lines, print_legend

ITEMS = [
    "p50/p95: wait to first start",
    "JCT: mean completion time",
    "borrow: hours above quota",
    "broken: time the team asked for ≤ its quota yet did not get it",
    "fair: JCT ÷ JCT under static",
]


@pytest.mark.parametrize("width", [40, 60, 80, 120, 200])
def test_a_legend_breaks_between_items_and_keeps_every_item_whole(width: int) -> None:
    lines = legend_lines(ITEMS, width)
    # Every item whole, in order, and nothing else.
    assert SEPARATOR.join(lines) == SEPARATOR.join(ITEMS)
    for line in lines:
        assert not line.endswith(SEPARATOR.rstrip()) and not line.startswith(SEPARATOR.lstrip())
        # A line is over the width only when it is one item longer than the width.
        assert len(line) <= width or line in ITEMS


def test_a_legend_fills_each_line_before_starting_another() -> None:
    assert legend_lines(["a", "b", "c"], 9) == ["a · b · c"]
    assert legend_lines(["a", "b", "c"], 8) == ["a · b", "c"]
    assert legend_lines(["longer than the line", "b"], 5) == ["longer than the line", "b"]
    assert legend_lines([], 80) == []


def test_a_piped_legend_is_one_line_for_grep() -> None:
    out = io.StringIO()
    print_legend(Console(file=out, width=40, force_terminal=False), ITEMS)
    assert out.getvalue() == SEPARATOR.join(ITEMS) + "\n"


def test_a_legend_in_a_terminal_uses_its_width() -> None:
    out = io.StringIO()
    print_legend(Console(file=out, width=60, force_terminal=True, color_system=None), ITEMS)
    assert out.getvalue().splitlines() == legend_lines(ITEMS, 60)


@pytest.mark.parametrize("width", [50, 60, 80, 120])
@pytest.mark.parametrize("description", ["commons", "validating 8 candidates on the newest days"])
def test_a_progress_line_keeps_its_count_whole_at_any_width(width: int, description: str) -> None:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None)
    bar = counting_bar(44, "jobs", console=console)
    task = bar.add_task(description, total=47192)
    bar.update(task, completed=47192)
    first_line = console.render_lines(bar.make_tasks_table(bar.tasks))[0]
    text = "".join(segment.text for segment in first_line)
    assert "47192/47192 jobs" in text
    assert len(text.rstrip()) <= width
    # The description is cut with an ellipsis only when the terminal has no room for it.
    if width >= 120:
        assert description in text
