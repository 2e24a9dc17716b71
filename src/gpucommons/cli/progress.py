"""A counting progress bar (done/total and a unit) that fits the terminal it is drawn on.

Rich gives `BarColumn` 40 columns and a description its padded width whatever the terminal's, so
at 60 columns the count (`47192/47192`), the part people read, was cut to `47192/471…`. Here the
description and the bar give up room first; the count, the unit and the time stay whole.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column

#: Columns rich puts between two columns of a progress line.
_GAP = 1
#: Room the count, the unit and the elapsed time need (`12345/12345 replays 0:01:23`), with gaps.
_TAIL = 28
BAR_MAX, BAR_MIN = 40, 8
DESCRIPTION_MIN = 12


def counting_bar(
    description_width: int,
    unit: str,
    *,
    console: Console | None = None,
    transient: bool = False,
    disable: bool = False,
) -> Progress:
    """A bar on stderr (or `console`): description (up to `description_width` columns, cut with an
    ellipsis when the terminal is narrow), bar, `done/total`, `unit` (a rich template such as
    `"jobs"` or `"{task.fields[unit]}"`), elapsed time."""
    console = console or Console(stderr=True)
    room = console.width - _TAIL - 2 * _GAP
    described = max(DESCRIPTION_MIN, min(description_width, room - BAR_MIN))
    bar = max(BAR_MIN, min(BAR_MAX, room - described))
    return Progress(
        TextColumn(
            "[bold]{task.description}",
            table_column=Column(width=described, no_wrap=True, overflow="ellipsis"),
        ),
        BarColumn(bar_width=bar),
        MofNCompleteColumn(),
        TextColumn(unit),
        TimeElapsedColumn(),
        console=console,
        transient=transient,
        disable=disable,
    )
