"""Consolidation (issue 9, item 3): a head its quota allows but that no node holds gets room made by
moving cheap tasks that fit again elsewhere at once — and never at any other price."""

from __future__ import annotations

from dataclasses import replace

from gpucommons.engine import ClusterState, EngineConfig, NodeSlice, PendingCode, PreemptReason
from gpucommons.engine.types import Decisions
from gpucommons.testing.builders import decide_checked, make_policy, make_state, make_task, settle

T = make_task
COMMONS = EngineConfig.commons()
NOW = 1000.0  # every running task below was admitted at 0: past min_runtime and the move's wait


def _on(node: int, first_local: int, n: int, gpn: int = 8) -> tuple[NodeSlice, ...]:
    return (NodeSlice(node, tuple(node * gpn + first_local + i for i in range(n))),)


def _policy(nodes: int = 4, classes: bool = False):  # type: ignore[no-untyped-def]
    builder = make_policy().pool("h100", nodes=nodes, gpus_per_node=8)
    if classes:
        builder = builder.priority_class("normal", 100).priority_class("prod", 900, preemptible=False)
    return builder.team("nlp", h100=16).team("cv", h100=16).build()


def _half_full(unsaved: float = 0.0, at: float = 0.0) -> ClusterState:
    """Four nodes with 4 of 8 GPUs held each by cv: 16 GPUs free, none 8 together."""
    b = make_state(_policy())
    for n in range(4):
        b = b.running(T(f"r{n}").team("cv").gpus(4), placement=_on(n, 0, 4), unsaved_gpu_s=unsaved, at=at)
    return b.pending(T("a").team("nlp").gpus(8)).obj()


def _moves(d: Decisions) -> dict[str, str]:
    return {p.victim_id: p.preemptor_id for p in d.preempt if p.reason is PreemptReason.CONSOLIDATION}


def test_a_fragmented_head_gets_a_node_by_moving_one_cheap_task() -> None:
    d = decide_checked(_half_full(), NOW, COMMONS)
    assert _moves(d) == {"r0": "a"}  # the cheapest plan, lowest node on ties
    assert d.pending["a"].code is PendingCode.WAITING_FOR_PREEMPTION
    (p,) = d.preempt
    assert "consolidation" in p.message and "fits again elsewhere" in p.message


def test_without_consolidation_the_head_waits_on_fragmentation() -> None:
    d = decide_checked(_half_full(), NOW, replace(COMMONS, consolidation=False))
    assert not d.preempt and d.pending["a"].code is PendingCode.NO_NODE_FITS


def test_kueue_and_static_never_consolidate() -> None:
    assert not EngineConfig.kueue().consolidation and not EngineConfig.static_partition().consolidation
    assert EngineConfig.named("kueue+pack").consolidation is False


def test_the_task_with_the_least_unsaved_work_is_the_one_moved() -> None:
    b = make_state(_policy())
    for n, unsaved in enumerate([800.0, 10.0, 500.0, 700.0]):
        b = b.running(T(f"r{n}").team("cv").gpus(4), placement=_on(n, 0, 4), unsaved_gpu_s=unsaved)
    d = decide_checked(b.pending(T("a").team("nlp").gpus(8)).obj(), NOW, COMMONS)
    assert _moves(d) == {"r1": "a"}


def test_no_task_with_more_unsaved_work_than_the_bound_is_moved() -> None:
    d = decide_checked(_half_full(unsaved=901.0), NOW, COMMONS)
    assert not d.preempt and d.pending["a"].code is PendingCode.NO_NODE_FITS


def test_a_task_that_started_less_than_the_moves_wait_ago_stays() -> None:
    d = decide_checked(_half_full(at=NOW - 299.0), NOW, COMMONS)
    assert not d.preempt
    d = decide_checked(_half_full(at=NOW - 300.0), NOW, COMMONS)
    assert _moves(d) == {"r0": "a"}


def test_a_task_inside_its_class_min_runtime_stays() -> None:
    config = replace(COMMONS, consolidation_min_run_s=0.0)
    d = decide_checked(_half_full(at=NOW - 200.0), NOW, config)  # the default class: 300 s
    assert not d.preempt


def test_a_task_that_saves_no_state_is_never_moved() -> None:
    """A move restarts the task from its last save; one that never saves would start from nothing."""
    b = make_state(_policy())
    for n in range(4):
        b = b.running(T(f"r{n}").team("cv").gpus(4).no_checkpoint(), placement=_on(n, 0, 4))
    d = decide_checked(b.pending(T("a").team("nlp").gpus(8)).obj(), NOW, COMMONS)
    assert not d.preempt and d.pending["a"].code is PendingCode.NO_NODE_FITS


def test_of_tasks_alike_only_the_checkpointed_one_is_moved() -> None:
    b = make_state(_policy())
    for n in range(4):
        task = T(f"r{n}").team("cv").gpus(4)
        b = b.running(task if n == 2 else task.no_checkpoint(), placement=_on(n, 0, 4))
    d = decide_checked(b.pending(T("a").team("nlp").gpus(8)).obj(), NOW, COMMONS)
    assert _moves(d) == {"r2": "a"}


def test_a_non_preemptible_task_is_never_moved() -> None:
    b = make_state(_policy(classes=True))
    for n in range(4):
        b = b.running(T(f"r{n}").team("cv").gpus(4).klass("prod"), placement=_on(n, 0, 4))
    d = decide_checked(b.pending(T("a").team("nlp").gpus(8).klass("normal")).obj(), NOW, COMMONS)
    assert not d.preempt and d.pending["a"].code is PendingCode.NO_NODE_FITS


def test_no_plan_unless_every_moved_task_fits_again_at_once() -> None:
    # Two nodes, 6 and 5 GPUs held (2 and 3 free). A 4-GPU head fits on either once its task is
    # moved, but that task (6 or 5 GPUs) would not fit again in what is left: no move.
    b = make_state(_policy(nodes=2))
    b = b.running(T("big").team("cv").gpus(6), placement=_on(0, 0, 6))
    b = b.running(T("mid").team("cv").gpus(5), placement=_on(1, 0, 5))
    d = decide_checked(b.pending(T("a").team("nlp").gpus(4)).obj(), NOW, COMMONS)
    assert not d.preempt and d.pending["a"].code is PendingCode.NO_NODE_FITS


def test_a_gang_gets_whole_nodes_by_emptying_the_cheapest() -> None:
    # Four nodes: 0 and 1 free, 2 and 3 hold a 2-GPU task each: a 24-GPU gang (3 nodes) needs one
    # of them emptied, and its task fits on the other.
    policy = (
        make_policy().pool("h100", nodes=4, gpus_per_node=8).team("nlp", h100=24).team("cv", h100=8).build()
    )
    b = make_state(policy)
    b = b.running(T("x").team("cv").gpus(2), placement=_on(2, 0, 2), unsaved_gpu_s=50.0)
    b = b.running(T("y").team("cv").gpus(2), placement=_on(3, 0, 2), unsaved_gpu_s=5.0)
    d = decide_checked(b.pending(T("g").team("nlp").gpus(24)).obj(), NOW, COMMONS)
    assert _moves(d) == {"y": "g"}


def test_quota_still_rules_a_borrower_beyond_its_limit_is_not_helped() -> None:
    # nlp may not hold more than 8 (borrow limit 0): the head is refused by quota, not placement.
    policy = (
        make_policy()
        .pool("h100", nodes=4, gpus_per_node=8)
        .team("nlp", h100=8, borrow_limit=0)
        .team("cv", h100=24)
        .build()
    )
    b = make_state(policy).running(T("n0").team("nlp").gpus(4), placement=_on(0, 0, 4))
    for n in range(1, 4):
        b = b.running(T(f"r{n}").team("cv").gpus(4), placement=_on(n, 0, 4))
    d = decide_checked(b.pending(T("a").team("nlp").gpus(8)).obj(), NOW, COMMONS)
    assert not _moves(d)


def test_after_the_move_the_head_runs_and_the_moved_task_runs_elsewhere() -> None:
    state = _half_full()
    settle(state, NOW, COMMONS)  # r0 is told to stop
    state.requeue("r0", NOW + 30)  # its grace period ends
    rounds = settle(state, NOW + 30, COMMONS)
    admitted = {a.task_id: a.admission for d in rounds for a in d.admit}
    assert set(admitted) == {"a", "r0"}
    assert [s.node for s in admitted["a"].placement] == [0]
    assert admitted["r0"].placement[0].node != 0
    assert not [p for d in rounds for p in d.preempt]  # one move, then nothing more
