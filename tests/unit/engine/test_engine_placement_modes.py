"""Placement modes: `none` counts quota only, `spread` is kube-scheduler's default (the node with
the most free GPUs), `pack` is best fit (the fullest node that holds the task)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpucommons.engine import EngineConfig, NodeSlice, PendingCode, Placement
from gpucommons.testing.builders import decide_checked, make_policy, make_state, make_task

T = make_task
SPREAD = EngineConfig(placement=Placement.SPREAD)


def _node(n: int, *local: int) -> NodeSlice:
    return NodeSlice(n, tuple(n * 8 + i for i in local))


def _half_full_cluster():
    """Four 8-GPU nodes: node 0 half used, nodes 2 and 3 full, node 1 free."""
    policy = make_policy().pool("h100", nodes=4, gpus_per_node=8).team("nlp", h100=32).build()
    return (
        make_state(policy)
        .running(T("r0").team("nlp").gpus(4), placement=(_node(0, *range(4)),))
        .running(T("r2").team("nlp").gpus(8), placement=(_node(2, *range(8)),))
        .running(T("r3").team("nlp").gpus(8), placement=(_node(3, *range(8)),))
    )


def test_spread_puts_a_small_task_on_the_node_with_the_most_free_gpus() -> None:
    state = _half_full_cluster().pending(T("a").team("nlp").gpus(2)).obj()
    (admit,) = decide_checked(state, 10, SPREAD).admit
    assert admit.admission.placement == (_node(1, 0, 1),)


def test_pack_puts_a_small_task_on_the_fullest_node_that_holds_it() -> None:
    state = _half_full_cluster().pending(T("a").team("nlp").gpus(2)).obj()
    (admit,) = decide_checked(state, 10, EngineConfig(placement=Placement.PACK)).admit
    assert admit.admission.placement == (_node(0, 4, 5),)


def test_spread_breaks_the_last_whole_node_so_a_full_node_gang_waits_where_pack_admits_it() -> None:
    def state():
        return (
            _half_full_cluster().pending(T("a").team("nlp").gpus(2)).pending(T("b").team("nlp").gpus(8)).obj()
        )

    packed = decide_checked(state(), 10)
    assert sorted(a.task_id for a in packed.admit) == ["a", "b"]
    spread = decide_checked(state(), 10, SPREAD)
    assert [a.task_id for a in spread.admit] == ["a"]
    assert spread.pending["b"].code is PendingCode.NO_NODE_FITS


def test_kueue_counts_quota_only_unless_given_a_placement() -> None:
    state = _half_full_cluster().pending(T("a").team("nlp").gpus(2)).obj()
    (quota_only,) = decide_checked(state, 10, EngineConfig.kueue()).admit
    assert quota_only.admission.placement == ()
    state = _half_full_cluster().pending(T("a").team("nlp").gpus(2)).obj()
    (spread,) = decide_checked(state, 10, EngineConfig.named("kueue+spread")).admit
    assert spread.admission.placement == (_node(1, 0, 1),)


def test_engine_names_carry_a_placement_mode_and_defaults_stay() -> None:
    assert EngineConfig.named("kueue+spread") == replace(EngineConfig.kueue(), placement=Placement.SPREAD)
    assert EngineConfig.named("commons") == EngineConfig.named("commons+pack")
    assert not EngineConfig.kueue().node_placement
    assert EngineConfig.commons().node_placement


def test_an_unknown_placement_mode_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown placement 'tight'; choose one of: none, spread, pack"):
        EngineConfig.named("kueue+tight")
