"""Each attempt of a task is a row of its own (`task_attempts`), kept after it ends: a task preempted
and admitted again has two, the first with where it ran, its process, why and for whom it was
stopped, the second its current one; nothing of the first is reset by hand. On SQLite and PostgreSQL,
with a hand-driven clock and the in-memory executor."""

from __future__ import annotations

import signal
from collections.abc import Callable

from sqlalchemy import select
from tests.integration.server.conftest import Harness

from gpucommons.backends.clock import ManualClock
from gpucommons.backends.fake import FakeExecutor, Script
from gpucommons.backends.ports import ExitStatus
from gpucommons.store.models import AttemptRow, TaskRow

START = 1_800_000_000.0
TICK_S = 0.6


def attempts(h: Harness, task: str) -> tuple[int | None, list[AttemptRow]]:
    with h.ctx.db.session() as session:
        row = session.get(TaskRow, task)
        assert row is not None
        history = session.scalars(
            select(AttemptRow).where(AttemptRow.task_id == task).order_by(AttemptRow.id)
        )
        return row.attempt_id, list(history)


def test_a_preempted_task_keeps_its_first_attempt_and_gets_a_second(
    make_harness: Callable[..., Harness],
) -> None:
    clock = ManualClock(START)
    executor = FakeExecutor(clock)
    h = make_harness(executor=executor, clock=clock)
    big = str(h.submit(team="a", gpus=4, command=["train"])["id"])
    executor.script(big, Script(on_signal=ExitStatus(0)))  # saves and exits on SIGTERM
    h.cycle()
    assert h.task(big)["state"] == "running"
    current, (first,) = attempts(h, big)
    assert current == first.id and first.ended_at is None and first.pid is not None
    assert (first.pool, first.borrowed_gpus, first.gpu_indices) == ("gpu", 2, [0, 1, 2, 3])

    clock.advance(10)
    owner = str(h.submit(team="b", gpus=2, command=["eval"])["id"])
    h.cycle()  # the owner reclaims: `big` is signalled and exits
    clock.advance(TICK_S)
    h.cycle()
    h.cycle()
    current, history = attempts(h, big)
    ended = history[0]
    assert ended.end_reason == "preempted" and ended.ended_at is not None
    assert (ended.stop_reason, ended.preempted_by) == ("preempted", owner)
    assert ended.pool == "gpu" and ended.borrowed_gpus == 2 and ended.pid == first.pid
    assert current is None and h.task(big)["state"] == "pending"  # waits with no attempt

    executor.finish(owner)
    for _ in range(3):
        clock.advance(TICK_S)
        h.cycle()
    assert h.task(big)["state"] == "running"
    current, history = attempts(h, big)
    assert len(history) == 2 and current == history[1].id
    second = history[1]
    assert second.ended_at is None and second.stop_reason is None and second.killed_at is None
    assert second.admitted_at > ended.ended_at
    assert h.task(big)["restart_count"] == 1

    executor.finish(big)
    clock.advance(TICK_S)
    h.cycle()
    done = h.wait_state(big, "succeeded")
    current, history = attempts(h, big)
    assert current == history[1].id and history[1].end_reason == "succeeded" and history[1].exit_code == 0
    assert done["assigned_pool"] == "gpu"  # a finished task still says where it ran
    assert [s for a in executor.attempts if a.launch.task_id == big for s in a.signals] == [signal.SIGTERM]
    shown = h.http.get(f"/api/v1/tasks/{big}/attempts", headers=h.admin).json()
    assert [(a["number"], a["end_reason"], a["pool"], a["borrowed_gpus"]) for a in shown] == [
        (1, "preempted", "gpu", 2),
        (2, "succeeded", "gpu", 2),
    ]
    assert (shown[0]["stop_reason"], shown[0]["preempted_by"], shown[1]["exit_code"]) == (
        "preempted",
        owner,
        0,
    )


def test_a_waiting_task_has_no_attempt_and_shows_no_pool(make_harness: Callable[..., Harness]) -> None:
    clock = ManualClock(START)
    h = make_harness(executor=FakeExecutor(clock), clock=clock)
    hog = str(h.submit(team="b", gpus=4, command=["x"])["id"])
    h.cycle()
    waiting = str(h.submit(team="b", gpus=1, command=["y"])["id"])
    h.cycle()
    assert attempts(h, waiting) == (None, [])
    assert h.http.get(f"/api/v1/tasks/{waiting}/attempts", headers=h.admin).json() == []
    shown = h.task(waiting)
    assert (shown["assigned_pool"], shown["gpu_indices"], shown["borrowed_gpus"]) == (None, [], 0)
    assert attempts(h, hog)[0] is not None
