"""`commons teams`: each team's quota, use and borrowing as bars; `commons queue`: why tasks wait."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from gpucommons.cli._client import api
from gpucommons.cli.main import app

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
    console.print(_table(rows))


def _table(rows: list[schemas.TeamSummary]) -> Table:
    table = Table(box=None, pad_edge=False)
    for col in ("TEAM", "POOL", "QUOTA", "USED", "BORROWED", "", "PENDING"):
        table.add_column(col)
    scale = max([p.nominal_gpus + p.borrowed_gpus for t in rows for p in t.pools] + [1])
    for team in rows:
        for i, p in enumerate(team.pools):
            table.add_row(
                team.name if i == 0 else "",
                p.pool,
                str(p.nominal_gpus),
                str(p.used_gpus),
                str(p.borrowed_gpus),
                usage_bar(p.used_gpus, p.nominal_gpus, p.borrowed_gpus, scale),
                f"{team.pending_tasks} ({team.pending_gpus} GPUs)" if i == 0 else "",
            )
    return table


@app.command()
def queue(
    team: Annotated[str | None, typer.Option("--team", "-t", help="Only this team's tasks.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="A JSON list of queue entries.")] = False,
) -> None:
    """Pending tasks in the order the scheduler considers them, and why each waits."""
    with api() as client:
        rows = client.queue(team)
    if as_json:
        print(json.dumps([e.model_dump(mode="json") for e in rows], indent=2))
        return
    table = Table(box=None, pad_edge=False)
    for col in ("POS", "ID", "TEAM", "PRIO", "GPUS", "WAITING", "WHY"):
        table.add_column(col, overflow="fold" if col == "WHY" else "ellipsis")
    for e in rows:
        table.add_row(
            str(e.position), e.task_id, e.team, e.priority, str(e.gpus), f"{e.waiting_seconds:.0f}s", e.reason
        )
    console.print(table)
