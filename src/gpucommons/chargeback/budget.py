"""Monthly budgets: what each team has spent so far this month, and which alert thresholds it crossed.

A team's spend is the direct cost of its GPU-time this month up to now — rule 3's price with
borrowed GPU-hours at `borrowed_rate` — summed over pools and rounded once, half to even. Idle and
admin shares are left out: they depend on every team's month and are only known when it ends, and a
budget should move only with what the team itself runs.

`soft` budgets raise an alert at 80 % and at 100 % (once each per month); `hard` budgets also make the
engine hold the team's new tasks ("budget exhausted") once spend reaches the budget, except tasks of a
`budget_exempt` priority class. The server feeds `spend_cents` to `ClusterState.set_team_spend`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction

from gpucommons.chargeback.allocate import raw_direct_cents
from gpucommons.chargeback.rounding import round_half_even
from gpucommons.domain.model import BudgetEnforcement, Policy
from gpucommons.domain.money import to_cents
from gpucommons.ledger.integrate import summarize_usage
from gpucommons.ledger.interval import UsageInterval
from gpucommons.ledger.period import Period
from gpucommons.ledger.table import UsageTable

#: Percent of the monthly budget at which an alert is raised.
ALERT_THRESHOLDS: tuple[int, ...] = (80, 100)


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    team: str
    month: str
    budget_cents: int
    spent_cents: int
    enforce: BudgetEnforcement
    #: The thresholds (percent) spend has reached, e.g. `(80,)`.
    crossed: tuple[int, ...]

    @property
    def ratio(self) -> float:
        """Spend ÷ budget (for a gauge); 0 for a zero budget with no spend, else infinity-safe."""
        if self.budget_cents <= 0:
            return 0.0 if self.spent_cents <= 0 else float(self.spent_cents)
        return self.spent_cents / self.budget_cents

    @property
    def exhausted(self) -> bool:
        return self.spent_cents >= self.budget_cents

    @property
    def holds_new_tasks(self) -> bool:
        """A `hard` budget that is exhausted: the engine holds the team's non-exempt tasks."""
        return self.enforce is BudgetEnforcement.HARD and self.exhausted


@dataclass(frozen=True, slots=True)
class BudgetAlert:
    team: str
    month: str
    threshold: int
    spent_cents: int
    budget_cents: int
    enforce: BudgetEnforcement

    @property
    def key(self) -> tuple[str, str, int]:
        """What makes an alert unique: one per team, month and threshold."""
        return (self.team, self.month, self.threshold)

    def message(self, currency: str) -> str:
        spent, budget = self.spent_cents / 100, self.budget_cents / 100
        held = " New tasks are held until next month." if self.enforce is BudgetEnforcement.HARD else ""
        if self.threshold >= 100:
            return (
                f"team {self.team} has spent {spent:,.2f} {currency}, all of its {self.month} budget "
                f"of {budget:,.2f}.{held}"
            )
        return (
            f"team {self.team} has spent {spent:,.2f} {currency}, {self.threshold} % of its "
            f"{self.month} budget of {budget:,.2f}."
        )


def spend_cents(
    policy: Policy, intervals: Iterable[UsageInterval] | UsageTable, period: Period
) -> dict[str, int]:
    """Each team's direct cost over `period` (intervals are cut at its edges), in cents."""
    usage = summarize_usage(intervals, period, policy)
    rate = Fraction(policy.chargeback.borrowed_rate)
    raw: dict[str, Fraction] = {}
    for pu in usage.pools.values():
        if pu.gpu_us and policy.has_pool(pu.pool):
            price = policy.pool(pu.pool).price_per_gpu_hour
            raw[pu.team] = raw.get(pu.team, Fraction(0)) + raw_direct_cents(pu, price, rate)
    return {team: round_half_even(value) for team, value in raw.items()}


def evaluate_budgets(
    policy: Policy, intervals: Iterable[UsageInterval] | UsageTable, now: datetime
) -> dict[str, BudgetStatus]:
    """The budget status of every team with a budget, for the calendar month (UTC) up to `now`."""
    month = Period.month_of(now)
    spent = spend_cents(policy, intervals, Period(month.start, now)) if now > month.start else {}
    out: dict[str, BudgetStatus] = {}
    for team in policy.teams:
        if team.budget is None:
            continue
        budget = to_cents(team.budget.monthly)
        used = spent.get(team.name, 0)
        crossed = tuple(t for t in ALERT_THRESHOLDS if used * 100 >= budget * t)
        out[team.name] = BudgetStatus(team.name, month.label, budget, used, team.budget.enforce, crossed)
    return out


def new_alerts(
    statuses: Mapping[str, BudgetStatus], already: Collection[tuple[str, str, int]]
) -> list[BudgetAlert]:
    """Alerts for thresholds crossed and not yet alerted (`already` holds `BudgetAlert.key`s)."""
    out = []
    for status in statuses.values():
        for threshold in status.crossed:
            alert = BudgetAlert(
                status.team, status.month, threshold, status.spent_cents, status.budget_cents, status.enforce
            )
            if alert.key not in already:
                out.append(alert)
    return out
