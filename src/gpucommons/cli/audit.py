"""`commons audit`: who changed what, when, from where, and whether it worked (platform admins)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from gpucommons.cli._client import api, fail
from gpucommons.cli.main import app
from gpucommons.cli.tables import Col, print_table
from gpucommons.policy.durations import parse_duration

if TYPE_CHECKING:  # pydantic models: only annotations here, so not imported at start-up
    from gpucommons.api.identity import AuditEntry

console = Console(highlight=False, soft_wrap=True)


def parse_since(text: str, now: datetime) -> datetime:
    """`2h`, `7d` (that long ago) or an ISO-8601 time (UTC if no zone is given)."""
    try:
        return now - timedelta(seconds=parse_duration(text))
    except ValueError:
        pass
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--since takes a duration (2h, 7d) or an ISO-8601 time, not {text!r}") from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


@app.command()
def audit(
    since: Annotated[str | None, typer.Option(help="Only entries since: 2h, 7d or 2026-11-30T09:00.")] = None,
    actor: Annotated[str | None, typer.Option(help="Only this actor (a userName or token name).")] = None,
    action: Annotated[
        str | None, typer.Option(help="Only this action, or a prefix ending in * (token.*).")
    ] = None,
    outcome: Annotated[str | None, typer.Option(help="ok, denied or error.")] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=10_000, help="At most this many entries, newest first.")
    ] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="A JSON list.")] = False,
    wide: Annotated[
        bool, typer.Option("--wide", help="Every column, even when the terminal is narrow.")
    ] = False,
) -> None:
    """The audit log of mutating actions, newest first."""
    from gpucommons.client.identity import IdentityApi  # httpx: imported only when it is used

    try:
        start = parse_since(since, datetime.now(UTC)) if since else None
    except ValueError as exc:
        raise fail(str(exc)) from None
    if outcome is not None and outcome not in ("ok", "denied", "error"):
        raise fail(f"--outcome must be ok, denied or error, not {outcome!r}")
    with api() as client:
        rows = IdentityApi(client).audit(
            since=start, actor=actor, action=action, outcome=outcome, limit=limit
        )
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in rows], indent=2))
        return
    print_table(console, AUDIT_COLUMNS, _rows(rows), wide)


#: Who did what to which: never cut; where from goes first at 80 columns.
AUDIT_COLUMNS = (
    Col("WHEN (UTC)", keep=True),
    Col("ACTOR", keep=True),
    Col("ACTION", keep=True),
    Col("TARGET", keep=True),
    Col("RESULT", keep=True),
    Col("FROM", drop=1),
)


def _rows(rows: list[AuditEntry]) -> list[list[str]]:
    out = []
    for r in rows:
        target = ", ".join(x for x in (r.team and f"team={r.team}", r.target) if x)
        out.append(
            [
                r.at.astimezone(UTC).strftime("%m-%d %H:%M:%S"),
                escape(r.actor or "(anonymous)"),
                escape(r.action),
                escape(target),
                f"{r.outcome} {r.status_code}",
                escape(r.remote_addr or ""),
            ]
        )
    return out
