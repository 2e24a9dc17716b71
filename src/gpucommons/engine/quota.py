"""The quota tree: teams (Kueue ClusterQueues) under nested cohorts, with incremental usage.

Kueue's hierarchical resource arithmetic (`pkg/cache/resource_node.go`), specialised to our policy
file, where cohorts carry no quota or limits of their own:

- a team's *guaranteed* quota is `nominal − lend_limit` (0 when it lends everything); the rest of its
  nominal quota is *stored in the parent* and is what the cohort can lend;
- a cohort's subtree quota is the sum of what its children store in it; its usage is the sum of its
  children's usage above their guaranteed quota;
- what a team can still take: `max(0, guaranteed − usage)` plus what the root cohort has left,
  capped by `lendable − usage_in_parent + borrow_limit` when the team has a borrow limit.

Because our cohorts have no limits, every cohort of a tree shares the root's capacity (as in Kueue).
Usage is kept per (team, pool) and pushed up the tree on every change, so `available` costs
O(depth) and never walks the teams.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpucommons.domain.model import Isolation, Policy, Team
from gpucommons.domain.resources import UNLIMITED, ZERO, Resources


@dataclass(frozen=True, slots=True)
class TeamQuota:
    """One team's quota in one pool, with the derived numbers the arithmetic needs."""

    team: str
    pool: str
    nominal: Resources
    borrow_limit: Resources  # UNLIMITED components where the policy set none
    guaranteed: Resources  # nominal − lend limit: never lent out
    lendable: Resources  # nominal − guaranteed: stored in the parent cohort

    @property
    def limited_borrowing(self) -> bool:
        b = self.borrow_limit
        return b.gpus < UNLIMITED or b.cpu_milli < UNLIMITED or b.memory_mib < UNLIMITED


#: The components of `Resources`, by attribute name.
COMPONENTS = ("gpus", "cpu_milli", "memory_mib")


def _pos(r: Resources) -> Resources:
    return Resources(max(0, r.gpus), max(0, r.cpu_milli), max(0, r.memory_mib))


class QuotaTree:
    """Static structure of the policy plus mutable usage. Owned by `ClusterState`."""

    def __init__(self, policy: Policy) -> None:
        self.quotas: dict[tuple[str, str], TeamQuota] = {}
        #: Parent cohort of each team; None for dedicated teams (they neither lend nor borrow).
        self.team_parent: dict[str, str | None] = {}
        self.cohort_parent: dict[str, str | None] = {c.name: c.parent for c in policy.cohorts}
        self.subtree_quota: dict[tuple[str, str], Resources] = {}
        self.cohort_usage: dict[tuple[str, str], Resources] = {}
        self.usage: dict[tuple[str, str], Resources] = {}
        self.team_pools: dict[str, tuple[str, ...]] = {}
        for team in policy.teams:
            self._add_team(team)
        # Cohorts named by teams but not declared are roots of their own (policy validation refuses
        # them; the engine stays total).
        for parent in list(self.team_parent.values()):
            if parent is not None and parent not in self.cohort_parent:
                self.cohort_parent[parent] = None
        #: Each team's cohorts from its own up to the root, computed once (the tree is static).
        self._ancestors: dict[str, tuple[str, ...]] = {t: tuple(self._walk_up(t)) for t in self.team_parent}
        for (team_name, pool), q in self.quotas.items():
            for cohort in self.ancestors(team_name):
                key = (cohort, pool)
                self.subtree_quota[key] = self.subtree_quota.get(key, ZERO) + q.lendable
                self.cohort_usage.setdefault(key, ZERO)
        #: Kueue `getNodeHeight`: a cohort's distance to its furthest leaf (1 with teams only).
        self.height: dict[str, int] = self._heights()

    def _heights(self) -> dict[str, int]:
        children: dict[str, list[str]] = {c: [] for c in self.cohort_parent}
        has_child: set[str] = {p for p in self.team_parent.values() if p is not None}
        for c, parent in self.cohort_parent.items():
            if parent is not None and parent in children:
                children[parent].append(c)
                has_child.add(parent)
        out: dict[str, int] = {}

        def height(c: str, depth: int) -> int:
            if c in out:
                return out[c]
            h = 1 if c in has_child else 0
            if depth < len(children):  # a cycle (refused by validation) cannot recurse forever
                for child in children.get(c, ()):
                    h = max(h, height(child, depth + 1) + 1)
            out[c] = h
            return h

        for c in children:
            height(c, 0)
        return out

    def _add_team(self, team: Team) -> None:
        dedicated = team.isolation is Isolation.DEDICATED
        self.team_parent[team.name] = None if dedicated else team.cohort
        pools = []
        for q in team.quotas:
            if dedicated:
                guaranteed = q.nominal
                borrow = ZERO
            else:
                guaranteed = q.reserved
                borrow = q.borrow_limit
            self.quotas[(team.name, q.pool)] = TeamQuota(
                team.name, q.pool, q.nominal, borrow, guaranteed, q.nominal - guaranteed
            )
            self.usage[(team.name, q.pool)] = ZERO
            pools.append(q.pool)
        self.team_pools[team.name] = tuple(pools)

    # --- structure -------------------------------------------------------------------------------

    def ancestors(self, team: str) -> tuple[str, ...]:
        """The team's cohort, its parent, ... up to the root (nothing for dedicated teams)."""
        return self._ancestors.get(team, ())

    def _walk_up(self, team: str) -> Iterable[str]:
        cohort = self.team_parent.get(team)
        seen: set[str] = set()
        while cohort is not None and cohort not in seen:
            seen.add(cohort)
            yield cohort
            cohort = self.cohort_parent.get(cohort)

    def root(self, team: str) -> str | None:
        chain = self._ancestors.get(team)
        return chain[-1] if chain else None

    def quota(self, team: str, pool: str) -> TeamQuota | None:
        return self.quotas.get((team, pool))

    # --- usage -----------------------------------------------------------------------------------

    def add_usage(self, team: str, pool: str, delta: Resources) -> None:
        """Add (or with a negative delta, remove) usage and push the change up the cohorts."""
        key = (team, pool)
        q = self.quotas.get(key)
        if q is None:
            return
        old = self.usage[key]
        new = old + delta
        self.usage[key] = new
        g = q.guaranteed
        stored_delta = Resources(
            max(0, new.gpus - g.gpus) - max(0, old.gpus - g.gpus),
            max(0, new.cpu_milli - g.cpu_milli) - max(0, old.cpu_milli - g.cpu_milli),
            max(0, new.memory_mib - g.memory_mib) - max(0, old.memory_mib - g.memory_mib),
        )
        if stored_delta.is_zero():
            return
        for cohort in self._ancestors.get(team, ()):
            ck = (cohort, pool)
            self.cohort_usage[ck] = self.cohort_usage[ck] + stored_delta

    # --- the arithmetic --------------------------------------------------------------------------

    def available(self, team: str, pool: str, isolated: bool = False) -> Resources:
        """What the team can take now in the pool without preempting anyone (may be negative).

        `isolated` treats the team as having no cohort (the `static` engine).
        """
        q = self.quotas.get((team, pool))
        if q is None:
            return ZERO
        used = self.usage[(team, pool)]
        root = None if isolated else self.root(team)
        if root is None:
            return q.nominal - used
        rk = (root, pool)
        parent_avail = self.subtree_quota[rk] - self.cohort_usage[rk]
        if q.limited_borrowing:
            used_in_parent = _pos(used - q.guaranteed)
            parent_avail = parent_avail.min(q.lendable - used_in_parent + q.borrow_limit)
        return _pos(q.guaranteed - used) + parent_avail

    def potential(self, team: str, pool: str, isolated: bool = False) -> Resources:
        """The most the team may ever hold in the pool, were every other team idle."""
        q = self.quotas.get((team, pool))
        if q is None:
            return ZERO
        root = None if isolated else self.root(team)
        if root is None:
            return q.nominal
        most = q.guaranteed + self.subtree_quota[(root, pool)]
        if q.limited_borrowing:
            most = most.min(q.nominal + q.borrow_limit)
        return most

    def cohort_idle(self, team: str, pool: str) -> Resources:
        """What the team's root cohort has left to lend in the pool."""
        root = self.root(team)
        if root is None:
            return ZERO
        rk = (root, pool)
        return self.subtree_quota[rk] - self.cohort_usage[rk]

    def borrowing(self, team: str, pool: str) -> Resources:
        """Usage above nominal (what the team borrows from the cohort)."""
        q = self.quotas.get((team, pool))
        if q is None:
            return ZERO
        return _pos(self.usage[(team, pool)] - q.nominal)

    def is_borrowing(self, team: str, pool: str, components: Resources) -> bool:
        """True if usage is above nominal in any component named (positive) in `components`."""
        q = self.quotas.get((team, pool))
        if q is None:
            return False
        u = self.usage[(team, pool)]
        n = q.nominal
        return (
            (components.gpus > 0 and u.gpus > n.gpus)
            or (components.cpu_milli > 0 and u.cpu_milli > n.cpu_milli)
            or (components.memory_mib > 0 and u.memory_mib > n.memory_mib)
        )

    def lowest_subtree_that_fits(
        self, team: str, pool: str, component: str, val: int, isolated: bool = False
    ) -> tuple[int, bool]:
        """Kueue `FindHeightOfLowestSubtreeThatFits` for one resource component (`gpus`,
        `cpu_milli` or `memory_mib`): the height of the lowest subtree of the team's cohort tree
        whose quota holds `val` more of it (0: the team's own nominal quota does), and whether
        that subtree is smaller than the whole tree — then the team may reclaim in the hierarchy
        (Kueue `mayReclaimInHierarchy`). With our cohorts, which hold no quota of their own, a
        flat tree never allows it beyond the team's nominal quota; nested cohorts do.
        """
        q = self.quotas.get((team, pool))
        chain = () if isolated else self._ancestors.get(team, ())
        if q is None:
            return 0, False
        used = getattr(self.usage[(team, pool)], component)
        if used + val <= getattr(q.nominal, component) or not chain:
            return 0, bool(chain)
        remaining = val - max(0, getattr(q.guaranteed, component) - used)
        for i, cohort in enumerate(chain):
            key = (cohort, pool)
            quota = getattr(self.subtree_quota.get(key, ZERO), component)
            usage = getattr(self.cohort_usage.get(key, ZERO), component)
            if usage + remaining <= quota:
                return self.height.get(cohort, 1), i < len(chain) - 1
            # Our cohorts guarantee nothing locally (no quota, no lend limit of their own).
        return self.height.get(chain[-1], 1), False

    def borrowing_level(self, team: str, pool: str, req: Resources, isolated: bool = False) -> int:
        """Kueue's borrowing level of an assignment: the worst, over the components `req` asks for,
        of `lowest_subtree_that_fits` (0 = within the team's nominal quota)."""
        level = 0
        for component in COMPONENTS:
            val = getattr(req, component)
            if val > 0:
                level = max(level, self.lowest_subtree_that_fits(team, pool, component, val, isolated)[0])
        return level

    def root_teams(self, root: str) -> list[str]:
        return [t for t in self.team_parent if self.root(t) == root]
