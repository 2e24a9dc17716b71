"""The loop both callers run at one instant (`engine.instant.settle_instant`): events between
cycles, a second decision with fresh victim inputs, its bound, and no cycle while nothing waits."""

from __future__ import annotations

from gpucommons.engine import ClusterState, Decisions, EngineConfig, PreemptReason, apply_decisions
from gpucommons.engine.instant import settle_instant
from gpucommons.testing.builders import make_policy, make_state, make_task

T = make_task
COMMONS = EngineConfig.commons()


class ZeroGrace:
    """A caller whose victims stop the moment they are told to (grace period 0s)."""

    def __init__(self, state: ClusterState, unsaved: dict[str, float] | None = None) -> None:
        self.state = state
        self.unsaved = unsaved or {}
        self.events_taken = 0
        self.decided: list[Decisions] = []

    def take_events(self, now: float) -> None:
        self.events_taken += 1
        for rt in list(self.state.iter_running()):
            if rt.preempting:
                self.state.requeue(rt.task.id, now)

    def refresh_victim_inputs(self, now: float) -> bool:
        for task_id, gpu_s in self.unsaved.items():
            self.state.set_unsaved_work(task_id, gpu_s)
        return bool(self.unsaved)

    def apply(self, decisions: Decisions, now: float) -> bool:
        self.decided.append(decisions)
        apply_decisions(self.state, decisions, now)
        return not decisions.empty


def _reclaim_state() -> ClusterState:
    """b borrows 4 of a's GPUs with two 2-GPU tasks; a wants its 4 back."""
    policy = (
        make_policy()
        .pool("h100", nodes=1, gpus_per_node=8)
        .team("a", h100=4, reclaim="any")
        .team("b", h100=4)
        .build()
    )
    return (
        make_state(policy)
        .running(T("b0").team("b").gpus(4).priority(100), at=0)
        .running(T("v1").team("b").gpus(2).priority(100), at=1)
        .running(T("v2").team("b").gpus(2).priority(100), at=2)
        .pending(T("p").team("a").gpus(2).priority(100).at(10))
        .obj()
    )


def test_a_victim_that_stops_at_once_lets_its_preemptor_in_at_the_same_instant() -> None:
    state = _reclaim_state()
    hands = ZeroGrace(state)
    instant = settle_instant(state, 10.0, COMMONS, hands, max_cycles=10)
    assert [(p.victim_id, p.preemptor_id, p.reason) for p in instant.preempted] == [
        ("v2", "p", PreemptReason.RECLAIM)
    ]
    assert [a.task_id for a in instant.admitted] == ["p"]
    # preempt; (victim stops) admit p; nothing more for v2, which waits for room again.
    assert instant.settled and instant.cycles == 3
    assert state.running("p") is not None and state.pending("v2") is not None
    assert hands.events_taken == 3


def test_a_cycle_that_preempts_is_decided_again_with_fresh_unsaved_work() -> None:
    # v2 is the most recently admitted, taken first, unless fresh inputs say it has more to lose.
    state = _reclaim_state()
    instant = settle_instant(state, 10.0, COMMONS, ZeroGrace(state, {"v2": 500.0}), max_cycles=10)
    assert [p.victim_id for p in instant.preempted] == ["v1"]


def test_the_loop_stops_at_its_bound_and_says_it_did_not_settle() -> None:
    state = _reclaim_state()

    class Restless(ZeroGrace):
        def apply(self, decisions: Decisions, now: float) -> bool:
            return True  # claims a change every time: a zero-time loop

    instant = settle_instant(state, 10.0, COMMONS, Restless(state), max_cycles=5)
    assert not instant.settled
    assert instant.cycles == 5


def test_no_cycle_runs_while_nothing_waits_but_events_are_taken() -> None:
    policy = make_policy().pool("h100", nodes=1, gpus_per_node=8).team("a", h100=8).build()
    state = make_state(policy).running(T("r").team("a").gpus(8)).obj()
    hands = ZeroGrace(state)
    instant = settle_instant(state, 5.0, COMMONS, hands, max_cycles=5)
    assert (instant.cycles, instant.settled, hands.events_taken, hands.decided) == (0, True, 1, [])
    assert instant.decisions.empty and instant.pending == {}


def test_the_same_state_and_instant_give_the_same_cycles() -> None:
    runs = []
    for _ in range(2):
        state = _reclaim_state()
        hands = ZeroGrace(state)
        settle_instant(state, 10.0, COMMONS, hands, max_cycles=10)
        runs.append(hands.decided)
    assert runs[0] == runs[1]
