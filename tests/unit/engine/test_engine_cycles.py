"""Scenarios over several cycles: the preemption-loop traps of docs/design.md, min-runtime progress,
fair share (ordering, both strategies, half-life), and what callers rely on between cycles."""

from __future__ import annotations

from itertools import pairwise

import pytest

from gpucommons.engine import (
    EngineConfig,
    FairShareStrategy,
    NodeSlice,
    PendingCode,
    Placement,
    PreemptReason,
    apply_decisions,
)
from gpucommons.testing.builders import decide_checked, make_policy, make_state, make_task, settle

T = make_task
KUEUE = EngineConfig.kueue()


def _bwc_policy():
    return (
        make_policy()
        .pool("h100", nodes=6, gpus_per_node=8)
        .team("nlp", h100=16, reclaim="any", borrow_within_cohort="lower_priority")
        .team("cv", h100=16)
        .team("idle", h100=16)
        .build()
    )


def _bwc_state():
    """nlp at nominal; cv borrows 8 with a low-priority task; the cohort is full."""
    return (
        make_state(_bwc_policy())
        .running(T("n1").team("nlp").gpus(16).priority(500))
        .running(T("c0").team("cv").gpus(16).priority(900))
        .running(T("v").team("cv").gpus(8).priority(100), at=0)
        .running(T("i1").team("idle").gpus(8).priority(500))
        .pending(T("p").team("nlp").gpus(8).priority(500).at(10))
        .obj()
    )


def test_preemptor_gets_the_gpus_its_victim_frees_before_a_higher_priority_borrower() -> None:
    state = _bwc_state()
    d1 = decide_checked(state, 1000)
    assert [(p.victim_id, p.reason) for p in d1.preempt] == [("v", PreemptReason.BORROW_WITHIN_COHORT)]
    apply_decisions(state, d1, 1000)
    assert state.waiting_preemptors() == {"p": "h100"}
    # While the victim stops, a higher-priority borrower of the victim's team arrives.
    state.add_pending(T("q").team("cv").gpus(8).priority(900).at(1001).obj())
    d2 = decide_checked(state, 1001)
    assert d2.empty
    assert d2.pending["p"].code is PendingCode.WAITING_FOR_PREEMPTION
    state.requeue("v", 1030)
    d3 = decide_checked(state, 1030)
    assert [a.task_id for a in d3.admit] == ["p"]
    assert not d3.preempt


def test_waiting_preemptor_stays_its_teams_head() -> None:
    policy = (
        make_policy()
        .pool("h100", nodes=4, gpus_per_node=8)
        .team("nlp", h100=16, reclaim="any", within_team="lower_priority")
        .team("cv", h100=16)
        .build()
    )
    state = (
        make_state(policy)
        .running(T("c1").team("cv").gpus(24).priority(100), at=0)
        .running(T("own").team("nlp").gpus(8).priority(50), at=0)
        .pending(T("p").team("nlp").gpus(8).priority(500).at(10))
        .obj()
    )
    d1 = decide_checked(state, 1000)
    assert {p.victim_id for p in d1.preempt} == {"c1"}
    apply_decisions(state, d1, 1000)
    # A higher-priority task of the same team arrives while c1 stops: it must not start a new plan
    # that takes the preemptor's place (nor preempt `own` in the same breath).
    state.add_pending(T("p2").team("nlp").gpus(8).priority(900).at(1001).obj())
    d2 = decide_checked(state, 1001)
    assert not d2.preempt and not d2.admit
    assert d2.pending["p"].code is PendingCode.WAITING_FOR_PREEMPTION
    state.requeue("c1", 1060)
    d3 = decide_checked(state, 1060)
    assert "p" in {a.task_id for a in d3.admit}


def test_a_victim_requeued_at_the_same_instant_does_not_take_its_gpus_back() -> None:
    state = _bwc_state()
    d1 = decide_checked(state, 1000)
    apply_decisions(state, d1, 1000)
    state.requeue("v", 1000)  # zero grace, same instant: the trap
    d2 = decide_checked(state, 1000)
    assert [a.task_id for a in d2.admit] == ["p"]
    assert not d2.preempt
    apply_decisions(state, d2, 1000)
    assert decide_checked(state, 1000).empty


def test_no_task_is_preempted_twice_without_progress() -> None:
    policy = (
        make_policy()
        .pool("h100", nodes=4, gpus_per_node=8)
        .team("nlp", h100=16, reclaim="any")
        .team("cv", h100=16)
        .build()
    )
    state = make_state(policy).running(T("v").team("cv").gpus(24).priority(100), at=0).obj()
    state.add_pending(T("p").team("nlp").gpus(16).at(5).obj())
    apply_decisions(state, decide_checked(state, 10), 10)
    state.requeue("v", 20)
    state.finish("p") if state.running("p") else None
    # v was preempted once; p leaves; v is readmitted, borrowing again.
    state.remove_pending("p") if state.pending("p") else None
    d = decide_checked(state, 30)
    assert [a.task_id for a in d.admit] == ["v"]
    apply_decisions(state, d, 30)
    assert state.preemption_count("v") == 1
    state.add_pending(T("p2").team("nlp").gpus(16).at(40).obj())
    protected = decide_checked(state, 100)
    assert not protected.preempt
    assert decide_checked(state, 100, KUEUE).preempt  # Kueue takes it back at once
    later = decide_checked(state, 30 + 301)  # the experiment class's min_runtime is 300 s
    assert [p.victim_id for p in later.preempt] == ["v"]


def test_kueue_tries_preemption_in_every_pool_where_it_could_help() -> None:
    # v1beta2's default flavorFungibility (whenCanPreempt: TryNextFlavor): a pool where no victim
    # can go does not end the search (Kueue flavorassigner_test.go "preempt try next flavor";
    # scheduler_test.go "use second flavor when the first has no preemption candidates").
    policy = (
        make_policy()
        .pool("a100", nodes=1, gpus_per_node=8)
        .pool("h100", nodes=1, gpus_per_node=8)
        .team("nlp", a100=8, h100=8, within_team="lower_priority", borrow_limit=0)
        .build()
    )
    state = (
        make_state(policy)
        .running(T("a").team("nlp").gpus(8).priority(900), pool="a100")
        .running(T("h").team("nlp").gpus(8).priority(100), pool="h100")
        .pending(T("p").team("nlp").gpus(8).priority(500))
        .obj()
    )
    assert [p.victim_id for p in decide_checked(state, 10, KUEUE).preempt] == ["h"]
    assert [p.victim_id for p in decide_checked(state, 10).preempt] == ["h"]


def test_a_multi_node_preemptor_keeps_the_nodes_it_will_take_whole() -> None:
    # Found by the hypothesis properties: j3 (9 GPUs, two whole 8-GPU nodes) preempts j4 to free
    # node 0; a 1-GPU task admitted after it in the same cycle must not land on node 1.
    policy = (
        make_policy()
        .pool("p0", nodes=2, gpus_per_node=8)
        .team("t0", p0=11, within_team="lower_priority")
        .team("t1", p0=0)
        .fair_share()
        .build()
    )
    state = (
        make_state(policy)
        .running(T("j4").team("t0").gpus(1).priority(800), placement=(NodeSlice(0, (2,)),))
        .pending(
            T("j3").team("t0").gpus(9).priority(1000).seq(1), T("j0").team("t0").gpus(1).priority(1000).seq(3)
        )
        .obj()
    )
    d = decide_checked(state, 0)
    assert [p.victim_id for p in d.preempt] == ["j4"]
    assert not d.admit  # no free GPU outside the two nodes j3 will take
    apply_decisions(state, d, 0)
    state.requeue("j4", 10)
    assert "j3" in {a.task_id for a in decide_checked(state, 10).admit}


def test_settle_fills_the_cluster_one_head_per_team_per_cycle_in_kueue_mode() -> None:
    policy = (
        make_policy().pool("h100", nodes=4, gpus_per_node=8).team("nlp", h100=16).team("cv", h100=16).build()
    )
    state = make_state(policy).pending(*(T(f"t{i}").team("nlp").gpus(4).at(i) for i in range(8))).obj()
    rounds = settle(state, 0, KUEUE)
    assert len(rounds) == 8 and all(len(r.admit) == 1 for r in rounds)
    assert state.running_count("nlp") == 8


# --- fair share ----------------------------------------------------------------------------------


def _fair_policy(half_life_s: int = 0, weight_a: int = 1):
    return (
        make_policy()
        .pool("h100", nodes=4, gpus_per_node=8)
        .team("a", h100=8, reclaim="any", weight=weight_a)
        .team("b", h100=8, reclaim="any")
        .team("c", h100=16, reclaim="any")
        .fair_share(half_life_s)
        .build()
    )


def test_fair_share_admits_the_team_with_the_lower_share_first() -> None:
    state = (
        make_state(_fair_policy())
        .running(T("a0").team("a").gpus(16))
        .running(T("c0").team("c").gpus(8))
        .pending(T("a1").team("a").gpus(8).priority(900).at(0), T("b1").team("b").gpus(8).priority(100).at(5))
        .obj()
    )
    # 8 GPUs left: b's share after admission is 0 (within nominal), a's is above 0.
    d = decide_checked(state, 10)
    assert [x.task_id for x in d.admit] == ["b1"]


def test_fair_share_weight_makes_a_heavier_team_look_smaller() -> None:
    def run(weight_a: int) -> list[str]:
        state = (
            make_state(_fair_policy(weight_a=weight_a))
            .running(T("a0").team("a").gpus(12))
            .running(T("b0").team("b").gpus(10))
            .pending(T("a1").team("a").gpus(4).at(0), T("b1").team("b").gpus(4).at(0))
            .running(T("c0").team("c").gpus(6))
            .obj()
        )
        return [x.task_id for x in decide_checked(state, 10, EngineConfig(multi_admit=False)).admit]

    assert run(weight_a=1) == ["b1"]  # a would borrow 8, b 6
    assert run(weight_a=4) == ["a1"]  # a's 8 borrowed count a quarter


def _share_rule_state(strategies: tuple[FairShareStrategy, ...]):
    state = (
        make_state(_fair_policy())
        .running(T("a_big").team("a").gpus(24).priority(100))
        .running(T("c0").team("c").gpus(8))
        .pending(T("c1").team("c").gpus(16).priority(100))
        .obj()
    )
    return decide_checked(state, 1000, EngineConfig(fair_share_strategies=strategies))


def test_fair_share_falls_back_to_less_than_initial_share() -> None:
    d = _share_rule_state(
        (FairShareStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, FairShareStrategy.LESS_THAN_INITIAL_SHARE)
    )
    assert [(p.victim_id, p.reason) for p in d.preempt] == [("a_big", PreemptReason.FAIR_SHARE)]


def test_fair_share_final_share_rule_alone_refuses_to_overshoot() -> None:
    d = _share_rule_state((FairShareStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,))
    assert not d.preempt


def test_fair_share_takes_from_the_team_with_the_highest_share() -> None:
    state = (
        make_state(_fair_policy())
        .running(T("a0").team("a").gpus(8).priority(100), at=0)
        .running(T("a1").team("a").gpus(12).priority(100), at=1)
        .running(T("b0").team("b").gpus(8).priority(100), at=0)
        .running(T("b1").team("b").gpus(4).priority(100), at=2)
        .pending(T("c1").team("c").gpus(4).priority(100))
        .obj()
    )
    # The cohort is full; a borrows 12, b borrows 4; c wants 4 within its nominal: a's task goes,
    # although b's is the most recently admitted.
    d = decide_checked(state, 1000, EngineConfig(placement=Placement.NONE))
    assert [p.victim_id for p in d.preempt] == ["a1"]


def _bwc_fair_policy():
    """Fair share; `lender` lends 6 of the pool's 8 GPUs; `c` may borrow within the cohort."""
    return (
        make_policy()
        .pool("p0", nodes=2, gpus_per_node=4)
        .team("lender", p0=6)
        .team("b", p0=0, reclaim="any")
        .team("c", p0=0, reclaim="lower_priority", borrow_within_cohort="lower_priority")
        .fair_share()
        .build()
    )


def test_fair_share_ignores_borrow_within_cohort_so_a_victim_never_takes_its_gpus_back() -> None:
    """Found by hypothesis (zero grace, same-instant requeue, Kueue with node packing). b borrows 5
    for a training task; c's 6-GPU interactive task, which would borrow 6, took it as lower-priority
    (borrow within cohort) although c's share would then be the larger; requeued at once, b's task
    had the lower share, was admitted first and took the GPUs back by fair share, and so on, forever
    at one instant. Kueue had the same loop (issue 3779) and, since PR 4165, ignores
    `borrowWithinCohort` under fair sharing; so does the engine: c waits."""
    from dataclasses import replace

    from gpucommons.testing.strategies import Job, MiniSim

    state = (
        make_state(_bwc_fair_policy())
        .running(T("train").team("b").gpus(5).klass("training"), at=0)
        .pending(T("inter").team("c").gpus(6).klass("interactive"))
        .obj()
    )
    d = decide_checked(state, 0, KUEUE)
    assert not d.preempt and not d.admit  # c's share with 6 (6/6) > b's (5/6): no fair-share victim

    jobs = [
        Job(T("train").team("b").gpus(5).klass("training").seq(0).obj(), 0, 30),
        Job(T("inter").team("c").gpus(6).klass("interactive").seq(1).obj(), 0, 30),
    ]
    for config in (KUEUE, replace(KUEUE, placement=Placement.PACK), EngineConfig.commons()):
        result = MiniSim(_bwc_fair_policy(), config, grace_s=0.0, requeue_same_instant=True).run(jobs)
        assert not result.preemptions and result.finished == 2


def test_fair_share_under_a_sub_cohort_without_quota_measures_what_it_may_borrow_from_above() -> None:
    """Found by hypothesis (Kueue rules, zero grace, same-instant requeue): b and c sit in a
    sub-cohort without quota, borrowing the one GPU the lender's sub-cohort lends through the root.
    Measured against the sub-cohort's own quota (0), both shares were 0, and 0 ≤ 0 let each take
    the GPU from the other, forever at one instant. Kueue divides by what the parent may ever hold
    (`potentialAvailable`): 1 GPU, so each borrower's share is 1000 and neither preempts the other."""
    from gpucommons.testing.strategies import Job, MiniSim

    policy = (
        make_policy()
        .pool("p0", nodes=1, gpus_per_node=2)
        .cohort("root")
        .cohort("a", parent="root")
        .cohort("sub", parent="root")
        .team("lender", cohort="a", p0=1)
        .team("b", cohort="sub", p0=0, reclaim="any")
        .team("c", cohort="sub", p0=0, reclaim="lower_priority")
        .fair_share()
        .build()
    )
    state = (
        make_state(policy)
        .running(T("inter").team("c").gpus(1).klass("interactive"), at=0)
        .pending(T("train").team("b").gpus(1).klass("training"))
        .obj()
    )
    d = decide_checked(state, 0, KUEUE)
    assert not d.preempt and not d.admit
    jobs = [
        Job(T("train").team("b").gpus(1).klass("training").seq(0).obj(), 0, 30),
        Job(T("inter").team("c").gpus(1).klass("interactive").seq(1).obj(), 0, 30),
    ]
    result = MiniSim(policy, KUEUE, grace_s=0.0, requeue_same_instant=True).run(jobs)
    assert not result.preemptions and result.finished == 2


def test_usage_half_life_remembers_who_used_the_cluster_lately() -> None:
    def order(half_life_s: int) -> list[str]:
        state = make_state(_fair_policy(half_life_s=half_life_s)).obj()
        state.add_pending(T("a_past").team("a").gpus(32).obj())
        apply_decisions(state, decide_checked(state, 0), 0)
        state.finish("a_past", now=600)
        state.add_pending(T("c0").team("c").gpus(16).at(600).obj())
        apply_decisions(state, decide_checked(state, 600), 600)
        state.add_pending(T("a1").team("a").gpus(12).at(650).obj())
        state.add_pending(T("b1").team("b").gpus(12).at(660).obj())
        state.advance_usage(700)
        return [x.task_id for x in decide_checked(state, 700).admit]

    assert order(half_life_s=0) == ["a1"]  # equal shares: the older task
    assert order(half_life_s=600) == ["b1"]  # a used 32 GPUs until recently


def test_decayed_usage_rebuilt_from_history_is_what_the_state_remembered() -> None:
    """A restarted server has only its ledger: the closed form over what each team held must give
    the usage the state brought up to date admission by admission, and the same order of teams."""
    from gpucommons.engine.state import decayed_usage_from_history

    state = make_state(_fair_policy(half_life_s=600)).obj()
    past, now_running = T("a_past").team("a").gpus(32).obj(), T("c0").team("c").gpus(16).at(600).obj()
    state.add_pending(past)
    apply_decisions(state, decide_checked(state, 0), 0)
    state.finish("a_past", now=600)
    state.add_pending(now_running)
    apply_decisions(state, decide_checked(state, 600), 600)
    state.advance_usage(900)
    _, remembered = state.usage_memory()

    history = [("a", 0.0, 600.0, past.resources), ("c", 600.0, None, now_running.resources)]
    rebuilt = decayed_usage_from_history(history, 900, 600)
    for team in ("a", "b", "c"):
        assert rebuilt.get(team, (0.0, 0.0, 0.0)) == pytest.approx(remembered[team])

    restarted = make_state(_fair_policy(half_life_s=600)).obj()
    restarted.add_pending(now_running)
    restarted.admit("c0", state.running("c0").admission, 600)
    restarted.restore_usage_memory(900, rebuilt)
    for task in (T("a1").team("a").gpus(12).at(650).obj(), T("b1").team("b").gpus(12).at(660).obj()):
        state.add_pending(task)
        restarted.add_pending(task)
    assert [x.task_id for x in decide_checked(restarted, 900).admit] == ["b1"]
    assert decide_checked(restarted, 900) == decide_checked(state, 900)


def test_a_class_that_is_not_preemptible_protects_its_tasks_whatever_the_request_says() -> None:
    policy = (
        make_policy()
        .pool("h100", nodes=2, gpus_per_node=8)
        .team("nlp", h100=16, within_team="lower_priority", borrow_limit=0)
        .build()
    )
    from dataclasses import replace

    prod = replace(T("prod").team("nlp").gpus(16).klass("production").priority(100).obj(), preemptible=True)
    state = make_state(policy).running(prod).pending(T("p").team("nlp").gpus(8).priority(900)).obj()
    assert decide_checked(state, 10).preempt == ()


def test_kueue_reclaims_a_readmitted_borrower_again_and_again_while_commons_guarantees_progress() -> None:
    """The second genuine Kueue loop: a borrower readmitted between a lender's short tasks is
    reclaimed each time without progress. With min-runtime protection every task runs at least its
    class's min_runtime (300 s for experiments) between two preemptions."""
    from gpucommons.testing.strategies import Job, MiniSim

    policy = (
        make_policy()
        .pool("h100", nodes=2, gpus_per_node=8)
        .team("a", h100=8, reclaim="any")
        .team("b", h100=8)
        .build()
    )
    jobs = [
        Job(T("b1").team("b").gpus(8).seq(1).obj(), 0, 1e5),
        Job(T("b2").team("b").gpus(8).seq(2).obj(), 0, 3000),
        *(Job(T(f"a{i}").team("a").gpus(8).seq(10 + i).obj(), 10 + 200 * i, 100) for i in range(10)),
    ]
    kueue = MiniSim(policy, KUEUE, grace_s=5).run(jobs, until=5000)
    commons = MiniSim(policy, EngineConfig.commons(), grace_s=5).run(jobs, until=5000)
    assert kueue.preemptions["b2"] == 10  # at every one of a's arrivals
    assert sum(commons.preemptions.values()) < sum(kueue.preemptions.values())
    for task in commons.preemptions:
        times = sorted(t for (tid, t) in commons.per_instant if tid == task)
        assert all(later - earlier >= 300 for earlier, later in pairwise(times)), times


def test_kueue_may_preempt_a_requeued_victim_again_at_the_same_instant() -> None:
    """Found by hypothesis (zero grace, victims requeued at the very instant): an 11-GPU gang needs
    two whole free nodes, so team a reclaims the 1-GPU borrower on one of them. Once it is gone, the
    gang is admitted and, Kueue admitting one head per team per cycle, the borrower comes back on
    the gang's second node before a's next head, which then reclaims it again: two preemptions of one
    task at one instant, by two preemptors, as Kueue would do. `commons` admits a's next head in the
    same cycle as the gang, and min-runtime protection would keep the readmitted borrower anyway."""
    from dataclasses import replace

    from gpucommons.testing.strategies import Job, MiniSim

    policy = (
        make_policy()
        .pool("h100", nodes=2, gpus_per_node=8)
        .team("a", h100=12, reclaim="lower_priority")
        .team("b", h100=0)
        .build()
    )
    jobs = [
        *(Job(T(f"short{i}").team("a").gpus(1).priority(1000).seq(i).obj(), 0, 30) for i in range(8)),
        Job(T("gang").team("a").gpus(11).priority(1000).seq(10).obj(), 0, 30),
        Job(T("late").team("a").gpus(1).priority(1000).seq(11).obj(), 30, 30),
        Job(T("borrower").team("b").gpus(1).priority(800).seq(12).obj(), 0, 60),
    ]

    def preempted_at_30(config: EngineConfig) -> list[str]:
        result = MiniSim(policy, config, grace_s=0.0, requeue_same_instant=True).run(jobs)
        return sorted(by for (_, by, at), n in result.per_preemptor.items() for _ in range(n) if at == 30)

    assert preempted_at_30(replace(KUEUE, placement=Placement.PACK)) == ["gang", "late"]
    assert preempted_at_30(EngineConfig.commons()) == ["gang"]


def test_static_examines_again_a_head_that_failed_on_the_nodes_in_its_second_pool() -> None:
    """Found by hypothesis: under `static` a team's heads are skipped while it is unchanged only if
    they failed on its own quota. The reason given is the first pool's ("the most team a may ever
    hold in pool small is 0 GPUs"), but in its second pool the 5-GPU gang waited for two whole
    nodes that team b held. When b's task ended, a was unchanged, and the gang waited forever."""
    from gpucommons.testing.strategies import Job, MiniSim

    policy = (
        make_policy()
        .pool("big", nodes=3, gpus_per_node=4)
        .pool("small", nodes=1, gpus_per_node=2)
        .team("a", small=0, big=5)
        .team("b", big=5)
        .build()
    )
    jobs = [
        Job(T("a1").team("a").gpus(1).pools("big").seq(0).obj(), 0, 30),
        Job(T("b_gang").team("b").gpus(5).seq(1).obj(), 0, 60),
        Job(T("a2").team("a").gpus(1).seq(2).obj(), 0, 30),
        Job(T("a_gang").team("a").gpus(5).seq(3).obj(), 0, 30),
    ]
    result = MiniSim(policy, EngineConfig.static_partition()).run(jobs)
    assert result.finished == 4


def test_static_gives_a_team_unchanged_since_its_heads_failed_the_same_reasons_as_afresh() -> None:
    """Under `static` a team whose heads all failed on its own quota is not examined again while
    `team_version` stands: its reasons are the last cycle's, and they are what a cycle that
    examines it (no remembered reasons) decides; a change to the team is seen at once."""
    static = EngineConfig.static_partition()
    policy = (
        make_policy().pool("h100", nodes=4, gpus_per_node=8).team("nlp", h100=8).team("cv", h100=16).build()
    )
    state = (
        make_state(policy)
        .running(T("n1").team("nlp").gpus(8))
        .pending(T("n2").team("nlp").gpus(4).at(1), T("n3").team("nlp").gpus(8).at(2))
        .obj()
    )
    first = decide_checked(state, 10, static)
    assert "n2" in first.pending and "nlp" in state.failed_teams

    def afresh(now: float) -> dict[str, object]:
        remembered = dict(state.failed_teams)
        state.failed_teams.clear()
        decisions = decide_checked(state, now, static)
        state.failed_teams.update(remembered)
        return dict(decisions.pending)

    # Another team's change leaves nlp's reasons as they were.
    state.add_pending(T("c1").team("cv").gpus(16).at(20).obj())
    second = decide_checked(state, 20, static)
    assert [a.task_id for a in second.admit] == ["c1"]
    assert second.pending == first.pending == afresh(20)
    apply_decisions(state, second, 20)
    assert decide_checked(state, 25, static).pending == first.pending == afresh(25)
    # nlp's own change (its running task ends) is seen: its head is admitted.
    state.finish("n1", 30)
    third = decide_checked(state, 30, static)
    assert [a.task_id for a in third.admit] == ["n2"]
    assert third.pending == afresh(30)
