"""Builders for ledger and chargeback tests: intervals in hours from a period's start, small policies.

policy = chargeback_policy(pools={"gpu": (4, "1.00")}, teams={"a": {"gpu": 2}, "b": {"gpu": 1}})
ledger = [hours_interval("a", "gpu", gpus=3, start_h=0, end_h=4)]
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from gpucommons.domain.model import (
    AdminSplit,
    Budget,
    BudgetEnforcement,
    ChargebackConfig,
    IdlePolicy,
    Policy,
    Pool,
    PriorityClass,
    Quota,
    Team,
)
from gpucommons.domain.resources import Resources
from gpucommons.ledger.interval import EndReason, UsageInterval

#: The origin `hours_interval` counts from: the start of November 2026.
ORIGIN = datetime(2026, 11, 1, tzinfo=UTC)
CLASSES = (
    PriorityClass("production", 1000, preemptible=False),
    PriorityClass("interactive", 800),
    PriorityClass("training", 500),
    PriorityClass("experiment", 100),
)
_ids = itertools.count(1)


def hours_interval(
    team: str,
    pool: str,
    *,
    gpus: int,
    start_h: float,
    end_h: float,
    priority: str = "experiment",
    end_reason: EndReason = EndReason.SUCCEEDED,
    lost_gpu_hours: str | Decimal = "0",
    origin: datetime = ORIGIN,
    task_id: str | None = None,
) -> UsageInterval:
    """An interval from `start_h` to `end_h` hours after `origin` (negative hours: before it)."""
    return UsageInterval(
        task_id=task_id or f"t{next(_ids)}",
        team=team,
        pool=pool,
        gpus=gpus,
        start=origin + timedelta(hours=start_h),
        end=origin + timedelta(hours=end_h),
        priority=priority,
        borrowed_gpus=0,
        end_reason=end_reason,
        lost_gpu_hours=Decimal(lost_gpu_hours),
    )


def chargeback_policy(
    *,
    pools: Mapping[str, tuple[int, str]],
    teams: Mapping[str, Mapping[str, int]],
    idle: IdlePolicy = IdlePolicy.USAGE,
    admin_monthly: str = "0",
    admin_split: AdminSplit = AdminSplit.WEIGHTED,
    admin_percentages: Mapping[str, str] | None = None,
    borrowed_rate: str = "1",
    budgets: Mapping[str, tuple[str, BudgetEnforcement]] | None = None,
    classes: tuple[PriorityClass, ...] = CLASSES,
) -> Policy:
    """A policy with `pools` as name -> (GPUs, price per GPU-hour) on one node each, and `teams` as
    name -> {pool: nominal GPUs}."""
    budgets = budgets or {}
    return Policy(
        cluster_name="test",
        pools=tuple(
            Pool(name, name.upper(), nodes=1, gpus_per_node=gpus, price_per_gpu_hour=Decimal(price))
            for name, (gpus, price) in pools.items()
        ),
        priority_classes=classes,
        default_priority_class=classes[-1].name,
        teams=tuple(
            Team(
                name,
                tuple(Quota(pool, Resources(gpus=n)) for pool, n in quotas.items()),
                budget=Budget(Decimal(budgets[name][0]), budgets[name][1]) if name in budgets else None,
            )
            for name, quotas in teams.items()
        ),
        chargeback=ChargebackConfig(
            currency="USD",
            idle=idle,
            admin_monthly=Decimal(admin_monthly),
            admin_split=admin_split,
            admin_percentages=tuple((t, Decimal(p)) for t, p in (admin_percentages or {}).items()),
            borrowed_rate=Decimal(borrowed_rate),
        ),
    )
