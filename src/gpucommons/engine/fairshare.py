"""Dominant resource share (DRS), Kueue's fair-sharing measure (KEP-1714, `resource_node.go`).

DRS of a team = max over resources of (usage above nominal, summed over pools) × 1000 ÷ (what its
parent cohort can lend of that resource, summed over pools), then × 1000 ÷ (weight in milli-units).
0 means the team is within its nominal quota; a weight of 0 makes the share infinite (the team only
ever gets idle capacity). Integer arithmetic, like Kueue, so ties are exact.

With a usage half-life (`scheduling.usage_half_life_s`), admission order uses the team's decayed
usage (remembered in `ClusterState`) instead of its current usage; preemption always uses current
usage, since what a victim frees is current.
"""

from __future__ import annotations

from gpucommons.domain.resources import RESOURCE_NAMES, ZERO, Resources
from gpucommons.engine.context import Cycle
from gpucommons.engine.types import FairShareStrategy

#: The share of a team whose weight is 0 (Kueue: math.MaxInt).
INFINITE_SHARE = 1 << 62


def _parts(r: Resources) -> tuple[int, int, int]:
    return (r.gpus, r.cpu_milli, r.memory_mib)


def lendable(cy: Cycle, team: str) -> tuple[int, int, int]:
    """What the team's parent cohort can lend, per resource, summed over pools: the most the cohort
    may ever hold (Kueue `calculateLendable`, `potentialAvailable` of the parent), which under a
    nested cohort includes what the cohort may borrow from above — not only its own subtree quota.
    Under the root the two are the same. With the subtree quota alone, a sub-cohort without quota
    lends 0, its borrowing teams all have share 0, and `LessThanOrEqualToFinalShare` (0 ≤ 0) lets
    two of them take one another's GPUs back and forth at one instant."""
    if cy.quota.team_parent.get(team) is None:
        return (0, 0, 0)
    total = ZERO
    for pool in cy.quota.team_pools.get(team, ()):
        total = total + cy.quota.parent_potential(team, pool)
    return _parts(total)


def dominant_share(
    cy: Cycle,
    team: str,
    pool: str | None = None,
    delta: Resources = ZERO,
    decayed: bool = False,
) -> int:
    """DRS of `team` were its usage in `pool` changed by `delta` (a request, or minus a victim)."""
    if cy.isolated or cy.quota.team_parent.get(team) is None:
        return 0
    weight = cy.weight_milli(team)
    if weight <= 0:
        return INFINITE_SHARE
    borrowed = [0.0, 0.0, 0.0]
    if decayed and cy.policy.scheduling.usage_half_life_s > 0:
        used = cy.state.decayed_usage(team)
        nominal = ZERO
        for p in cy.quota.team_pools.get(team, ()):
            q = cy.quota.quota(team, p)
            if q is not None:
                nominal = nominal + q.nominal
        d, n = _parts(delta), _parts(nominal)
        borrowed = [max(0.0, used[i] + d[i] - n[i]) for i in range(3)]
    else:
        for p in cy.quota.team_pools.get(team, ()):
            q = cy.quota.quota(team, p)
            if q is None:
                continue
            u = cy.quota.usage[(team, p)]
            if p == pool:
                u = u + delta
            over = _parts(u - q.nominal)
            for i in range(3):
                if over[i] > 0:
                    borrowed[i] += over[i]
    lend = lendable(cy, team)
    share = -1
    for i in range(len(RESOURCE_NAMES)):
        if borrowed[i] > 0 and lend[i] > 0:
            share = max(share, int(borrowed[i] * 1000 // lend[i]))
    if share < 0:
        return 0
    return share * 1000 // weight


def strategy_allows(
    strategy: FairShareStrategy, preemptor_new: int, target_old: int, target_new: int
) -> bool:
    """Kueue's two rules, named as in `fairsharing/strategy.go`."""
    if strategy is FairShareStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:
        return preemptor_new <= target_new
    return preemptor_new < target_old
