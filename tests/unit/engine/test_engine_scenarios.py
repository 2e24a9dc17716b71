"""One-cycle scenarios: a state, a config, and what the cycle must decide. Each is named for the
rule it pins down (docs/design.md, "Governance rules", issue 2 part 3)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from gpucommons.engine import ClusterState, Decisions, EngineConfig, PendingCode, Placement, PreemptReason
from gpucommons.testing.builders import decide_checked, make_policy, make_state, make_task

COMMONS = EngineConfig.commons()
KUEUE = EngineConfig.kueue()
NO_PLACEMENT = EngineConfig(placement=Placement.NONE)
NO_CONSOLIDATION = EngineConfig(consolidation=False)


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
    # --- Kueue fidelity (issue 9, item 1): each mirrors a case of Kueue's pkg/scheduler tests -----
    # 1. A request above the team's nominal quota preempts only if hierarchical reclaim is possible
    #    or borrowWithinCohort allows it (flavorassigner.go, fitsResourceQuota's gate).
    Scenario(
        # Kueue scheduler_test.go "A workload is only eligible to do preemptions if it fits fully
        # within nominal quota" (and flavorassigner_test.go "when borrowing while preemption is
        # needed for flavor one, fair sharing enabled, reclaimWithinCohort=Never": NoFit).
        "a_request_above_nominal_quota_does_not_preempt_its_own_team_to_borrow",
        lambda: (
            make_state(p_two(nlp={**WITHIN, **RECLAIM_ANY}))
            .running(T("n1").team("nlp").gpus(8).priority(100))
            .running(T("c1").team("cv").gpus(8).priority(100))
            .pending(T("a").team("nlp").gpus(24).priority(500))
            .obj()
        ),
        pending={"a": PendingCode.NO_IDLE_TO_BORROW},
        message={"a": "may not preempt"},
        config=KUEUE,
    ),
    Scenario(
        # The same under our extensions: the gate is Kueue's rule, not a switch.
        "commons_keeps_the_nominal_quota_gate_on_preemption",
        lambda: (
            make_state(p_two(nlp={**WITHIN, **RECLAIM_ANY}))
            .running(T("n1").team("nlp").gpus(8).priority(100))
            .running(T("c1").team("cv").gpus(8).priority(100))
            .pending(T("a").team("nlp").gpus(24).priority(500))
            .obj()
        ),
        pending={"a": PendingCode.NO_IDLE_TO_BORROW},
    ),
    Scenario(
        # Kueue flavorassigner_test.go "when borrowing while preemption is needed for flavor one;
        # WhenCanBorrow=MayStopSearch": with borrowWithinCohort the gate opens (Preempt, borrowing).
        "a_request_above_nominal_quota_preempts_when_borrow_within_cohort_allows_it",
        lambda: (
            make_state(p_two(nlp={**WITHIN, **BWC}))
            .running(T("n1").team("nlp").gpus(8).priority(100))
            .running(T("c1").team("cv").gpus(8).priority(100))
            .pending(T("a").team("nlp").gpus(24).priority(500))
            .obj()
        ),
        preempt={"n1": PreemptReason.WITHIN_TEAM},
        pending={"a": PendingCode.WAITING_FOR_PREEMPTION},
        config=KUEUE,
    ),
    Scenario(
        # Kueue classical.FindHeightOfLowestSubtreeThatFits (mayReclaimInHierarchy): the request is
        # above nlp's nominal quota but within its own sub-cohort's, so the gate lets it preempt.
        "a_request_above_nominal_quota_preempts_when_its_sub_cohort_can_hold_it",
        lambda: (
            make_state(
                make_policy()
                .pool("h100", nodes=6, gpus_per_node=8)
                .cohort("org")
                .cohort("research", parent="org")
                .cohort("product", parent="org")
                .team("nlp", cohort="research", h100=16, **WITHIN)  # type: ignore[arg-type]
                .team("lab", cohort="research", h100=16)
                .team("cv", cohort="product", h100=16)
                .build()
            )
            .running(T("n1").team("nlp").gpus(8).priority(100))
            .running(T("c1").team("cv").gpus(24).priority(100))
            .pending(T("a").team("nlp").gpus(24).priority(500))
            .obj()
        ),
        preempt={"n1": PreemptReason.WITHIN_TEAM},
        config=KUEUE,
    ),
    # 2. Victims are sought in every pool (v1beta2 flavorFungibility whenCanPreempt: TryNextFlavor)
    #    and the best is taken: reclaiming others' borrowed capacity before preempting the own
    #    team, then the least borrowing after preemption, then the first listed pool.
    Scenario(
        # Kueue scheduler_test.go "prefer reclamation over cq priority based preemption".
        "preemption_prefers_reclaiming_borrowed_capacity_in_a_later_pool_over_preempting_own_tasks",
        lambda: _two_pool_state(borrower_priority=100),
        preempt={"b1": PreemptReason.RECLAIM},
        pending={"a": PendingCode.WAITING_FOR_PREEMPTION},
        config=KUEUE,
    ),
    Scenario(
        "commons_also_prefers_reclaim_in_a_later_pool_over_preempting_own_tasks",
        lambda: _two_pool_state(borrower_priority=100),
        preempt={"b1": PreemptReason.RECLAIM},
    ),
    Scenario(
        # Kueue scheduler_test.go "prefer first preemption flavor when second flavor also requires
        # cq preemption": the borrower ranks too high to reclaim, so both pools mean preempting an
        # own task, and the first listed pool wins.
        "equal_preemptions_in_two_pools_go_to_the_first_listed",
        lambda: _two_pool_state(borrower_priority=900, own_in_spot=True),
        preempt={"a1": PreemptReason.WITHIN_TEAM},
        config=KUEUE,
    ),
    Scenario(
        # Kueue flavorassigner.go isPreferred (BorrowingOverPreemption, the default): with the same
        # preemption mode in both pools, the lower borrowing level after preemption wins, here the
        # second pool, where the preemptor ends within nominal quota.
        "equal_preemption_modes_prefer_the_pool_that_borrows_least_after_preemption",
        lambda: (
            make_state(
                make_policy()
                .pool("ondemand", nodes=2, gpus_per_node=8)
                .pool("spot", nodes=2, gpus_per_node=8)
                .team("alpha", ondemand=8, within_team="lower_priority")
                .quota("spot", 8)
                .team("beta", ondemand=8)
                .quota("spot", 8)
                .build()
            )
            .running(T("hi").team("alpha").gpus(6).priority(900), pool="ondemand", place=False)
            .running(T("lo").team("alpha").gpus(4).priority(50), pool="ondemand", place=False)
            .running(T("b1").team("beta").gpus(6).priority(50), pool="ondemand", place=False)
            .running(T("lo2").team("alpha").gpus(8).priority(50), pool="spot", place=False)
            .running(T("b2").team("beta").gpus(8).priority(50), pool="spot", place=False)
            .pending(T("a").team("alpha").gpus(4).priority(500))
            .obj()
        ),
        preempt={"lo2": PreemptReason.WITHIN_TEAM},
        config=KUEUE,
    ),
    # 3. Several queues of a cohort preempt in the same cycle when their victims do not overlap;
    #    a plan counts the victims of the cycle's earlier plans as gone (scheduler.go `fits` with
    #    the preempted workloads removed, RecomputeAssignmentUponPreemptionTargetsOverlap).
    Scenario(
        # Kueue scheduler_test.go "multiple preemptions without borrowing".
        "several_teams_of_a_cohort_preempt_in_the_same_cycle_when_their_victims_do_not_overlap",
        lambda: (
            make_state(p_two(nlp={**WITHIN, "borrow_limit": 0}, cv={**WITHIN, "borrow_limit": 0}))
            .running(T("n1").team("nlp").gpus(16).priority(100))
            .running(T("c1").team("cv").gpus(16).priority(100))
            .pending(T("a").team("nlp").gpus(16).priority(500), T("b").team("cv").gpus(16).priority(500))
            .obj()
        ),
        preempt={"n1": PreemptReason.WITHIN_TEAM, "c1": PreemptReason.WITHIN_TEAM},
        pending={"a": PendingCode.WAITING_FOR_PREEMPTION, "b": PendingCode.WAITING_FOR_PREEMPTION},
        config=KUEUE,
    ),
    Scenario(
        # Kueue scheduler_test.go "multiple preemptions preemption possible after earlier workload
        # fits": an admission in the cohort does not hold back a preemption in the same cycle.
        "an_admission_does_not_hold_back_a_preemption_in_the_same_cycle",
        lambda: (
            make_state(
                make_policy()
                .pool("h100", nodes=3, gpus_per_node=8)
                .team("nlp", h100=8, borrow_limit=0, **WITHIN)  # type: ignore[arg-type]
                .team("cv", h100=16, borrow_limit=0, **WITHIN)  # type: ignore[arg-type]
                .build()
            )
            .running(T("c1").team("cv").gpus(16).priority(100))
            .pending(T("fit").team("nlp").gpus(8).priority(900), T("p").team("cv").gpus(16).priority(500))
            .obj()
        ),
        admit={"fit": "h100"},
        preempt={"c1": PreemptReason.WITHIN_TEAM},
        config=KUEUE,
    ),
    Scenario(
        # Kueue scheduler_test.go "multiple preemptions skip preemption when shared limited
        # resource": with alpha's victim counted as gone, beta would still not fit, so beta
        # preempts nobody (no wasteful preemption).
        "a_second_plan_that_would_not_fit_after_the_first_preempts_nobody",
        lambda: (
            make_state(
                make_policy()
                .pool("h100", nodes=5, gpus_per_node=8)
                .team("alpha", h100=16, **{**WITHIN, **BWC})  # type: ignore[arg-type]
                .team("beta", h100=16, **{**WITHIN, **BWC})  # type: ignore[arg-type]
                .team("bank", h100=8)
                .build()
            )
            .running(T("a1").team("alpha").gpus(16).priority(0))
            .running(T("b1").team("beta").gpus(16).priority(0))
            .pending(
                T("preemptor").team("alpha").gpus(24).priority(100),
                T("pretender").team("beta").gpus(24).priority(99),
            )
            .obj()
        ),
        preempt={"a1": PreemptReason.WITHIN_TEAM},
        pending={"preemptor": PendingCode.WAITING_FOR_PREEMPTION, "pretender": PendingCode.NO_IDLE_TO_BORROW},
        config=KUEUE,
    ),
    Scenario(
        # Kueue's DeferredFit: a task that fits once the cycle's planned victims have stopped
        # waits for them, holding its request, and preempts nobody of its own.
        "a_task_that_fits_once_planned_victims_stop_waits_for_them_without_preempting",
        lambda: (
            make_state(
                make_policy()
                .pool("h100", nodes=6, gpus_per_node=8)
                .team("nlp", h100=16, **RECLAIM_ANY)  # type: ignore[arg-type]
                .team("cv", h100=16, **RECLAIM_ANY)  # type: ignore[arg-type]
                .team("big", h100=16)
                .build()
            )
            .running(T("b1").team("big").gpus(24).priority(100), at=1)
            .running(T("b2").team("big").gpus(24).priority(100), at=2)
            .pending(T("a").team("nlp").gpus(8).priority(900), T("c").team("cv").gpus(8).priority(100))
            .obj()
        ),
        preempt={"b2": PreemptReason.RECLAIM},
        pending={"a": PendingCode.WAITING_FOR_PREEMPTION, "c": PendingCode.WAITING_FOR_PREEMPTION},
        message={"c": "b2"},
        config=KUEUE,
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
        config=NO_CONSOLIDATION,  # with it, r0 moves (test_engine_consolidation.py)
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


def _two_pool_state(borrower_priority: int, own_in_spot: bool = False) -> ClusterState:
    """alpha lists pool `ondemand` (where its own a1 runs) before `spot` (where beta borrows)."""
    policy = (
        make_policy()
        .pool("ondemand", nodes=2, gpus_per_node=8)
        .pool("spot", nodes=2, gpus_per_node=8)
        .team("alpha", ondemand=16, reclaim="lower_priority", within_team="lower_priority")
        .quota("spot", 12)
        .team("beta", spot=4)
        .build()
    )
    b = make_state(policy).running(T("a1").team("alpha").gpus(8).priority(50), pool="ondemand")
    if own_in_spot:
        b = b.running(T("a2").team("alpha").gpus(8).priority(50), pool="spot")
        b = b.running(T("b1").team("beta").gpus(8).priority(borrower_priority), pool="spot")
    else:
        b = b.running(T("b1").team("beta").gpus(16).priority(borrower_priority), pool="spot")
    return b.pending(T("a").team("alpha").gpus(12).priority(500)).obj()


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
