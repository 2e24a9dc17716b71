"""`commons invoice --month 2026-11 [--team T] [--format json|csv|focus|html|pdf]`: from the server.

The server computes the month's chargeback from its ledger (a month in progress: up to now) and
shows only the teams whose costs the caller may see.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated

import typer

from gpucommons.api.errors import BadRequest
from gpucommons.cli._client import api, fail
from gpucommons.cli.main import app


@app.command("invoice")
def invoice(
    month: Annotated[str, typer.Option("--month", help="The month, e.g. 2026-11.")],
    team: Annotated[str | None, typer.Option("--team", help="One team (needed for html and pdf).")] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="json (the chargeback result, docs/design.md), csv, focus (FOCUS 1.2), html or pdf.",
        ),
    ] = "json",
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write to this file (default: stdout).")
    ] = None,
) -> None:
    """A month's chargeback, or one team's invoice, from the server."""
    from gpucommons.client.invoices import INVOICE_FORMATS, fetch_invoice  # httpx: not at start-up

    if not re.fullmatch(r"\d{4}-\d{2}", month):
        raise fail(f"--month must look like 2026-11, not {month!r}")
    if fmt not in INVOICE_FORMATS:
        raise fail(f"--format must be one of {', '.join(INVOICE_FORMATS)}, not {fmt!r}")
    if fmt == "pdf" and out is None and sys.stdout.isatty():
        raise fail("a PDF is binary: write it to a file with --out invoice.pdf")
    with api() as client:
        try:
            body = fetch_invoice(client, month, team, fmt)
        except BadRequest as exc:
            if team is None and "teams" in exc.details:  # the server needs one team: say it our way
                seen = ", ".join(exc.details["teams"]) or "none"
                raise fail(
                    f"--format {fmt} is one team's invoice: add --team TEAM (your teams: {seen})"
                ) from None
            raise
    if out is None:
        if fmt == "pdf":
            sys.stdout.buffer.write(body)
            sys.stdout.flush()
        else:
            typer.echo(body.decode("utf-8"), nl=False)
        return
    try:
        out.write_bytes(body)
    except OSError as exc:
        raise fail(f"cannot write {out}: {exc.strerror or exc}") from None
    typer.echo(f"wrote {out}", err=True)
