"""A team's invoice as a PDF (fpdf2), the same content as the HTML invoice.

Rendered in memory (`bytes`), with the creation date set to the period's end so the same chargeback
always gives the same file. The built-in Helvetica font covers Latin-1 only, so other characters in
names are replaced by `?` rather than failing.
"""

from __future__ import annotations

from decimal import Decimal

from fpdf import FPDF
from fpdf.enums import XPos, YPos

from gpucommons.chargeback.explain import PLATFORM_SENTENCE, direct_cost_sentence, idle_share_sentence
from gpucommons.chargeback.invoice import Invoice, build_invoice
from gpucommons.chargeback.result import ChargebackResult
from gpucommons.domain.money import format_cents
from gpucommons.ledger.interval import format_utc

_POOL_COLUMNS = (
    ("Pool", 24, "L"),
    ("GPU type", 22, "L"),
    ("Quota", 14, "R"),
    ("GPU-hours", 22, "R"),
    ("Owned", 20, "R"),
    ("Borrowed", 20, "R"),
    ("Price/GPU-h", 20, "R"),
    ("Direct", 24, "R"),
    ("Idle share", 24, "R"),
)
_LINE = 6.0


def _latin1(text: str) -> str:
    return text.encode("latin-1", "replace").decode("latin-1")


def _hours(value: Decimal) -> str:
    return f"{value:,.2f}"


class _InvoicePdf(FPDF):
    def text_line(self, text: str, *, size: float = 10, style: str = "", height: float = _LINE) -> None:
        self.set_font("Helvetica", style=style, size=size)
        self.multi_cell(0, height, _latin1(text), new_x=XPos.LMARGIN, new_y=YPos.NEXT)

    def heading(self, text: str) -> None:
        self.ln(3)
        self.text_line(text, size=12, style="B", height=8)

    def row(self, cells: list[tuple[str, float, str]], *, bold: bool = False, rule: bool = False) -> None:
        self.set_font("Helvetica", style="B" if bold else "", size=9)
        for text, width, align in cells:
            self.cell(width, _LINE, _latin1(text), border="B" if rule else 0, align=align)
        self.ln(_LINE)

    def amount_line(self, label: str, amount: str, *, bold: bool = False) -> None:
        self.set_font("Helvetica", style="B" if bold else "", size=10)
        self.cell(150, _LINE + 1, _latin1(label), border="T" if bold else 0)
        self.cell(40, _LINE + 1, _latin1(amount), border="T" if bold else 0, align="R")
        self.ln(_LINE + 1)


def render_invoice_bytes(invoice: Invoice) -> bytes:
    def money(cents: int) -> str:
        return format_cents(cents, invoice.currency)

    pdf = _InvoicePdf(orientation="portrait", unit="mm", format="A4")
    pdf.set_creation_date(invoice.period.end)
    pdf.set_title(f"Invoice {invoice.invoice_id}")
    pdf.set_author(f"GPU Commons ({invoice.cluster_name})")
    pdf.set_auto_page_break(auto=True, margin=15)
    pdf.add_page()
    pdf.text_line(f"Invoice {invoice.invoice_id}", size=16, style="B", height=10)
    pdf.text_line(
        f"Team {invoice.team} - cluster {invoice.cluster_name} - period {invoice.period.label} "
        f"({format_utc(invoice.period.start)} to {format_utc(invoice.period.end)}, end excluded) - "
        f"amounts in {invoice.currency}",
        size=9,
    )
    if not invoice.in_policy:
        pdf.text_line(
            "This team is in the usage ledger but not in the policy: all its GPU-time counts as borrowed."
        )

    pdf.heading("GPU-hours by pool")
    pdf.row([(name, width, align) for name, width, align in _POOL_COLUMNS], bold=True, rule=True)
    widths = [(w, a) for _, w, a in _POOL_COLUMNS]
    for p in invoice.pools:
        values = [
            p.pool,
            p.gpu_type,
            str(p.nominal_gpus),
            _hours(p.gpu_hours),
            _hours(p.owned_gpu_hours),
            _hours(p.borrowed_gpu_hours),
            str(p.price_per_gpu_hour),
            f"{p.direct_cents / 100:,.2f}",
            f"{p.idle_cents / 100:,.2f}",
        ]
        pdf.row([(v, w, a) for v, (w, a) in zip(values, widths, strict=True)])
    if not invoice.pools:
        pdf.text_line("No GPU use and no quota in this period.", size=9)

    pdf.heading("GPU-hours by priority class")
    pdf.row([("Pool", 40, "L"), ("Priority class", 60, "L"), ("GPU-hours", 40, "R")], bold=True, rule=True)
    for c in invoice.classes:
        pdf.row([(c.pool, 40, "L"), (c.priority, 60, "L"), (_hours(c.gpu_hours), 40, "R")])
    if not invoice.classes:
        pdf.text_line("No GPU use in this period.", size=9)

    pdf.heading("Summary")
    pdf.text_line(
        f"GPU-hours: {_hours(invoice.gpu_hours)} ({_hours(invoice.owned_gpu_hours)} owned, "
        f"{_hours(invoice.borrowed_gpu_hours)} borrowed at {invoice.borrowed_rate}x the price)",
        size=9,
    )
    pdf.amount_line("Direct cost", money(invoice.direct_cents))
    pdf.amount_line(f"Idle share (idle policy: {invoice.idle_policy})", money(invoice.idle_cents))
    pdf.amount_line(f"Admin share (split: {invoice.admin_split})", money(invoice.admin_cents))
    pdf.amount_line(
        f"Lost work from preemption: {_hours(invoice.lost_gpu_hours)} GPU-hours "
        f"(approx. {money(invoice.lost_value_cents)}, already in the direct cost)",
        "-",
    )
    pdf.amount_line("Total", money(invoice.total_cents), bold=True)
    pdf.ln(4)
    notes = (
        direct_cost_sentence(invoice.borrowed_rate),
        idle_share_sentence(invoice.idle_policy),
        PLATFORM_SENTENCE + " Amounts are rounded to the cent by largest remainder.",
    )
    for note in notes:
        pdf.text_line(note.replace("×", "x").replace("—", "-"), size=8, height=4.5)
    return bytes(pdf.output())


def render_invoice_pdf(result: ChargebackResult, team: str) -> bytes:
    """The PDF invoice of `team` for the result's period (KeyError for a team not in the result)."""
    return render_invoice_bytes(build_invoice(result, team))
