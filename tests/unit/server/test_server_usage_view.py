"""The usage view the API reads: borrowing belongs to the team's use now, pending tasks to the pool
they asked for."""

from __future__ import annotations

from gpucommons.server.workers.outputs import UsageView, borrowed_now
from gpucommons.testing.builders import make_policy, make_state, make_task

POLICY = (
    make_policy()
    .pool("h100", nodes=4, gpus_per_node=8)
    .pool("a100", nodes=1, gpus_per_node=8)
    .team("nlp", h100=16, a100=4)
    .team("vision", h100=16, a100=4)
    .build()
)


def test_the_newest_tasks_carry_the_teams_borrowing() -> None:
    state = (
        make_state(POLICY)
        .running(make_task("old").team("nlp").gpus(8).pools("h100"), at=0)
        .running(make_task("mid").team("nlp").gpus(8).pools("h100"), at=10)
        .running(make_task("new").team("nlp").gpus(8).pools("h100"), at=20)
        .obj()
    )
    assert borrowed_now(state) == {"new": 8}


def test_nothing_is_borrowed_once_the_team_is_back_within_its_quota() -> None:
    """A task admitted while its team was above nominal stops borrowing when the others end."""
    state = (
        make_state(POLICY)
        .running(make_task("a").team("nlp").gpus(8).pools("h100"), at=0)
        .running(make_task("b").team("nlp").gpus(8).pools("h100"), at=10)
        .running(make_task("late").team("nlp").gpus(8).pools("h100"), at=20)
        .obj()
    )
    assert borrowed_now(state) == {"late": 8}
    state.finish("a", 30)
    assert borrowed_now(state) == {}


def test_an_excess_smaller_than_the_newest_task_is_split_honestly() -> None:
    state = (
        make_state(POLICY)
        .running(make_task("a").team("nlp").gpus(12).pools("h100"), at=0)
        .running(make_task("b").team("nlp").gpus(6).pools("h100"), at=10)
        .obj()
    )
    assert borrowed_now(state) == {"b": 2}


def test_pending_tasks_count_on_the_pool_they_asked_for() -> None:
    state = (
        make_state(POLICY)
        .pending(make_task("p1").team("vision").gpus(8).pools("h100"))
        .pending(make_task("p2").team("vision").gpus(2))
        .obj()
    )
    view = UsageView.of(state)
    assert view.pending_by_pool == {("vision", "h100"): (1, 8), ("vision", ""): (1, 2)}
