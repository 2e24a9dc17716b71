"""Cohorts with quota of their own (Kueue: a Cohort's `spec.resourceGroups`), one cycle each.

"research owns 64 H100, its teams share them first": the cohort's nominal quota adds to what its
subtree may use (Kueue `SubtreeQuota`), its lend limit keeps part of it inside the subtree, its borrow
limit caps what the whole subtree takes from outside, and a team of the subtree takes the cohort's
quota back from outsiders (Kueue's hierarchical reclaim), while outsiders never reclaim from a
subtree that stays within its own quota.
"""

from __future__ import annotations

import pytest
from test_engine_scenarios import Scenario
from test_engine_scenarios import test_scenario as check_scenario

from gpucommons.engine import ClusterState, EngineConfig, PendingCode, PreemptReason
from gpucommons.testing.builders import PolicyBuilder, make_policy, make_state, make_task

T = make_task
KUEUE = EngineConfig.kueue()


def research(
    reclaim: str = "any", lend_limit: int | None = None, borrow_limit: int | None = None, gpus: int = 64
) -> PolicyBuilder:
    """80 H100: research (a child of `cluster`) owns `gpus` of them; its teams r1, r2 own nothing;
    ops, outside research, owns 16."""
    return (
        make_policy()
        .pool("h100", nodes=10, gpus_per_node=8)
        .cohort("cluster")
        .cohort("research", parent="cluster", lend_limit=lend_limit, borrow_limit=borrow_limit, h100=gpus)
        .team("r1", cohort="research", h100=0, reclaim=reclaim)
        .team("r2", cohort="research", h100=0, reclaim=reclaim)
        .team("ops", h100=16, reclaim="any")
    )


def _outsider_borrows(priority: int = 100, reclaim: str = "any") -> ClusterState:
    """ops holds 64 of the 80 GPUs (48 above its nominal, in one task); r1 asks for 32."""
    return (
        make_state(research(reclaim=reclaim).build())
        .running(T("o1").team("ops").gpus(16).priority(priority), at=10.0)
        .running(T("o2").team("ops").gpus(48).priority(priority), at=20.0)
        .pending(T("a").team("r1").gpus(32).priority(500))
        .obj()
    )


SCENARIOS = [
    Scenario(
        "teams_of_a_cohort_share_its_quota_first_with_no_nominal_of_their_own",
        lambda: (
            make_state(research().build())
            .pending(T("a").team("r1").gpus(32), T("b").team("r2").gpus(32))
            .obj()
        ),
        admit={"a": "h100", "b": "h100"},
        borrowed={"a": 32, "b": 32},
    ),
    Scenario(
        "a_team_outside_the_cohort_borrows_its_quota_while_it_is_idle",
        lambda: make_state(research().build()).pending(T("a").team("ops").gpus(64)).obj(),
        admit={"a": "h100"},
        borrowed={"a": 48},
    ),
    Scenario(
        "a_team_of_the_cohort_reclaims_the_cohort_quota_from_an_outside_borrower",
        _outsider_borrows,
        preempt={"o2": PreemptReason.RECLAIM},
        pending={"a": PendingCode.WAITING_FOR_PREEMPTION},
    ),
    Scenario(
        "hierarchical_reclaim_is_kueues_too",
        _outsider_borrows,
        preempt={"o2": PreemptReason.RECLAIM},
        pending={"a": PendingCode.WAITING_FOR_PREEMPTION},
        config=KUEUE,
    ),
    Scenario(
        "hierarchical_reclaim_follows_the_reclaim_word_lower_priority",
        lambda: _outsider_borrows(priority=800, reclaim="lower_priority"),
        pending={"a": PendingCode.NO_IDLE_TO_BORROW},
    ),
    Scenario(
        "hierarchical_reclaim_needs_a_reclaim_word_other_than_never",
        lambda: _outsider_borrows(reclaim="never"),
        pending={"a": PendingCode.NO_IDLE_TO_BORROW},
    ),
    Scenario(
        # research uses exactly its 64; dev (outside, nominal 0) borrows ops' 16. ops reclaims from
        # dev only: research's teams run above their (zero) nominal quota, but on their cohort's.
        "reclaim_spares_a_cohort_that_stays_within_its_own_quota",
        lambda: (
            make_state(research().team("dev", h100=0).build())
            .running(T("r1a").team("r1").gpus(48), at=10.0)
            .running(T("r2a").team("r2").gpus(16), at=30.0)
            .running(T("d1").team("dev").gpus(16), at=20.0)
            .pending(T("a").team("ops").gpus(16).priority(500))
            .obj()
        ),
        preempt={"d1": PreemptReason.RECLAIM},
        pending={"a": PendingCode.WAITING_FOR_PREEMPTION},
    ),
    Scenario(
        # research uses 80 of its 64: 16 of ops' quota. ops takes them back from research's newest task.
        "a_cohort_above_its_own_quota_is_reclaimed_like_a_borrowing_team",
        lambda: (
            make_state(research().build())
            .running(T("r1a").team("r1").gpus(48), at=10.0)
            .running(T("r2a").team("r2").gpus(32), at=30.0)
            .pending(T("a").team("ops").gpus(16).priority(500))
            .obj()
        ),
        preempt={"r2a": PreemptReason.RECLAIM},
        pending={"a": PendingCode.WAITING_FOR_PREEMPTION},
    ),
    Scenario(
        # lend_limit 16: research keeps 48 of its 64 to its own teams; ops may ever hold 16 + 16.
        "a_cohort_lend_limit_caps_what_outsiders_may_ever_borrow_of_its_quota",
        lambda: make_state(research(lend_limit=16).build()).pending(T("a").team("ops").gpus(40)).obj(),
        pending={"a": PendingCode.NEVER_FITS},
        message={"a": "the most team ops may ever hold in pool h100 is 32 GPUs"},
    ),
    Scenario(
        "a_cohort_lend_limit_keeps_the_rest_of_its_quota_for_its_own_teams",
        lambda: (
            make_state(research(lend_limit=16).build())
            .running(T("o1").team("ops").gpus(32))
            .pending(T("a").team("r1").gpus(48))
            .obj()
        ),
        admit={"a": "h100"},
        borrowed={"a": 48},
    ),
    Scenario(
        # research owns 16 and may borrow 8 more from outside, whatever ops leaves idle.
        "a_cohort_borrow_limit_caps_what_its_whole_subtree_takes_from_outside",
        lambda: (
            make_state(research(gpus=16, borrow_limit=8).build())
            .running(T("r1a").team("r1").gpus(16))
            .pending(T("b").team("r2").gpus(16), T("c").team("r1").gpus(8))
            .obj()
        ),
        admit={"c": "h100"},
        pending={"b": PendingCode.NO_IDLE_TO_BORROW},
    ),
    Scenario(
        "a_request_above_what_the_cohort_may_borrow_never_fits",
        lambda: (
            make_state(research(gpus=16, borrow_limit=8).build()).pending(T("a").team("r1").gpus(32)).obj()
        ),
        pending={"a": PendingCode.NEVER_FITS},
        message={"a": "is 24 GPUs"},
    ),
    Scenario(
        # research (root) owns 16; vision (inside research) owns 16 and lends none of it. A vision team
        # may use both; a research team outside vision only research's own 16.
        "nested_cohort_quotas_add_up_along_the_path_and_a_zero_lend_limit_keeps_one_inside",
        lambda: (
            make_state(
                make_policy()
                .pool("h100", nodes=4, gpus_per_node=8)
                .cohort("research", h100=16)
                .cohort("vision", parent="research", lend_limit=0, h100=16)
                .team("v1", cohort="vision", h100=0)
                .team("n1", cohort="research", h100=0)
                .build()
            )
            .pending(T("a").team("v1").gpus(32), T("b").team("n1").gpus(24))
            .obj()
        ),
        admit={"a": "h100"},
        pending={"b": PendingCode.NEVER_FITS},
    ),
    Scenario(
        # org ⊃ research (owns 32), product (owns 0). cv, in product, borrows research's 32; nlp, in
        # research, takes them back.
        "a_team_reclaims_its_sub_cohort_quota_from_a_sibling_sub_cohort",
        lambda: (
            make_state(
                make_policy()
                .pool("h100", nodes=4, gpus_per_node=8)
                .cohort("org")
                .cohort("research", parent="org", h100=32)
                .cohort("product", parent="org")
                .team("nlp", cohort="research", h100=0, reclaim="any")
                .team("cv", cohort="product", h100=0)
                .build()
            )
            .running(T("c1").team("cv").gpus(16), at=10.0)
            .running(T("c2").team("cv").gpus(16), at=20.0)
            .pending(T("a").team("nlp").gpus(16).priority(500))
            .obj()
        ),
        preempt={"c2": PreemptReason.RECLAIM},
        pending={"a": PendingCode.WAITING_FOR_PREEMPTION},
        config=KUEUE,
    ),
]


@pytest.mark.parametrize("sc", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario(sc: Scenario) -> None:
    check_scenario(sc)
