"""The policy file's schema (docs/design.md, contract 1), as pydantic models.

Every model forbids unknown keys: a typo (`cohrt:`) is an error, never silently ignored. Defaults
live here and nowhere else; `docs/policy.md` documents the same values. These models describe the
*file*; `gpucommons.policy.convert` turns a validated file into the frozen `gpucommons.domain` objects.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    WithJsonSchema,
    model_validator,
)

from gpucommons.domain.model import (
    BorrowWithinCohortPolicy,
    BudgetEnforcement,
    IdlePolicy,
    Isolation,
    QueueingStrategy,
    ReclaimPolicy,
    SchedulingMode,
    WithinTeamPolicy,
)
from gpucommons.policy.durations import DURATION_HELP, DURATION_PATTERN, parse_duration

#: Names of pools, teams, cohorts and priority classes. Kubernetes object names are derived from
#: them (lower-cased), so they stay short and free of spaces.
NAME_PATTERN = r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$"
NAME_HELP = (
    "use letters, digits, '-', '_' or '.', starting and ending with a letter or digit, at most 63 characters"
)

Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
Text = Annotated[str, StringConstraints(min_length=1)]
#: Far above any real cluster, far below the engine's UNLIMITED sentinel (2**60): a typo such as
#: `nodes: 40000000000000` is refused instead of turning into "no limit".
MAX_AMOUNT = 10**12


def _not_a_boolean(value: Any) -> Any:
    """YAML reads `yes`/`true` as booleans and pydantic would take them as 1: refuse them as numbers."""
    if isinstance(value, bool):
        raise ValueError(f"must be a number, not {str(value).lower()}")
    return value


NonNegativeInt = Annotated[int, BeforeValidator(_not_a_boolean), Field(ge=0, le=MAX_AMOUNT)]
NonNegativeDecimal = Annotated[
    Decimal, BeforeValidator(_not_a_boolean), Field(ge=0, le=MAX_AMOUNT, allow_inf_nan=False)
]

Duration = Annotated[
    int,
    BeforeValidator(parse_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": DURATION_PATTERN},
                {"type": "integer", "minimum": 0},
            ],
            "description": f"A duration: {DURATION_HELP}.",
        }
    ),
]

#: Signals a task may be asked to stop with. SIGKILL and SIGSTOP cannot be caught, so they would
#: leave no chance to checkpoint: they are not offered.
Signal = Literal["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"]

#: Roles a priority class may be reserved to (docs/identity.md, "Roles").
ClassRole = Literal["platform_admin", "team_admin", "team_member"]

#: Tags of the two shapes a limit may take; they appear in pydantic's error locations and are
#: stripped from the paths we show (see `gpucommons.policy.issues`).
LIMIT_AS_NUMBER = "limit:number"
LIMIT_AS_MAPPING = "limit:mapping"
SPLIT_AS_WORD = "split:word"
SPLIT_AS_PERCENTAGES = "split:percentages"
UNION_TAGS = frozenset({LIMIT_AS_NUMBER, LIMIT_AS_MAPPING, SPLIT_AS_WORD, SPLIT_AS_PERCENTAGES})


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: A Slurm partition or feature name: no spaces, and none of the characters Slurm's own syntax uses
#: between names (`,` lists, `&|[]*()` in constraints, `:` in Gres, `=` in options).
SLURM_WORD_PATTERN = r"^[A-Za-z0-9_.+/-]{1,64}$"
SLURM_WORD_HELP = "use letters, digits and '_', '.', '+', '/', '-' (no spaces), at most 64 characters"
SlurmWord = Annotated[str, StringConstraints(pattern=SLURM_WORD_PATTERN)]


class SlurmPoolSpec(_Section):
    """Which Slurm nodes make up the pool (`commons up --backend slurm`)."""

    partition: SlurmWord | None = Field(
        default=None, description="The Slurm partition whose nodes the pool takes. Absent: any partition."
    )
    features: list[SlurmWord] = Field(
        default_factory=list,
        description="Node features (slurm.conf `Features=`) a node must all carry to be in the pool.",
    )

    @model_validator(mode="after")
    def _names_some_nodes(self) -> SlurmPoolSpec:
        if self.partition is None and not self.features:
            raise ValueError("give a partition, features, or both (an empty `slurm:` would take every node)")
        return self


class PoolSpec(_Section):
    """A homogeneous group of nodes (Kueue: a ResourceFlavor)."""

    name: Name = Field(description="Unique pool name, used in team quotas (`quota: {h100: ...}`).")
    gpu_type: Text = Field(description="The GPU model of every node in the pool, e.g. H100.")
    nodes: NonNegativeInt = Field(description="Number of nodes in the pool.")
    gpus_per_node: NonNegativeInt = Field(description="GPUs per node (0 for a CPU-only pool).")
    price_per_gpu_hour: NonNegativeDecimal = Field(
        default=Decimal(0),
        description="What one GPU-hour costs, in the chargeback currency; read exactly (2.50 stays 2.50).",
    )
    cpus_per_node: NonNegativeDecimal | None = Field(
        default=None, description="CPUs per node; when given, CPU quotas in this pool are checked against it."
    )
    memory_gib_per_node: NonNegativeDecimal | None = Field(
        default=None, description="Memory per node in GiB; when given, memory quotas are checked against it."
    )
    slurm: SlurmPoolSpec | None = Field(
        default=None,
        description="On a Slurm cluster: the partition and/or node features of the pool's nodes. Absent: "
        "the partition named like the pool (a policy with one pool and no `slurm` key takes every node).",
    )


class ClusterSpec(_Section):
    name: Text = Field(description="The cluster's name (shown on the dashboard and on invoices).")
    pools: list[PoolSpec] = Field(min_length=1, description="The node pools; at least one.")


class PriorityClassSpec(_Section):
    """A named priority and its rules (Kueue: a WorkloadPriorityClass)."""

    name: Name = Field(description="Unique class name, given at submit (`--priority training`).")
    value: Annotated[int, BeforeValidator(_not_a_boolean)] = Field(
        ge=-(2**31),
        le=2**31 - 1,
        description="The priority: higher wins (admitted first, may preempt lower). A 32-bit integer, "
        "as Kubernetes priorities are.",
    )
    preemptible: bool = Field(default=True, description="False: tasks of this class are never preempted.")
    grace_period: Duration = Field(
        default=30, description="Time between the stop signal and the kill, to checkpoint. Default 30s."
    )
    max_runtime: Duration | None = Field(
        default=None, description="A task of this class is stopped after this long. Default: no limit."
    )
    min_runtime: Duration = Field(
        default=300,
        description="A task admitted on borrowed GPUs runs at least this long before a borrow-within-cohort "
        "or fair-share preemption may take it. Default 5m.",
    )
    checkpoint_required: bool = Field(
        default=False, description="Refuse tasks of this class that do not declare how they checkpoint."
    )
    budget_exempt: bool = Field(
        default=False, description="Tasks of this class are admitted even when the team's budget is spent."
    )
    signal: Signal = Field(default="SIGTERM", description="The signal that asks a task to stop.")
    teams: list[Name] | None = Field(
        default=None,
        description="Teams whose tasks may use the class. Absent: every team. Others are refused (403).",
    )
    roles: list[ClassRole] | None = Field(
        default=None,
        description="Who may submit tasks of the class: platform_admin, team_admin (of the task's team) "
        "or team_member (of the task's team). Absent: anyone who may submit to the team. Platform admins "
        "pass any roles rule, but not a teams rule.",
    )


class ResourceLimitSpec(_Section):
    """A borrow or lend limit per resource; a resource left out has no limit."""

    gpus: NonNegativeInt | None = Field(default=None, description="GPUs.")
    cpus: NonNegativeDecimal | None = Field(default=None, description="CPUs (0.5 = 500 milli-CPUs).")
    memory_gib: NonNegativeDecimal | None = Field(default=None, description="Memory in GiB.")


def _limit_shape(value: Any) -> str:
    if isinstance(value, ResourceLimitSpec | dict):
        return LIMIT_AS_MAPPING
    return LIMIT_AS_NUMBER


Limit = Annotated[
    Annotated[NonNegativeInt, Tag(LIMIT_AS_NUMBER)] | Annotated[ResourceLimitSpec, Tag(LIMIT_AS_MAPPING)],
    Discriminator(_limit_shape),
]


class QuotaSpec(_Section):
    """What a team is guaranteed in one pool, and how far it borrows and lends."""

    gpus: NonNegativeInt = Field(default=0, description="Nominal (guaranteed) GPUs.")
    cpus: NonNegativeDecimal = Field(default=Decimal(0), description="Nominal CPUs.")
    memory_gib: NonNegativeDecimal = Field(default=Decimal(0), description="Nominal memory in GiB.")
    borrow_limit: Limit | None = Field(
        default=None,
        description="How much above nominal the team may borrow from others' idle quota: a number of GPUs "
        "or {gpus, cpus, memory_gib}. Absent: unlimited.",
    )
    lend_limit: Limit | None = Field(
        default=None,
        description="How much of its idle nominal quota the team lends: a number of GPUs or "
        "{gpus, cpus, memory_gib}; at most the nominal. Absent: all of it.",
    )


class CohortSpec(_Section):
    """A group of teams (and child cohorts) that lend each other idle quota, optionally with quota of
    its own (Kueue: a Cohort's `spec.resourceGroups`)."""

    name: Name = Field(description="Unique cohort name.")
    parent: Name | None = Field(default=None, description="The enclosing cohort; null for a root cohort.")
    quotas: dict[str, QuotaSpec] = Field(
        default_factory=dict,
        description="The cohort's own quota per pool, keyed by pool name: capacity its teams share first, "
        "on top of what they lend each other. borrow_limit caps what the cohort's subtree borrows from its "
        "parent; lend_limit caps what the subtree lends to the parent (its own quota plus what its "
        "members lend); both only on a cohort with a parent.",
    )


class PreemptionSpec(_Section):
    """Kueue's three preemption knobs, one-to-one; the defaults are Kueue's (never)."""

    reclaim: ReclaimPolicy = Field(
        default=ReclaimPolicy.NEVER,
        description="Take back lent quota by preempting borrowers (Kueue reclaimWithinCohort).",
    )
    borrow_within_cohort: BorrowWithinCohortPolicy = Field(
        default=BorrowWithinCohortPolicy.NEVER,
        description="While borrowing, preempt lower-priority tasks of other borrowers "
        "(Kueue borrowWithinCohort.policy).",
    )
    within_team: WithinTeamPolicy = Field(
        default=WithinTeamPolicy.NEVER,
        description="Preempt the team's own tasks (Kueue withinClusterQueue).",
    )


class BudgetSpec(_Section):
    monthly: NonNegativeDecimal = Field(description="Monthly budget in the chargeback currency.")
    enforce: BudgetEnforcement = Field(
        default=BudgetEnforcement.SOFT,
        description="soft: warn when spent; hard: hold new tasks (except budget-exempt classes).",
    )


class TeamSpec(_Section):
    """A tenant: members, a cohort, quotas per pool and how it preempts."""

    name: Name = Field(description="Unique team name (also its namespace and workspace).")
    groups: list[Text] = Field(
        default_factory=list, description="Directory groups whose members are members of the team."
    )
    admin_groups: list[Text] = Field(
        default_factory=list, description="Directory groups whose members administer the team."
    )
    cohort: Name | None = Field(
        default=None, description="The cohort the team lends to and borrows from. Default: `cluster`."
    )
    quota: dict[str, QuotaSpec] = Field(
        default_factory=dict,
        description="Quota per pool, keyed by pool name; pools are tried in the order listed.",
    )
    preemption: PreemptionSpec = Field(default_factory=PreemptionSpec, description="Preemption rules.")
    fair_share_weight: NonNegativeDecimal = Field(
        default=Decimal(1), description="Weight in fair-share mode (a larger weight gets a larger share)."
    )
    isolation: Isolation = Field(
        default=Isolation.SHARED,
        description="shared, or dedicated: the team's own nodes, never lent or borrowed.",
    )
    budget: BudgetSpec | None = Field(default=None, description="Optional monthly budget.")


class SchedulingSpec(_Section):
    mode: SchedulingMode = Field(
        default=SchedulingMode.CLASSIC, description="classic (Kueue's classic preemption) or fair_share."
    )
    queueing: QueueingStrategy = Field(
        default=QueueingStrategy.BEST_EFFORT_FIFO,
        description="best_effort_fifo (a task that does not fit lets the next one try) or strict_fifo.",
    )
    checkpoint_aware: bool = Field(
        default=True, description="Among equal-priority victims, preempt the one with the least unsaved work."
    )
    usage_half_life: Duration = Field(
        default=0, description="Fair-share usage decay half-life; 0 counts only current usage."
    )


class IdentitySpec(_Section):
    admin_groups: list[Text] = Field(default_factory=list, description="Directory groups of platform admins.")
    finance_groups: list[Text] = Field(
        default_factory=list, description="Directory groups that read every team's usage and costs."
    )


def _split_shape(value: Any) -> str:
    return SPLIT_AS_PERCENTAGES if isinstance(value, dict) else SPLIT_AS_WORD


AdminSplitSpec = Annotated[
    Annotated[Literal["weighted", "even"], Tag(SPLIT_AS_WORD)]
    | Annotated[dict[str, NonNegativeDecimal], Tag(SPLIT_AS_PERCENTAGES)],
    Discriminator(_split_shape),
]


class AdminCostSpec(_Section):
    monthly: NonNegativeDecimal = Field(
        default=Decimal(0), description="Monthly cost of running the platform (people, licences)."
    )
    split: AdminSplitSpec = Field(
        default="weighted",
        description="weighted (by direct cost), even, or fixed percentages {team: percent} summing to 100.",
    )


class ChargebackSpec(_Section):
    currency: Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")] = Field(
        default="USD", description="ISO 4217 currency code of prices and invoices."
    )
    idle: IdlePolicy = Field(
        default=IdlePolicy.USAGE,
        description="Who pays for idle GPUs: usage (by GPU-hours used), quota (by unused nominal quota), "
        "even, or platform (nobody: the platform keeps it).",
    )
    admin_cost: AdminCostSpec = Field(default_factory=AdminCostSpec, description="Platform running cost.")
    borrowed_rate: Decimal = Field(
        default=Decimal(1),
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="Price multiplier for GPU-hours above nominal quota, in (0, 1].",
    )


class PolicyFile(_Section):
    """A GPU Commons policy file (commons.yaml)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        title="GPU Commons policy (commons.yaml)",
    )

    cluster: ClusterSpec = Field(description="The cluster and its node pools.")
    priority_classes: list[PriorityClassSpec] = Field(
        default_factory=lambda: [PriorityClassSpec(name="default", value=0)],
        min_length=1,
        description="Priority classes; higher value wins. Default: one class `default` with value 0.",
    )
    default_priority_class: Name | None = Field(
        default=None,
        description="Class of a task submitted without one. Default: the class with the lowest value.",
    )
    cohorts: list[CohortSpec] = Field(
        default_factory=list,
        description="Cohorts (may nest). Teams that name none are in the implicit cohort `cluster`.",
    )
    teams: list[TeamSpec] = Field(description="The teams (tenants).")
    scheduling: SchedulingSpec = Field(default_factory=SchedulingSpec, description="Admission settings.")
    identity: IdentitySpec = Field(default_factory=IdentitySpec, description="Platform-wide roles.")
    chargeback: ChargebackSpec = Field(default_factory=ChargebackSpec, description="How costs are split.")
