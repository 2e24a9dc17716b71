"""`commons chargeback` (file in, file out) and `commons chargeback compare`.

    commons chargeback --policy P --usage U.csv --period 2026-11 [--bill B.csv] --out C.json
    commons chargeback compare --policy P --usage U.csv --period 2026-11 [--out compare.json|.html]

Pure file-in/file-out: no server. Every bad input ends with exit code 1 and a message naming the
file, line and field (never a traceback).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from gpucommons.cli.main import app
from gpucommons.cli.tables import Col, print_legend, print_table
from gpucommons.domain.model import Policy
from gpucommons.domain.money import format_cents
from gpucommons.policy import PolicyError

if TYPE_CHECKING:
    # The chargeback engine and ledger (numpy), the exports (jinja2, fpdf) and the policy loader
    # (pydantic, YAML) are imported by the commands below, not when the CLI starts.
    from gpucommons.chargeback import ChargebackResult
    from gpucommons.chargeback.compare import Comparison
    from gpucommons.ledger import LineIssue, Period, UsageTable

FORMATS = ("json", "csv", "focus", "html", "pdf")

chargeback_app = typer.Typer(
    name="chargeback",
    help="Who pays what, to the cent: chargeback from a policy and a usage ledger (no server needed).",
)
app.add_typer(chargeback_app, name="chargeback")

# Tables go through `print_table`: plain text with every column when piped, nothing cut.
out_console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

PolicyOpt = Annotated[Path | None, typer.Option("--policy", help="The policy file (commons.yaml).")]
UsageOpt = Annotated[
    Path | None, typer.Option("--usage", help="The usage ledger CSV that commons usage export writes.")
]
PeriodOpt = Annotated[
    str | None,
    typer.Option(
        "--period",
        help="A month (2026-11), days FROM..TO (2026-11-01..2026-11-15, both included) or instants.",
    ),
]
FullPeriodOpt = Annotated[
    bool,
    typer.Option(
        "--full-period",
        help="Charge every day of a period that has not ended (default: only up to now, as invoices do).",
    ),
]
AsOfOpt = Annotated[
    str | None,
    typer.Option(
        "--as-of", help="Charge up to this instant instead of now (ISO-8601, e.g. 2026-12-01T12:00Z)."
    ),
]
BillOpt = Annotated[
    Path | None, typer.Option("--bill", help="What each pool really cost: CSV with the header pool,amount.")
]


def _fail(message: str) -> typer.Exit:
    err_console.print(f"error: {message}", markup=False)
    return typer.Exit(1)


def _issues(path: Path, issues: tuple[LineIssue, ...], what: str, truncated: bool = False) -> typer.Exit:
    for issue in issues:
        where = f"{path}:{issue.line}: " + (f"{issue.column}: " if issue.column else "")
        err_console.print(where + issue.message, markup=False)
    more = " (and more after these)" if truncated else ""
    return _fail(f"{path}: {what} refused, {len(issues)} bad line(s){more}")


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _fail(f"{path}: no such {what} file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(f"{path}: cannot read the {what} file: {exc}") from None


@dataclass(frozen=True, slots=True)
class _Inputs:
    policy: Policy
    intervals: UsageTable
    period: Period
    bill: dict[str, Decimal]


def _as_of(text: str | None) -> datetime:
    if text is None:
        return datetime.now(UTC)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise _fail(
            f"--as-of: cannot read {text!r}: write an ISO-8601 instant, e.g. 2026-12-01T12:00:00Z"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _load(
    policy: Path | None,
    usage: Path | None,
    period: str | None,
    bill: Path | None,
    *,
    full_period: bool = False,
    as_of: str | None = None,
) -> _Inputs:
    missing = [
        name
        for name, value in (("--policy", policy), ("--usage", usage), ("--period", period))
        if value is None
    ]
    if missing:
        raise _fail(f"missing {', '.join(missing)} (see commons chargeback --help)")
    assert policy is not None and usage is not None and period is not None
    from gpucommons.chargeback import BillError, read_bill_csv
    from gpucommons.ledger import LedgerError, Period, PeriodError, read_usage_bytes
    from gpucommons.policy import load_policy

    try:
        asked = Period.parse(period)
        the_period = asked if full_period else asked.to_date(_as_of(as_of))
    except PeriodError as exc:
        raise _fail(f"--period: {exc}") from None
    if the_period.is_to_date:
        err_console.print(
            f"note: {asked.label} has not ended: charged up to {the_period.end:%Y-%m-%d %H:%M:%S} UTC "
            "(--full-period charges all of it)",
            markup=False,
        )
    try:
        the_policy = load_policy(policy)
    except PolicyError as error:
        for issue in error.issues:
            err_console.print(issue.format(error.source), markup=False)
        raise _fail(f"{error.source}: policy refused ({len(error.issues)} problem(s))") from None
    pools = [p.name for p in the_policy.pools]
    try:
        intervals = read_usage_bytes(usage.read_bytes(), pools=pools)
    except FileNotFoundError:
        raise _fail(f"{usage}: no such usage ledger file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(f"{usage}: cannot read the usage ledger: {exc}") from None
    except LedgerError as error:
        raise _issues(usage, error.issues, "usage ledger", error.truncated) from None
    amounts: dict[str, Decimal] = {}
    if bill is not None:
        try:
            amounts = read_bill_csv(_read_text(bill, "bill").splitlines(), pools=pools)
        except BillError as error:
            raise _issues(bill, error.issues, "bill") from None
    return _Inputs(the_policy, intervals, the_period, amounts)


def _write(out: Path | None, data: str | bytes) -> None:
    if out is None:
        if isinstance(data, bytes):
            if sys.stdout.isatty():
                raise _fail("a PDF is binary: write it to a file with --out invoice.pdf")
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        else:
            typer.echo(data, nl=False)
        return
    try:
        if isinstance(data, bytes):
            out.write_bytes(data)
        else:
            out.write_text(data, encoding="utf-8")
    except OSError as exc:
        raise _fail(f"cannot write {out}: {exc.strerror or exc}") from None


def render(result: ChargebackResult, fmt: str, team: str | None) -> str | bytes:
    """The result in one of `FORMATS` (html and pdf are one team's invoice)."""
    # Each format imports only its own renderer: fpdf and jinja2 cost ~0.5 s to import, a JSON
    # answer needs neither.
    if fmt == "json":
        from gpucommons.chargeback.exports.contract import to_json

        return to_json(result)
    if fmt == "csv":
        from gpucommons.chargeback.exports.contract import to_csv

        return to_csv(result)
    if fmt == "focus":
        from gpucommons.chargeback.exports.focus import to_focus_csv

        return to_focus_csv(result)
    if team is None:
        raise _fail(f"--format {fmt} is one team's invoice: name the team with --team")
    if not result.has_team(team):
        raise _fail(f"no team {team!r} in this chargeback (teams: {', '.join(t.team for t in result.teams)})")
    if fmt == "html":
        from gpucommons.chargeback.exports.invoice_html import render_invoice_html

        return render_invoice_html(result, team)
    from gpucommons.chargeback.exports.invoice_pdf import render_invoice_pdf

    return render_invoice_pdf(result, team)


def _money(cents: int) -> str:
    return f"{Decimal(cents).scaleb(-2):,.2f}"


#: The team whole; at 80 columns the parts of the total go before the total and the GPU-hours.
SUMMARY_COLUMNS = (
    Col("team", keep=True),
    Col("GPU-hours", justify="right"),
    Col("borrowed", drop=1, justify="right"),
    Col("direct", drop=4, justify="right"),
    Col("idle", drop=3, justify="right"),
    Col("admin", drop=2, justify="right"),
    Col("total", justify="right"),
)


def _summary(result: ChargebackResult, console: Console, wide: bool = False) -> None:
    rows = [
        [
            escape(t.team),
            f"{t.gpu_hours:,.2f}",
            f"{t.borrowed_gpu_hours:,.2f}",
            _money(t.direct_cents),
            _money(t.idle_cents),
            _money(t.admin_cents),
            _money(t.total_cents),
        ]
        for t in result.teams
    ]
    rows.append(["platform", "", "", "", "", "", _money(result.platform_cents)])
    rows.append(["[b]cluster cost[/b]", "", "", "", "", "", f"[b]{_money(result.cluster_cost_cents)}[/b]"])
    title = f"Chargeback {result.period.label} ({result.currency})"
    print_table(console, SUMMARY_COLUMNS, rows, wide, title)
    print_legend(
        console,
        [
            f"idle policy: {result.idle_policy}",
            f"admin split: {result.admin_split}",
            f"borrowed rate: {result.borrowed_rate}",
        ],
    )
    for warning in result.warnings:
        err_console.print(f"warning: {warning}", markup=False)


@chargeback_app.callback(invoke_without_command=True)
def chargeback(
    ctx: typer.Context,
    policy: PolicyOpt = None,
    usage: UsageOpt = None,
    period: PeriodOpt = None,
    bill: BillOpt = None,
    full_period: FullPeriodOpt = False,
    as_of: AsOfOpt = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write here (default: stdout).")] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="json (the chargeback result, docs/design.md), csv, focus (FOCUS 1.2), html or pdf "
            "(--team).",
        ),
    ] = "json",
    team: Annotated[str | None, typer.Option("--team", help="The team of an html or pdf invoice.")] = None,
    wide: Annotated[
        bool, typer.Option("--wide", help="Every column, even when the terminal is narrow.")
    ] = False,
) -> None:
    """Compute the period's chargeback: every team's direct, idle and admin cost, to the cent."""
    if ctx.invoked_subcommand is not None:
        return
    from gpucommons.chargeback import ChargebackError, compute_chargeback

    if fmt not in FORMATS:
        raise _fail(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    inputs = _load(policy, usage, period, bill, full_period=full_period, as_of=as_of)
    try:
        result = compute_chargeback(inputs.policy, inputs.intervals, inputs.period, bill=inputs.bill)
    except ChargebackError as exc:
        raise _fail(str(exc)) from None
    data = render(result, fmt, team)
    _write(out, data)
    if out is not None:
        _summary(result, out_console, wide)
        out_console.print(f"wrote {out}", markup=False)
    else:
        for warning in result.warnings:
            err_console.print(f"warning: {warning}", markup=False)


@chargeback_app.command("compare")
def compare(
    policy: PolicyOpt = None,
    usage: UsageOpt = None,
    period: PeriodOpt = None,
    bill: BillOpt = None,
    full_period: FullPeriodOpt = False,
    as_of: AsOfOpt = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Also write the comparison: a .json or .html file.")
    ] = None,
) -> None:
    """The same period under every idle policy and admin split, side by side."""
    from gpucommons.chargeback import ChargebackError
    from gpucommons.chargeback.compare import compare_models
    from gpucommons.chargeback.exports import comparison_to_json, render_comparison_html

    if out is not None and out.suffix.lower() not in (".json", ".html", ".htm"):
        raise _fail(f"--out {out}: write a .json or an .html file")
    inputs = _load(policy, usage, period, bill, full_period=full_period, as_of=as_of)
    try:
        comparison = compare_models(inputs.policy, inputs.intervals, inputs.period, bill=inputs.bill)
    except ChargebackError as exc:
        raise _fail(str(exc)) from None
    _print_comparison(comparison)
    if out is not None:
        text = (
            comparison_to_json(comparison)
            if out.suffix.lower() == ".json"
            else render_comparison_html(comparison)
        )
        _write(out, text)
        out_console.print(f"wrote {out}", markup=False)


def _print_comparison(comparison: Comparison) -> None:
    columns = (
        Col("idle", keep=True),
        Col("admin", keep=True),
        *(Col(team, keep=True, justify="right") for team in comparison.teams),
        Col("platform", justify="right"),
    )
    rows = [
        [
            f"{'*' if s.current else ''}{s.idle}",
            str(s.admin_split),
            *(_money(comparison.total(s, t)) for t in comparison.teams),
            _money(s.result.platform_cents),
        ]
        for s in comparison.scenarios
    ]
    title = (
        f"Chargeback models compared, {comparison.period.label} ({comparison.currency}); "
        "* = the policy's model"
    )
    print_table(out_console, columns, rows, title=title)
    if comparison.scenarios:
        cost = comparison.scenarios[0].result.cluster_cost_cents
        out_console.print(
            f"cluster cost in every model: {format_cents(cost, comparison.currency)}", markup=False
        )
