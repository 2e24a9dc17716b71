"""The quota advisor: nominal quotas, borrow limits and lend limits sized from usage history.

The rule, per pool (docs/advisor.md explains why each step is there):

1. Each team's *target* is a percentile of its demand (default: the median of its demand while it
   asks for anything, so a team's idle hours do not shrink what it gets when it works).
2. The pool's capacity, less the quotas kept as they are (dedicated teams, teams the history says
   nothing about), is handed out by largest remainder (optionally in whole nodes), so Σ nominal
   never exceeds capacity: scaled down in proportion to the targets when they do not all fit;
   when they do, each team gets its target and the spare GPUs go where demand often exceeds it
   (in proportion to p95 − target, then to peak − p95).
   The whole pool is handed out: in Kueue's quota tree, which our engine follows, a GPU in
   nobody's nominal quota can be used by nobody.
3. What the team borrows at its peak = peak demand (default: the highest seen) − nominal, capped
   by what the others hold. It is written as the borrow limit only on request (`limit_borrowing`):
   replayed on the weeks after the history, limits at the past peak left GPUs idle while work
   waited and stopped jobs larger than any seen before (docs/advisor.md has the figures). By
   default a team's borrow limit stays as the policy has it.
4. Lend limit = nominal − the demand the team had almost all the time (default: its 5th
   percentile). Those GPUs are busy 95% of the time anyway, so keeping them costs the others little
   and spares the team a reclaim (and its preemption grace period) for the work it always runs.

Pure: the history is already parsed, the policy is a value, and the result is deterministic (ties
in the rounding go to the team name that sorts first).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from gpucommons.chargeback.rounding import largest_remainder
from gpucommons.domain.model import Isolation, Policy, Pool, Quota, Team
from gpucommons.domain.resources import ALL_UNLIMITED, UNLIMITED, Resources
from gpucommons.planning.usage_history import Demand, UsageHistory, demand_from_jobs, read_usage_samples
from gpucommons.policy import dump_policy, parse_policy
from gpucommons.sim.jobs import SimJob

Status = Literal["sized", "kept"]


@dataclass(frozen=True, slots=True)
class AdvisorRule:
    """The knobs of the rule; the defaults are the documented rule."""

    percentile: float = 50.0
    #: False: the percentile is taken over the time the team asked for at least one GPU.
    include_idle: bool = False
    peak_percentile: float = 100.0
    reserve_percentile: float = 5.0
    whole_nodes: bool = False
    #: Write `peak − nominal` as each sized team's borrow limit (else leave the policy's own).
    limit_borrowing: bool = False

    def __post_init__(self) -> None:
        for name in ("percentile", "peak_percentile", "reserve_percentile"):
            value = getattr(self, name)
            if not 0 <= value <= 100:
                raise ValueError(f"{name} must be between 0 and 100, got {value:g}")

    def describe(self) -> str:
        basis = "all of the time" if self.include_idle else "the time it asked for GPUs"
        nodes = ", in whole nodes" if self.whole_nodes else ""
        return (
            f"nominal ∝ p{self.percentile:g} of demand over {basis}{nodes}, filling each pool; "
            + (
                f"borrow limit at p{self.peak_percentile:g} of demand; "
                if self.limit_borrowing
                else "borrow limits left as they are; "
            )
            + f"keep p{self.reserve_percentile:g}, lend the rest"
        )


@dataclass(frozen=True, slots=True)
class QuotaLimits:
    """GPUs of one quota entry; None = no limit (borrow anything / lend all idle nominal quota)."""

    nominal: int
    borrow_limit: int | None
    lend_limit: int | None

    @staticmethod
    def of(quota: Quota | None) -> QuotaLimits:
        if quota is None:
            return QuotaLimits(0, None, None)

        def gpus(limit: Resources) -> int | None:
            return None if limit.gpus >= UNLIMITED else limit.gpus

        return QuotaLimits(quota.nominal.gpus, gpus(quota.borrow_limit), gpus(quota.lend_limit))

    @property
    def ceiling(self) -> int | None:
        return None if self.borrow_limit is None else self.nominal + self.borrow_limit


@dataclass(frozen=True, slots=True)
class DemandFigures:
    """What the history says about one team in one pool (GPUs; shares are fractions of time)."""

    target: int
    p50: int
    p95: int
    peak: int
    reserve: int
    mean: float
    active_fraction: float
    censored_fraction: float
    gpu_hours: float
    largest_job: int


@dataclass(frozen=True, slots=True)
class TeamAdvice:
    team: str
    pool: str
    status: Status
    current: QuotaLimits
    proposed: QuotaLimits
    reason: str
    demand: DemandFigures | None = None
    #: GPUs above its nominal the team asked for at its peak (capped by what the others hold).
    borrow_at_peak: int = 0
    #: Share of the time (over the rule's basis) the demand fitted in the nominal quota, before and
    #: after (None: no history).
    covered_before: float | None = None
    covered_after: float | None = None


@dataclass(frozen=True, slots=True)
class PoolAdvice:
    pool: str
    capacity: int
    gpus_per_node: int
    kept: int
    targets: int
    nominal_before: int
    nominal_after: int


@dataclass(frozen=True, slots=True)
class IgnoredDemand:
    team: str
    pool: str | None
    gpu_hours: float
    why: str


@dataclass(frozen=True, slots=True)
class Advice:
    rule: AdvisorRule
    history: UsageHistory
    pools: tuple[PoolAdvice, ...]
    teams: tuple[TeamAdvice, ...]
    ignored: tuple[IgnoredDemand, ...]
    current: Policy
    proposed: Policy

    def demand_of(self, team: str, pool: str) -> Demand | None:
        for demand in self.history.demands:
            if demand.team == team and default_pool(self.current, demand) == pool:
                return demand
        return None


def default_pool(policy: Policy, demand: Demand) -> str | None:
    """The pool a demand counts in: its own, else the team's first (the one tried first)."""
    if demand.pool is not None:
        return demand.pool
    if not policy.has_team(demand.team):
        return None
    team = policy.team(demand.team)
    if team.quotas:
        return team.quotas[0].pool
    return policy.pools[0].name if policy.pools else None


def trace_history(policy: Policy, jobs: Sequence[SimJob]) -> UsageHistory:
    """Demand from a job trace, with jobs that name no pool counted in their team's first pool.

    Pools are resolved before the demand is summed, because a histogram cannot be added to another:
    a team's demand in a pool is the sum of its jobs' requests at each instant.
    """
    resolved = []
    for job in jobs:
        if job.pool is None:
            pool = default_pool(policy, Demand(job.team, None, ()))
            job = replace(job, pool=pool)
        resolved.append(job)
    return demand_from_jobs(resolved)


def samples_history(policy: Policy, lines: Iterable[str], source: str = "usage") -> UsageHistory:
    """Demand from a sampled usage file, rows without a pool counted in their team's first pool."""
    return read_usage_samples(lines, source, lambda team: default_pool(policy, Demand(team, None, ())))


def _figures(demand: Demand, rule: AdvisorRule) -> DemandFigures:
    active_only = not rule.include_idle
    total = demand.total_s
    return DemandFigures(
        target=demand.percentile(rule.percentile, active_only=active_only),
        p50=demand.percentile(50, active_only=active_only),
        p95=demand.percentile(95, active_only=active_only),
        peak=max(demand.percentile(rule.peak_percentile), demand.largest_job),
        reserve=demand.percentile(rule.reserve_percentile),
        mean=demand.mean,
        active_fraction=demand.active_fraction,
        censored_fraction=demand.censored_s / total if total else 0.0,
        gpu_hours=demand.gpu_hours,
        largest_job=demand.largest_job,
    )


def _split(available: int, figures: dict[str, DemandFigures]) -> dict[str, int]:
    """Hand out `available` GPUs: targets first, then the spare where demand goes above them (step 2).

    Σ targets above `available`: everyone is scaled down in proportion to its target. Below: each
    team gets its target; the spare GPUs go in proportion to how far each team's p95 is above what
    it has (a team that seldom needs more gets little more); if every p95 fits, the same again up
    to the peaks; what is left after that goes in proportion to the targets. Largest remainder
    throughout, so the parts add up to `available` exactly.
    """
    given = {name: f.target for name, f in figures.items()}
    if not any(given.values()):  # every target 0 (e.g. a low percentile over mostly idle time)
        given = {name: f.peak for name, f in figures.items()}
    weights = dict(given)
    if sum(given.values()) == 0:
        return given
    if sum(given.values()) >= available:
        return _shares(available, given)
    spare = available - sum(given.values())
    for level in ("p95", "peak"):
        headroom = {name: max(getattr(figures[name], level) - have, 0) for name, have in given.items()}
        if spare <= sum(headroom.values()):
            extra = _shares(spare, headroom)
            return {name: have + extra[name] for name, have in given.items()}
        given = {name: have + headroom[name] for name, have in given.items()}
        spare -= sum(headroom.values())
    extra = _shares(spare, weights)
    return {name: have + extra[name] for name, have in given.items()}


def _shares(total: int, weights: dict[str, int]) -> dict[str, int]:
    shares = largest_remainder(total, weights)
    return {name: shares.get(name, 0) for name in weights}


def _in_whole_nodes(gpus: dict[str, int], available: int, per_node: int) -> dict[str, int]:
    """The same split in whole nodes: nodes in proportion to each team's GPUs."""
    if not any(gpus.values()):
        return gpus
    nodes = _shares(available // per_node, gpus)
    return {name: n * per_node for name, n in nodes.items()}


def _percent(share: float) -> str:
    return f"{share:.0%}" if share >= 0.01 or share == 0 else "<1%"


def _sized_reason(
    team: str,
    figures: DemandFigures,
    before: QuotaLimits,
    after: QuotaLimits,
    capacity: int,
    rule: AdvisorRule,
) -> str:
    while_active = "" if rule.include_idle else " while active"
    words = [
        f"{team}: asks for GPUs {_percent(figures.active_fraction)} of the time; demand{while_active} "
        f"p50 {figures.p50}, p95 {figures.p95}, peak {figures.peak} GPUs",
    ]
    if figures.censored_fraction:
        words.append(
            f"part of it pending {_percent(figures.censored_fraction)} of the time, so demand above "
            "what ran is a lower bound"
        )
    words.append(
        f"nominal {before.nominal} → {after.nominal} (target p{rule.percentile:g} = {figures.target})"
    )
    at_peak = _borrow_at_peak(figures, after.nominal, capacity)
    if at_peak:
        words.append(f"borrows up to {at_peak} at peaks")
    else:
        words.append("never needed more than its nominal")
    if rule.limit_borrowing:
        words.append(f"borrow limit {after.borrow_limit}")
    elif after.ceiling is not None and after.ceiling < figures.peak:
        words.append(f"its borrow limit of {after.borrow_limit} keeps it below its peak")
    if after.lend_limit is not None and after.lend_limit < after.nominal:
        kept = after.nominal - after.lend_limit
        words.append(
            f"keeps {kept} (it asked for at least that {100 - rule.reserve_percentile:g}% of the time) "
            f"and lends up to {after.lend_limit}"
        )
    else:
        words.append("lends all of its quota when idle")
    return "; ".join(words)


def _kept_reason(team: Team, pool: str, demand: Demand | None) -> str:
    if team.isolation is Isolation.DEDICATED:
        return f"{team.name}: dedicated nodes (never lends or borrows); quota kept as it is"
    if demand is None:
        return f"{team.name}: no demand for pool {pool} in the history; quota kept as it is"
    return f"{team.name}: asked for no GPUs of pool {pool} in the whole history; quota kept as it is"


def _borrow_at_peak(figures: DemandFigures, nominal: int, capacity: int) -> int:
    return min(max(figures.peak - nominal, 0), capacity - nominal)


def _proposed_limits(
    figures: DemandFigures, nominal: int, current: QuotaLimits, capacity: int, rule: AdvisorRule
) -> QuotaLimits:
    borrow = _borrow_at_peak(figures, nominal, capacity) if rule.limit_borrowing else current.borrow_limit
    lend = nominal - min(figures.reserve, nominal)
    return QuotaLimits(nominal, borrow, lend)


def _with_gpus(limit: Resources, gpus: int | None) -> Resources:
    return replace(limit, gpus=UNLIMITED if gpus is None else gpus)


def _new_quota(old: Quota | None, pool: str, limits: QuotaLimits) -> Quota:
    base = old or Quota(pool, Resources(), ALL_UNLIMITED, ALL_UNLIMITED)
    return replace(
        base,
        nominal=replace(base.nominal, gpus=limits.nominal),
        borrow_limit=_with_gpus(base.borrow_limit, limits.borrow_limit),
        lend_limit=_with_gpus(base.lend_limit, limits.lend_limit),
    )


def _apply(policy: Policy, teams: Sequence[TeamAdvice]) -> Policy:
    sized = {(t.team, t.pool): t.proposed for t in teams if t.status == "sized"}
    new_teams = []
    for team in policy.teams:
        quotas = [
            _new_quota(q, q.pool, sized[(team.name, q.pool)]) if (team.name, q.pool) in sized else q
            for q in team.quotas
        ]
        have = {q.pool for q in team.quotas}
        for pool in policy.pools:  # demand in a pool the team had no quota in: a new entry, tried last
            if pool.name not in have and (team.name, pool.name) in sized:
                quotas.append(_new_quota(None, pool.name, sized[(team.name, pool.name)]))
        new_teams.append(replace(team, quotas=tuple(quotas)))
    return replace(policy, teams=tuple(new_teams), _index={})


def _usable_demands(
    policy: Policy, history: UsageHistory
) -> tuple[dict[tuple[str, str], Demand], list[IgnoredDemand]]:
    usable: dict[tuple[str, str], Demand] = {}
    ignored: list[IgnoredDemand] = []
    for demand in history.demands:
        pool = default_pool(policy, demand)
        if not policy.has_team(demand.team):
            ignored.append(
                IgnoredDemand(demand.team, demand.pool, demand.gpu_hours, "not a team of the policy")
            )
        elif pool is None or not policy.has_pool(pool):
            ignored.append(IgnoredDemand(demand.team, pool, demand.gpu_hours, "not a pool of the policy"))
        elif (demand.team, pool) in usable:
            raise ValueError(f"two demands for team {demand.team!r} in pool {pool!r}: resolve pools first")
        else:
            usable[(demand.team, pool)] = demand
    return usable, ignored


def _advise_pool(
    policy: Policy, pool: Pool, demands: dict[tuple[str, str], Demand], rule: AdvisorRule
) -> tuple[PoolAdvice, list[TeamAdvice], list[IgnoredDemand]]:
    capacity = pool.capacity.gpus
    members = [t for t in policy.teams if t.quota(pool.name) is not None or (t.name, pool.name) in demands]
    sized: dict[str, DemandFigures] = {}
    kept: list[TeamAdvice] = []
    ignored: list[IgnoredDemand] = []
    for team in members:
        demand = demands.get((team.name, pool.name))
        current = QuotaLimits.of(team.quota(pool.name))
        usable = demand is not None and demand.gpu_hours > 0 and team.isolation is Isolation.SHARED
        if usable and demand is not None:
            sized[team.name] = _figures(demand, rule)
        elif team.quota(pool.name) is None:
            hours = demand.gpu_hours if demand else 0.0
            ignored.append(
                IgnoredDemand(team.name, pool.name, hours, "dedicated team without quota in this pool")
            )
        else:
            kept.append(
                TeamAdvice(
                    team.name, pool.name, "kept", current, current, _kept_reason(team, pool.name, demand)
                )
            )
    kept_gpus = sum(t.current.nominal for t in kept)
    available = max(capacity - kept_gpus, 0)
    nominal = _split(available, sized)
    if rule.whole_nodes:
        nominal = _in_whole_nodes(nominal, available, pool.gpus_per_node)
    advice: list[TeamAdvice] = []
    for team in members:
        if team.name not in sized:
            advice.extend(t for t in kept if t.team == team.name)
            continue
        figures = sized[team.name]
        demand = demands[(team.name, pool.name)]
        before = QuotaLimits.of(team.quota(pool.name))
        after = _proposed_limits(figures, nominal[team.name], before, capacity, rule)
        advice.append(
            TeamAdvice(
                team.name,
                pool.name,
                "sized",
                before,
                after,
                _sized_reason(team.name, figures, before, after, capacity, rule),
                figures,
                _borrow_at_peak(figures, after.nominal, capacity),
                demand.share_at_or_below(before.nominal, active_only=not rule.include_idle),
                demand.share_at_or_below(after.nominal, active_only=not rule.include_idle),
            )
        )
    summary = PoolAdvice(
        pool.name,
        capacity,
        pool.gpus_per_node,
        kept_gpus,
        sum(f.target for f in sized.values()),
        sum(t.current.nominal for t in advice),
        sum(t.proposed.nominal for t in advice),
    )
    return summary, advice, ignored


def advise(policy: Policy, history: UsageHistory, rule: AdvisorRule = AdvisorRule()) -> Advice:
    """Size every shared team's quota in every pool from `history`; keep what the history cannot size."""
    demands, ignored = _usable_demands(policy, history)
    pools: list[PoolAdvice] = []
    teams: list[TeamAdvice] = []
    for pool in policy.pools:
        summary, advice, dropped = _advise_pool(policy, pool, demands, rule)
        pools.append(summary)
        teams.extend(advice)
        ignored.extend(dropped)
    return Advice(rule, history, tuple(pools), tuple(teams), tuple(ignored), policy, _apply(policy, teams))


def proposed_policy_text(advice: Advice) -> str:
    """The proposed policy as a policy file, checked by the same loader `policy check` uses.

    Raises `PolicyError` if the proposal were refused: a file the cluster would not accept is
    never handed to the caller.
    """
    text = dump_policy(advice.proposed)
    parse_policy(text, source="the proposed policy")
    return text
