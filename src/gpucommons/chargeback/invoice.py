"""A team's invoice for a period: the lines finance and the team lead read (HTML, PDF, JSON).

Built from a `ChargebackResult`, so an invoice always agrees with the chargeback to the cent: its
total is the team's `total_cents`, and its lines add up to it (direct and idle per pool, admin).
Lost work is shown on its own line, in GPU-hours and at list price, as information: those GPU-hours
are already inside the direct cost (the GPUs were held), so it is not charged twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from gpucommons.chargeback.result import ChargebackResult, TeamCharge
from gpucommons.chargeback.rounding import round_half_even
from gpucommons.domain.model import AdminSplit, IdlePolicy
from gpucommons.ledger.period import Period


@dataclass(frozen=True, slots=True)
class InvoicePoolLine:
    pool: str
    gpu_type: str
    price_per_gpu_hour: Decimal
    gpu_hours: Decimal
    owned_gpu_hours: Decimal
    borrowed_gpu_hours: Decimal
    unused_quota_gpu_hours: Decimal
    nominal_gpus: int
    direct_cents: int
    idle_cents: int
    lost_gpu_hours: Decimal


@dataclass(frozen=True, slots=True)
class InvoiceClassLine:
    pool: str
    priority: str
    gpu_hours: Decimal


@dataclass(frozen=True, slots=True)
class Invoice:
    invoice_id: str
    cluster_name: str
    team: str
    period: Period
    currency: str
    idle_policy: IdlePolicy
    admin_split: AdminSplit
    borrowed_rate: Decimal
    pools: tuple[InvoicePoolLine, ...]
    classes: tuple[InvoiceClassLine, ...]
    direct_cents: int
    idle_cents: int
    admin_cents: int
    total_cents: int
    lost_gpu_hours: Decimal
    #: Lost GPU-hours at each pool's list price: information, already part of `direct_cents`.
    lost_value_cents: int
    in_policy: bool

    @property
    def gpu_hours(self) -> Decimal:
        return sum((p.gpu_hours for p in self.pools), Decimal(0))

    @property
    def borrowed_gpu_hours(self) -> Decimal:
        return sum((p.borrowed_gpu_hours for p in self.pools), Decimal(0))

    @property
    def owned_gpu_hours(self) -> Decimal:
        return sum((p.owned_gpu_hours for p in self.pools), Decimal(0))


def invoice_id(cluster_name: str, period: Period, team: str) -> str:
    """`INV-<cluster>-<period>-<team>`: stable, so re-issuing a period's invoice keeps its id.

    The period is the one asked for (`INV-demo-2026-12-nlp`, not `... 2026-12 to date-nlp`): an id
    has no spaces, and an invoice of a month in progress says "to date" beside its period instead."""
    return f"INV-{cluster_name}-{period.asked.label}-{team}"


def build_invoice(result: ChargebackResult, team: str) -> Invoice:
    """The invoice of `team` (KeyError when the team has no line in the result)."""
    charge: TeamCharge = result.team(team)
    prices = {p.pool: p for p in result.pools}
    lines = tuple(
        InvoicePoolLine(
            pool=tp.pool,
            gpu_type=prices[tp.pool].gpu_type,
            price_per_gpu_hour=prices[tp.pool].price_per_gpu_hour,
            gpu_hours=tp.gpu_hours,
            owned_gpu_hours=tp.owned_gpu_hours,
            borrowed_gpu_hours=tp.borrowed_gpu_hours,
            unused_quota_gpu_hours=tp.unused_quota_gpu_hours,
            nominal_gpus=tp.nominal_gpus,
            direct_cents=tp.direct_cents,
            idle_cents=tp.idle_cents,
            lost_gpu_hours=tp.lost_gpu_hours,
        )
        for tp in charge.pools
    )
    lost_value = round_half_even(
        sum(
            (
                Fraction(tp.lost_gpu_hours) * Fraction(prices[tp.pool].price_per_gpu_hour) * 100
                for tp in charge.pools
            ),
            Fraction(0),
        )
    )
    return Invoice(
        invoice_id=invoice_id(result.cluster_name, result.period, team),
        cluster_name=result.cluster_name,
        team=team,
        period=result.period,
        currency=result.currency,
        idle_policy=result.idle_policy,
        admin_split=result.admin_split,
        borrowed_rate=result.borrowed_rate,
        pools=lines,
        classes=tuple(InvoiceClassLine(c.pool, c.priority, c.gpu_hours) for c in charge.by_class),
        direct_cents=charge.direct_cents,
        idle_cents=charge.idle_cents,
        admin_cents=charge.admin_cents,
        total_cents=charge.total_cents,
        lost_gpu_hours=charge.lost_gpu_hours,
        lost_value_cents=lost_value,
        in_policy=charge.in_policy,
    )
