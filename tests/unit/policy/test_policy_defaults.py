"""The optional sections and keys take the defaults docs/policy.md documents."""

from __future__ import annotations

from decimal import Decimal

from policy_helpers import MINIMAL

from gpucommons.domain import (
    ALL_UNLIMITED,
    DEFAULT_COHORT,
    UNLIMITED,
    AdminSplit,
    BorrowWithinCohortPolicy,
    Cohort,
    IdlePolicy,
    Isolation,
    QueueingStrategy,
    ReclaimPolicy,
    Resources,
    SchedulingMode,
    WithinTeamPolicy,
)
from gpucommons.policy import parse_policy


def test_minimal_policy_gets_the_documented_defaults() -> None:
    policy = parse_policy(MINIMAL)
    team = policy.team("nlp")
    assert team.cohort == DEFAULT_COHORT
    assert policy.cohorts == (Cohort(DEFAULT_COHORT, None),)
    assert team.groups == () and team.admin_groups == ()
    assert team.preemption.reclaim is ReclaimPolicy.NEVER
    assert team.preemption.borrow_within_cohort is BorrowWithinCohortPolicy.NEVER
    assert team.preemption.within_team is WithinTeamPolicy.NEVER
    assert team.fair_share_weight == Decimal(1)
    assert team.isolation is Isolation.SHARED
    assert team.budget is None
    quota = team.quotas[0]
    assert quota.nominal == Resources(8, 0, 0)
    assert quota.borrow_limit == ALL_UNLIMITED  # absent borrow limit = unlimited
    assert quota.lend_limit == ALL_UNLIMITED  # absent lend limit = lends all
    assert quota.lendable == Resources(8, 0, 0)
    s = policy.scheduling
    assert (s.mode, s.queueing, s.checkpoint_aware, s.usage_half_life_s) == (
        SchedulingMode.CLASSIC,
        QueueingStrategy.BEST_EFFORT_FIFO,
        True,
        0,
    )
    assert policy.identity.admin_groups == () and policy.identity.finance_groups == ()
    c = policy.chargeback
    assert (c.currency, c.idle, c.admin_monthly, c.admin_split, c.borrowed_rate) == (
        "USD",
        IdlePolicy.USAGE,
        Decimal(0),
        AdminSplit.WEIGHTED,
        Decimal(1),
    )


def test_without_priority_classes_there_is_one_default_class() -> None:
    policy = parse_policy(MINIMAL)
    assert [(c.name, c.value) for c in policy.priority_classes] == [("default", 0)]
    assert policy.default_priority_class == "default"


def test_priority_class_defaults() -> None:
    policy = parse_policy(MINIMAL + "priority_classes:\n  - {name: batch, value: 5}\n")
    cls = policy.priority_class("batch")
    assert cls.preemptible is True
    assert cls.grace_period_s == 30
    assert cls.max_runtime_s is None
    assert cls.min_runtime_s == 300
    assert cls.checkpoint_required is False
    assert cls.budget_exempt is False
    assert cls.signal == "SIGTERM"


def test_default_priority_class_defaults_to_the_lowest_value() -> None:
    text = MINIMAL + (
        "priority_classes:\n"
        "  - {name: high, value: 10}\n"
        "  - {name: low, value: -3}\n"
        "  - {name: also-low, value: -3}\n"
    )
    assert parse_policy(text).default_priority_class == "low"


def test_a_number_limit_is_gpus_and_leaves_cpu_and_memory_open() -> None:
    text = MINIMAL.replace("h100: {gpus: 8}", "h100: {gpus: 8, cpus: 16, borrow_limit: 4, lend_limit: 2}")
    quota = parse_policy(text).team("nlp").quotas[0]
    assert quota.borrow_limit == Resources(4, UNLIMITED, UNLIMITED)
    assert quota.lend_limit == Resources(2, UNLIMITED, UNLIMITED)


def test_a_mapping_limit_limits_only_the_resources_it_names() -> None:
    text = MINIMAL.replace(
        "h100: {gpus: 8}",
        "h100: {gpus: 8, cpus: 16, memory_gib: 64, borrow_limit: {cpus: 0.5}, lend_limit: {memory_gib: 32}}",
    )
    quota = parse_policy(text).team("nlp").quotas[0]
    assert quota.nominal == Resources(8, 16_000, 65_536)
    assert quota.borrow_limit == Resources(UNLIMITED, 500, UNLIMITED)
    assert quota.lend_limit == Resources(UNLIMITED, UNLIMITED, 32_768)


def test_a_cpu_only_quota_in_a_cpu_only_pool_is_legal() -> None:
    text = """\
cluster:
  name: cpu
  pools:
    - {name: cpu, gpu_type: none, nodes: 4, gpus_per_node: 0, cpus_per_node: 64, memory_gib_per_node: 256}
teams:
  - name: etl
    quota:
      cpu: {cpus: 128, memory_gib: 512, borrow_limit: {cpus: 64}}
"""
    policy = parse_policy(text)
    assert policy.pool("cpu").capacity == Resources(0, 256_000, 1_048_576)
    assert policy.team("etl").quotas[0].nominal == Resources(0, 128_000, 524_288)


def test_a_dedicated_team_neither_lends_nor_borrows() -> None:
    text = MINIMAL.replace("  - name: nlp\n", "  - name: nlp\n    isolation: dedicated\n")
    quota = parse_policy(text).team("nlp").quotas[0]
    assert quota.borrow_limit == Resources() and quota.lend_limit == Resources()


def test_implicit_cluster_cohort_is_added_only_when_a_team_needs_it() -> None:
    both = MINIMAL + "cohorts:\n  - {name: research}\n"
    assert [c.name for c in parse_policy(both).cohorts] == ["research", DEFAULT_COHORT]
    all_named = both.replace("  - name: nlp\n", "  - name: nlp\n    cohort: research\n")
    assert [c.name for c in parse_policy(all_named).cohorts] == ["research"]
