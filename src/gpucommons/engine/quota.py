"""The quota tree: teams (Kueue ClusterQueues) under nested cohorts, with incremental usage.

Kueue's hierarchical resource arithmetic (`pkg/cache/scheduler/resource_node.go`), node by node:

- every node (team or cohort) has a *subtree quota*: a team's is its nominal quota; a cohort's is its
  own nominal quota (the policy's `cohorts[].quotas`, Kueue `spec.resourceGroups`) plus what each
  child stores in it, `child subtree quota − child local quota`;
- a node's *local quota* (Kueue `localQuota`) is `max(0, subtree quota − lend limit)`, 0 without a
  lend limit: never lent to the parent. For a team that is `nominal − lend_limit` (*guaranteed*);
- a node's usage is what counts against its subtree quota: a team's own usage, a cohort's the sum of
  its children's usage above their local quota;
- what a node can take now (`available`): `max(0, local − usage)` plus what its parent can take,
  capped by `stored in parent − used in parent + borrow limit` when the node has a borrow limit; a
  root can take `subtree quota − usage`.

So a cohort's own quota is shared by its subtree first (a team there reclaims it from outsiders,
see `preemption.hierarchical_advantage`), lent to the rest of the tree up to the cohort's lend
limit, and the cohort's borrow limit caps what its whole subtree takes from outside. Usage is kept
per (node, pool) and pushed up the tree on every change, so `available` costs O(depth) and never
walks the teams.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gpucommons.domain.model import Isolation, Policy, Quota, Team
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
    #: Some component of `borrow_limit` is limited. Worked out once, here: `available` asks it for
    #: every fit check of every cycle (it was a property).
    limited_borrowing: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        b = self.borrow_limit
        limited = b.gpus < UNLIMITED or b.cpu_milli < UNLIMITED or b.memory_mib < UNLIMITED
        object.__setattr__(self, "limited_borrowing", limited)


#: No limit in any component (an absent borrow or lend limit).
_NO_LIMIT = Resources(UNLIMITED, UNLIMITED, UNLIMITED)

#: The components of `Resources`, by attribute name.
COMPONENTS = ("gpus", "cpu_milli", "memory_mib")


@dataclass(slots=True)
class UsageView:
    """Usage per (team, pool) and per (cohort, pool), apart from the tree's own."""

    usage: dict[tuple[str, str], Resources]
    cohort_usage: dict[tuple[str, str], Resources]
    mirrors: list[UsageView] = field(default_factory=list)

    def __init__(
        self,
        usage: dict[tuple[str, str], Resources],
        cohort_usage: dict[tuple[str, str], Resources],
        mirrors: list[UsageView] | None = None,
    ) -> None:
        # By hand (compiled, a generated `__init__` stays interpreted): `swap` builds one per plan view.
        self.usage = usage
        self.cohort_usage = cohort_usage
        self.mirrors = [] if mirrors is None else mirrors


class _Shared:
    """What `QuotaTree.available` reads of a team in a pool in the common case (a team in a
    cohort tree without cohort limits, borrowing without limit): found by one lookup instead of
    the quota, the team's ancestors and the root's subtree quota one by one."""

    __slots__ = ("guaranteed", "root_key", "root_quota")

    def __init__(self, guaranteed: Resources, root_key: tuple[str, str], root_quota: Resources) -> None:
        self.guaranteed = guaranteed
        self.root_key = root_key
        #: The root's subtree quota in the pool (the tree's structure: it never changes).
        self.root_quota = root_quota


def _pos(r: Resources) -> Resources:
    return Resources(max(0, r.gpus), max(0, r.cpu_milli), max(0, r.memory_mib))


class QuotaTree:
    """Static structure of the policy plus mutable usage. Owned by `ClusterState`."""

    def __init__(self, policy: Policy) -> None:
        self.quotas: dict[tuple[str, str], TeamQuota] = {}
        #: The same by team, then pool: `quota()` looks up two strings (whose hashes Python keeps)
        #: instead of building and hashing a tuple, several times for every head of every cycle.
        self._team_quotas: dict[str, dict[str, TeamQuota]] = {}
        #: Parent cohort of each team; None for dedicated teams (they neither lend nor borrow).
        self.team_parent: dict[str, str | None] = {}
        self.cohort_parent: dict[str, str | None] = {c.name: c.parent for c in policy.cohorts}
        self.subtree_quota: dict[tuple[str, str], Resources] = {}
        self.cohort_usage: dict[tuple[str, str], Resources] = {}
        self.usage: dict[tuple[str, str], Resources] = {}
        #: Copies of (`usage`, `cohort_usage`) kept in step (`follow`): every `add_usage` is
        #: applied to them too. A cycle's preemption-plan views live there (engine/cycle.py).
        self.mirrors: list[UsageView] = []
        self.team_pools: dict[str, tuple[str, ...]] = {}
        #: A cohort's own quota per pool (Kueue: the Cohort's `spec.resourceGroups`).
        self.cohort_quota: dict[tuple[str, str], Quota] = {
            (c.name, q.pool): q for c in policy.cohorts for q in c.quotas
        }
        #: Kueue `localQuota` of a cohort: `max(0, subtree quota − lend limit)`, never lent upwards.
        self.cohort_local: dict[tuple[str, str], Resources] = {}
        for team in policy.teams:
            self._add_team(team)
        # Cohorts named by teams but not declared are roots of their own (policy validation refuses
        # them; the engine stays total).
        for parent in list(self.team_parent.values()):
            if parent is not None and parent not in self.cohort_parent:
                self.cohort_parent[parent] = None
        #: Each team's cohorts from its own up to the root, computed once (the tree is static).
        self._ancestors: dict[str, tuple[str, ...]] = {t: tuple(self._walk_up(t)) for t in self.team_parent}
        #: Each cohort's parent chain (itself excluded) up to the root.
        self._cohort_ancestors: dict[str, tuple[str, ...]] = {
            c: tuple(self._walk_cohorts(self.cohort_parent.get(c), c)) for c in self.cohort_parent
        }
        self._sum_subtree_quotas()
        #: Whether any cohort has quota limits of its own: else every cohort of a tree simply passes
        #: its root's capacity down, and `available` takes the short way.
        self._cohort_limits = any(
            q.borrow_limit != _NO_LIMIT or q.lend_limit != _NO_LIMIT for q in self.cohort_quota.values()
        )
        #: `available`'s common case, by (team, pool): see `_Shared`.
        self._shared: dict[tuple[str, str], _Shared] = {}
        if not self._cohort_limits:
            for key, q in self.quotas.items():
                chain = self._ancestors.get(key[0])
                if chain and not q.limited_borrowing:
                    rk = (chain[-1], key[1])
                    self._shared[key] = _Shared(q.guaranteed, rk, self.subtree_quota[rk])
        #: Kueue `getNodeHeight`: a cohort's distance to its furthest leaf (1 with teams only).
        self.height: dict[str, int] = self._heights()
        #: Each cohort's teams and child cohorts, in policy order (hierarchical reclaim walks them).
        self.child_teams: dict[str, list[str]] = {c: [] for c in self.cohort_parent}
        self.child_cohorts: dict[str, list[str]] = {c: [] for c in self.cohort_parent}
        for t, parent in self.team_parent.items():
            if parent is not None:
                self.child_teams[parent].append(t)
        for c, parent in self.cohort_parent.items():
            if parent is not None and parent in self.child_cohorts:
                self.child_cohorts[parent].append(c)

    def _sum_subtree_quotas(self) -> None:
        """Subtree quota and local quota of every (cohort, pool), children before parents."""
        pools = {pool for _, pool in self.quotas} | {pool for _, pool in self.cohort_quota}
        contributions: dict[tuple[str, str], Resources] = {}
        for (team_name, pool), q in self.quotas.items():
            parent = self.team_parent.get(team_name)
            if parent is not None:
                key = (parent, pool)
                contributions[key] = contributions.get(key, ZERO) + q.lendable
        # Deepest cohorts first, so a cohort's children are summed before it is.
        order = sorted(self.cohort_parent, key=lambda c: -len(self._cohort_ancestors.get(c, ())))
        for cohort in order:
            for pool in pools:
                key = (cohort, pool)
                own = self.cohort_quota.get(key)
                total = contributions.get(key, ZERO) + (own.nominal if own is not None else ZERO)
                local = _pos(total - own.lend_limit) if own is not None else ZERO
                self.subtree_quota[key] = total
                self.cohort_local[key] = local
                self.cohort_usage[key] = ZERO
                parent = self.cohort_parent.get(cohort)
                if parent is not None and parent in self.cohort_parent:
                    pk = (parent, pool)
                    contributions[pk] = contributions.get(pk, ZERO) + (total - local)

    def _walk_cohorts(self, cohort: str | None, start: str) -> Iterable[str]:
        seen: set[str] = {start}
        while cohort is not None and cohort not in seen:
            seen.add(cohort)
            yield cohort
            cohort = self.cohort_parent.get(cohort)

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
            tq = TeamQuota(team.name, q.pool, q.nominal, borrow, guaranteed, q.nominal - guaranteed)
            self.quotas[(team.name, q.pool)] = tq
            self._team_quotas.setdefault(team.name, {})[q.pool] = tq
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
        by_pool = self._team_quotas.get(team)
        return by_pool.get(pool) if by_pool is not None else None

    # --- usage -----------------------------------------------------------------------------------

    def follow(self) -> UsageView:
        """A copy of the usage now, to which every later `add_usage` is applied too, until
        `unfollow()`. The cohorts' usage is a function of the teams' (each step adds the change of
        a clamped sum), so the copy equals what the same changes in any order would give."""
        view = UsageView(dict(self.usage), dict(self.cohort_usage))
        self.mirrors.append(view)
        return view

    def unfollow(self) -> None:
        self.mirrors = []

    def swap(self, view: UsageView) -> UsageView:
        """Make `view` the usage (and stop mirroring while it is); returns the usage it replaced,
        with the mirrors, for `swap` back."""
        old = UsageView(self.usage, self.cohort_usage, self.mirrors)
        self.usage, self.cohort_usage, self.mirrors = view.usage, view.cohort_usage, view.mirrors
        return old

    def add_usage(self, team: str, pool: str, delta: Resources) -> None:
        """Add (or with a negative delta, remove) usage and push the change up the cohorts."""
        self._add_usage(self.usage, self.cohort_usage, team, pool, delta)
        for view in self.mirrors:
            self._add_usage(view.usage, view.cohort_usage, team, pool, delta)

    def add_view_usage(self, view: UsageView, team: str, pool: str, delta: Resources) -> None:
        """`add_usage` on `view` alone."""
        self._add_usage(view.usage, view.cohort_usage, team, pool, delta)

    def _add_usage(
        self,
        usage: dict[tuple[str, str], Resources],
        cohort_usage: dict[tuple[str, str], Resources],
        team: str,
        pool: str,
        delta: Resources,
    ) -> None:
        key = (team, pool)
        q = self.quotas.get(key)
        if q is None:
            return
        old = usage[key]
        # Integer arithmetic, one `Resources` per result: every admission, finish and what-if
        # change of every cycle comes through here.
        ng, nc, nm = old.gpus + delta.gpus, old.cpu_milli + delta.cpu_milli, old.memory_mib + delta.memory_mib
        usage[key] = Resources(ng, nc, nm)
        g = q.guaranteed
        gg, gc, gm = g.gpus, g.cpu_milli, g.memory_mib
        dg = (ng - gg if ng > gg else 0) - (old.gpus - gg if old.gpus > gg else 0)
        dc = (nc - gc if nc > gc else 0) - (old.cpu_milli - gc if old.cpu_milli > gc else 0)
        dm = (nm - gm if nm > gm else 0) - (old.memory_mib - gm if old.memory_mib > gm else 0)
        if not (dg or dc or dm):
            return
        cohort_local = self.cohort_local
        for cohort in self._ancestors.get(team, ()):
            ck = (cohort, pool)
            old_c = cohort_usage[ck]
            og, oc, om = old_c.gpus, old_c.cpu_milli, old_c.memory_mib
            ng, nc, nm = og + dg, oc + dc, om + dm
            cohort_usage[ck] = Resources(ng, nc, nm)
            local = cohort_local[ck]
            lg, lc, lm = local.gpus, local.cpu_milli, local.memory_mib
            if lg or lc or lm:  # only usage above the cohort's local quota goes further up
                dg = (ng - lg if ng > lg else 0) - (og - lg if og > lg else 0)
                dc = (nc - lc if nc > lc else 0) - (oc - lc if oc > lc else 0)
                dm = (nm - lm if nm > lm else 0) - (om - lm if om > lm else 0)
                if not (dg or dc or dm):
                    return

    # --- the arithmetic --------------------------------------------------------------------------

    def _parent_available(self, team: str, pool: str) -> Resources:
        """What the team's cohort can give it now (Kueue `available` of the team's parent): the
        root's unused subtree quota, passed down through each cohort's local quota and borrow limit."""
        chain = self._ancestors[team]
        rk = (chain[-1], pool)
        avail = self.subtree_quota[rk] - self.cohort_usage[rk]
        if not self._cohort_limits:
            return avail
        for cohort in reversed(chain[:-1]):
            avail = self._through(cohort, pool, avail)
        return avail

    def _through(self, cohort: str, pool: str, parent_avail: Resources) -> Resources:
        """Kueue `available` of a non-root cohort, given what its parent can give."""
        key = (cohort, pool)
        used = self.cohort_usage[key]
        local = self.cohort_local[key]
        own = self.cohort_quota.get(key)
        if own is not None and own.borrow_limit != _NO_LIMIT:
            stored = self.subtree_quota[key] - local
            used_in_parent = _pos(used - local)
            parent_avail = parent_avail.min(stored - used_in_parent + own.borrow_limit)
        return _pos(local - used) + parent_avail

    def available(self, team: str, pool: str, isolated: bool = False) -> Resources:
        """What the team can take now in the pool without preempting anyone (may be negative).

        `isolated` treats the team as having no cohort (the `static` engine).
        """
        key = (team, pool)
        shared = None if isolated else self._shared.get(key)
        if shared is not None:
            gpus, cpu_milli, memory_mib = self._shared_available(key, shared)
            return Resources(gpus, cpu_milli, memory_mib)
        q = self.quotas.get(key)
        if q is None:
            return ZERO
        used = self.usage[key]
        chain = self._ancestors.get(team)
        if isolated or not chain:
            return q.nominal - used
        parent_avail = self._parent_available(team, pool)
        if q.limited_borrowing:
            used_in_parent = _pos(used - q.guaranteed)
            parent_avail = parent_avail.min(q.lendable - used_in_parent + q.borrow_limit)
        return _pos(q.guaranteed - used) + parent_avail

    def available_parts(self, team: str, pool: str, isolated: bool = False) -> tuple[int, int, int]:
        """`available` as (gpus, cpu_milli, memory_mib), without building a `Resources` in its
        common case: the victim search asks it of every head that fails."""
        key = (team, pool)
        shared = None if isolated else self._shared.get(key)
        if shared is not None:
            return self._shared_available(key, shared)
        avail = self.available(team, pool, isolated)
        return avail.gpus, avail.cpu_milli, avail.memory_mib

    def allows(self, team: str, pool: str, req: Resources, isolated: bool = False) -> bool:
        """`req.fits_in(self.available(team, pool, isolated))`, in integers where `available`
        takes its common case (no `Resources` built: every fit check of every cycle asks it)."""
        key = (team, pool)
        shared = None if isolated else self._shared.get(key)
        if shared is None:
            return req.fits_in(self.available(team, pool, isolated))
        gpus, cpu_milli, memory_mib = self._shared_available(key, shared)
        return req.gpus <= gpus and req.cpu_milli <= cpu_milli and req.memory_mib <= memory_mib

    def _shared_available(self, key: tuple[str, str], shared: _Shared) -> tuple[int, int, int]:
        """`available` in its common case (`_Shared`), per component, in integers: every fit check
        of every cycle comes through here. `_pos(guaranteed − used) + root subtree quota − root
        usage`."""
        used = self.usage[key]
        sq, cu, g = shared.root_quota, self.cohort_usage[shared.root_key], shared.guaranteed
        return (
            (g.gpus - used.gpus if g.gpus > used.gpus else 0) + sq.gpus - cu.gpus,
            (g.cpu_milli - used.cpu_milli if g.cpu_milli > used.cpu_milli else 0)
            + sq.cpu_milli
            - cu.cpu_milli,
            (g.memory_mib - used.memory_mib if g.memory_mib > used.memory_mib else 0)
            + sq.memory_mib
            - cu.memory_mib,
        )

    def potential(self, team: str, pool: str, isolated: bool = False) -> Resources:
        """The most the team may ever hold in the pool, were every other team idle (Kueue
        `potentialAvailable`)."""
        q = self.quotas.get((team, pool))
        if q is None:
            return ZERO
        chain = () if isolated else self._ancestors.get(team, ())
        if not chain:
            return q.nominal
        most = q.guaranteed + self.parent_potential(team, pool)
        if q.limited_borrowing:
            most = most.min(q.nominal + q.borrow_limit)
        return most

    def parent_potential(self, team: str, pool: str) -> Resources:
        """The most the team's cohort may ever hold in the pool, were every team outside it idle
        (Kueue `potentialAvailable` of the parent): the root's subtree quota, passed down through
        each cohort's local quota and borrow limit. ZERO for a team without a cohort."""
        chain = self._ancestors.get(team, ())
        if not chain:
            return ZERO
        most = self.subtree_quota.get((chain[-1], pool), ZERO)
        for cohort in reversed(chain[:-1]):
            key = (cohort, pool)
            most = self.cohort_local.get(key, ZERO) + most
            own = self.cohort_quota.get(key)
            if own is not None and own.borrow_limit != _NO_LIMIT:
                most = most.min(self.subtree_quota[key] + own.borrow_limit)
        return most

    def cohort_idle(self, team: str, pool: str) -> Resources:
        """What the team's cohort has left to give it in the pool: the root's idle capacity, less
        what cohort limits on the way down hold back, plus idle cohort quota kept for the subtree."""
        if not self._ancestors.get(team):
            return ZERO
        return self._parent_available(team, pool)

    def cohort_idle_gpus(self, team: str, pool: str) -> int:
        """`cohort_idle(team, pool).gpus`; without cohort limits, read off the root's quota and
        usage (no `Resources` built: the reason of a head that fails asks it every cycle)."""
        chain = self._ancestors.get(team)
        if not chain:
            return 0
        if self._cohort_limits:
            return self._parent_available(team, pool).gpus
        rk = (chain[-1], pool)
        return self.subtree_quota[rk].gpus - self.cohort_usage[rk].gpus

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
        (Kueue `mayReclaimInHierarchy`). A flat tree never allows it beyond the team's nominal
        quota; nested cohorts do, and so does a sub-cohort's own quota.
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
            # Kueue `LocalAvailable`: the cohort's unlent quota is the subtree's before the parent's.
            remaining -= max(0, getattr(self.cohort_local.get(key, ZERO), component) - usage)
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
