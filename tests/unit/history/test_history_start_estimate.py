"""When will a waiting task start? (`planning.start_estimate`): the live queue replayed on the engine
with run times guessed from finished attempts; the range from their quartiles."""

from __future__ import annotations

from gpucommons.planning.start_estimate import RunTimes, estimate_start, replay_start
from gpucommons.testing.builders import make_policy, make_state, make_task

POLICY = (
    make_policy()
    .pool("gpu", nodes=1, gpus_per_node=8)
    .team("a", borrow_limit=0, gpu=4)
    .team("b", borrow_limit=0, gpu=4)
    .build()
)
NOW = 1000.0


def live(*pending: str):  # type: ignore[no-untyped-def]
    """a and b each run 4 GPUs since t=900 (age 100); the given tasks of a wait for 2 GPUs."""
    state = (
        make_state(POLICY)
        .running(make_task("a1").team("a").gpus(4).seq(1), at=900)
        .running(make_task("b1").team("b").gpus(4).seq(2), at=900)
    )
    for i, name in enumerate(pending):
        state.pending(make_task(name).team("a").gpus(2).seq(10 + i).at(950 + i))
    s = state.obj()
    return list(s.iter_running()), list(s.iter_pending())


def test_a_waiting_task_starts_when_its_teams_running_task_is_guessed_to_end() -> None:
    running, pending = live("a2")
    times = RunTimes.of([200, 400, 600])
    # Past run times longer than the running tasks' age (100 s) leave 100, 300 or 500 s; the median is 300.
    assert replay_start(POLICY, running, pending, "a2", times, NOW, 50.0) == NOW + 300
    assert replay_start(POLICY, running, pending, "a2", times, NOW, 25.0) == NOW + 200
    estimate = estimate_start(POLICY, running, pending, "a2", times, NOW)
    assert (estimate.earliest, estimate.likely, estimate.latest) == (NOW + 200, NOW + 300, NOW + 400)


def test_a_task_behind_another_of_its_team_waits_for_that_one_too() -> None:
    running, pending = live("a2", "a3")
    times = RunTimes.of([200, 400, 600])
    # a2 and a3 both fit in a's 4 GPUs once a1 ends: the engine admits them together.
    assert replay_start(POLICY, running, pending, "a3", times, NOW, 50.0) == NOW + 300
    # with a 6-GPU request behind, a3 must wait for a2 too
    running, pending = live("a2")
    big = make_task("a3").team("a").gpus(4).seq(20).at(990).obj()
    start = replay_start(POLICY, running, [*pending, big], "a3", times, NOW, 50.0)
    assert start is not None and start > NOW + 300


def test_no_history_means_no_estimate_and_says_why() -> None:
    running, pending = live("a2")
    estimate = estimate_start(POLICY, running, pending, "a2", RunTimes.of([]), NOW)
    assert estimate.likely is None and "no finished task" in estimate.unknown_because


def test_a_running_task_older_than_every_past_one_is_given_its_age_again() -> None:
    times = RunTimes.of([10, 20])
    assert times.remaining(100.0, 50.0) == 100.0
    assert times.remaining(15.0, 50.0) == 5.0
    assert times.total(50.0) == 15.0
