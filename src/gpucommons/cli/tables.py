"""Tables that fit the terminal without hiding what identifies a row, and plain text for pipes.

Rules, as `kubectl get` follows them:
- ids and names (`keep`) are never cut and never dropped;
- when the terminal is too narrow, optional columns go first, in their `drop` order (1 goes first);
  then the one free-text column (`wrap`, e.g. a message or a reason) wraps onto more lines;
- `wide` shows every column;
- not a terminal (a pipe, a file): every column, aligned, no colour, nothing cut — for grep and awk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.console import Console
from rich.table import Table
from rich.text import Text

#: Columns are separated by this many spaces (rich's default cell padding with pad_edge=False).
GAP = 2
#: The free-text column keeps at least this width before optional columns are given room.
WRAP_MIN = 24


@dataclass(frozen=True, slots=True)
class Col:
    header: str
    #: An id or a name: shown whole, whatever the width.
    keep: bool = False
    #: The free-text column that wraps (at most one, best last).
    wrap: bool = False
    #: For an optional column: 1 is dropped first when space runs out; 0 = never dropped.
    drop: int = 0
    justify: Literal["left", "right"] = "left"
    #: For the wrapping column: the width it keeps before optional columns get room.
    wrap_min: int = WRAP_MIN


def plain(cell: str) -> str:
    """A cell's text without rich markup (`[green]running[/]` → `running`)."""
    return Text.from_markup(cell).plain


def _natural(cols: Sequence[Col], rows: Sequence[Sequence[str]]) -> list[int]:
    widths = [len(c.header) for c in cols]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], *(len(line) for line in plain(cell).splitlines() or [""]))
    return widths


def fit(cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int, wide: bool = False) -> list[int]:
    """Indices of the columns to show in `width` characters (pure, so it is tested alone)."""
    shown = list(range(len(cols)))
    if wide:
        return shown
    natural = _natural(cols, rows)

    def needed(indices: list[int]) -> int:
        total = sum(min(cols[i].wrap_min, natural[i]) if cols[i].wrap else natural[i] for i in indices)
        return total + GAP * (len(indices) - 1)

    for i in sorted((i for i, c in enumerate(cols) if c.drop), key=lambda i: cols[i].drop):
        if needed(shown) <= width:
            break
        shown.remove(i)
    return shown


def print_table(
    console: Console, cols: Sequence[Col], rows: Sequence[Sequence[str]], wide: bool = False
) -> None:
    """Print `rows` (cells may hold rich markup) as the rules of this module say."""
    if not console.is_terminal:
        console.file.write(plain_table(cols, rows))
        console.file.flush()
        return
    if wide:  # every column at its full width; the terminal wraps what is longer than a line
        full = sum(_natural(cols, rows)) + GAP * (len(cols) - 1)
        wider = Console(
            file=console.file,
            width=max(full, console.width),
            force_terminal=console.is_terminal,
            color_system=console.color_system,  # type: ignore[arg-type]
            highlight=False,
        )
        wider.print(rich_table(cols, rows, full, wide))
        return
    console.print(rich_table(cols, rows, console.width, wide))


def rich_table(cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int, wide: bool = False) -> Table:
    shown = fit(cols, rows, width, wide)
    natural = _natural(cols, rows)
    fixed = sum(natural[i] for i in shown if not cols[i].wrap) + GAP * (len(shown) - 1)
    table = Table(box=None, pad_edge=False)
    for i in shown:
        col = cols[i]
        if col.wrap:
            # What is left, but never so little that each word breaks; the table may then be wider
            # than the terminal, which wraps it (ids and names still whole).
            room = max(10, min(col.wrap_min, natural[i], width - fixed))
            table.add_column(col.header, overflow="fold", ratio=1, min_width=room)
        else:
            table.add_column(col.header, no_wrap=True, min_width=natural[i], justify=col.justify)
    for row in rows:
        table.add_row(*(row[i] for i in shown))
    return table


def plain_table(cols: Sequence[Col], rows: Sequence[Sequence[str]]) -> str:
    """Every column, padded to its widest cell, two spaces apart; no markup; one line per row."""
    texts = [[plain(c).replace("\n", " ") for c in row] for row in rows]
    widths = _natural(cols, texts)
    lines = []
    for cells in [[c.header for c in cols], *texts]:
        parts = [
            cell.rjust(w) if col.justify == "right" else cell.ljust(w)
            for cell, w, col in zip(cells, widths, cols, strict=True)
        ]
        lines.append((" " * GAP).join(parts).rstrip())
    return "\n".join(lines) + "\n"
