"""`commons teams`: each team's quota, use and borrowing as bars; `commons queue`: why tasks wait."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from gpucommons.cli._client import api, err_console
from gpucommons.cli.main import app
from gpucommons.cli.tables import Col, print_table

if TYPE_CHECKING:  # pydantic models: only annotations here, so not imported at start-up
    from gpucommons.api import schemas

console = Console(highlight=False, soft_wrap=True)
BAR_WIDTH = 24


def usage_bar(used: int, nominal: int, borrowed: int, scale: int) -> str:
    """`███████░░░░▓▓` — own quota in use, unused quota, then borrowed GPUs, on a shared scale."""
    if scale <= 0:
        return ""
    own = min(used, nominal)

    def cells(n: int) -> int:
        return round(n * BAR_WIDTH / scale)

    return (
        "[green]"
        + "█" * cells(own)
        + "[/][dim]"
        + "░" * cells(nominal - own)
        + "[/][magenta]"
        + "▓" * cells(borrowed)
        + "[/]"
    )


@app.command()
def teams(
    as_json: Annotated[bool, typer.Option("--json", help="A JSON list of team objects.")] = False,
) -> None:
    """Each team's quota, GPUs used and borrowed (bars: █ used of quota, ░ idle quota, ▓ borrowed)."""
    with api() as client:
        rows = client.teams()
    if as_json:
        print(json.dumps([t.model_dump(mode="json") for t in rows], indent=2))
        return
    print_table(console, TEAM_COLUMNS, _rows(rows))


TEAM_COLUMNS = (
    Col("TEAM", keep=True),
    Col("POOL", keep=True),
    Col("QUOTA", justify="right"),
    Col("USED", justify="right"),
    Col("BORROWED", justify="right"),
    Col("", drop=1),
    Col("PENDING", wrap=True, wrap_min=10),
)


def _pending(tasks: int, gpus: int) -> str:
    return f"{tasks} ({gpus} GPUs)" if tasks else ""


def _rows(rows: list[schemas.TeamSummary]) -> list[list[str]]:
    """One row per team and pool; pending tasks on the pool they asked for, and those that named no
    pool on a row of their own ("any")."""
    scale = max([p.nominal_gpus + p.borrowed_gpus for t in rows for p in t.pools] + [1])
    out = []
    for team in rows:
        for i, p in enumerate(team.pools):
            out.append(
                [
                    team.name if i == 0 else "",
                    p.pool,
                    str(p.nominal_gpus),
                    str(p.used_gpus),
                    str(p.borrowed_gpus),
                    usage_bar(p.used_gpus, p.nominal_gpus, p.borrowed_gpus, scale),
                    _pending(p.pending_tasks, p.pending_gpus),
                ]
            )
        if team.pending_any_pool_tasks:
            pending = _pending(team.pending_any_pool_tasks, team.pending_any_pool_gpus)
            out.append(["" if team.pools else team.name, "any", "", "", "", "", pending])
    return out


QUEUE_COLUMNS = (
    Col("POS", justify="right"),
    Col("ID", keep=True),
    Col("TEAM", keep=True),
    Col("PRIO", drop=2),
    Col("GPUS", justify="right"),
    Col("WAITING", drop=1, justify="right"),
    Col("WHY", wrap=True),
)


def waited(seconds: float) -> str:
    """`42s`, `12m`, `3h05m`, `2d04h`: short enough for a column."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


@app.command()
def queue(
    team: Annotated[str | None, typer.Option("--team", "-t", help="Only this team's tasks.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="A JSON list of queue entries.")] = False,
    wide: Annotated[
        bool, typer.Option("--wide", help="Every column, even when the terminal is narrow.")
    ] = False,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, max=10_000, help="Only the first N waiting tasks (default: all)."),
    ] = None,
) -> None:
    """Pending tasks in the order the scheduler considers them, and why each waits."""
    more: int | None = None
    with api() as client:
        if limit is None:
            rows = client.queue(team)
        else:
            rows, more = client.queue_page(team, limit)
    if more is not None:
        err_console.print(f"the first {limit} waiting tasks; more wait after position {more}")
    if as_json:
        print(json.dumps([e.model_dump(mode="json") for e in rows], indent=2))
        return
    if not rows and console.is_terminal:
        console.print("no task is waiting" + (f" in team {team}" if team else ""))
        return
    cells = [
        [
            str(e.position),
            e.task_id,
            e.team,
            e.priority,
            str(e.gpus),
            waited(e.waiting_seconds),
            escape(e.reason),
        ]
        for e in rows
    ]
    print_table(console, QUEUE_COLUMNS, cells, wide)
