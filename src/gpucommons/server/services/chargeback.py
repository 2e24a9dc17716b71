"""Chargeback and budgets on the live ledger: the store's intervals through the pure `chargeback`.

The split of idle and admin cost depends on every team's usage, so a chargeback is always computed
over all of the policy's teams; callers then show each person only the teams they may see.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from gpucommons.api.errors import BadRequest
from gpucommons.chargeback import ChargebackResult, compute_chargeback
from gpucommons.chargeback.budget import BudgetStatus, evaluate_budgets
from gpucommons.domain.model import Policy
from gpucommons.ledger.interval import UsageInterval
from gpucommons.ledger.period import Period
from gpucommons.server.services import ledger
from gpucommons.store.db import Database

_MONTH = re.compile(r"^\d{4}-\d{2}$")


def month_to_date(month: str, now: float) -> Period:
    """The calendar month `YYYY-MM`; a month in progress ends now (an invoice "to date")."""
    if not _MONTH.match(month):
        raise BadRequest(f"month must look like 2026-11, not {month!r}", {"month": month})
    try:
        period = Period.parse(month)
    except ValueError as exc:
        raise BadRequest(str(exc), {"month": month}) from None
    try:
        return period.to_date(datetime.fromtimestamp(now, tz=UTC))
    except ValueError as exc:
        raise BadRequest(str(exc), {"month": month}) from None


def intervals(db: Database, policy: Policy, period: Period, now: float) -> list[UsageInterval]:
    """Every policy team's intervals overlapping `period`, cut at its edges; open ones end now."""
    with db.session() as session:
        return ledger.usage_intervals(
            session, policy.team_names, period.start.timestamp(), period.end.timestamp(), now
        )


def chargeback(db: Database, policy: Policy, period: Period, now: float) -> ChargebackResult:
    return compute_chargeback(policy, intervals(db, policy, period, now), period)


def budgets(db: Database, policy: Policy, now: float) -> dict[str, BudgetStatus]:
    """Each budgeted team's spend this month so far (`chargeback.budget`)."""
    moment = datetime.fromtimestamp(now, tz=UTC)
    month = Period.month_of(moment)
    if moment <= month.start:
        return evaluate_budgets(policy, [], moment)
    return evaluate_budgets(policy, intervals(db, policy, Period(month.start, moment), now), moment)
