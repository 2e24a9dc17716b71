"""Exports: the exact keys of docs/design.md, contract 5, the CSV's platform row, FOCUS 1.2's column
rules, invoices."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
from datetime import UTC, datetime
from decimal import Decimal
from html import unescape
from pathlib import Path

import pytest
from pypdf import PdfReader

from gpucommons.chargeback import ChargebackResult, compute_chargeback
from gpucommons.chargeback.explain import PLATFORM_SENTENCE, idle_share_sentence
from gpucommons.chargeback.exports import (
    FOCUS_COLUMNS,
    FOCUS_MANDATORY,
    render_invoice_html,
    render_invoice_pdf,
    to_csv,
    to_dict,
    to_focus_csv,
    to_json,
)
from gpucommons.chargeback.invoice import build_invoice
from gpucommons.domain import IdlePolicy
from gpucommons.ledger import EndReason, Period
from gpucommons.testing.chargeback import chargeback_policy, hours_interval

NOVEMBER = Period.parse("2026-11")


def result(idle: IdlePolicy = IdlePolicy.USAGE) -> ChargebackResult:
    policy = chargeback_policy(
        pools={"h100": (16, "2.50"), "a100": (8, "1.60")},
        teams={"nlp": {"h100": 8, "a100": 2}, "vision": {"h100": 8}, "idle-team": {"a100": 2}},
        idle=idle,
        admin_monthly="3000",
        borrowed_rate="0.8",
    )
    ledger = [
        hours_interval("nlp", "h100", gpus=12, start_h=-10, end_h=100, priority="training"),
        hours_interval(
            "nlp",
            "a100",
            gpus=2,
            start_h=5,
            end_h=50,
            priority="interactive",
            end_reason=EndReason.PREEMPTED,
            lost_gpu_hours="7.5",
        ),
        hours_interval("vision", "h100", gpus=4, start_h=0, end_h=600, priority="production"),
    ]
    return compute_chargeback(policy, ledger, NOVEMBER)


def test_json_has_exactly_the_keys_of_contract_5() -> None:
    data = json.loads(to_json(result()))
    assert set(data) == {"period", "currency", "cluster_cost_cents", "platform_cents", "teams"}
    assert data["period"] == {"start": "2026-11-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"}
    for team in data["teams"].values():
        assert set(team) == {
            "gpu_hours",
            "borrowed_gpu_hours",
            "direct_cents",
            "idle_cents",
            "admin_cents",
            "total_cents",
        }
        assert all(isinstance(team[k], int) for k in team if k.endswith("_cents"))
    assert (
        data["platform_cents"] + sum(t["total_cents"] for t in data["teams"].values())
        == data["cluster_cost_cents"]
    )
    assert data["teams"]["nlp"]["gpu_hours"] == 12 * 100 + 2 * 45
    assert data["teams"]["nlp"]["borrowed_gpu_hours"] == 4 * 100


def test_csv_has_a_platform_row_so_totals_add_up_to_the_cluster_cost() -> None:
    r = result(IdlePolicy.PLATFORM)
    rows = list(csv.DictReader(io.StringIO(to_csv(r))))
    assert [row["account"] for row in rows] == ["idle-team", "nlp", "vision", "platform"]
    assert sum(int(row["total_cents"]) for row in rows) == r.cluster_cost_cents
    assert rows[-1]["total_cents"] == str(r.platform_cents) and r.platform_cents > 0
    assert Decimal(rows[1]["total"]) * 100 == int(rows[1]["total_cents"])


FOCUS_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
FOCUS_DECIMAL = re.compile(r"^-?\d+(\.\d+)?$")
NOT_NULL = {
    "BilledCost",
    "BillingAccountId",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "ContractedCost",
    "EffectiveCost",
    "InvoiceIssuerName",
    "ListCost",
    "ProviderName",
    "PublisherName",
    "ServiceCategory",
    "ServiceName",
    "ChargeFrequency",
    "ServiceSubcategory",
}


@pytest.mark.parametrize("idle", [IdlePolicy.USAGE, IdlePolicy.PLATFORM])
def test_focus_export_follows_the_focus_1_2_column_rules(idle: IdlePolicy) -> None:
    r = result(idle)
    rows = list(csv.DictReader(io.StringIO(to_focus_csv(r))))
    header = list(rows[0])
    # the 21 mandatory columns, plus the three this project promises; custom columns start with x_
    assert len(FOCUS_MANDATORY) == 21 and set(FOCUS_MANDATORY) <= set(header)
    assert {"ChargeFrequency", "InvoiceId", "ServiceSubcategory", "SubAccountId"} <= set(header)
    assert header == list(FOCUS_COLUMNS)
    assert all(c.startswith("x_") for c in header if c not in FOCUS_MANDATORY and c[0].islower())
    assert all(re.fullmatch(r"[A-Z][A-Za-z]+|x_[A-Za-z]+", c) for c in header)
    for row in rows:
        for column in NOT_NULL:
            assert row[column] != "", column
        for column in ("BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd"):
            assert FOCUS_DATETIME.match(row[column]), row[column]
        # charge periods are [start, end): the billing period itself here
        assert (
            row["ChargePeriodStart"] == "2026-11-01T00:00:00Z"
            and row["ChargePeriodEnd"] == "2026-12-01T00:00:00Z"
        )
        for column in ("BilledCost", "EffectiveCost", "ContractedCost", "ListCost", "PricingQuantity"):
            assert FOCUS_DECIMAL.match(row[column]), (column, row[column])
        assert row["ChargeCategory"] in {"Usage", "Purchase", "Tax", "Credit", "Adjustment"}
        assert row["ChargeClass"] in {"", "Correction"}
        assert row["ChargeFrequency"] in {"One-Time", "Recurring", "Usage-Based"}
        assert not (row["ChargeCategory"] == "Purchase" and row["ChargeFrequency"] == "Usage-Based")
        # PricingQuantity/Unit are required on Usage and Purchase rows; ConsumedQuantity only on Usage
        assert row["PricingQuantity"] and row["PricingUnit"]
        assert (row["ConsumedQuantity"] != "") == (row["ChargeCategory"] == "Usage")
        assert row["BillingCurrency"] == "USD"
        # a team's rows carry it as the sub account, and its invoice
        assert (row["SubAccountId"] == "") == (row["InvoiceId"] == "")
    assert sum(Decimal(row["BilledCost"]) for row in rows) * 100 == r.cluster_cost_cents
    for team in r.teams:
        billed = sum(Decimal(row["BilledCost"]) for row in rows if row["SubAccountId"] == team.team)
        assert billed * 100 == team.total_cents
    usage = [row for row in rows if row["ChargeCategory"] == "Usage" and row["SubAccountId"] == "nlp"]
    h100 = next(row for row in usage if row["x_Pool"] == "h100")
    assert (h100["PricingUnit"], h100["PricingQuantity"], h100["x_BorrowedGpuHours"]) == (
        "GPU-Hours",
        "1200.000000",
        "400.000000",
    )
    assert Decimal(h100["ListCost"]) == Decimal("3000.00")  # 1200 GPU-hours at the list price


def test_invoice_lines_add_up_to_the_team_total_and_show_lost_work() -> None:
    r = result()
    invoice = build_invoice(r, "nlp")
    assert invoice.total_cents == r.team("nlp").total_cents
    assert (
        sum(p.direct_cents + p.idle_cents for p in invoice.pools) + invoice.admin_cents == invoice.total_cents
    )
    assert invoice.lost_gpu_hours == Decimal("7.5")
    assert invoice.lost_value_cents == 1200  # 7.5 GPU-hours × 1.60
    assert {(c.pool, c.priority) for c in invoice.classes} == {("h100", "training"), ("a100", "interactive")}
    assert invoice.invoice_id == "INV-test-2026-11-nlp"


def test_the_invoice_id_of_a_month_in_progress_is_a_clean_identifier() -> None:
    """It was `INV-test-2026-12 to date-nlp`: the id is the month's, "to date" is said beside it."""
    policy = chargeback_policy(pools={"h100": (8, "2.50")}, teams={"nlp": {"h100": 8}})
    december = Period.parse("2026-12").to_date(datetime(2026, 12, 10, 12, 30, 15, tzinfo=UTC))
    used = hours_interval("nlp", "h100", gpus=2, start_h=0, end_h=24, origin=december.start)
    r = compute_chargeback(policy, [used], december)
    assert december.label == "2026-12 to date"
    invoice = build_invoice(r, "nlp")
    assert invoice.invoice_id == "INV-test-2026-12-nlp"
    assert re.fullmatch(r"[A-Za-z0-9._-]+", invoice.invoice_id)
    html = render_invoice_html(r, "nlp")
    assert "Invoice INV-test-2026-12-nlp" in html and "period 2026-12 to date" in html
    assert "period 2026-12 to date" in _pdf_text(render_invoice_pdf(r, "nlp"))
    focus = list(csv.DictReader(io.StringIO(to_focus_csv(r))))
    assert {row["InvoiceId"] for row in focus if row["SubAccountId"] == "nlp"} == {"INV-test-2026-12-nlp"}


def _visible_text(html: str) -> str:
    """What a reader of the page sees: tags dropped, entities read, white space collapsed."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


@pytest.mark.parametrize("idle", list(IdlePolicy))
def test_invoices_explain_idle_share_and_kept_by_the_platform_with_the_policys_idle_rule(
    idle: IdlePolicy,
) -> None:
    """One sentence each, naming the policy's own idle rule, in the HTML and the PDF invoice."""
    r = result(idle)
    idle_sentence, platform = idle_share_sentence(idle), PLATFORM_SENTENCE
    for sentence, starts in ((idle_sentence, "Idle share: "), (platform, "Kept by the platform: ")):
        assert sentence.startswith(starts) and sentence.endswith(".")
        assert ". " not in sentence.rstrip("."), f"more than one sentence: {sentence}"
    assert f"the policy's idle rule '{idle.value}'" in idle_sentence
    html = _visible_text(render_invoice_html(r, "nlp"))
    assert idle_sentence in html and platform in html
    pdf = " ".join(_pdf_text(render_invoice_pdf(r, "nlp")).split())
    assert " ".join(idle_sentence.split()) in pdf
    assert "Kept by the platform:" in pdf


def test_html_invoice_shows_every_line_and_escapes_names() -> None:
    r = result()
    html = render_invoice_html(r, "nlp")
    inv = build_invoice(r, "nlp")
    for text in ("GPU-hours by pool", "GPU-hours by priority class", "Lost work from preemption", "Total"):
        assert text in html
    assert f"{inv.total_cents // 100:,}.{inv.total_cents % 100:02d} USD" in html
    assert "<script" not in html


def _pdf_text(data: bytes) -> str:
    return "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(data)).pages)


def test_pdf_invoice_shows_the_totals() -> None:
    r = result()
    data = render_invoice_pdf(r, "nlp")
    assert data.startswith(b"%PDF-")
    text = _pdf_text(data)
    charge = r.team("nlp")
    for cents in (charge.direct_cents, charge.idle_cents, charge.admin_cents, charge.total_cents):
        assert f"{cents // 100:,}.{cents % 100:02d} USD" in text
    assert "Lost work from preemption: 7.50 GPU-hours" in text
    assert render_invoice_pdf(r, "nlp") == data  # same chargeback, same bytes


@pytest.mark.skipif(
    shutil.which("pdftoppm") is None or shutil.which("pdftotext") is None,
    reason="pdftoppm/pdftotext (Debian's poppler-utils) are not installed",
)
def test_pdf_invoice_rendered_to_png_shows_the_total(tmp_path: Path) -> None:
    """Render the PDF to a PNG as a reader sees it, find where the total is laid out (poppler's word
    boxes), and check that this spot of the picture is really inked, and the rest of its row too."""
    r = result()
    total = r.team("nlp").total_cents
    total_text = f"{total // 100:,}.{total % 100:02d}"
    pdf = tmp_path / "invoice.pdf"
    pdf.write_bytes(render_invoice_pdf(r, "nlp"))
    dpi = 100
    subprocess.run(
        ["pdftoppm", "-png", "-r", str(dpi), "-singlefile", str(pdf), str(tmp_path / "invoice")], check=True
    )
    boxes = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], check=True, capture_output=True, text=True)
    words = re.findall(
        r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">([^<]*)</word>', boxes.stdout
    )
    found = [tuple(float(v) * dpi / 72 for v in w[:4]) for w in words if w[4] == total_text]
    assert found, f"the total {total_text} is not laid out on the page"
    labels = [w for w in words if w[4] == "Total"]
    assert labels, "the Total label is not laid out on the page"

    from PIL import Image  # pillow comes with matplotlib

    with Image.open(tmp_path / "invoice.png") as image:
        page = image.convert("L")
        assert abs(page.size[0] - 827) <= 1 and abs(page.size[1] - 1169) <= 1  # A4 at 100 dpi
        x0, y0, x1, y1 = (int(v) for v in found[-1])
        spot = page.crop((x0, y0, x1 + 1, y1 + 1))
        dark = sum(1 for value in spot.tobytes() if value < 128)
        assert dark > 0.05 * spot.size[0] * spot.size[1], "the total's place on the page is blank"
        # the Total label sits on the same line as the amount
        assert abs(float(labels[-1][1]) * dpi / 72 - y0) < 3
        blank = page.crop((x0, y1 + 200, x1 + 1, y1 + 240))  # well below the last line of text
        assert all(value > 250 for value in blank.tobytes())


def test_an_invoice_for_a_team_without_usage_still_renders() -> None:
    r = result()
    assert r.team("idle-team").total_cents >= 0
    assert "No GPU use in this period." in render_invoice_html(r, "idle-team")
    assert "No GPU use in this period." in _pdf_text(render_invoice_pdf(r, "idle-team"))


def test_to_dict_and_to_json_agree() -> None:
    r = result()
    assert json.loads(to_json(r)) == to_dict(r)


def test_a_negative_idle_share_is_a_focus_credit() -> None:
    policy = chargeback_policy(pools={"gpu": (4, "1.00")}, teams={"a": {"gpu": 4}})
    ledger = [hours_interval("a", "gpu", gpus=4, start_h=0, end_h=10)]
    r = compute_chargeback(policy, ledger, NOVEMBER, bill={"gpu": Decimal("20.00")})  # direct: 40.00
    rows = list(csv.DictReader(io.StringIO(to_focus_csv(r))))
    idle = next(row for row in rows if row["x_CostComponent"] == "idle")
    assert (idle["ChargeCategory"], idle["BilledCost"]) == ("Credit", "-20.00")
    assert sum(Decimal(row["BilledCost"]) for row in rows) == Decimal("20.00")
