"""`commons usage export`: the usage ledger as CSV (docs/design.md, contract 4)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from gpucommons.cli._client import api, fail
from gpucommons.cli.main import app

usage_app = typer.Typer(
    name="usage", help="The usage ledger: who held which GPUs when.", no_args_is_help=True
)
app.add_typer(usage_app, name="usage")


def parse_time(text: str | None, option: str) -> datetime | None:
    """ISO-8601 date or time; naive values are UTC."""
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise fail(
            f"{option} {text!r} is not an ISO-8601 date or time (e.g. 2026-11-01 or 2026-11-01T08:00Z)"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@usage_app.command("export")
def export(
    start: Annotated[
        str | None, typer.Option("--from", help="Start (ISO-8601, UTC); default: the beginning.")
    ] = None,
    end: Annotated[str | None, typer.Option("--to", help="End, exclusive; default: now.")] = None,
    team: Annotated[str | None, typer.Option("--team", help="Only this team.")] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write to this file (default: stdout).")
    ] = None,
) -> None:
    """Write the usage ledger CSV (its columns: docs/design.md): who held which GPUs, when."""
    lo, hi = parse_time(start, "--from"), parse_time(end, "--to")
    if lo and hi and hi <= lo:
        raise fail("--to must be after --from")
    with api() as client:
        text = client.usage_csv(lo, hi, team)
    if out is None:
        typer.echo(text, nl=False)
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot write {out}: {exc}") from None
    rows = max(0, text.count("\n") - 1)
    typer.echo(f"wrote {rows} interval(s) to {out}", err=True)
