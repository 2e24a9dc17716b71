"""The chargeback rules of docs/design.md, "Chargeback rules", one small function per rule.

All amounts are exact until they become cents: prices and rates are `Decimal`s from the policy,
GPU-time is integer GPU-microseconds, and their products are carried as exact fractions (an hour is
3.6 × 10⁹ µs, and a third of a cent is not a finite decimal), rounded once — half to even — or split
by largest remainder. So `platform_cents + Σ total_cents == cluster_cost_cents` holds to the cent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction

from gpucommons.chargeback.result import (
    ChargebackResult,
    ClassUsage,
    CostSource,
    PoolCharge,
    TeamCharge,
    TeamPoolCharge,
)
from gpucommons.chargeback.rounding import largest_remainder, round_half_even
from gpucommons.domain.model import AdminSplit, ChargebackConfig, IdlePolicy, Policy, Pool
from gpucommons.domain.money import to_cents
from gpucommons.ledger.integrate import PoolUsage, UsageSummary, summarize_usage, us_to_hours
from gpucommons.ledger.interval import US_PER_HOUR, UsageInterval
from gpucommons.ledger.period import Period
from gpucommons.ledger.table import UsageTable

_CENTS_PER_UNIT = 100


class ChargebackError(ValueError):
    """The inputs cannot be charged back as they are (e.g. the ledger names a pool the policy lacks)."""


def compute_chargeback(
    policy: Policy,
    intervals: Iterable[UsageInterval] | UsageTable,
    period: Period,
    bill: Mapping[str, Decimal] | None = None,
    *,
    config: ChargebackConfig | None = None,
) -> ChargebackResult:
    """The chargeback of `period` from ledger intervals (cut at the period's edges).

    `bill`: pool -> amount actually paid for the period (currency units), replacing the list price of
    those pools (rule 1). `config`: another chargeback model than the policy's (for comparisons).
    """
    return allocate(policy, summarize_usage(intervals, period, policy), bill=bill, config=config)


def allocate(
    policy: Policy,
    usage: UsageSummary,
    *,
    bill: Mapping[str, Decimal] | None = None,
    config: ChargebackConfig | None = None,
) -> ChargebackResult:
    """Apply rules 1 to 6 to an integrated ledger. Cheap: `compare` calls it once per model."""
    cfg = config or policy.chargeback
    rate = _borrowed_rate(cfg)
    bill = bill or {}
    _check_pools(policy, usage, bill)
    period = usage.period
    warnings: list[str] = [
        f"team {team!r} is in the ledger but not in the policy: charged for its usage as a team "
        "without quota (all of its GPU-time counts as borrowed)"
        for team in usage.unknown_teams
    ]
    if usage.intervals_counted == 0:
        warnings.append(
            f"no GPU use in {period.label}: the whole cluster cost goes to the idle rule "
            f"('{cfg.idle}') and the platform; check the period and the usage file"
        )

    by_pool: dict[str, list[PoolUsage]] = {}
    for pu in usage.pools.values():
        by_pool.setdefault(pu.pool, []).append(pu)

    pool_charges: list[PoolCharge] = []
    team_pools: dict[str, list[TeamPoolCharge]] = {}
    for pool in policy.pools:
        members = sorted(by_pool.get(pool.name, []), key=lambda pu: pu.team)
        charge, per_team = _charge_pool(policy, pool, members, period, bill, rate, cfg.idle)
        pool_charges.append(charge)
        warnings.extend(_pool_warnings(charge, cfg.currency))
        for tpc in per_team:
            team_pools.setdefault(tpc.team, []).append(
                replace(tpc, lost_gpu_hours=usage.lost_gpu_hours.get((tpc.team, pool.name), Decimal(0)))
            )

    direct_by_team = {team: sum(p.direct_cents for p in team_pools.get(team, [])) for team in usage.teams}
    admin_cents = admin_cost_cents(cfg.admin_monthly, period)
    admin_split = _split_admin(policy, cfg, admin_cents, direct_by_team)
    admin_to_platform = admin_cents - sum(admin_split.values())

    teams: list[TeamCharge] = []
    policy_teams = set(policy.team_names)
    for team in usage.teams:
        pools = tuple(team_pools.get(team, ()))
        classes = tuple(
            ClassUsage(pool, priority, gpu_us)
            for (t, pool, priority), gpu_us in sorted(usage.by_class.items())
            if t == team
        )
        teams.append(
            TeamCharge(
                team=team,
                in_policy=team in policy_teams,
                pools=pools,
                by_class=classes,
                direct_cents=direct_by_team[team],
                idle_cents=sum(p.idle_cents for p in pools),
                admin_cents=admin_split.get(team, 0),
                lost_gpu_hours=sum((p.lost_gpu_hours for p in pools), Decimal(0)),
            )
        )
    return ChargebackResult(
        cluster_name=policy.cluster_name,
        period=period,
        currency=cfg.currency,
        idle_policy=cfg.idle,
        admin_split=cfg.admin_split,
        borrowed_rate=cfg.borrowed_rate,
        pools=tuple(pool_charges),
        teams=tuple(teams),
        admin_cost_cents=admin_cents,
        admin_to_platform_cents=admin_to_platform,
        warnings=tuple(warnings),
    )


def _borrowed_rate(cfg: ChargebackConfig) -> Fraction:
    rate = Fraction(cfg.borrowed_rate)
    if not 0 < rate <= 1:
        raise ChargebackError(f"borrowed_rate must be above 0 and at most 1, not {cfg.borrowed_rate}")
    return rate


def _check_pools(policy: Policy, usage: UsageSummary, bill: Mapping[str, Decimal]) -> None:
    unknown = sorted({pu.pool for pu in usage.pools.values() if not policy.has_pool(pu.pool)})
    if unknown:
        raise ChargebackError(
            f"the ledger names pool(s) {', '.join(unknown)} that the policy lacks, so they have no price"
        )
    unbilled = sorted(p for p in bill if not policy.has_pool(p))
    if unbilled:
        raise ChargebackError(f"the bill names pool(s) {', '.join(unbilled)} that the policy lacks")


def pool_cost_cents(pool: Pool, period: Period) -> int:
    """Rule 1: `C_g = round_half_even(capacity × hours(period) × price)`, in cents."""
    capacity_us = pool.capacity.gpus * period.duration_us
    return round_half_even(
        Fraction(capacity_us, US_PER_HOUR) * Fraction(pool.price_per_gpu_hour) * _CENTS_PER_UNIT
    )


def raw_direct_cents(pu: PoolUsage, price: Decimal, rate: Fraction) -> Fraction:
    """Rule 3: `d_tg = ((H − B) + B × borrowed_rate) × price`, exactly, in cents."""
    weighted_us = pu.owned_us + pu.borrowed_us * rate
    return Fraction(weighted_us) / US_PER_HOUR * Fraction(price) * _CENTS_PER_UNIT


def idle_weights(policy: IdlePolicy, members: list[PoolUsage]) -> dict[str, int]:
    """Rule 4: who shares a pool's idle cost, and in which proportion (`platform`: nobody)."""
    if policy is IdlePolicy.USAGE:
        return {pu.team: pu.gpu_us for pu in members}
    if policy is IdlePolicy.QUOTA:
        return {pu.team: pu.unused_quota_us for pu in members}
    if policy is IdlePolicy.EVEN:
        return {pu.team: 1 for pu in members if pu.nominal_gpus > 0}
    return {}


def _charge_pool(
    policy: Policy,
    pool: Pool,
    members: list[PoolUsage],
    period: Period,
    bill: Mapping[str, Decimal],
    rate: Fraction,
    idle_policy: IdlePolicy,
) -> tuple[PoolCharge, list[TeamPoolCharge]]:
    if pool.name in bill:
        cost, source = to_cents(bill[pool.name]), CostSource.BILL
    else:
        cost, source = pool_cost_cents(pool, period), CostSource.PRICE
    raw = {pu.team: raw_direct_cents(pu, pool.price_per_gpu_hour, rate) for pu in members}
    direct_total = round_half_even(sum(raw.values(), Fraction(0)))
    direct = largest_remainder(direct_total, raw)
    idle_total = cost - direct_total
    idle = largest_remainder(idle_total, idle_weights(idle_policy, members))
    per_team = [
        TeamPoolCharge(
            team=pu.team,
            pool=pool.name,
            nominal_gpus=pu.nominal_gpus,
            gpu_us=pu.gpu_us,
            borrowed_us=pu.borrowed_us,
            unused_quota_us=pu.unused_quota_us,
            direct_cents=direct.get(pu.team, 0),
            idle_cents=idle.get(pu.team, 0),
            lost_gpu_hours=Decimal(0),
        )
        for pu in members
    ]
    charge = PoolCharge(
        pool=pool.name,
        gpu_type=pool.gpu_type,
        capacity_gpus=pool.capacity.gpus,
        price_per_gpu_hour=pool.price_per_gpu_hour,
        cost_source=source,
        cost_cents=cost,
        direct_cents=direct_total,
        idle_cents=idle_total,
        idle_to_platform_cents=idle_total - sum(idle.values()),
        gpu_us=sum(pu.gpu_us for pu in members),
        capacity_us=pool.capacity.gpus * period.duration_us,
    )
    return charge, per_team


def _pool_warnings(charge: PoolCharge, currency: str) -> list[str]:
    out: list[str] = []
    if charge.gpu_us > charge.capacity_us:
        out.append(
            f"pool {charge.pool!r}: the ledger shows {us_to_hours(charge.gpu_us)} GPU-hours, more than "
            f"its capacity of {us_to_hours(charge.capacity_us)}; check the ledger for overlapping intervals"
        )
    if charge.idle_cents < 0:
        out.append(
            f"pool {charge.pool!r}: direct charges exceed the pool's cost by {-charge.idle_cents} cents "
            f"({currency}); the idle split hands that back as a credit"
        )
    return out


def admin_cost_cents(monthly: Decimal, period: Period) -> int:
    """Rule 5: the monthly admin cost, prorated by the share of each calendar month the period covers."""
    return round_half_even(Fraction(monthly) * _CENTS_PER_UNIT * period.month_fraction())


def _split_admin(
    policy: Policy, cfg: ChargebackConfig, admin_cents: int, direct_by_team: Mapping[str, int]
) -> dict[str, int]:
    """Rule 5: `weighted` by direct cents, `even` over the policy's teams, or fixed percentages."""
    weights: dict[str, int | Decimal]
    if cfg.admin_split is AdminSplit.WEIGHTED:
        weights = dict(direct_by_team)
    elif cfg.admin_split is AdminSplit.EVEN:
        weights = {team: 1 for team in policy.team_names}
    else:
        weights = dict(cfg.admin_percentages)
    return largest_remainder(admin_cents, weights)
