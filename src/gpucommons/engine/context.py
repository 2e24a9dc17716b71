"""What one cycle knows besides the state: the clock, the switches, the what-if log, lookups."""

from __future__ import annotations

from decimal import Decimal

from gpucommons.domain.model import (
    BorrowWithinCohortPolicy,
    Pool,
    PriorityClass,
    ReclaimPolicy,
    Team,
    WithinTeamPolicy,
)
from gpucommons.domain.resources import ZERO, Resources
from gpucommons.engine.state import ClusterState
from gpucommons.engine.types import EngineConfig, NodeSlice, Placement, RunningTask
from gpucommons.engine.whatif import WhatIf

#: Min runtime for a task whose class is unknown to the policy (docs/design.md: default 5 minutes).
DEFAULT_MIN_RUNTIME_S = 300


class TeamRules:
    """A team's preemption rules as the flags preemption tests (`Team.preemption`'s enums, read
    once: a compiled cycle asks them several times for every head that fails, and the policy's
    classes are not compiled)."""

    __slots__ = ("borrows_within_cohort", "newer_equal", "reclaim_lower_only", "reclaims", "within_team")

    def __init__(self, team: Team) -> None:
        rules = team.preemption
        #: `within_team` is not `never`: own tasks of lower priority may yield.
        self.within_team: bool = rules.within_team is not WithinTeamPolicy.NEVER
        #: `within_team` is `lower_or_newer_equal_priority`.
        self.newer_equal: bool = rules.within_team is WithinTeamPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
        #: `reclaim` is not `never`.
        self.reclaims: bool = rules.reclaim is not ReclaimPolicy.NEVER
        #: `reclaim` is `lower_priority`.
        self.reclaim_lower_only: bool = rules.reclaim is ReclaimPolicy.LOWER_PRIORITY
        #: `borrow_within_cohort` is not `never`.
        self.borrows_within_cohort: bool = rules.borrow_within_cohort is not BorrowWithinCohortPolicy.NEVER


class PolicyLookups:
    """Name lookups that depend on the policy alone: built by the first cycle under a policy and
    kept by the state until the policy changes (a cycle used to build them every time)."""

    __slots__ = (
        "never_preempted_classes",
        "pools",
        "root_teams",
        "rules",
        "team_index",
        "team_names",
        "teams",
    )

    def __init__(self, state: ClusterState) -> None:
        policy = state.policy
        self.teams: dict[str, Team] = {t.name: t for t in policy.teams}
        self.rules: dict[str, TeamRules] = {t.name: TeamRules(t) for t in policy.teams}
        #: `Policy.team_names`, which builds its tuple on every call (and is not compiled).
        self.team_names: tuple[str, ...] = policy.team_names
        self.pools: dict[str, Pool] = {p.name: p for p in policy.pools}
        self.root_teams: dict[str, list[str]] = {}
        for team in policy.teams:
            root = state.quota.root(team.name)
            if root is not None:
                self.root_teams.setdefault(root, []).append(team.name)
        self.team_index = {t.name: i for i, t in enumerate(policy.teams)}
        self.never_preempted_classes = frozenset(c.name for c in policy.priority_classes if not c.preemptible)


class Cycle:
    """One scheduling cycle over a state. Everything it changes goes through `whatif`."""

    def __init__(self, state: ClusterState, now: float, config: EngineConfig) -> None:
        self.state = state
        self.now = now
        self.config = config
        self.policy = state.policy
        self.quota = state.quota
        self.whatif = WhatIf(state)
        #: The `static` engine: every team on its own, confined to its nominal quota.
        self.isolated = config.static
        self.checkpoint_aware = config.checkpoint_aware and self.policy.scheduling.checkpoint_aware
        #: Victims chosen in this cycle, and tasks admitted in it: neither is a candidate again.
        self.taken: set[str] = set()
        lookups = state.cycle_lookups
        if not isinstance(lookups, PolicyLookups):
            lookups = state.cycle_lookups = PolicyLookups(state)
        self._teams = lookups.teams
        self._rules = lookups.rules
        #: The policy's teams in order.
        self.team_names = lookups.team_names
        self._pools = lookups.pools
        self._root_teams = lookups.root_teams
        self._team_index = lookups.team_index
        #: Classes whose tasks are never victims, whatever a request says.
        self.never_preempted_classes = lookups.never_preempted_classes
        #: Tasks preempted before (min-runtime protection looks at them).
        self.preempted_before = state.preempted_before()
        #: `most_ever` per (team, pool, isolated, node placement) and `pools_for`: they depend on
        #: the policy alone, and a cycle asks them for every head it examines, so the state keeps
        #: them from cycle to cycle (and forgets them with the policy).
        self._most_ever = state.most_ever_cache.setdefault((self.isolated, config.node_placement), {})
        self._pools_for = state.pools_cache
        self._team_pools = state.team_pools_cache
        #: Usage the cycle itself added per (team, pool): admissions, and requests held for
        #: preemptors or deferred tasks. Kueue chooses victims on the snapshot taken before the
        #: cycle's admissions, so a team is a borrower only by what it held before them.
        self.added: dict[tuple[str, str], Resources] = {}
        #: Cohorts above a team the cycle added usage to (`cohort_usage_before` must recount them).
        self.added_cohorts: set[str] = set()

    # --- lookups ---------------------------------------------------------------------------------

    def team(self, name: str) -> Team:
        return self._teams[name]

    def rules(self, team: str) -> TeamRules:
        """The team's preemption rules as flags."""
        return self._rules[team]

    def team_index(self, name: str) -> int:
        return self._team_index[name]

    def pool(self, name: str) -> Pool | None:
        return self._pools.get(name)

    def gpu_type(self, pool: str) -> str:
        p = self._pools.get(pool)
        return p.gpu_type if p is not None else pool

    def root(self, team: str) -> str | None:
        return None if self.isolated else self.quota.root(team)

    def cohort_members(self, team: str) -> list[str]:
        """Teams that share the team's root cohort (itself included); just itself when isolated."""
        root = self.root(team)
        return self._root_teams.get(root, [team]) if root is not None else [team]

    def priority_class(self, name: str) -> PriorityClass | None:
        return self.state.priority_class(name)

    def min_runtime_s(self, rt: RunningTask) -> int:
        cls = self.priority_class(rt.task.priority_class)
        return cls.min_runtime_s if cls is not None else DEFAULT_MIN_RUNTIME_S

    def partition_gpus(self, team: str, pool: str) -> int:
        """GPUs on the nodes the team may land on in the pool (its own nodes if dedicated)."""
        return self.state.nodes.partition_capacity(team, pool)

    def most_ever(self, team: str, pool: str) -> Resources:
        """The most the team may ever hold in the pool, were every other team idle: its quota
        potential, and with node placement no more GPUs than the nodes it may land on."""
        key = (team, pool)
        most = self._most_ever.get(key)
        if most is None:
            most = self.quota.potential(team, pool, self.isolated)
            if self.config.node_placement and self.pool(pool) is not None:
                gpus = min(most.gpus, self.partition_gpus(team, pool))
                most = Resources(gpus, most.cpu_milli, most.memory_mib)
            self._most_ever[key] = most
        return most

    def weight_milli(self, team: str) -> int:
        return int(self._teams[team].fair_share_weight * Decimal(1000))

    def pools_for(self, team: str, requested: tuple[str, ...]) -> tuple[list[str], list[str]]:
        """(pools to try in order, requested pools the team cannot use). Shared between calls:
        callers must not change the lists."""
        if not requested:
            every = self._team_pools.get(team)
            if every is None:
                every = self._team_pools[team] = (list(self.quota.team_pools.get(team, ())), [])
            return every
        key = (team, requested)
        found = self._pools_for.get(key)
        if found is None:
            team_pools = self.quota.team_pools.get(team, ())
            usable = [p for p in requested if p in team_pools]
            found = (usable, [p for p in requested if p not in team_pools])
            self._pools_for[key] = found
        return found

    # --- fit -------------------------------------------------------------------------------------

    def fits(
        self, team: str, pool: str, req: Resources, allow_borrowing: bool = True
    ) -> tuple[NodeSlice, ...] | None:
        """Where the request would go now (GPUs, or () without node placement); None if it does not fit."""
        q = self.quota.quota(team, pool)
        if q is None:
            return None
        if not self.quota.allows(team, pool, req, self.isolated):
            return None
        if not allow_borrowing and not self.within_nominal(team, pool, req):
            return None
        return self.place(team, pool, req)

    def place(self, team: str, pool: str, req: Resources) -> tuple[NodeSlice, ...] | None:
        """`fits` for a request its quota is known to allow (borrowing allowed): where it goes."""
        if self.config.node_placement:
            return self.state.nodes.find(team, pool, req.gpus, self.config.placement is Placement.SPREAD)
        return ()

    def is_borrowing(self, team: str, pool: str, components: Resources) -> bool:
        """Whether the team is above nominal quota in a component named in `components`, counting
        what it held before this cycle (less any victim removed in the view), not the cycle's own
        admissions and holds: a task admitted this cycle is no candidate, so it must not make an
        older task of its team look borrowed."""
        q = self.quota.quota(team, pool)
        if q is None:
            return False
        u = self.quota.usage[(team, pool)]
        g, c, m = u.gpus, u.cpu_milli, u.memory_mib
        added = self.added.get((team, pool))
        if added is not None:  # in integers: the victim search asks it of every team it reaches
            g, c, m = g - added.gpus, c - added.cpu_milli, m - added.memory_mib
        n = q.nominal
        return (
            (components.gpus > 0 and g > n.gpus)
            or (components.cpu_milli > 0 and c > n.cpu_milli)
            or (components.memory_mib > 0 and m > n.memory_mib)
        )

    def add_held(self, team: str, pool: str, req: Resources, placement: tuple[NodeSlice, ...]) -> None:
        """Hold `req` for the rest of the cycle (an admission, or a preemptor's or deferred task's
        reservation), and remember it as the cycle's own addition."""
        self.whatif.hold(team, pool, req, placement)
        key = (team, pool)
        self.added[key] = self.added.get(key, Resources()) + req
        self.added_cohorts.update(self.quota.ancestors(team))

    def cohort_usage_before(self, cohort: str, pool: str) -> Resources:
        """A cohort's usage as `is_borrowing` counts a team's: without this cycle's own admissions and
        holds (less any victim removed in the view). Recounted from its children only when the
        cycle added usage below it; Kueue's `accumulateFromChild` rule."""
        tree = self.quota
        if cohort not in self.added_cohorts:
            return tree.cohort_usage.get((cohort, pool), ZERO)
        total = ZERO
        for team in tree.child_teams.get(cohort, ()):
            q = tree.quota(team, pool)
            if q is not None:
                used = tree.usage[(team, pool)] - self.added.get((team, pool), ZERO)
                total = total + (used - q.guaranteed).clamp_nonnegative()
        for child in tree.child_cohorts.get(cohort, ()):
            local = tree.cohort_local.get((child, pool), ZERO)
            total = total + (self.cohort_usage_before(child, pool) - local).clamp_nonnegative()
        return total

    def cohort_within_quota(self, cohort: str, pool: str, components: Resources) -> bool:
        """Kueue `IsWithinNominalInResources` for a cohort, on the usage before this cycle: its
        subtree uses no more than its subtree quota in every component named in `components`."""
        u = self.cohort_usage_before(cohort, pool)
        q = self.quota.subtree_quota.get((cohort, pool), ZERO)
        return not (
            (components.gpus > 0 and u.gpus > q.gpus)
            or (components.cpu_milli > 0 and u.cpu_milli > q.cpu_milli)
            or (components.memory_mib > 0 and u.memory_mib > q.memory_mib)
        )

    def within_nominal(self, team: str, pool: str, req: Resources) -> bool:
        q = self.quota.quota(team, pool)
        if q is None:
            return False
        # `(usage + req).fits_in(nominal)` in integers: every head's key asks it.
        u, n = self.quota.usage[(team, pool)], q.nominal
        return (
            u.gpus + req.gpus <= n.gpus
            and u.cpu_milli + req.cpu_milli <= n.cpu_milli
            and u.memory_mib + req.memory_mib <= n.memory_mib
        )

    def borrowed_after(self, team: str, pool: str, req: Resources) -> Resources:
        q = self.quota.quota(team, pool)
        if q is None:
            return req
        return (self.quota.usage[(team, pool)] + req - q.nominal).clamp_nonnegative().min(req)

    # --- what-if ---------------------------------------------------------------------------------

    def hold(self, team: str, pool: str, req: Resources, placement: tuple[NodeSlice, ...]) -> None:
        self.whatif.hold(team, pool, req, placement)

    def release(self, rt: RunningTask) -> None:
        self.whatif.release(rt.task.team, rt.admission.pool, rt.task.resources, rt.admission.placement)

    def restore(self, rt: RunningTask) -> None:
        self.whatif.hold(rt.task.team, rt.admission.pool, rt.task.resources, rt.admission.placement)
