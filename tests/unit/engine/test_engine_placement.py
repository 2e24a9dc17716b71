"""Node-level placement: one node when it fits on one (best fit), whole nodes for bigger gangs,
global GPU indices, dedicated teams on their own nodes, all-or-nothing."""

from __future__ import annotations

from gpucommons.engine import NodeSlice
from gpucommons.testing.builders import decide_checked, make_policy, make_state, make_task

T = make_task


def _policy(dedicated: bool = False):
    b = make_policy().pool("h100", nodes=4, gpus_per_node=8).team("nlp", h100=24)
    other = b.team("secure", h100=8, dedicated=True) if dedicated else b.team("cv", h100=8)
    return other.build()


def _node(n: int, *local: int) -> NodeSlice:
    return NodeSlice(n, tuple(n * 8 + i for i in local))


def test_best_fit_picks_the_fullest_node_that_still_holds_the_task() -> None:
    state = (
        make_state(_policy())
        .running(T("r0").team("nlp").gpus(6), placement=(_node(0, *range(6)),))
        .running(T("r1").team("nlp").gpus(4), placement=(_node(1, *range(4)),))
        .pending(T("a").team("nlp").gpus(2))
        .obj()
    )
    (admit,) = decide_checked(state, 10).admit
    assert admit.admission.placement == (_node(0, 6, 7),)  # node 0 has exactly 2 free


def test_gpu_indices_are_global_in_the_pool() -> None:
    state = (
        make_state(_policy())
        .running(T("r").team("nlp").gpus(8), placement=(_node(0, *range(8)),))
        .pending(T("a").team("nlp").gpus(3))
        .obj()
    )
    (admit,) = decide_checked(state, 10).admit
    assert admit.admission.placement == (NodeSlice(1, (8, 9, 10)),)


def test_a_task_larger_than_a_node_takes_whole_free_nodes() -> None:
    state = (
        make_state(_policy())
        .running(T("r").team("cv").gpus(1), placement=(_node(1, 0),))
        .pending(T("a").team("nlp").gpus(12))
        .obj()
    )
    (admit,) = decide_checked(state, 10).admit
    assert admit.admission.placement == (_node(0, *range(8)), _node(2, 0, 1, 2, 3))


def test_a_gang_is_all_or_nothing() -> None:
    state = (
        make_state(_policy())
        .running(T("r1").team("cv").gpus(1), placement=(_node(1, 0),))
        .running(T("r2").team("cv").gpus(1), placement=(_node(2, 0),))
        .running(T("r3").team("cv").gpus(1), placement=(_node(3, 0),))
        .pending(T("a").team("nlp").gpus(16))
        .obj()
    )
    d = decide_checked(state, 10)
    assert not d.admit
    assert d.pending["a"].code == "no_node_fits"
    assert "needs 2 whole free H100 nodes" in d.pending["a"].message


def test_dedicated_team_lands_on_its_own_nodes_and_others_never_do() -> None:
    state = (
        make_state(_policy(dedicated=True))
        .pending(T("s").team("secure").gpus(8), T("a").team("nlp").gpus(24))
        .obj()
    )
    admits = {a.task_id: a.admission.placement for a in decide_checked(state, 10).admit}
    assert [s.node for s in admits["s"]] == [3]  # the highest-numbered node
    assert [s.node for s in admits["a"]] == [0, 1, 2]
