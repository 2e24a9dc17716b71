"""One-cycle scenarios: a state, a config, and what the cycle must decide. Each is named for the
rule it pins down (docs/design.md, "Governance rules", issue 2 part 3)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from gpucommons.engine import ClusterState, Decisions, EngineConfig, PendingCode, PreemptReason
from gpucommons.testing.builders import decide_checked, make_policy, make_state, make_task

COMMONS = EngineConfig.commons()
KUEUE = EngineConfig.kueue()
NO_PLACEMENT = EngineConfig(node_placement=False)


@dataclass(frozen=True)
class Scenario:
    name: str
    state: Callable[[], ClusterState]
    admit: dict[str, str] = field(default_factory=dict)  # task -> pool
    preempt: dict[str, PreemptReason] = field(default_factory=dict)  # victim -> reason
    pending: dict[str, PendingCode] = field(default_factory=dict)
    config: EngineConfig = COMMONS
    now: float = 1000.0
    message: dict[str, str] = field(default_factory=dict)  # task -> text its reason must contain
    borrowed: dict[str, int] = field(default_factory=dict)  # task -> GPUs borrowed at admission


def p_two(nlp: dict[str, object] | None = None, cv: dict[str, object] | None = None, nodes: int = 4):
    return (
        make_policy()
        .pool("h100", nodes=nodes, gpus_per_node=8)
        .team("nlp", h100=16, **(nlp or {}))  # type: ignore[arg-type]
        .team("cv", h100=16, **(cv or {}))  # type: ignore[arg-type]
        .build()
    )


def p_bwc():
    """nlp may borrow within the cohort; cv and an idle team lend."""
    return (
        make_policy()
        .pool("h100", nodes=6, gpus_per_node=8)
        .team("nlp", h100=16, reclaim="any", borrow_within_cohort="lower_priority")
        .team("cv", h100=16)
        .team("idle", h100=16)
        .build()
    )


def bwc_state(borrower_priority: int, borrower_admitted_at: float):
    """nlp (priority 500 tasks) at nominal wants 8 more; cv borrows 16 with one task; full cohort."""
    return (
        make_state(p_bwc())
        .running(T("n1").team("nlp").gpus(16).priority(500))
        .running(T("c1").team("cv").gpus(32).priority(borrower_priority), at=borrower_admitted_at)
        .pending(T("a").team("nlp").gpus(8).priority(500))
        .obj()
    )


T = make_task
RECLAIM_ANY = {"reclaim": "any"}
BWC = {"reclaim": "any", "borrow_within_cohort": "lower_priority"}
WITHIN = {"within_team": "lower_priority"}

SCENARIOS = [
    # --- quota tree: nominal, borrowing, limits ---------------------------------------------------
    Scenario(
        "admits_within_nominal_without_borrowing",
        lambda: make_state(p_two()).pending(T("a").team("nlp").gpus(16)).obj(),
        admit={"a": "h100"},
        borrowed={"a": 0},
    ),
    Scenario(
        "borrows_idle_quota_of_the_cohort_and_reports_it",
        lambda: make_state(p_two()).pending(T("a").team("nlp").gpus(24)).obj(),
        admit={"a": "h100"},
        borrowed={"a": 8},
    ),
    Scenario(
        "borrow_limit_caps_what_a_team_may_hold",
        lambda: (
            make_state(p_two(nlp={"borrow_limit": 8}))
            .running(T("r").team("nlp").gpus(24))
            .pending(T("a").team("nlp").gpus(8))
            .obj()
        ),
        pending={"a": PendingCode.QUOTA_EXHAUSTED},
        message={"a": "team nlp uses 24/16 H100 GPUs and has reached its borrow limit of 8"},
    ),
    Scenario(
        "zero_borrow_limit_means_the_team_never_borrows",
        lambda: (
            make_state(p_two(nlp={"borrow_limit": 0}))
            .running(T("r").team("nlp").gpus(16))
            .pending(T("a").team("nlp").gpus(1))
            .obj()
        ),
        pending={"a": PendingCode.QUOTA_EXHAUSTED},
        message={"a": "may not borrow"},
    ),
    Scenario(
        "lend_limit_keeps_the_rest_of_nominal_to_the_lender",
        lambda: make_state(p_two(cv={"lend_limit": 4})).pending(T("a").team("nlp").gpus(24)).obj(),
        pending={"a": PendingCode.NEVER_FITS},
        message={"a": "the most team nlp may ever hold in pool h100 is 20"},
    ),
    Scenario(
        "lend_limit_still_lends_up_to_the_limit",
        lambda: make_state(p_two(cv={"lend_limit": 4})).pending(T("a").team("nlp").gpus(20)).obj(),
        admit={"a": "h100"},
        borrowed={"a": 4},
    ),
    Scenario(
        "no_idle_capacity_left_to_borrow_names_the_cohort",
        lambda: (
            make_state(p_two())
            .running(T("r").team("cv").gpus(16))
            .running(T("r2").team("nlp").gpus(16))
            .pending(T("a").team("nlp").gpus(8))
            .obj()
        ),
        pending={"a": PendingCode.NO_IDLE_TO_BORROW},
        message={"a": "no idle H100 left to borrow in cohort cluster"},
    ),
    Scenario(
        "request_above_the_most_a_team_may_hold_never_fits",
        lambda: make_state(p_two(nlp={"borrow_limit": 8})).pending(T("a").team("nlp").gpus(32)).obj(),
        pending={"a": PendingCode.NEVER_FITS},
        message={"a": "needs 32 GPUs but the most team nlp may ever hold in pool h100 is 24"},
    ),
    Scenario(
        "teams_in_separate_cohorts_do_not_lend_to_each_other",
        lambda: (
            make_state(
                make_policy()
                .pool("h100", nodes=4, gpus_per_node=8)
                .team("nlp", cohort="research", h100=16)
                .team("cv", cohort="product", h100=16)
                .build()
            )
            .pending(T("a").team("nlp").gpus(24))
            .obj()
        ),
        pending={"a": PendingCode.NEVER_FITS},
    ),
    Scenario(
        "nested_cohorts_lend_through_their_common_root",
        lambda: (
            make_state(
                make_policy()
                .pool("h100", nodes=4, gpus_per_node=8)
                .cohort("org")
                .cohort("research", parent="org")
                .cohort("product", parent="org")
                .team("nlp", cohort="research", h100=16)
                .team("cv", cohort="product", h100=16)
                .build()
            )
            .pending(T("a").team("nlp").gpus(32))
            .obj()
        ),
        admit={"a": "h100"},
        borrowed={"a": 16},
    ),
    # --- pools --------------------------------------------------------------------------------------
    Scenario(
        "pools_are_tried_in_the_order_the_team_lists_them",
        lambda: (
            make_state(
                make_policy()
                .pool("a100", nodes=1, gpus_per_node=8)
                .pool("h100", nodes=1, gpus_per_node=8)
                .team("nlp", a100=8, borrow_limit=0)
                .quota("h100", 8, borrow_limit=0)
                .build()
            )
            .running(T("r").team("nlp").gpus(8), pool="a100")
            .pending(T("a").team("nlp").gpus(4))
            .obj()
        ),
        admit={"a": "h100"},
    ),
    Scenario(
        "first_listed_pool_wins_when_both_fit",
        lambda: (
            make_state(
                make_policy()
                .pool("a100", nodes=1, gpus_per_node=8)
                .pool("h100", nodes=1, gpus_per_node=8)
                .team("nlp", h100=8)
                .quota("a100", 8)
                .build()
            )
            .pending(T("a").team("nlp").gpus(4))
            .obj()
        ),
        admit={"a": "h100"},
    ),
    Scenario(
        "a_task_that_names_a_pool_runs_only_there",
        lambda: (
            make_state(
                make_policy()
                .pool("a100", nodes=1, gpus_per_node=8)
                .pool("h100", nodes=1, gpus_per_node=8)
                .team("nlp", h100=8, borrow_limit=0)
                .quota("a100", 8, borrow_limit=0)
                .build()
            )
            .running(T("r").team("nlp").gpus(8), pool="h100")
            .pending(T("a").team("nlp").gpus(4).pools("h100"))
            .obj()
        ),
        pending={"a": PendingCode.QUOTA_EXHAUSTED},
    ),
    Scenario(
        "a_pool_the_team_has_no_quota_in_is_refused_with_its_name",
        lambda: make_state(p_two()).pending(T("a").team("nlp").gpus(1).pools("tpu")).obj(),
        pending={"a": PendingCode.UNKNOWN_POOL},
        message={"a": "team nlp has no quota in tpu"},
    ),
    # --- queueing -----------------------------------------------------------------------------------
    Scenario(
        "within_a_team_higher_priority_goes_first",
        lambda: (
            make_state(p_two(nlp={"borrow_limit": 0}))
            .running(T("r").team("nlp").gpus(8))
            .pending(
                T("low").team("nlp").gpus(8).priority(100).at(0),
                T("high").team("nlp").gpus(8).priority(500).at(5),
            )
            .obj()
        ),
        admit={"high": "h100"},
        pending={"low": PendingCode.QUOTA_EXHAUSTED},
    ),
    Scenario(
        "within_a_team_the_older_task_goes_first_at_equal_priority",
        lambda: (
            make_state(p_two(nlp={"borrow_limit": 0}))
            .running(T("r").team("nlp").gpus(8))
            .pending(T("new").team("nlp").gpus(8).at(5), T("old").team("nlp").gpus(8).at(1))
            .obj()
        ),
        admit={"old": "h100"},
        pending={"new": PendingCode.QUOTA_EXHAUSTED},
    ),
    Scenario(
        "across_teams_a_task_that_fits_without_borrowing_goes_before_a_borrower",
        lambda: (
            make_state(p_two())
            .running(T("r1").team("nlp").gpus(16))
            .running(T("r2").team("cv").gpus(8))
            .pending(
                T("borrower").team("nlp").gpus(8).priority(900), T("owner").team("cv").gpus(8).priority(100)
            )
            .obj()
        ),
        admit={"owner": "h100"},
        pending={"borrower": PendingCode.NO_IDLE_TO_BORROW},
    ),
    Scenario(
        "across_teams_higher_priority_goes_first_when_both_borrow",
        lambda: (
            make_state(
                make_policy()
                .pool("h100", nodes=5, gpus_per_node=8)
                .team("nlp", h100=16)
                .team("cv", h100=16)
                .team("idle", h100=8)
                .build()
            )
            .running(T("r1").team("nlp").gpus(16))
            .running(T("r2").team("cv").gpus(16))
            .pending(T("lo").team("nlp").gpus(8).priority(100), T("hi").team("cv").gpus(8).priority(500))
            .obj()
        ),
        admit={"hi": "h100"},
        pending={"lo": PendingCode.NO_IDLE_TO_BORROW},
    ),
    Scenario(
        "best_effort_fifo_lets_a_smaller_task_past_a_head_that_does_not_fit",
        lambda: (
            make_state(p_two(nlp={"borrow_limit": 0}))
            .running(T("r").team("nlp").gpus(8))
            .pending(T("big").team("nlp").gpus(16).at(0), T("small").team("nlp").gpus(8).at(1))
            .obj()
        ),
        admit={"small": "h100"},
        pending={"big": PendingCode.QUOTA_EXHAUSTED},
    ),
    Scenario(
        "strict_fifo_keeps_the_team_behind_its_head",
        lambda: (
            make_state(
                make_policy()
                .pool("h100", nodes=4, gpus_per_node=8)
                .team("nlp", h100=16, borrow_limit=0)
                .team("cv", h100=16)
                .strict_fifo()
                .build()
            )
            .running(T("r").team("nlp").gpus(8))
            .pending(T("big").team("nlp").gpus(16).at(0), T("small").team("nlp").gpus(8).at(1))
            .obj()
        ),
        pending={"big": PendingCode.QUOTA_EXHAUSTED, "small": PendingCode.BEHIND_HEAD},
    ),
    Scenario(
        "several_admissions_per_team_per_cycle",
        lambda: make_state(p_two()).pending(*(T(f"t{i}").team("nlp").gpus(8).at(i) for i in range(3))).obj(),
        admit={"t0": "h100", "t1": "h100", "t2": "h100"},
    ),
    Scenario(
        "kueue_admits_one_head_per_team_per_cycle",
        lambda: make_state(p_two()).pending(*(T(f"t{i}").team("nlp").gpus(8).at(i) for i in range(3))).obj(),
        admit={"t0": "h100"},
        config=KUEUE,
    ),
    # --- classic preemption -------------------------------------------------------------------------
    Scenario(
        "within_team_lower_priority_is_preempted_for_a_higher_priority_task",
        lambda: (
            make_state(p_two(nlp={**WITHIN, "borrow_limit": 0}))
            .running(T("low").team("nlp").gpus(16).priority(100))
            .pending(T("high").team("nlp").gpus(8).priority(500))
            .obj()
        ),
        preempt={"low": PreemptReason.WITHIN_TEAM},
        pending={"high": PendingCode.WAITING_FOR_PREEMPTION},
    ),
    Scenario(
        "within_team_never_leaves_own_tasks_alone",
        lambda: (
            make_state(p_two(nlp={"borrow_limit": 0}))
            .running(T("low").team("nlp").gpus(16).priority(100))
            .pending(T("high").team("nlp").gpus(8).priority(500))
            .obj()
        ),
        pending={"high": PendingCode.QUOTA_EXHAUSTED},
    ),
    Scenario(
        "within_team_lower_priority_spares_equal_priority",
        lambda: (
            make_state(p_two(nlp={**WITHIN, "borrow_limit": 0}))
            .running(T("old").team("nlp").gpus(16).priority(100).at(50))
            .pending(T("new").team("nlp").gpus(8).priority(100).at(10))
            .obj()
        ),
        pending={"new": PendingCode.QUOTA_EXHAUSTED},
    ),
    Scenario(
        "lower_or_newer_equal_priority_preempts_a_newer_equal",
        lambda: (
            make_state(p_two(nlp={"within_team": "lower_or_newer_equal_priority", "borrow_limit": 0}))
            .running(T("newer").team("nlp").gpus(16).priority(100).at(50))
            .pending(T("older").team("nlp").gpus(8).priority(100).at(10))
            .obj()
        ),
        preempt={"newer": PreemptReason.WITHIN_TEAM},
    ),
    Scenario(
        "reclaim_takes_back_only_borrowed_gpus",
        lambda: (
            make_state(p_two(nlp=RECLAIM_ANY))
            .running(T("c1").team("cv").gpus(8).at(1), at=1)
            .running(T("c2").team("cv").gpus(8).at(2), at=2)
            .running(T("c3").team("cv").gpus(8).at(3), at=3)
            .running(T("c4").team("cv").gpus(8).at(4), at=4)
            .pending(T("a").team("nlp").gpus(16))
            .obj()
        ),
        preempt={"c4": PreemptReason.RECLAIM, "c3": PreemptReason.RECLAIM},
    ),
    Scenario(
        "reclaim_never_leaves_borrowers_running",
        lambda: (
            make_state(p_two()).running(T("c1").team("cv").gpus(32)).pending(T("a").team("nlp").gpus(8)).obj()
        ),
        pending={"a": PendingCode.NO_IDLE_TO_BORROW},
        message={"a": "the rest of its quota is lent out"},
    ),
    Scenario(
        "reclaim_lower_priority_spares_a_borrower_of_equal_priority",
        lambda: (
            make_state(p_two(nlp={"reclaim": "lower_priority"}))
            .running(T("c1").team("cv").gpus(32).priority(500))
            .pending(T("a").team("nlp").gpus(8).priority(500))
            .obj()
        ),
        pending={"a": PendingCode.NO_IDLE_TO_BORROW},
    ),
    Scenario(
        "reclaim_does_not_let_the_preemptor_borrow",
        lambda: (
            make_state(p_two(nlp=RECLAIM_ANY))
            .running(T("c1").team("cv").gpus(24))
            .running(T("n1").team("nlp").gpus(8))
            .pending(T("a").team("nlp").gpus(16))
            .obj()
        ),
        pending={"a": PendingCode.NO_IDLE_TO_BORROW},
    ),
    Scenario(
        "a_team_within_its_nominal_quota_is_never_preempted_by_another_team",
        lambda: (
            make_state(p_two(nlp=BWC))
            .running(T("c1").team("cv").gpus(16).priority(100))
            .running(T("n1").team("nlp").gpus(16).priority(100))
            .pending(T("a").team("nlp").gpus(8).priority(900))
            .obj()
        ),
        pending={"a": PendingCode.NO_IDLE_TO_BORROW},
    ),
    Scenario(
        "borrow_within_cohort_preempts_a_lower_priority_borrower",
        lambda: bwc_state(borrower_priority=100, borrower_admitted_at=0),
        preempt={"c1": PreemptReason.BORROW_WITHIN_COHORT},
    ),
    Scenario(
        "borrow_within_cohort_never_takes_equal_priority",
        lambda: bwc_state(borrower_priority=500, borrower_admitted_at=0),
        pending={"a": PendingCode.NO_IDLE_TO_BORROW},
    ),
    Scenario(
        "min_runtime_protects_young_borrowed_capacity_from_borrow_within_cohort",
        lambda: bwc_state(borrower_priority=100, borrower_admitted_at=990),
        pending={"a": PendingCode.NO_IDLE_TO_BORROW},
    ),
    Scenario(
        "kueue_has_no_min_runtime_protection",
        lambda: bwc_state(borrower_priority=100, borrower_admitted_at=990),
        preempt={"c1": PreemptReason.BORROW_WITHIN_COHORT},
        config=KUEUE,
    ),
    Scenario(
        "reclaim_is_not_delayed_by_min_runtime",
        lambda: (
            make_state(p_two(nlp=RECLAIM_ANY))
            .running(T("c1").team("cv").gpus(32), at=999)
            .pending(T("a").team("nlp").gpus(8))
            .obj()
        ),
        preempt={"c1": PreemptReason.RECLAIM},
    ),
    Scenario(
        "other_teams_borrowers_go_before_own_tasks",
        lambda: (
            make_state(p_two(nlp={**RECLAIM_ANY, **WITHIN}))
            .running(T("own").team("nlp").gpus(8).priority(100))
            .running(T("theirs").team("cv").gpus(24).priority(400))
            .pending(T("a").team("nlp").gpus(8).priority(500))
            .obj()
        ),
        preempt={"theirs": PreemptReason.RECLAIM},
    ),
    Scenario(
        "lower_priority_victims_go_first",
        lambda: (
            make_state(p_two(nlp={**WITHIN, "borrow_limit": 0}))
            .running(T("mid").team("nlp").gpus(8).priority(300), at=10)
            .running(T("low").team("nlp").gpus(8).priority(100), at=0)
            .pending(T("a").team("nlp").gpus(8).priority(500))
            .obj()
        ),
        preempt={"low": PreemptReason.WITHIN_TEAM},
    ),
    Scenario(
        "kueue_takes_the_most_recently_admitted_among_equals",
        lambda: (
            make_state(p_two(nlp={**WITHIN, "borrow_limit": 0}))
            .running(T("old").team("nlp").gpus(8).priority(100), at=0, unsaved_gpu_s=10)
            .running(T("new").team("nlp").gpus(8).priority(100), at=500, unsaved_gpu_s=9000)
            .pending(T("a").team("nlp").gpus(8).priority(500))
            .obj()
        ),
        preempt={"new": PreemptReason.WITHIN_TEAM},
        config=KUEUE,
    ),
    Scenario(
        "checkpoint_aware_takes_the_least_unsaved_work_among_equals",
        lambda: (
            make_state(p_two(nlp={**WITHIN, "borrow_limit": 0}))
            .running(T("old").team("nlp").gpus(8).priority(100), at=0, unsaved_gpu_s=10)
            .running(T("new").team("nlp").gpus(8).priority(100), at=500, unsaved_gpu_s=9000)
            .pending(T("a").team("nlp").gpus(8).priority(500))
            .obj()
        ),
        preempt={"old": PreemptReason.WITHIN_TEAM},
    ),
    Scenario(
        "victims_that_turn_out_not_to_be_needed_are_given_back",
        lambda: (
            make_state(p_two(nlp={**WITHIN, "borrow_limit": 0}))
            .running(T("big").team("nlp").gpus(8).priority(100), at=0)
            .running(T("small").team("nlp").gpus(4).priority(100), at=10)
            .running(T("small2").team("nlp").gpus(4).priority(300), at=20)
            .pending(T("a").team("nlp").gpus(8).priority(500))
            .obj()
        ),
        preempt={"big": PreemptReason.WITHIN_TEAM},
        config=NO_PLACEMENT,
    ),
    Scenario(
        "a_non_preemptible_task_is_never_a_victim",
        lambda: (
            make_state(p_two(nlp={**WITHIN, "borrow_limit": 0}))
            .running(T("prod").team("nlp").gpus(16).priority(100).nonpreemptible())
            .pending(T("a").team("nlp").gpus(8).priority(500))
            .obj()
        ),
        pending={"a": PendingCode.QUOTA_EXHAUSTED},
    ),
    Scenario(
        "one_preemption_plan_per_cohort_and_pool_per_cycle",
        lambda: (
            make_state(
                make_policy()
                .pool("h100", nodes=6, gpus_per_node=8)
                .team("nlp", h100=16, **RECLAIM_ANY)  # type: ignore[arg-type]
                .team("cv", h100=16, **RECLAIM_ANY)  # type: ignore[arg-type]
                .team("big", h100=16)
                .build()
            )
            .running(T("b1").team("big").gpus(48).priority(100))
            .pending(T("a").team("nlp").gpus(8).priority(900), T("c").team("cv").gpus(8).priority(100))
            .obj()
        ),
        preempt={"b1": PreemptReason.RECLAIM},
        pending={"a": PendingCode.WAITING_FOR_PREEMPTION, "c": PendingCode.NO_IDLE_TO_BORROW},
        message={"c": "preemption in cohort cluster waits for the next cycle"},
    ),
    # --- placement ----------------------------------------------------------------------------------
    Scenario(
        "a_task_that_fits_on_one_node_lands_on_one_node",
        lambda: (
            make_state(p_two()).running(T("r").team("cv").gpus(2)).pending(T("a").team("nlp").gpus(8)).obj()
        ),
        admit={"a": "h100"},
    ),
    Scenario(
        "quota_allows_but_no_node_has_the_gpus_together",
        lambda: (
            make_state(p_two())
            .running(T("r0").team("cv").gpus(4), placement=_slice(0, 0, 4))
            .running(T("r1").team("cv").gpus(4), placement=_slice(1, 0, 4))
            .running(T("r2").team("cv").gpus(4), placement=_slice(2, 0, 4))
            .running(T("r3").team("cv").gpus(4), placement=_slice(3, 0, 4))
            .pending(T("a").team("nlp").gpus(8))
            .obj()
        ),
        pending={"a": PendingCode.NO_NODE_FITS},
        message={"a": "largest free block is 4"},
    ),
    Scenario(
        "without_node_placement_fragmentation_does_not_matter",
        lambda: (
            make_state(p_two())
            .running(T("r0").team("cv").gpus(4), placement=_slice(0, 0, 4))
            .running(T("r1").team("cv").gpus(4), placement=_slice(1, 0, 4))
            .running(T("r2").team("cv").gpus(4), placement=_slice(2, 0, 4))
            .running(T("r3").team("cv").gpus(4), placement=_slice(3, 0, 4))
            .pending(T("a").team("nlp").gpus(8))
            .obj()
        ),
        admit={"a": "h100"},
        config=NO_PLACEMENT,
    ),
    Scenario(
        "dedicated_team_runs_on_its_own_nodes_and_never_borrows",
        lambda: (
            make_state(
                make_policy()
                .pool("h100", nodes=4, gpus_per_node=8)
                .team("secure", h100=8, dedicated=True)
                .team("nlp", h100=24)
                .build()
            )
            .pending(T("s").team("secure").gpus(16))
            .obj()
        ),
        pending={"s": PendingCode.NEVER_FITS},
    ),
    Scenario(
        "dedicated_team_never_lends_its_idle_nodes",
        lambda: (
            make_state(
                make_policy()
                .pool("h100", nodes=4, gpus_per_node=8)
                .team("secure", h100=8, dedicated=True)
                .team("nlp", h100=24)
                .build()
            )
            .pending(T("a").team("nlp").gpus(32))
            .obj()
        ),
        pending={"a": PendingCode.NEVER_FITS},
    ),
    Scenario(
        "static_engine_confines_each_team_to_its_nominal_quota",
        lambda: make_state(p_two()).pending(T("a").team("nlp").gpus(24), T("b").team("nlp").gpus(16)).obj(),
        admit={"b": "h100"},
        pending={"a": PendingCode.NEVER_FITS},
        config=EngineConfig.static_partition(),
    ),
    # --- budgets ------------------------------------------------------------------------------------
    Scenario(
        "hard_budget_spent_stops_admission",
        lambda: (
            make_state(p_two(nlp={"budget": 100}))
            .spend("nlp", 10_000)
            .pending(T("a").team("nlp").gpus(1))
            .obj()
        ),
        pending={"a": PendingCode.BUDGET_EXHAUSTED},
        message={"a": "team nlp has spent 100.00 USD of its hard monthly budget of 100.00 USD"},
    ),
    Scenario(
        "budget_exempt_class_runs_past_a_spent_budget",
        lambda: (
            make_state(
                make_policy()
                .pool("h100", nodes=4, gpus_per_node=8)
                .priority_class("urgent", 900, budget_exempt=True)
                .priority_class("normal", 100)
                .team("nlp", h100=16, budget=100)
                .build()
            )
            .spend("nlp", 20_000)
            .pending(
                T("n").team("nlp").gpus(1).klass("normal").priority(100),
                T("u").team("nlp").gpus(1).klass("urgent").priority(50),
            )
            .obj()
        ),
        admit={"u": "h100"},
        pending={"n": PendingCode.BUDGET_EXHAUSTED},
    ),
    Scenario(
        "soft_budget_only_warns",
        lambda: (
            make_state(p_two(nlp={"budget": 100, "hard_budget": False}))
            .spend("nlp", 50_000)
            .pending(T("a").team("nlp").gpus(1))
            .obj()
        ),
        admit={"a": "h100"},
    ),
    Scenario(
        "kueue_ignores_budgets",
        lambda: (
            make_state(p_two(nlp={"budget": 100}))
            .spend("nlp", 50_000)
            .pending(T("a").team("nlp").gpus(1))
            .obj()
        ),
        admit={"a": "h100"},
        config=KUEUE,
    ),
]


def _slice(node: int, first_local: int, n: int, gpn: int = 8):
    from gpucommons.engine import NodeSlice

    return (NodeSlice(node, tuple(node * gpn + first_local + i for i in range(n))),)


@pytest.mark.parametrize("sc", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario(sc: Scenario) -> None:
    state = sc.state()
    d: Decisions = decide_checked(state, sc.now, sc.config)
    assert {a.task_id: a.admission.pool for a in d.admit} == sc.admit
    assert {p.victim_id: p.reason for p in d.preempt} == sc.preempt
    for task_id, code in sc.pending.items():
        assert task_id in d.pending, f"{task_id} has no pending reason; got {d.pending}"
        assert d.pending[task_id].code == code, d.pending[task_id]
    for task_id, text in sc.message.items():
        assert text in d.pending[task_id].message, d.pending[task_id].message
    admitted = {a.task_id: a for a in d.admit}
    for task_id, gpus in sc.borrowed.items():
        assert admitted[task_id].admission.borrowed.gpus == gpus
    for a in d.admit:
        assert a.message
    for p in d.preempt:
        assert p.message and p.preemptor_id


def test_there_are_at_least_forty_named_scenarios() -> None:
    assert len({s.name for s in SCENARIOS}) == len(SCENARIOS) >= 40
