"""The governance model: pools, priority classes, cohorts, teams and their quotas.

These are the policy file's meaning, free of YAML and validation (that is `gpucommons.policy`).
Every object is frozen: a policy change is a new `Policy`, never an edit in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum

from gpucommons.domain.resources import ALL_UNLIMITED, ZERO, Resources

#: The name of the cohort that holds every team that names none (docs/design.md: "the cluster").
DEFAULT_COHORT = "cluster"


class ReclaimPolicy(StrEnum):
    """Kueue `reclaimWithinCohort`: may a team take back its lent quota by preempting borrowers?"""

    NEVER = "never"
    LOWER_PRIORITY = "lower_priority"
    ANY = "any"


class BorrowWithinCohortPolicy(StrEnum):
    """Kueue `borrowWithinCohort.policy`: may a borrowing team preempt other borrowers?"""

    NEVER = "never"
    LOWER_PRIORITY = "lower_priority"


class WithinTeamPolicy(StrEnum):
    """Kueue `withinClusterQueue`: may a task preempt its own team's tasks?"""

    NEVER = "never"
    LOWER_PRIORITY = "lower_priority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "lower_or_newer_equal_priority"


class Isolation(StrEnum):
    SHARED = "shared"
    DEDICATED = "dedicated"


class BudgetEnforcement(StrEnum):
    SOFT = "soft"
    HARD = "hard"


class SchedulingMode(StrEnum):
    CLASSIC = "classic"
    FAIR_SHARE = "fair_share"


class QueueingStrategy(StrEnum):
    BEST_EFFORT_FIFO = "best_effort_fifo"
    STRICT_FIFO = "strict_fifo"


class IdlePolicy(StrEnum):
    USAGE = "usage"
    QUOTA = "quota"
    EVEN = "even"
    PLATFORM = "platform"


class AdminSplit(StrEnum):
    WEIGHTED = "weighted"
    EVEN = "even"
    FIXED = "fixed"


@dataclass(frozen=True, slots=True)
class SlurmNodeMatch:
    """Which nodes of a Slurm cluster make up a pool: those in `partition` (any, when None) that carry
    every one of `features`. The policy's optional `cluster.pools[].slurm` (docs/policy.md)."""

    partition: str | None = None
    features: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Pool:
    """A homogeneous group of nodes (Kueue: a ResourceFlavor)."""

    name: str
    gpu_type: str
    nodes: int
    gpus_per_node: int
    price_per_gpu_hour: Decimal = Decimal(0)
    cpu_milli_per_node: int = 0
    memory_mib_per_node: int = 0
    #: Its nodes on a Slurm cluster; None = the default rule of `backends.slurm.inventory`.
    slurm: SlurmNodeMatch | None = None

    @property
    def capacity(self) -> Resources:
        return Resources(
            self.nodes * self.gpus_per_node,
            self.nodes * self.cpu_milli_per_node,
            self.nodes * self.memory_mib_per_node,
        )

    @property
    def node_capacity(self) -> Resources:
        return Resources(self.gpus_per_node, self.cpu_milli_per_node, self.memory_mib_per_node)


@dataclass(frozen=True, slots=True)
class PriorityClass:
    """A named priority with its rules. Durations are whole seconds."""

    name: str
    value: int
    preemptible: bool = True
    grace_period_s: int = 30
    max_runtime_s: int | None = None
    checkpoint_required: bool = False
    min_runtime_s: int = 300
    budget_exempt: bool = False
    signal: str = "SIGTERM"
    #: Teams whose tasks may use the class; empty: every team.
    teams: tuple[str, ...] = ()
    #: Roles (`platform_admin`, `team_admin`, `team_member`) one of which the submitter must hold
    #: for the task's team; empty: anyone who may submit to the team.
    roles: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Quota:
    """What a team is guaranteed in one pool, and how far it may borrow and lend.

    `borrow_limit` and `lend_limit` hold `UNLIMITED` in a component the policy left open
    (absent borrow limit = unlimited; absent lend limit = lends all of its idle nominal quota).
    """

    pool: str
    nominal: Resources
    borrow_limit: Resources = ALL_UNLIMITED
    lend_limit: Resources = ALL_UNLIMITED

    @property
    def max_usage(self) -> Resources:
        """The most the team may ever hold in this pool: nominal + borrow limit (capped at UNLIMITED)."""
        total = self.nominal + self.borrow_limit
        return total.min(ALL_UNLIMITED)

    @property
    def lendable(self) -> Resources:
        """How much of its nominal quota the team may lend when idle."""
        return self.lend_limit.min(self.nominal)

    @property
    def reserved(self) -> Resources:
        """`nominal − lend_limit`: what the team always keeps to itself."""
        return (self.nominal - self.lendable).clamp_nonnegative()


@dataclass(frozen=True, slots=True)
class Cohort:
    """A group of teams (and child cohorts) that lend to each other.

    `quotas` is the cohort's own quota per pool (Kueue: a Cohort's `spec.resourceGroups`): capacity
    shared by the cohort's subtree on top of what its members lend. Its limits apply towards the
    parent: `borrow_limit` caps what the subtree takes from outside beyond what it stores there,
    `lend_limit` caps what the subtree lends out (of its own quota plus what its members lend).
    """

    name: str
    parent: str | None = None
    quotas: tuple[Quota, ...] = ()

    def quota(self, pool: str) -> Quota | None:
        for q in self.quotas:
            if q.pool == pool:
                return q
        return None


@dataclass(frozen=True, slots=True)
class PreemptionPolicy:
    """Kueue's three preemption knobs; the defaults are Kueue's (never preempt)."""

    reclaim: ReclaimPolicy = ReclaimPolicy.NEVER
    borrow_within_cohort: BorrowWithinCohortPolicy = BorrowWithinCohortPolicy.NEVER
    within_team: WithinTeamPolicy = WithinTeamPolicy.NEVER


@dataclass(frozen=True, slots=True)
class Budget:
    monthly: Decimal
    enforce: BudgetEnforcement = BudgetEnforcement.SOFT


@dataclass(frozen=True, slots=True)
class Team:
    """A tenant. `quotas` are in the order the team lists its pools, which is the order tried."""

    name: str
    quotas: tuple[Quota, ...]
    cohort: str = DEFAULT_COHORT
    groups: tuple[str, ...] = ()
    admin_groups: tuple[str, ...] = ()
    preemption: PreemptionPolicy = PreemptionPolicy()
    fair_share_weight: Decimal = Decimal(1)
    isolation: Isolation = Isolation.SHARED
    budget: Budget | None = None

    def quota(self, pool: str) -> Quota | None:
        for q in self.quotas:
            if q.pool == pool:
                return q
        return None

    def nominal(self, pool: str) -> Resources:
        q = self.quota(pool)
        return q.nominal if q is not None else ZERO


@dataclass(frozen=True, slots=True)
class SchedulingConfig:
    mode: SchedulingMode = SchedulingMode.CLASSIC
    queueing: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    checkpoint_aware: bool = True
    #: Fair-share usage decay half-life in seconds (0 = only current usage counts, Kueue's default).
    usage_half_life_s: int = 0


@dataclass(frozen=True, slots=True)
class IdentityConfig:
    admin_groups: tuple[str, ...] = ()
    finance_groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ChargebackConfig:
    currency: str = "USD"
    idle: IdlePolicy = IdlePolicy.USAGE
    admin_monthly: Decimal = Decimal(0)
    admin_split: AdminSplit = AdminSplit.WEIGHTED
    #: With `AdminSplit.FIXED`: team name -> percent; the percents sum to 100.
    admin_percentages: tuple[tuple[str, Decimal], ...] = ()
    borrowed_rate: Decimal = Decimal(1)


@dataclass(frozen=True, slots=True)
class Policy:
    """The whole governance policy of one cluster."""

    cluster_name: str
    pools: tuple[Pool, ...]
    priority_classes: tuple[PriorityClass, ...]
    default_priority_class: str
    teams: tuple[Team, ...]
    cohorts: tuple[Cohort, ...] = (Cohort(DEFAULT_COHORT),)
    scheduling: SchedulingConfig = SchedulingConfig()
    identity: IdentityConfig = IdentityConfig()
    chargeback: ChargebackConfig = ChargebackConfig()
    _index: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        idx = self._index
        for p in self.pools:
            idx["pool:" + p.name] = p
        for c in self.priority_classes:
            idx["class:" + c.name] = c
        for t in self.teams:
            idx["team:" + t.name] = t
        for k in self.cohorts:
            idx["cohort:" + k.name] = k

    def pool(self, name: str) -> Pool:
        p = self._index.get("pool:" + name)
        if not isinstance(p, Pool):
            raise KeyError(f"unknown pool {name!r}")
        return p

    def team(self, name: str) -> Team:
        t = self._index.get("team:" + name)
        if not isinstance(t, Team):
            raise KeyError(f"unknown team {name!r}")
        return t

    def priority_class(self, name: str | None = None) -> PriorityClass:
        c = self._index.get("class:" + (name or self.default_priority_class))
        if not isinstance(c, PriorityClass):
            raise KeyError(f"unknown priority class {name!r}")
        return c

    def cohort(self, name: str) -> Cohort:
        c = self._index.get("cohort:" + name)
        if not isinstance(c, Cohort):
            raise KeyError(f"unknown cohort {name!r}")
        return c

    def has_team(self, name: str) -> bool:
        return ("team:" + name) in self._index

    def has_pool(self, name: str) -> bool:
        return ("pool:" + name) in self._index

    @property
    def team_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.teams)
