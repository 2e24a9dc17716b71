"""Tables that fit the terminal without hiding what identifies a row, and plain text for pipes.

Rules, as `kubectl get` follows them:
- ids and names (`keep`) are never cut and never dropped;
- when the terminal is too narrow, optional columns go first, in their `drop` order (1 goes first);
  then the one free-text column (`wrap`, e.g. a message or a reason) wraps onto more lines;
- `wide` shows every column;
- what must be shown and is still wider than the terminal is printed at its full width (the
  terminal wraps the lines): never cropped;
- not a terminal (a pipe, a file): every column, aligned, no colour, nothing cut — for grep and awk.

Every table a command prints goes through `print_table`, so each follows these rules.
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
    #: Plain text (not markup): a header may be a team's or a file's name.
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


#: The wrapping column is never narrower than this (narrower, each word would break).
WRAP_FLOOR = 10


def _needed(
    cols: Sequence[Col], natural: Sequence[int], indices: Sequence[int], wrap_at: int | None = None
) -> int:
    """The width of these columns side by side, the wrapping one at `wrap_at` (default: the width it
    keeps before optional columns get room)."""
    total = sum(
        min(cols[i].wrap_min if wrap_at is None else wrap_at, natural[i]) if cols[i].wrap else natural[i]
        for i in indices
    )
    return total + GAP * (len(indices) - 1)


def fit(cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int, wide: bool = False) -> list[int]:
    """Indices of the columns to show in `width` characters (pure, so it is tested alone)."""
    shown = list(range(len(cols)))
    if wide:
        return shown
    natural = _natural(cols, rows)
    for i in sorted((i for i, c in enumerate(cols) if c.drop), key=lambda i: cols[i].drop):
        if _needed(cols, natural, shown) <= width:
            break
        shown.remove(i)
    return shown


def print_table(
    console: Console,
    cols: Sequence[Col],
    rows: Sequence[Sequence[str]],
    wide: bool = False,
    title: str = "",
) -> list[int]:
    """Print `rows` (cells may hold rich markup) as the rules of this module say, under `title`;
    the indices of the columns printed (a legend then explains only those)."""
    if not console.is_terminal:
        console.file.write((f"{title}\n" if title else "") + plain_table(cols, rows))
        console.file.flush()
        return list(range(len(cols)))
    if title:
        console.print(Text(title, style="bold"), soft_wrap=True)
    natural = _natural(cols, rows)
    shown = fit(cols, rows, console.width, wide)
    # Wide: every column at its full width. Otherwise what is left after the optional columns went
    # may still be wider than the terminal (many names): print it whole and let the terminal wrap
    # the lines rather than let rich crop the names at the edge.
    needed = sum(natural) + GAP * (len(cols) - 1) if wide else _needed(cols, natural, shown, WRAP_FLOOR)
    if needed <= console.width:
        console.print(rich_table(cols, rows, console.width, wide))
        return shown
    wider = Console(
        file=console.file,
        width=needed,
        force_terminal=True,
        color_system=console.color_system,  # type: ignore[arg-type]
        highlight=False,
    )
    wider.print(rich_table(cols, rows, needed, wide))
    return fit(cols, rows, needed, wide)


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
            room = max(min(WRAP_FLOOR, natural[i]), min(col.wrap_min, natural[i], width - fixed))
            table.add_column(Text(col.header), overflow="fold", ratio=1, min_width=room)
        else:
            table.add_column(Text(col.header), no_wrap=True, min_width=natural[i], justify=col.justify)
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


#: What separates the items of a legend or a summary line.
SEPARATOR = " · "


def legend_lines(items: Sequence[str], width: int) -> list[str]:
    """`items` joined by " · " into lines of at most `width` columns, broken between items only (an
    item longer than the line stands alone): a narrow terminal then shows one item per line rather
    than an item cut in two and a separator hanging at a line's end."""
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + len(SEPARATOR) + len(item) <= width:
            lines[-1] += SEPARATOR + item
        else:
            lines.append(item)
    return lines


def print_legend(console: Console, items: Sequence[str]) -> None:
    """Print `items` (plain text, no markup) as `legend_lines` lays them out for the terminal; to a
    pipe or a file, on one line (for grep)."""
    width = console.width if console.is_terminal else 1 << 30
    for line in legend_lines(items, width):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
