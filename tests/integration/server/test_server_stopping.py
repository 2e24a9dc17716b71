"""The supervisor takes every step of a stop through the stop machine, on a real store (SQLite and
PostgreSQL), with a hand-driven clock and an in-memory executor: the class's signal at once, SIGKILL
only once the grace period is over, the reason stored as its plain name, and a reason this version
does not know (a newer version wrote it before a rollback) escalated and settled like any other."""

from __future__ import annotations

import signal
from collections.abc import Callable

from sqlalchemy import text
from tests.integration.server.conftest import Harness

from gpucommons.backends.clock import ManualClock
from gpucommons.backends.fake import FakeExecutor, Script
from gpucommons.backends.ports import ExitStatus
from gpucommons.domain.stopping import GIVE_UP_AFTER_S, KILL_RETRY_S
from gpucommons.store.models import TaskRow

START = 1_800_000_000.0
GRACE_S = 2.0  # SMALL_POLICY's `normal` class
TICK_S = 0.6  # more than the scheduler's tick: every cycle after an advance reads every live row


def started(
    make_harness: Callable[..., Harness], lost_kills: int = 0
) -> tuple[Harness, ManualClock, FakeExecutor, str]:
    """A harness on a manual clock with one running task that ignores every signal but SIGKILL (and
    the first `lost_kills` of those: a failed `scancel`)."""
    clock = ManualClock(START)
    executor = FakeExecutor(clock)
    h = make_harness(executor=executor, clock=clock)
    task = str(h.submit(team="a", gpus=1, command=["sleep", "60"])["id"])
    executor.script(task, Script(ignore_signals=True, lost_kills=lost_kills))
    h.cycle()
    assert h.task(task)["state"] == "running"
    return h, clock, executor, task


def signals_of(executor: FakeExecutor, task: str) -> list[int]:
    return [s for a in executor.attempts if a.launch.task_id == task for s in a.signals]


def stored(h: Harness, task: str, column: str) -> object:
    """A column of the task's current attempt, as stored."""
    with h.ctx.db.session() as session:
        return session.execute(
            text(
                f"SELECT a.{column} FROM tasks t JOIN task_attempts a ON a.id = t.attempt_id WHERE t.id = :id"
            ),
            {"id": task},
        ).scalar_one()


def test_a_cancel_signals_at_once_and_kills_only_when_the_grace_period_is_over(
    make_harness: Callable[..., Harness],
) -> None:
    h, clock, executor, task = started(make_harness)
    h.http.post(f"/api/v1/tasks/{task}/cancel", headers=h.admin)
    h.cycle()
    assert signals_of(executor, task) == [signal.SIGTERM]
    assert stored(h, task, "stop_reason") == "cancelled"
    assert stored(h, task, "stop_deadline") == START + GRACE_S

    clock.set(START + GRACE_S - 0.01)
    h.cycle()
    assert signals_of(executor, task) == [signal.SIGTERM]  # still within its grace period

    clock.advance(TICK_S)
    h.cycle()
    assert signals_of(executor, task) == [signal.SIGTERM, signal.SIGKILL]
    h.wait_state(task, "cancelled")
    kinds = [e["kind"] for e in h.http.get(f"/api/v1/tasks/{task}/events", headers=h.admin).json()]
    assert (kinds.count("signal"), kinds.count("killed")) == (1, 1)


def test_a_stop_reason_a_newer_server_wrote_is_escalated_and_settled_by_the_exit_status(
    make_harness: Callable[..., Harness],
) -> None:
    h, clock, executor, task = started(make_harness)
    with h.ctx.db.session() as session:  # what a newer version stored before it was rolled back
        row = session.get(TaskRow, task)
        assert row is not None and row.attempt is not None
        attempt = row.attempt
        attempt.stop_reason, attempt.stop_requested_at, attempt.stop_deadline = (
            "drained_by_v9",
            START,
            START + 1,
        )
    clock.advance(1 + TICK_S)
    h.cycle()
    assert signals_of(executor, task) == [signal.SIGKILL]  # its deadline stands: killed, not re-signalled
    done = h.wait_state(task, "failed")
    assert "signal 9" in str(done["message"])


def held_gpus(h: Harness, task: str) -> int:
    with h.ctx.db.session() as session:
        return int(
            session.execute(
                text("SELECT count(*) FROM gpu_allocations WHERE task_id = :id"), {"id": task}
            ).scalar_one()
        )


def cancel_and_kill(h: Harness, clock: ManualClock, executor: FakeExecutor, task: str) -> None:
    """Cancel, then run the clock past the grace period: the first SIGKILL is sent."""
    h.http.post(f"/api/v1/tasks/{task}/cancel", headers=h.admin)
    h.cycle()
    clock.set(START + GRACE_S + TICK_S)
    h.cycle()
    assert signals_of(executor, task) == [signal.SIGTERM, signal.SIGKILL]


def test_a_sigkill_that_did_not_take_is_sent_again_after_the_retry(
    make_harness: Callable[..., Harness],
) -> None:
    h, clock, executor, task = started(make_harness, lost_kills=1)
    cancel_and_kill(h, clock, executor, task)
    clock.advance(KILL_RETRY_S - 2 * TICK_S)
    h.cycle()
    assert signals_of(executor, task).count(signal.SIGKILL) == 1  # not before the retry is due
    clock.advance(2 * TICK_S)
    h.cycle()
    assert signals_of(executor, task).count(signal.SIGKILL) == 2
    h.wait_state(task, "cancelled")
    assert held_gpus(h, task) == 0
    assert stored(h, task, "kills") == 2


def test_a_process_no_sigkill_ends_is_given_up_on_with_its_gpus_still_held(
    make_harness: Callable[..., Harness],
) -> None:
    h, clock, executor, task = started(make_harness, lost_kills=10_000)
    cancel_and_kill(h, clock, executor, task)
    first_kill = clock.now()
    while clock.now() < first_kill + GIVE_UP_AFTER_S + KILL_RETRY_S * 3:
        clock.advance(KILL_RETRY_S / 2)
        h.cycle()
    kills = signals_of(executor, task).count(signal.SIGKILL)
    # The first, then one per retry until the give-up time (the last due at +270 s), then none.
    assert kills == int(GIVE_UP_AFTER_S // KILL_RETRY_S) == 10
    assert stored(h, task, "gave_up_at") is not None
    events = h.http.get(f"/api/v1/tasks/{task}/events", headers=h.admin).json()
    warnings = [e["message"] for e in events if e["kind"] == "warning"]
    assert len(warnings) == 1 and "never reported the end" in warnings[0] and "keeps its GPUs" in warnings[0]
    # Nothing was freed while the process may still run: no GPU for two tasks.
    assert held_gpus(h, task) == 1 and h.task(task)["state"] == "running"

    executor.finish(task, ExitStatus(code=None, signal=int(signal.SIGKILL)))  # the end is seen at last
    clock.advance(TICK_S)
    h.cycle()
    h.wait_state(task, "cancelled")
    assert held_gpus(h, task) == 0
