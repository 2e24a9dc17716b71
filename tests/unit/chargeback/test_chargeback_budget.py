"""Budgets: month-to-date spend, the 80 % and 100 % thresholds, alerts once each, hard budgets hold."""

from __future__ import annotations

from datetime import UTC, datetime

from gpucommons.chargeback.budget import evaluate_budgets, new_alerts, spend_cents
from gpucommons.chargeback.compare import compare_models
from gpucommons.domain import BudgetEnforcement, IdlePolicy
from gpucommons.ledger import Period
from gpucommons.testing.chargeback import chargeback_policy, hours_interval

# 1.00 per GPU-hour; borrowed GPU-hours at half price
POLICY = chargeback_policy(
    pools={"gpu": (8, "1.00")},
    teams={"soft": {"gpu": 2}, "hard": {"gpu": 2}, "free": {"gpu": 2}},
    borrowed_rate="0.5",
    budgets={"soft": ("100", BudgetEnforcement.SOFT), "hard": ("50", BudgetEnforcement.HARD)},
)


def at(day: int, hour: int = 0) -> datetime:
    return datetime(2026, 11, day, hour, tzinfo=UTC)


def test_spend_is_the_direct_cost_to_date_with_borrowed_hours_at_the_borrowed_rate() -> None:
    ledger = [hours_interval("soft", "gpu", gpus=4, start_h=0, end_h=10)]  # 2 owned + 2 borrowed GPUs
    assert spend_cents(POLICY, ledger, Period(at(1), at(1, 5))) == {"soft": (10 + 5) * 100}


def test_thresholds_are_crossed_at_80_and_100_percent() -> None:
    ledger = [
        hours_interval("soft", "gpu", gpus=2, start_h=0, end_h=40),  # 80.00 by hour 40
        hours_interval("hard", "gpu", gpus=2, start_h=0, end_h=30),  # 60.00 of 50.00
    ]
    statuses = evaluate_budgets(POLICY, ledger, at(3))  # hour 48
    assert set(statuses) == {"soft", "hard"}  # "free" has no budget
    soft, hard = statuses["soft"], statuses["hard"]
    assert (soft.spent_cents, soft.crossed, soft.exhausted, soft.holds_new_tasks) == (
        8000,
        (80,),
        False,
        False,
    )
    assert (hard.spent_cents, hard.crossed, hard.exhausted, hard.holds_new_tasks) == (
        6000,
        (80, 100),
        True,
        True,
    )
    assert soft.month == "2026-11" and soft.ratio == 0.8


def test_spend_counts_only_the_month_so_far() -> None:
    ledger = [hours_interval("soft", "gpu", gpus=2, start_h=-100, end_h=10)]  # began in October
    assert evaluate_budgets(POLICY, ledger, at(1, 5))["soft"].spent_cents == 1000  # 5 h of November
    assert evaluate_budgets(POLICY, ledger, at(1))["soft"].spent_cents == 0  # midnight: nothing yet


def test_each_threshold_alerts_once_per_month() -> None:
    ledger = [hours_interval("soft", "gpu", gpus=2, start_h=0, end_h=60)]
    first = new_alerts(evaluate_budgets(POLICY, ledger, at(2, 18)), already=set())  # 84.00
    assert [(a.team, a.threshold) for a in first] == [("soft", 80)]
    assert "80 % of its 2026-11 budget" in first[0].message("USD")
    later = evaluate_budgets(POLICY, ledger, at(4))  # 120.00
    again = new_alerts(later, already={a.key for a in first})
    assert [(a.team, a.threshold) for a in again] == [("soft", 100)]


def test_a_hard_budget_alert_says_new_tasks_are_held() -> None:
    ledger = [hours_interval("hard", "gpu", gpus=2, start_h=0, end_h=30)]
    alerts = new_alerts(evaluate_budgets(POLICY, ledger, at(3)), already=set())
    assert "held until next month" in next(a for a in alerts if a.threshold == 100).message("USD")


def test_compare_shows_every_idle_policy_with_each_admin_split_and_marks_the_current_one() -> None:
    ledger = [hours_interval("soft", "gpu", gpus=4, start_h=0, end_h=100)]
    comparison = compare_models(POLICY, ledger, Period.parse("2026-11"))
    assert len(comparison.scenarios) == len(IdlePolicy) * 2  # no fixed percentages in this policy
    current = [s for s in comparison.scenarios if s.current]
    assert [(s.idle, s.admin_split) for s in current] == [(IdlePolicy.USAGE, POLICY.chargeback.admin_split)]
    costs = {s.result.cluster_cost_cents for s in comparison.scenarios}
    assert len(costs) == 1  # the models split the same bill differently
    platform = next(s for s in comparison.scenarios if s.idle is IdlePolicy.PLATFORM)
    assert platform.result.platform_cents > 0
