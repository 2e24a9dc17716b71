"""ClusterState: the caller's side of the contract (queues, lifecycle, incremental indexes)."""

from __future__ import annotations

import pytest

from gpucommons.domain.resources import Resources
from gpucommons.engine import Admission, ClusterState, NodeSlice, queue_key
from gpucommons.engine.placement import PlacementError
from gpucommons.testing.builders import make_policy, make_state, make_task

T = make_task


def _policy():
    return (
        make_policy()
        .pool("h100", nodes=2, gpus_per_node=8)
        .cohort("org")
        .cohort("research", parent="org")
        .team("nlp", cohort="research", h100=8, lend_limit=2)
        .team("cv", cohort="org", h100=8)
        .build()
    )


def test_queue_order_is_priority_then_queue_time_then_sequence() -> None:
    state = ClusterState(_policy())
    state.add_pending(T("late").team("nlp").priority(100).at(5).seq(1).obj())
    state.add_pending(T("tie_b").team("nlp").priority(100).at(1).seq(3).obj())
    state.add_pending(T("tie_a").team("nlp").priority(100).at(1).seq(2).obj())
    state.add_pending(T("urgent").team("nlp").priority(900).at(9).seq(4).obj())
    assert state.queue_ids("nlp") == ["urgent", "tie_a", "tie_b", "late"]
    assert [t.id for t in state.iter_pending("nlp")] == state.queue_ids("nlp")
    assert queue_key(state.pending("urgent")) == (-900, 9, 4)  # type: ignore[arg-type]


def test_lifecycle_admit_preempt_requeue_finish() -> None:
    state = ClusterState(_policy())
    state.add_pending(T("v").team("cv").gpus(8).seq(1).obj())
    state.add_pending(T("p").team("nlp").gpus(8).seq(2).obj())
    rt = state.admit("v", Admission("h100", (NodeSlice(0, tuple(range(8))),)), now=10)
    assert rt.admitted_at == 10 and state.usage("cv", "h100") == Resources(8)
    state.mark_preempting("v", preemptor_id="p")
    assert state.running("v").preempting  # type: ignore[union-attr]
    assert state.victims_of("p") == {"v"} and state.preemptor_of("v") == "p"
    again = state.requeue("v", now=40)
    assert again.queued_at == 40 and state.preemption_count("v") == 1
    assert state.usage("cv", "h100") == Resources() and state.free_gpus("h100") == 16
    assert state.victims_of("p") == frozenset()
    state.admit("p", Admission("h100", (NodeSlice(1, tuple(range(8, 16))),)), now=41)
    assert state.waiting_preemptors() == {}
    finished = state.finish("p", now=99)
    assert finished.task.id == "p" and state.running_count() == 0 and state.pending_count() == 1


def test_a_rebuilt_state_can_restore_preemption_counts() -> None:
    state = make_state(_policy()).running(T("v").team("cv").gpus(8)).obj()
    state.set_preemption_count("v", 2)
    assert state.preemption_count("v") == 2
    state.set_preemption_count("v", 0)
    assert state.preemption_count("v") == 0
    with pytest.raises(KeyError, match="neither pending nor running"):
        state.set_preemption_count("gone", 1)


def test_cancelling_a_waiting_preemptor_releases_its_claim() -> None:
    state = make_state(_policy()).running(T("v").team("cv").gpus(8)).pending(T("p").team("nlp").gpus(8)).obj()
    state.mark_preempting("v", "p")
    state.remove_pending("p")
    assert state.waiting_preemptors() == {} and state.preemptor_of("v") is None


def test_usage_is_pushed_up_nested_cohorts_and_back() -> None:
    state = make_state(_policy()).running(T("a").team("nlp").gpus(8)).running(T("b").team("cv").gpus(4)).obj()
    q = state.quota
    # nlp keeps 6 of its 8 to itself (lend limit 2): only 2 of its usage sits in the cohorts.
    assert q.cohort_usage[("research", "h100")] == Resources(2)
    assert q.cohort_usage[("org", "h100")] == Resources(6)
    assert q.subtree_quota[("org", "h100")] == Resources(10)
    state.finish("a")
    state.finish("b")
    assert q.cohort_usage[("research", "h100")] == Resources()
    assert q.cohort_usage[("org", "h100")] == Resources()


def test_bad_calls_name_what_is_wrong() -> None:
    state = ClusterState(_policy())
    with pytest.raises(ValueError, match="unknown team 'ops'"):
        state.add_pending(T("x").team("ops").obj())
    state.add_pending(T("x").team("nlp").obj())
    with pytest.raises(ValueError, match="already known"):
        state.add_pending(T("x").team("nlp").obj())
    with pytest.raises(KeyError, match="not pending"):
        state.remove_pending("nope")
    with pytest.raises(KeyError, match="not running"):
        state.finish("x")
    with pytest.raises(ValueError, match="no quota in pool 'a100'"):
        state.admit("x", Admission("a100"), 0)


def test_admitting_onto_gpus_already_held_is_refused_and_changes_nothing() -> None:
    state = (
        make_state(_policy())
        .running(T("a").team("cv").gpus(8), placement=(NodeSlice(0, tuple(range(8))),))
        .obj()
    )
    state.add_pending(T("b").team("nlp").gpus(2).obj())
    before = state.fingerprint()
    with pytest.raises(PlacementError, match="already held"):
        state.admit("b", Admission("h100", (NodeSlice(0, (0, 1)),)), 5)
    assert state.fingerprint() == before


def test_a_policy_change_keeps_running_tasks_and_recounts_usage() -> None:
    state = make_state(_policy()).running(T("a").team("nlp").gpus(8)).pending(T("b").team("cv").gpus(1)).obj()
    bigger = (
        make_policy().pool("h100", nodes=4, gpus_per_node=8).team("nlp", h100=16).team("cv", h100=16).build()
    )
    state.set_policy(bigger)
    assert state.running("a") is not None and state.usage("nlp", "h100") == Resources(8)
    assert state.pending("b") is not None and state.free_gpus("h100") == 24


def test_min_running_priority_follows_admissions_and_departures() -> None:
    """Preemption skips a team whose lowest running priority rules out every victim: the index
    behind that must follow admissions, requeues and finishes exactly."""
    state = ClusterState(_policy())
    assert state.min_running_priority("nlp") is None
    state.add_pending(T("low").team("nlp").gpus(1).priority(100).seq(1).obj())
    state.add_pending(T("high").team("nlp").gpus(1).priority(900).seq(2).obj())
    state.admit("high", Admission("h100", (NodeSlice(0, (0,)),)), now=1)
    assert state.min_running_priority("nlp") == 900
    state.admit("low", Admission("h100", (NodeSlice(0, (1,)),)), now=2)
    assert state.min_running_priority("nlp") == 100
    state.mark_preempting("low")
    state.requeue("low", now=3)
    assert state.min_running_priority("nlp") == 900
    state.finish("high", now=4)
    assert state.min_running_priority("nlp") is None and state.min_running_priority("cv") is None


def test_nodes_out_of_service_take_no_new_work_and_come_back() -> None:
    state = ClusterState(_policy())
    state.add_pending(T("on1").team("cv").gpus(8).seq(1).obj())
    state.admit("on1", Admission("h100", (NodeSlice(1, tuple(range(8, 16))),)), now=1)
    state.set_out_of_service("h100", frozenset({0}))
    assert state.free_gpus("h100") == 0 and state.out_of_service("h100") == {0}
    assert state.nodes.find("nlp", "h100", 1) is None
    # The task on the other node ends: its node is free again; node 0 still takes nothing.
    state.finish("on1", now=2)
    assert state.nodes.find("nlp", "h100", 8) == (NodeSlice(1, tuple(range(8, 16))),)
    # A new policy keeps the nodes out of service; the backend's all-clear brings node 0 back.
    state.set_policy(_policy())
    assert state.free_gpus("h100") == 8
    state.set_out_of_service("h100", frozenset())
    assert state.free_gpus("h100") == 16 and state.nodes.find("nlp", "h100", 16) is not None


def test_pending_totals_follow_the_queues_by_team_and_pool_asked_for() -> None:
    state = ClusterState(_policy())
    state.add_pending(T("any").team("nlp").gpus(2).seq(1).obj())
    state.add_pending(T("h100").team("nlp").gpus(3).pools("h100").seq(2).obj())
    state.add_pending(T("cv").team("cv").gpus(8).seq(3).obj())
    assert state.pending_totals() == {("nlp", ""): (1, 2), ("nlp", "h100"): (1, 3), ("cv", ""): (1, 8)}
    state.admit("cv", Admission("h100", (NodeSlice(0, tuple(range(8))),)), now=1)
    state.remove_pending("any")
    assert state.pending_totals() == {("nlp", "h100"): (1, 3)}
