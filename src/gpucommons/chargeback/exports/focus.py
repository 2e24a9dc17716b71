"""FOCUS 1.2 (FinOps Open Cost and Usage Specification) export of a chargeback.

Columns: the 21 mandatory columns of FOCUS 1.2, plus ChargeFrequency, InvoiceId and
ServiceSubcategory (recommended), SubAccountId/SubAccountName (conditional: the team is the sub
account), ConsumedQuantity/ConsumedUnit (conditional: we measure usage), and our own columns with the
`x_` prefix the spec reserves for custom columns.

Rows (one charge period = the whole billing period):
- `Usage` / `Usage-Based`: a team's GPU-hours in a pool (PricingQuantity = ConsumedQuantity =
  GPU-hours; BilledCost = its direct cents; ListCost = the GPU-hours at list price, before the
  borrowed-hour discount);
- `Purchase` / `Recurring`: a team's share of a pool's idle capacity (PricingQuantity = its share of
  the pool's idle GPU-hours; `Credit` when negative, i.e. a bill below the direct charges), and its
  share of the admin cost (PricingQuantity in Months);
- the same two kinds for the platform's kept amounts, with SubAccountId and InvoiceId null.

So Σ BilledCost over the file equals `cluster_cost_cents`, and over one InvoiceId the team's total.
Amounts are decimals in the billing currency, times are `YYYY-MM-DDTHH:MM:SSZ` in UTC, charge periods
start inclusive and end exclusive.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from gpucommons.chargeback.exports.amounts import decimal_text, money_text, utc_seconds
from gpucommons.chargeback.invoice import invoice_id
from gpucommons.chargeback.result import ChargebackResult, PoolCharge, TeamPoolCharge
from gpucommons.chargeback.rounding import round_half_even
from gpucommons.ledger.integrate import us_to_hours

#: FOCUS 1.2's mandatory columns (the spec lists them alphabetically).
FOCUS_MANDATORY = (
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "ContractedCost",
    "EffectiveCost",
    "InvoiceIssuerName",
    "ListCost",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "ServiceCategory",
    "ServiceName",
)
FOCUS_EXTRA = (
    "ChargeFrequency",
    "InvoiceId",
    "ServiceSubcategory",
    "SubAccountId",
    "SubAccountName",
    "ConsumedQuantity",
    "ConsumedUnit",
)
FOCUS_CUSTOM = (
    "x_CostComponent",
    "x_Pool",
    "x_GpuType",
    "x_OwnedGpuHours",
    "x_BorrowedGpuHours",
    "x_LostGpuHours",
)
FOCUS_COLUMNS = FOCUS_MANDATORY + FOCUS_EXTRA + FOCUS_CUSTOM

PROVIDER = "GPU Commons"
GPU_SERVICE = ("GPU Commons GPU capacity", "AI and Machine Learning", "Machine Learning")
ADMIN_SERVICE = (
    "GPU Commons platform administration",
    "Management and Governance",
    "Other (Management and Governance)",
)
GPU_HOURS = "GPU-Hours"
MONTHS = "Months"


@dataclass(frozen=True, slots=True)
class _Row:
    component: str
    billed_cents: int
    category: str
    frequency: str
    description: str
    quantity: Decimal
    unit: str
    service: tuple[str, str, str]
    team: str | None = None
    list_cents: int | None = None
    consumed: Decimal | None = None
    pool: PoolCharge | None = None
    usage: TeamPoolCharge | None = None


def to_focus_csv(result: ChargebackResult, teams: Collection[str] | None = None) -> str:
    """The chargeback as a FOCUS 1.2 CSV (header and rows, `\\n` line ends).

    `teams`: only these teams' rows (SubAccountId), and none of the platform's.
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(FOCUS_COLUMNS)
    period = (utc_seconds(result.period.start), utc_seconds(result.period.end))
    issuer = f"{PROVIDER} ({result.cluster_name})"
    for row in _rows(result):
        if teams is not None and row.team not in teams:
            continue
        service_name, category, subcategory = row.service
        billed = money_text(row.billed_cents)
        values: dict[str, object] = {
            "BilledCost": billed,
            "BillingAccountId": result.cluster_name,
            "BillingAccountName": result.cluster_name,
            "BillingCurrency": result.currency,
            "BillingPeriodEnd": period[1],
            "BillingPeriodStart": period[0],
            "ChargeCategory": row.category,
            "ChargeClass": "",
            "ChargeDescription": row.description,
            "ChargePeriodEnd": period[1],
            "ChargePeriodStart": period[0],
            "ContractedCost": billed,
            "EffectiveCost": billed,
            "InvoiceIssuerName": issuer,
            "ListCost": money_text(row.list_cents if row.list_cents is not None else row.billed_cents),
            "PricingQuantity": decimal_text(row.quantity),
            "PricingUnit": row.unit,
            "ProviderName": PROVIDER,
            "PublisherName": PROVIDER,
            "ServiceCategory": category,
            "ServiceName": service_name,
            "ChargeFrequency": row.frequency,
            "InvoiceId": invoice_id(result.cluster_name, result.period, row.team) if row.team else "",
            "ServiceSubcategory": subcategory,
            "SubAccountId": row.team or "",
            "SubAccountName": row.team or "",
            "ConsumedQuantity": decimal_text(row.consumed) if row.consumed is not None else "",
            "ConsumedUnit": GPU_HOURS if row.consumed is not None else "",
            "x_CostComponent": row.component,
            "x_Pool": row.pool.pool if row.pool else "",
            "x_GpuType": row.pool.gpu_type if row.pool else "",
            "x_OwnedGpuHours": decimal_text(row.usage.owned_gpu_hours) if row.usage else "",
            "x_BorrowedGpuHours": decimal_text(row.usage.borrowed_gpu_hours) if row.usage else "",
            "x_LostGpuHours": decimal_text(row.usage.lost_gpu_hours) if row.usage else "",
        }
        writer.writerow([values[c] for c in FOCUS_COLUMNS])
    return out.getvalue()


def _rows(result: ChargebackResult) -> Iterator[_Row]:
    pools = {p.pool: p for p in result.pools}
    currency = result.currency
    rate = result.borrowed_rate
    months = result.period.month_fraction()
    months_dec = (Decimal(months.numerator) / Decimal(months.denominator)).quantize(Decimal("0.000001"))
    for team in result.teams:
        for tp in team.pools:
            pool = pools[tp.pool]
            if tp.gpu_us:
                list_cents = round_half_even(
                    Fraction(tp.gpu_us, 3_600_000_000) * Fraction(pool.price_per_gpu_hour) * 100
                )
                yield _Row(
                    component="direct",
                    billed_cents=tp.direct_cents,
                    category="Usage",
                    frequency="Usage-Based",
                    description=(
                        f"{tp.gpu_hours} GPU-hours on {pool.pool} ({pool.gpu_type}) at "
                        f"{pool.price_per_gpu_hour} {currency} per GPU-hour; "
                        f"{tp.borrowed_gpu_hours} of them borrowed above quota at {rate}x"
                    ),
                    quantity=tp.gpu_hours,
                    unit=GPU_HOURS,
                    service=GPU_SERVICE,
                    team=team.team,
                    list_cents=list_cents,
                    consumed=tp.gpu_hours,
                    pool=pool,
                    usage=tp,
                )
            if tp.idle_cents:
                yield _idle_row(result, pool, tp.idle_cents, team.team)
        if team.admin_cents:
            yield _admin_row(result, team.admin_cents, months_dec, team.team)
    for pool in result.pools:
        if pool.idle_to_platform_cents:
            yield _idle_row(result, pool, pool.idle_to_platform_cents, None)
    if result.admin_to_platform_cents:
        yield _admin_row(result, result.admin_to_platform_cents, months_dec, None)


def _idle_row(result: ChargebackResult, pool: PoolCharge, cents: int, team: str | None) -> _Row:
    idle_us = max(pool.capacity_us - pool.gpu_us, 0)
    share = Fraction(idle_us) * Fraction(cents, pool.idle_cents) if pool.idle_cents else Fraction(0)
    who = "the platform's" if team is None else "a"
    return _Row(
        component="idle",
        billed_cents=cents,
        # negative when direct charges exceeded the pool's cost (a bill below list price): a credit
        category="Credit" if cents < 0 else "Purchase",
        frequency="Recurring",
        description=(
            f"{who} share of idle capacity on {pool.pool} ({pool.gpu_type}), "
            f"split by the '{result.idle_policy}' idle policy"
        ),
        quantity=us_to_hours(share),
        unit=GPU_HOURS,
        service=GPU_SERVICE,
        team=team,
        pool=pool,
    )


def _admin_row(result: ChargebackResult, cents: int, months: Decimal, team: str | None) -> _Row:
    who = "the platform's" if team is None else "a"
    return _Row(
        component="admin",
        billed_cents=cents,
        category="Purchase",
        frequency="Recurring",
        description=f"{who} share of the platform's administration cost, split '{result.admin_split}'",
        quantity=months,
        unit=MONTHS,
        service=ADMIN_SERVICE,
        team=team,
    )
