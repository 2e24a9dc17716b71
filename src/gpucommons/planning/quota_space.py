"""The space the quota search moves in: one nominal GPU count per sized (team, pool), Σ fixed per pool.

A point of the space is a `QuotaVector`: a plain tuple of GPUs, one per entry of `QuotaSpace.entries`
(pool by pool, teams in policy order), so it can be a cache key and cross a process boundary as it is.

Invariants every point keeps (tests/property/planning checks them):
- per pool, Σ nominal of the sized teams = the pool's capacity less the quotas kept as they are (with
  `whole_nodes`, less the part of a node that kept quotas leave over, which nobody can be given);
- each entry is a multiple of the pool's unit (a whole node with `whole_nodes`, else 1 GPU) and lies
  within `[lower, upper]` (what `--max-change` allows around today's quota, and never below 0).

Moves take `k` units from one team and give them to another of the same pool, so they keep every
invariant by construction; seeds and baselines are brought into the space by `project`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from gpucommons.chargeback.rounding import largest_remainder
from gpucommons.domain.model import Isolation, Policy, Quota
from gpucommons.domain.resources import ALL_UNLIMITED, UNLIMITED, Resources

QuotaVector = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MaxChange:
    """How far one run may move a team's nominal quota: GPUs, or a share of today's quota."""

    gpus: int | None = None
    fraction: float | None = None

    @staticmethod
    def parse(text: str) -> MaxChange:
        """`32` (GPUs) or `25%` (of each team's quota today); refuses anything else with a reason."""
        raw = text.strip()
        try:
            if raw.endswith("%"):
                value = float(raw[:-1])
                if not 0 < value <= 1000 or math.isnan(value):
                    raise ValueError
                return MaxChange(fraction=value / 100)
            gpus = int(raw)
            if gpus < 0:
                raise ValueError
            return MaxChange(gpus=gpus)
        except ValueError:
            raise ValueError(
                f"--max-change {text!r}: give GPUs (e.g. 32) or a share of today's quota (e.g. 25%)"
            ) from None

    def allowed(self, today: int) -> int | None:
        """GPUs this team may move (None: no cap)."""
        if self.gpus is not None:
            return self.gpus
        if self.fraction is not None:
            return math.floor(today * self.fraction)
        return None

    def describe(self) -> str:
        if self.gpus is not None:
            return f"at most {self.gpus} GPUs per team"
        if self.fraction is not None:
            return f"at most {self.fraction:.0%} of each team's quota"
        return "no cap"


@dataclass(frozen=True, slots=True)
class Entry:
    team: str
    pool: str
    today: int
    lower: int
    upper: int


@dataclass(frozen=True, slots=True)
class PoolSpace:
    pool: str
    capacity: int
    gpus_per_node: int
    #: Nominal GPUs of the teams kept as they are (dedicated teams, teams with no history here).
    kept: int
    #: GPUs the sized teams share: capacity − kept (in whole nodes with `whole_nodes`).
    available: int
    #: Moves and quotas are multiples of this (a node with `whole_nodes`, else 1).
    unit: int
    #: Indexes into `QuotaSpace.entries`.
    slots: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class QuotaSpace:
    entries: tuple[Entry, ...]
    pools: tuple[PoolSpace, ...]
    whole_nodes: bool
    max_change: MaxChange

    # -- points ----------------------------------------------------------------------------------
    def today(self) -> QuotaVector:
        """Today's quotas as they are (may lie outside the space: Σ ≠ capacity, not whole nodes)."""
        return tuple(e.today for e in self.entries)

    def contains(self, vector: QuotaVector) -> bool:
        if len(vector) != len(self.entries):
            return False
        for pool in self.pools:
            if sum(vector[i] for i in pool.slots) != pool.available:
                return False
            for i in pool.slots:
                entry, gpus = self.entries[i], vector[i]
                if gpus % pool.unit or not entry.lower <= gpus <= entry.upper:
                    return False
        return True

    def as_mapping(self, vector: QuotaVector) -> dict[tuple[str, str], int]:
        return {(e.team, e.pool): vector[i] for i, e in enumerate(self.entries)}

    def vector_of(self, gpus: Mapping[tuple[str, str], float]) -> QuotaVector:
        """Any per-(team, pool) sizing (fractions allowed), brought into the space by `project`."""
        return self.project(tuple(float(gpus.get((e.team, e.pool), 0.0)) for e in self.entries))

    def project(self, wanted: Sequence[float]) -> QuotaVector:
        """The point of the space nearest in spirit to `wanted`: same proportions, Σ and bounds kept.

        Per pool: scale to the available GPUs, round to units by largest remainder (ties to the team
        that sorts first), then clamp to `[lower, upper]` and hand what clamping freed or took to the
        teams with room, in proportion to what they wanted. Terminates: every pass fixes at least one
        team at a bound.
        """
        out = [0] * len(self.entries)
        for pool in self.pools:
            unit = pool.unit
            units_total = pool.available // unit
            lower = {i: -(-self.entries[i].lower // unit) for i in pool.slots}
            upper = {i: self.entries[i].upper // unit for i in pool.slots}
            weights = {i: max(float(wanted[i]), 0.0) for i in pool.slots}
            fixed: dict[int, int] = {}
            while True:
                free = [i for i in pool.slots if i not in fixed]
                left = units_total - sum(fixed.values())
                share = _split(left, {i: weights[i] for i in free}, self.entries)
                clamped = {i: min(max(share[i], lower[i]), upper[i]) for i in free}
                over = [i for i in free if clamped[i] != share[i]]
                if not over or len(free) == len(over):
                    # Either everything fits, or every team is at a bound: fill what is left in
                    # order, so Σ still holds whenever the bounds allow it.
                    result = {**fixed, **clamped}
                    _settle(result, units_total, lower, upper, pool.slots)
                    for i in pool.slots:
                        out[i] = result[i] * unit
                    break
                for i in over:
                    fixed[i] = clamped[i]
        return tuple(out)

    # -- moves ----------------------------------------------------------------------------------
    def move(self, vector: QuotaVector, donor: int, receiver: int, units: int) -> QuotaVector | None:
        """`vector` with `units` pool units moved from `donor` to `receiver`; None if out of bounds."""
        pool = self.pool_of(donor)
        if pool is not self.pool_of(receiver) or donor == receiver or units <= 0:
            return None
        gpus = units * pool.unit
        d, r = vector[donor] - gpus, vector[receiver] + gpus
        if d < self.entries[donor].lower or r > self.entries[receiver].upper:
            return None
        moved = list(vector)
        moved[donor], moved[receiver] = d, r
        return tuple(moved)

    def pool_of(self, slot: int) -> PoolSpace:
        for pool in self.pools:
            if slot in pool.slots:
                return pool
        raise IndexError(slot)

    def moved_gpus(self, a: QuotaVector, b: QuotaVector) -> int:
        return sum(abs(x - y) for x, y in zip(a, b, strict=True)) // 2


def _split(units: int, weights: dict[int, float], entries: tuple[Entry, ...]) -> dict[int, int]:
    if not weights:
        return {}
    if units <= 0:
        return {i: 0 for i in weights}
    # Integer weights for the exact splitter: scale fractions to millionths (ties broken by name).
    scaled = {entries[i].team + "\x00" + str(i): round(w * 1_000_000) for i, w in weights.items()}
    if not any(scaled.values()):
        scaled = {key: 1 for key in scaled}
    shares = largest_remainder(units, scaled)
    return {i: shares.get(entries[i].team + "\x00" + str(i), 0) for i in weights}


def _settle(
    result: dict[int, int], total: int, lower: dict[int, int], upper: dict[int, int], slots: Sequence[int]
) -> None:
    """Move single units until Σ = total, within bounds, in slot order (deterministic)."""
    gap = total - sum(result.values())
    while gap:
        step = 1 if gap > 0 else -1
        for i in slots:
            if gap and lower[i] <= result[i] + step <= upper[i]:
                result[i] += step
                gap -= step
        if gap and all(not lower[i] <= result[i] + step <= upper[i] for i in slots):
            break  # the bounds cannot hold Σ: leave the rest (reported by `contains`)


def sized_entries(policy: Policy, demand_pools: Mapping[str, set[str]]) -> list[tuple[str, str]]:
    """(team, pool) pairs the search sizes: shared teams with demand in the pool.

    `demand_pools` maps a team to the pools its history asks for. A team with a quota in a pool but
    no demand there keeps that quota: without evidence, nothing is changed (as in the demand rule).
    """
    pairs = []
    for pool in policy.pools:
        for team in policy.teams:
            if team.isolation is Isolation.SHARED and pool.name in demand_pools.get(team.name, set()):
                pairs.append((team.name, pool.name))
    return pairs


def build_space(
    policy: Policy,
    demand_pools: Mapping[str, set[str]],
    *,
    whole_nodes: bool = False,
    max_change: MaxChange = MaxChange(),
    largest_job: Mapping[tuple[str, str], int] | None = None,
    floor_share: float = 0.0,
) -> QuotaSpace:
    """The search space of `policy`: who is sized, what each pool hands out, the bounds per team.

    `largest_job[(team, pool)]` (GPUs) is a floor: a team's quota is never cut below the largest job
    it ran (nor below today's quota when that is smaller). A guarantee smaller than the team's own
    jobs cannot hold one of them whole, so those jobs would only ever run on borrowed GPUs: the demand
    rule did that to Philly's e13805 (32 → 5 GPUs for 8-GPU jobs), and replays of past weeks cannot
    see the cost when the team happened to be quiet.

    `floor_share` (`--floor`) is a second floor that does not depend on the history: that share of
    an equal split of what the pool hands out (0.5: half of capacity ÷ sized teams), again never
    above today's quota. The job floor only knows the jobs a team ran; a team that was quiet in the
    history can wake up with larger jobs or a surge (Philly's e13805 ran 8-GPU jobs before day 21
    and 12-GPU jobs after), and then it should not be the team whose guarantee was given away.
    """
    if not 0.0 <= floor_share <= 1.0 or math.isnan(floor_share):
        raise ValueError("--floor must be between 0% and 100% of an equal share")
    sized = set(sized_entries(policy, demand_pools))
    entries: list[Entry] = []
    pools: list[PoolSpace] = []
    for pool in policy.pools:
        capacity = pool.capacity.gpus
        unit = pool.gpus_per_node if whole_nodes and pool.gpus_per_node > 0 else 1
        kept = sum(
            t.nominal(pool.name).gpus
            for t in policy.teams
            if (t.name, pool.name) not in sized and t.quota(pool.name) is not None
        )
        available = max(capacity - kept, 0)
        available -= available % unit
        members = [
            (team.name, team.nominal(pool.name).gpus if team.quota(pool.name) is not None else 0)
            for team in policy.teams
            if (team.name, pool.name) in sized
        ]
        equal_floor = math.floor(floor_share * available / len(members)) if members else 0
        floors = [
            min(today, max((largest_job or {}).get((name, pool.name), 0), equal_floor))
            for name, today in members
        ]
        slots = []
        for name, lower, upper in _bounds(members, floors, available, unit, max_change):
            today = dict(members)[name]
            slots.append(len(entries))
            entries.append(Entry(name, pool.name, today, lower, upper))
        if not slots:  # nobody to size here: the pool's quotas stay as they are
            available = 0
        pools.append(PoolSpace(pool.name, capacity, pool.gpus_per_node, kept, available, unit, tuple(slots)))
    return QuotaSpace(tuple(entries), tuple(pools), whole_nodes, max_change)


def _bounds(
    members: list[tuple[str, int]], floors: list[int], available: int, unit: int, max_change: MaxChange
) -> list[tuple[str, int, int]]:
    """Per team [lower, upper] in GPUs, multiples of `unit`, such that Σ = `available` can be met.

    `--max-change` bounds what a team gains or loses against the others; GPUs in nobody's quota
    today (or taken away by kept quotas) are handed out (or taken back) on top of it, and with whole
    nodes the bounds round outward to whole nodes. If the bounds still cannot meet Σ, they are
    widened one unit at a time, team by team in policy order.
    """
    spare = available - sum(today for _, today in members)
    lowers: list[int] = []
    uppers: list[int] = []
    for (_, today), floor in zip(members, floors, strict=True):
        cap = max_change.allowed(today)
        if cap is None:
            lower, upper = 0, available
        else:
            lower = max(today - cap - max(-spare, 0), 0)
            upper = min(today + cap + max(spare, 0), available)
        lower = max(lower, floor)
        lowers.append(lower // unit * unit)
        uppers.append(min(-(-upper // unit) * unit, available))
    while uppers and sum(uppers) < available:
        for i in range(len(uppers)):
            if sum(uppers) < available and uppers[i] + unit <= available:
                uppers[i] += unit
    while lowers and sum(lowers) > available:
        for i in range(len(lowers)):
            if sum(lowers) > available and lowers[i] >= unit:
                lowers[i] -= unit
    return [(name, lo, up) for (name, _), lo, up in zip(members, lowers, uppers, strict=True)]


def _with_gpus(limit: Resources, gpus: int) -> Resources:
    return replace(limit, gpus=gpus)


def apply_vector(policy: Policy, space: QuotaSpace, vector: QuotaVector) -> Policy:
    """`policy` with the vector's nominal GPUs; borrow limits kept, lend limits no higher than nominal.

    A lend limit above the new nominal would be refused by the policy checks; it is lowered to the
    nominal (lend everything), which is what the old limit meant in spirit.
    """
    nominal = space.as_mapping(vector)
    teams = []
    for team in policy.teams:
        quotas: list[Quota] = []
        have = set()
        for quota in team.quotas:
            have.add(quota.pool)
            gpus = nominal.get((team.name, quota.pool))
            quotas.append(quota if gpus is None else _resized(quota, gpus))
        for pool in policy.pools:  # demand in a pool the team had no quota in: a new entry, tried last
            gpus = nominal.get((team.name, pool.name))
            if pool.name not in have and gpus is not None:
                quotas.append(_resized(Quota(pool.name, Resources(), ALL_UNLIMITED, ALL_UNLIMITED), gpus))
        teams.append(replace(team, quotas=tuple(quotas)))
    return replace(policy, teams=tuple(teams), _index={})


def _resized(quota: Quota, gpus: int) -> Quota:
    lend = quota.lend_limit
    if lend.gpus < UNLIMITED and lend.gpus > gpus:
        lend = _with_gpus(lend, gpus)
    return replace(quota, nominal=_with_gpus(quota.nominal, gpus), lend_limit=lend)
