"""Hand-computed chargebacks: one case for each idle policy and each admin split (docs/design.md, "Chargeback
model"). The scenario, worked by hand:

pool `gpu`: 4 GPUs at 1.00 USD per GPU-hour; the period is the first 10 hours of November 2026,
so the pool costs C = 4 × 10 × 1.00 = 40.00 USD. Borrowed GPU-hours cost half (borrowed_rate 0.5).
Teams: a (nominal 2), b (nominal 1), c (nominal 1).
- a runs 3 GPUs for hours 0–4: H = 12, borrowed B = (3 − 2) × 4 = 4, owned 8, unused quota Q = 20 − 8 = 12
- b runs 1 GPU for hours 0–6:   H = 6, B = 0, Q = 10 − 6 = 4
- c runs nothing:                H = 0, Q = 10
Direct: a = (8 + 4 × 0.5) × 1.00 = 10.00, b = 6.00, so D = 16.00 and idle I = 40.00 − 16.00 = 24.00.
Admin: 3000 USD a month × 10 h / 720 h (November) = 41.666… → 4167 cents (half-even).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from gpucommons.chargeback import ChargebackError, ChargebackResult, compute_chargeback
from gpucommons.domain import AdminSplit, IdlePolicy, Policy
from gpucommons.ledger import Period
from gpucommons.testing.chargeback import chargeback_policy, hours_interval

TEN_HOURS = Period.parse("2026-11-01T00:00:00Z..2026-11-01T10:00:00Z")
LEDGER = [
    hours_interval("a", "gpu", gpus=3, start_h=0, end_h=4),
    hours_interval("b", "gpu", gpus=1, start_h=0, end_h=6),
]


def policy(**kwargs: Any) -> Policy:
    defaults: dict[str, Any] = {
        "pools": {"gpu": (4, "1.00")},
        "teams": {"a": {"gpu": 2}, "b": {"gpu": 1}, "c": {"gpu": 1}},
        "borrowed_rate": "0.5",
        "admin_monthly": "3000",
    }
    defaults.update(kwargs)
    return chargeback_policy(**defaults)


def charge(**kwargs: Any) -> ChargebackResult:
    return compute_chargeback(policy(**kwargs), LEDGER, TEN_HOURS)


def cents(result: ChargebackResult, field: str) -> dict[str, int]:
    return {t.team: getattr(t, field) for t in result.teams}


def test_pool_cost_is_capacity_times_hours_times_price() -> None:
    result = charge()
    assert [p.cost_cents for p in result.pools] == [4000]
    assert result.admin_cost_cents == 4167
    assert result.cluster_cost_cents == 8167


def test_borrowed_hours_are_the_time_above_nominal_and_cost_the_borrowed_rate() -> None:
    result = charge()
    a = result.team("a")
    assert (a.gpu_hours, a.borrowed_gpu_hours) == (Decimal("12.000000"), Decimal("4.000000"))
    assert cents(result, "direct_cents") == {"a": 1000, "b": 600, "c": 0}
    assert result.pools[0].direct_cents == 1600 and result.pools[0].idle_cents == 2400


def test_unused_quota_is_nominal_time_not_used() -> None:
    result = charge()
    unused = {p.team: p.unused_quota_gpu_hours for t in result.teams for p in t.pools}
    assert unused == {"a": Decimal("12.000000"), "b": Decimal("4.000000"), "c": Decimal("10.000000")}


@pytest.mark.parametrize(
    ("idle", "expected", "platform_idle"),
    [
        # usage: weights H = 12 : 6 : 0
        (IdlePolicy.USAGE, {"a": 1600, "b": 800, "c": 0}, 0),
        # quota: weights Q = 12 : 4 : 10 → 1107.69, 369.23, 923.08; the spare cent goes to a (.69)
        (IdlePolicy.QUOTA, {"a": 1108, "b": 369, "c": 923}, 0),
        # even: every team with a quota in the pool, 2400 / 3
        (IdlePolicy.EVEN, {"a": 800, "b": 800, "c": 800}, 0),
        # platform: nobody pays idle time
        (IdlePolicy.PLATFORM, {"a": 0, "b": 0, "c": 0}, 2400),
    ],
)
def test_idle_policy_splits_idle_cost(idle: IdlePolicy, expected: dict[str, int], platform_idle: int) -> None:
    result = charge(idle=idle, admin_monthly="0")
    assert cents(result, "idle_cents") == expected
    assert result.pools[0].idle_to_platform_cents == platform_idle
    assert result.platform_cents == platform_idle
    assert result.platform_cents + sum(t.total_cents for t in result.teams) == result.cluster_cost_cents


@pytest.mark.parametrize(
    ("split", "percentages", "expected"),
    [
        # weighted by direct cents 1000 : 600 → 2604.375, 1562.625; the spare cent goes to b (.625)
        (AdminSplit.WEIGHTED, None, {"a": 2604, "b": 1563, "c": 0}),
        # even over every team of the policy: 4167 / 3
        (AdminSplit.EVEN, None, {"a": 1389, "b": 1389, "c": 1389}),
        # fixed 50/30/20 → 2083.5, 1250.1, 833.4; the spare cent goes to a (.5)
        (AdminSplit.FIXED, {"a": "50", "b": "30", "c": "20"}, {"a": 2084, "b": 1250, "c": 833}),
    ],
)
def test_admin_split(split: AdminSplit, percentages: dict[str, str] | None, expected: dict[str, int]) -> None:
    result = charge(admin_split=split, admin_percentages=percentages)
    assert cents(result, "admin_cents") == expected
    assert result.admin_to_platform_cents == 0
    assert result.platform_cents + sum(t.total_cents for t in result.teams) == result.cluster_cost_cents


def test_team_total_is_direct_plus_idle_plus_admin() -> None:
    result = charge()  # usage idle, weighted admin
    assert cents(result, "total_cents") == {"a": 1000 + 1600 + 2604, "b": 600 + 800 + 1563, "c": 0}
    assert result.platform_cents == 0


def test_admin_cost_of_a_whole_month_is_not_prorated() -> None:
    result = compute_chargeback(policy(), LEDGER, Period.parse("2026-11"))
    assert result.admin_cost_cents == 300000


def test_admin_cost_of_half_a_month_is_half() -> None:
    result = compute_chargeback(policy(), LEDGER, Period.parse("2026-11-01..2026-11-15"))
    assert result.admin_cost_cents == 150000


def test_admin_cost_with_no_usage_and_weighted_split_stays_with_the_platform() -> None:
    result = compute_chargeback(policy(), [], TEN_HOURS)
    assert result.admin_to_platform_cents == 4167
    assert result.platform_cents == result.cluster_cost_cents == 8167


def test_imported_bill_replaces_the_list_price() -> None:
    p = policy(admin_monthly="0")
    result = compute_chargeback(p, LEDGER, TEN_HOURS, bill={"gpu": Decimal("35.00")})
    pool = result.pools[0]
    assert (pool.cost_cents, pool.cost_source.value, pool.idle_cents) == (3500, "bill", 1900)
    assert sum(t.total_cents for t in result.teams) == 3500


def test_bill_below_direct_cost_credits_the_difference_back() -> None:
    p = policy(admin_monthly="0")
    result = compute_chargeback(p, LEDGER, TEN_HOURS, bill={"gpu": Decimal("10.00")})
    assert result.pools[0].idle_cents == -600
    assert cents(result, "idle_cents") == {"a": -400, "b": -200, "c": 0}
    assert any("exceed" in w for w in result.warnings)
    assert sum(t.total_cents for t in result.teams) + result.platform_cents == 1000


def test_team_missing_from_the_policy_pays_everything_as_borrowed() -> None:
    ledger = [*LEDGER, hours_interval("ghost", "gpu", gpus=1, start_h=0, end_h=2)]
    result = compute_chargeback(policy(admin_monthly="0"), ledger, TEN_HOURS)
    ghost = result.team("ghost")
    assert not ghost.in_policy
    assert ghost.borrowed_gpu_hours == ghost.gpu_hours == Decimal("2.000000")
    assert ghost.direct_cents == 100  # 2 h × 1.00 × 0.5
    assert any("ghost" in w for w in result.warnings)


def test_ledger_pool_unknown_to_the_policy_is_refused() -> None:
    ledger = [hours_interval("a", "tpu", gpus=1, start_h=0, end_h=1)]
    with pytest.raises(ChargebackError, match="tpu"):
        compute_chargeback(policy(), ledger, TEN_HOURS)


def test_borrowed_rate_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ChargebackError, match="borrowed_rate"):
        compute_chargeback(policy(borrowed_rate="1.5"), LEDGER, TEN_HOURS)


def test_direct_cost_split_ties_go_to_the_team_that_sorts_first() -> None:
    # 1 GPU for 1 s each at 0.01/h: each raw share is 1/360 cent; D rounds to 0 — no cent to hand out.
    # With 3 teams × 20 min at 0.01 → each 0.333… cents, D = round(1.0) = 1 cent → goes to "a".
    p = chargeback_policy(
        pools={"gpu": (4, "0.01")}, teams={"c": {"gpu": 1}, "b": {"gpu": 1}, "a": {"gpu": 1}}
    )
    ledger = [hours_interval(t, "gpu", gpus=1, start_h=0, end_h=1 / 3) for t in ("c", "b", "a")]
    result = compute_chargeback(p, ledger, TEN_HOURS)
    assert cents(result, "direct_cents") == {"a": 1, "b": 0, "c": 0}
