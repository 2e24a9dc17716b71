"""`commons doctor`: how far apart the teams are on this machine, and whether it is ready to run.

Per team: what separates it from the others (API roles, its Unix account and workspace mode when
the server runs as root, dedicated GPUs) and what does not (same machine, kernel, GPU driver,
network) — the honest answer to "is logical isolation enough for our regulated data?". Then the
environment: GPU inventory source, database, disk space, the server if one answers.

It reads the policy from --policy, else $COMMONS_POLICY, else the running server's current policy.
Exit code 1 when a check fails or no policy can be read.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gpucommons.api.errors import CommonsError
from gpucommons.backends.local.accounts import default_home
from gpucommons.backends.local.hostfacts import gather_host_facts
from gpucommons.backends.local.inventory import Inventory, discover_inventory
from gpucommons.cli._client import fail, server_token, server_url
from gpucommons.cli.doctor_checks import (
    Check,
    browser_check,
    configured_isolation,
    database_check,
    disk_check,
    engine_build_check,
    inventory_checks,
    isolation_check,
    server_check,
    task_path_check,
)
from gpucommons.cli.main import app
from gpucommons.cli.tables import Col, print_table
from gpucommons.domain.model import Policy
from gpucommons.policy import PolicyError

if TYPE_CHECKING:  # the isolation assessment pulls in the scheduling engine: imported by `doctor` itself
    from gpucommons.backends.local.isolation import IsolationReport

_STYLE = {"ok": "green", "info": "cyan", "warn": "yellow", "fail": "red bold"}


def _load_policy(file: Path | None) -> Policy:
    # The client (httpx) and the policy loader (pydantic, YAML) are imported when doctor runs.
    from gpucommons.client import CommonsClient
    from gpucommons.policy import load_policy, parse_policy

    source = file or (Path(os.environ["COMMONS_POLICY"]) if os.environ.get("COMMONS_POLICY") else None)
    try:
        if source is not None:
            return load_policy(source)
        url = server_url()
        with CommonsClient(url, server_token(), timeout=5) as client:
            text = client.policy().text
        return parse_policy(text, source=f"{url} (current policy)")
    except PolicyError as error:
        raise fail(str(error)) from None
    except CommonsError as error:
        raise fail(
            f"no policy to check: give --policy FILE (the server at {server_url()} did not give one: "
            f"{error.message})"
        ) from None


def _report_json(
    report: IsolationReport, inventory: Inventory, checks: list[Check], home: Path
) -> dict[str, Any]:
    return {
        "user": report.user,
        "isolation_mode": str(report.mode),
        "home": str(home),
        "inventory": {
            "source": inventory.source,
            "gpus": inventory.gpu_count,
            "pools": {
                p.pool: {"gpu_type": p.gpu_type, "declared": p.declared, "on_this_machine": len(p.devices)}
                for p in inventory.pools
            },
            "warnings": list(inventory.warnings),
        },
        "teams": [
            {
                "team": t.team,
                "isolation": t.isolation,
                "account": t.account,
                "workspace": t.workspace,
                "workspace_mode": t.workspace_mode,
                "dedicated": list(t.dedicated),
                "separated_by": list(t.separated_by),
                "not_separated": list(report.not_separated(t)),
                "verdict": t.verdict,
            }
            for t in report.teams
        ],
        "shared_by_all": list(report.shared_by_all),
        "answer": report.answer,
        "checks": [{"name": c.name, "status": c.status, "detail": c.detail} for c in checks],
    }


def _bullets(items: tuple[str, ...]) -> str:
    return "\n".join(f"• {item}" for item in items) or "—"


#: The check and its status whole; the detail (paths, PATHs) wraps, never cut.
CHECK_COLUMNS = (Col("CHECK", keep=True), Col("STATUS", keep=True), Col("DETAIL", wrap=True, wrap_min=40))


def _teams_table(console: Console, report: IsolationReport) -> None:
    """Per team, what separates it and what does not: a grid in a terminal, blocks of text otherwise."""
    if not console.is_terminal:
        for t in report.teams:
            console.file.write(f"{t.team} ({t.isolation})\n  separated from other teams by:\n")
            console.file.write("".join(f"    • {item}\n" for item in t.separated_by) or "    —\n")
            console.file.write("  not separated:\n")
            console.file.write("".join(f"    • {item}\n" for item in t.gaps) or "    —\n")
            console.file.write(f"  ⇒ {t.verdict}\n")
        console.file.flush()
        return
    # The team's name is never folded: its column is as wide as the longest name.
    name_width = max([len(t.team) for t in report.teams] + [len(t.isolation) for t in report.teams] + [4])
    teams = Table(show_lines=True, expand=True)
    teams.add_column("TEAM", no_wrap=True, min_width=name_width)
    teams.add_column("SEPARATED FROM OTHER TEAMS BY", ratio=4, overflow="fold")
    teams.add_column("NOT SEPARATED", ratio=3, overflow="fold")
    for t in report.teams:
        name = f"[bold]{escape(t.team)}[/]\n{escape(t.isolation)}"
        gaps = escape(_bullets(t.gaps)) + f"\n[italic]⇒ {escape(t.verdict)}[/]"
        teams.add_row(name, escape(_bullets(t.separated_by)), gaps, style=None)
    console.print(teams)


def _print(console: Console, report: IsolationReport, checks: list[Check]) -> None:
    mode = "own Unix account per team" if report.mode == "accounts" else "logical only"
    console.print(f"[bold]Team isolation on this machine:[/] {mode} (running as {report.user})")
    _teams_table(console, report)
    console.print("[bold]Shared by every team on this machine:[/]")
    for item in report.shared_by_all:
        console.print(f"  • {item}", markup=False)
    console.print()
    console.print(report.answer, markup=False)
    console.print()
    rows = [[c.name, f"[{_STYLE[c.status]}]{c.status}[/]", escape(c.detail)] for c in checks]
    print_table(console, CHECK_COLUMNS, rows, title="Environment")


@app.command()
def doctor(
    policy: Annotated[
        Path | None, typer.Option("--policy", help="Policy file (default: $COMMONS_POLICY or the server's).")
    ] = None,
    home: Annotated[
        Path | None,
        typer.Option(
            "--home",
            help="The server's home (default: $COMMONS_HOME; /var/lib/commons as root, else ~/.commons).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object instead of tables.")] = False,
) -> None:
    """Say how teams are isolated here (and what is shared), and check this machine is ready."""
    from gpucommons.backends.local.isolation import assess_isolation

    loaded = _load_policy(policy)
    home = home or default_home(os.environ)
    inventory = discover_inventory(loaded)
    facts = gather_host_facts(loaded, home, configured_isolation(os.environ))
    report = assess_isolation(loaded, facts, inventory.source)
    checks = [
        isolation_check(facts.mode, facts.user, facts.workspaces_blocked_by),
        task_path_check(facts.mode, os.environ.get("PATH", ""), sys.executable),
        *inventory_checks(inventory),
        database_check(os.environ.get("COMMONS_DATABASE_URL"), home),
        disk_check(home),
        server_check(server_url(), server_token()),
        browser_check(),
        engine_build_check(os.environ),
    ]
    if as_json:
        print(json.dumps(_report_json(report, inventory, checks, home), indent=2))
    else:
        _print(Console(highlight=False, soft_wrap=False), report, checks)
    if any(check.status == "fail" for check in checks):
        raise typer.Exit(1)
