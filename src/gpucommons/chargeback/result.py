"""What a chargeback computes: per pool, per team and pool, per team, and the cluster's totals.

Money is integer cents; time is integer GPU-microseconds (exact), shown as GPU-hours by the
`*_hours` properties. The invariant `platform_cents + Σ teams.total_cents == cluster_cost_cents`
holds exactly, by construction (docs/design.md, "Chargeback rules", rule 6).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from gpucommons.domain.model import AdminSplit, IdlePolicy
from gpucommons.ledger.integrate import us_to_hours
from gpucommons.ledger.period import Period


class CostSource(StrEnum):
    """Where a pool's cost came from: the policy's price per GPU-hour, or an imported bill."""

    PRICE = "price"
    BILL = "bill"


@dataclass(frozen=True, slots=True)
class PoolCharge:
    """One pool's cost and how it was split: `cost = direct + idle` (rules 1, 3, 4)."""

    pool: str
    gpu_type: str
    capacity_gpus: int
    price_per_gpu_hour: Decimal
    cost_source: CostSource
    cost_cents: int
    direct_cents: int
    idle_cents: int
    #: The part of `idle_cents` that no team pays (idle policy `platform`, or all weights zero).
    idle_to_platform_cents: int
    gpu_us: int
    capacity_us: int

    @property
    def gpu_hours(self) -> Decimal:
        return us_to_hours(self.gpu_us)

    @property
    def capacity_gpu_hours(self) -> Decimal:
        return us_to_hours(self.capacity_us)


@dataclass(frozen=True, slots=True)
class TeamPoolCharge:
    """One team's use of one pool and what it pays for it (rules 2 to 4)."""

    team: str
    pool: str
    nominal_gpus: int
    gpu_us: int
    borrowed_us: int
    unused_quota_us: int
    direct_cents: int
    idle_cents: int
    lost_gpu_hours: Decimal

    @property
    def owned_us(self) -> int:
        return self.gpu_us - self.borrowed_us

    @property
    def gpu_hours(self) -> Decimal:
        return us_to_hours(self.gpu_us)

    @property
    def owned_gpu_hours(self) -> Decimal:
        return us_to_hours(self.owned_us)

    @property
    def borrowed_gpu_hours(self) -> Decimal:
        return us_to_hours(self.borrowed_us)

    @property
    def unused_quota_gpu_hours(self) -> Decimal:
        return us_to_hours(self.unused_quota_us)


@dataclass(frozen=True, slots=True)
class ClassUsage:
    """GPU-time one team spent in one pool under one priority class (for invoices)."""

    pool: str
    priority: str
    gpu_us: int

    @property
    def gpu_hours(self) -> Decimal:
        return us_to_hours(self.gpu_us)


@dataclass(frozen=True, slots=True)
class TeamCharge:
    """A team's bill for the period: `total = direct + idle + admin` (rule 6)."""

    team: str
    #: False for a team found in the ledger but not in the policy (charged as having no quota).
    in_policy: bool
    pools: tuple[TeamPoolCharge, ...]
    by_class: tuple[ClassUsage, ...]
    direct_cents: int
    idle_cents: int
    admin_cents: int
    lost_gpu_hours: Decimal

    @property
    def total_cents(self) -> int:
        return self.direct_cents + self.idle_cents + self.admin_cents

    @property
    def gpu_us(self) -> int:
        return sum(p.gpu_us for p in self.pools)

    @property
    def borrowed_us(self) -> int:
        return sum(p.borrowed_us for p in self.pools)

    @property
    def gpu_hours(self) -> Decimal:
        return us_to_hours(self.gpu_us)

    @property
    def borrowed_gpu_hours(self) -> Decimal:
        return us_to_hours(self.borrowed_us)


@dataclass(frozen=True, slots=True)
class ChargebackResult:
    """The whole period's chargeback. Teams are sorted by name; pools are in the policy's order."""

    cluster_name: str
    period: Period
    currency: str
    idle_policy: IdlePolicy
    admin_split: AdminSplit
    borrowed_rate: Decimal
    pools: tuple[PoolCharge, ...]
    teams: tuple[TeamCharge, ...]
    #: The admin cost for the period (the monthly amount prorated by days), rule 5.
    admin_cost_cents: int
    #: The part of the admin cost no team pays (all weights zero).
    admin_to_platform_cents: int
    #: Things finance should know (usage above capacity, teams missing from the policy, ...).
    warnings: tuple[str, ...] = ()

    @property
    def cluster_cost_cents(self) -> int:
        """`Σ_g C_g + A` (rule 6)."""
        return sum(p.cost_cents for p in self.pools) + self.admin_cost_cents

    @property
    def platform_cents(self) -> int:
        """`cluster_cost − Σ_t total_t`: what the platform keeps (rule 6)."""
        return self.cluster_cost_cents - sum(t.total_cents for t in self.teams)

    def team(self, name: str) -> TeamCharge:
        for charge in self.teams:
            if charge.team == name:
                return charge
        raise KeyError(f"no team {name!r} in the chargeback for {self.period.label}")

    def has_team(self, name: str) -> bool:
        return any(t.team == name for t in self.teams)
