"""A validated policy file → the frozen `gpucommons.domain` objects the rest of the system uses.

Units change here and only here: CPUs → milli-CPUs, GiB → MiB, durations → seconds, an absent limit
→ `UNLIMITED` in that component. A dedicated team neither lends nor borrows, so its limits are zero.
"""

from __future__ import annotations

from decimal import Decimal

from gpucommons.domain.model import (
    DEFAULT_COHORT,
    AdminSplit,
    Budget,
    ChargebackConfig,
    Cohort,
    IdentityConfig,
    Isolation,
    Policy,
    Pool,
    PreemptionPolicy,
    PriorityClass,
    Quota,
    SchedulingConfig,
    SlurmNodeMatch,
    Team,
)
from gpucommons.domain.resources import UNLIMITED, ZERO, Resources
from gpucommons.policy.schema import (
    PolicyFile,
    PoolSpec,
    PriorityClassSpec,
    QuotaSpec,
    ResourceLimitSpec,
    TeamSpec,
)

MILLI_PER_CPU = 1000
MIB_PER_GIB = 1024


def cpu_milli(cpus: Decimal) -> int:
    """CPUs → milli-CPUs. Exact: the cross-checks refuse anything finer than 1m first."""
    return int(cpus * MILLI_PER_CPU)


def memory_mib(gib: Decimal) -> int:
    """GiB → MiB. Exact: the cross-checks refuse anything finer than 1 MiB first."""
    return int(gib * MIB_PER_GIB)


def nominal_resources(quota: QuotaSpec) -> Resources:
    return Resources(quota.gpus, cpu_milli(quota.cpus), memory_mib(quota.memory_gib))


def limit_resources(limit: int | ResourceLimitSpec | None) -> Resources:
    """A limit as written → Resources; a number is GPUs, every component left out is UNLIMITED."""
    if limit is None:
        return Resources(UNLIMITED, UNLIMITED, UNLIMITED)
    if isinstance(limit, int):
        return Resources(limit, UNLIMITED, UNLIMITED)
    return Resources(
        UNLIMITED if limit.gpus is None else limit.gpus,
        UNLIMITED if limit.cpus is None else cpu_milli(limit.cpus),
        UNLIMITED if limit.memory_gib is None else memory_mib(limit.memory_gib),
    )


def pool_capacity_declared(pool: PoolSpec) -> tuple[bool, bool]:
    """Whether the pool declares its CPUs and its memory (only then are those quotas checked)."""
    return pool.cpus_per_node is not None, pool.memory_gib_per_node is not None


def _pool(spec: PoolSpec) -> Pool:
    return Pool(
        name=spec.name,
        gpu_type=spec.gpu_type,
        nodes=spec.nodes,
        gpus_per_node=spec.gpus_per_node,
        price_per_gpu_hour=spec.price_per_gpu_hour,
        cpu_milli_per_node=cpu_milli(spec.cpus_per_node or Decimal(0)),
        memory_mib_per_node=memory_mib(spec.memory_gib_per_node or Decimal(0)),
        slurm=None
        if spec.slurm is None
        else SlurmNodeMatch(partition=spec.slurm.partition, features=tuple(spec.slurm.features)),
    )


def _priority_class(spec: PriorityClassSpec) -> PriorityClass:
    return PriorityClass(
        name=spec.name,
        value=spec.value,
        preemptible=spec.preemptible,
        grace_period_s=spec.grace_period,
        max_runtime_s=spec.max_runtime,
        checkpoint_required=spec.checkpoint_required,
        min_runtime_s=spec.min_runtime,
        budget_exempt=spec.budget_exempt,
        signal=spec.signal,
        teams=tuple(dict.fromkeys(spec.teams or ())),
        roles=tuple(dict.fromkeys(spec.roles or ())),
    )


def _quota(pool: str, q: QuotaSpec) -> Quota:
    return Quota(
        pool=pool,
        nominal=nominal_resources(q),
        borrow_limit=limit_resources(q.borrow_limit),
        lend_limit=limit_resources(q.lend_limit),
    )


def _team(spec: TeamSpec) -> Team:
    dedicated = spec.isolation is Isolation.DEDICATED
    quotas = tuple(
        Quota(pool, nominal_resources(q), ZERO, ZERO) if dedicated else _quota(pool, q)
        for pool, q in spec.quota.items()
    )
    return Team(
        name=spec.name,
        quotas=quotas,
        cohort=spec.cohort or DEFAULT_COHORT,
        groups=tuple(spec.groups),
        admin_groups=tuple(spec.admin_groups),
        preemption=PreemptionPolicy(
            reclaim=spec.preemption.reclaim,
            borrow_within_cohort=spec.preemption.borrow_within_cohort,
            within_team=spec.preemption.within_team,
        ),
        fair_share_weight=spec.fair_share_weight,
        isolation=spec.isolation,
        budget=None if spec.budget is None else Budget(spec.budget.monthly, spec.budget.enforce),
    )


def default_class_name(policy: PolicyFile) -> str:
    """The declared default, else the class with the lowest value (the first listed on a tie)."""
    if policy.default_priority_class is not None:
        return policy.default_priority_class
    return min(policy.priority_classes, key=lambda c: c.value).name


def cohorts_of(policy: PolicyFile) -> tuple[Cohort, ...]:
    """Declared cohorts in file order, then the implicit `cluster` cohort when something needs it."""
    declared = tuple(
        Cohort(c.name, c.parent, tuple(_quota(pool, q) for pool, q in c.quotas.items()))
        for c in policy.cohorts
    )
    names = {c.name for c in declared}
    needed = (
        not declared
        or any((t.cohort or DEFAULT_COHORT) == DEFAULT_COHORT for t in policy.teams)
        or any(c.parent == DEFAULT_COHORT for c in declared)
    )
    if DEFAULT_COHORT not in names and needed:
        declared = (*declared, Cohort(DEFAULT_COHORT))
    return declared


def to_domain(policy: PolicyFile) -> Policy:
    """The domain `Policy` of a file that passed the schema and every cross-check."""
    chargeback = policy.chargeback
    split = chargeback.admin_cost.split
    if isinstance(split, dict):
        admin_split = AdminSplit.FIXED
        percentages = tuple((team, Decimal(percent)) for team, percent in split.items())
    else:
        admin_split = AdminSplit(split)
        percentages = ()
    return Policy(
        cluster_name=policy.cluster.name,
        pools=tuple(_pool(p) for p in policy.cluster.pools),
        priority_classes=tuple(_priority_class(c) for c in policy.priority_classes),
        default_priority_class=default_class_name(policy),
        teams=tuple(_team(t) for t in policy.teams),
        cohorts=cohorts_of(policy),
        scheduling=SchedulingConfig(
            mode=policy.scheduling.mode,
            queueing=policy.scheduling.queueing,
            checkpoint_aware=policy.scheduling.checkpoint_aware,
            usage_half_life_s=policy.scheduling.usage_half_life,
        ),
        identity=IdentityConfig(
            admin_groups=tuple(policy.identity.admin_groups),
            finance_groups=tuple(policy.identity.finance_groups),
        ),
        chargeback=ChargebackConfig(
            currency=chargeback.currency,
            idle=chargeback.idle,
            admin_monthly=chargeback.admin_cost.monthly,
            admin_split=admin_split,
            admin_percentages=percentages,
            borrowed_rate=chargeback.borrowed_rate,
        ),
    )
