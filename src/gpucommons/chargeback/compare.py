"""The same period under every chargeback model, side by side (`commons chargeback compare`).

Practice asks for a chargeback model agreed with finance before launch; the honest way to agree is to
see last month's bill under each candidate. The ledger is integrated once; only the split (rules 4
and 5) changes between models, so comparing costs little more than one chargeback.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from decimal import Decimal

from gpucommons.chargeback.allocate import allocate
from gpucommons.chargeback.result import ChargebackResult
from gpucommons.domain.model import AdminSplit, IdlePolicy, Policy
from gpucommons.ledger.integrate import summarize_usage
from gpucommons.ledger.interval import UsageInterval
from gpucommons.ledger.period import Period
from gpucommons.ledger.table import UsageTable


@dataclass(frozen=True, slots=True)
class Scenario:
    idle: IdlePolicy
    admin_split: AdminSplit
    result: ChargebackResult
    #: True for the model the policy file sets today.
    current: bool

    @property
    def name(self) -> str:
        return f"idle={self.idle} admin={self.admin_split}"


@dataclass(frozen=True, slots=True)
class Comparison:
    period: Period
    currency: str
    teams: tuple[str, ...]
    scenarios: tuple[Scenario, ...]

    def total(self, scenario: Scenario, team: str) -> int:
        return scenario.result.team(team).total_cents


def admin_splits_to_compare(policy: Policy) -> tuple[AdminSplit, ...]:
    """Weighted and even always; fixed percentages only when the policy defines some."""
    if policy.chargeback.admin_percentages:
        return (AdminSplit.WEIGHTED, AdminSplit.EVEN, AdminSplit.FIXED)
    return (AdminSplit.WEIGHTED, AdminSplit.EVEN)


def compare_models(
    policy: Policy,
    intervals: Iterable[UsageInterval] | UsageTable,
    period: Period,
    bill: Mapping[str, Decimal] | None = None,
) -> Comparison:
    """Every idle policy × every admin split the policy allows, over the same integrated ledger."""
    usage = summarize_usage(intervals, period, policy)
    current = policy.chargeback
    scenarios = []
    for idle in IdlePolicy:
        for split in admin_splits_to_compare(policy):
            config = replace(current, idle=idle, admin_split=split)
            result = allocate(policy, usage, bill=bill, config=config)
            scenarios.append(
                Scenario(idle, split, result, current=(idle, split) == (current.idle, current.admin_split))
            )
    return Comparison(period=period, currency=current.currency, teams=usage.teams, scenarios=tuple(scenarios))
