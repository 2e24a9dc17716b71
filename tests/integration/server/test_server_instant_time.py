"""A scheduler cycle decides at one instant (`now`, read once), but real time goes on while it runs:
an attempt that ends after `now` must not be settled at `now`, or the ledger charges less than was
held (found with the timer executor in `bench/server_kueue_baseline.py`: a cycle ran 100 decision
rounds at one instant for 9 s of real time, starting and settling 10,200 `sleep 0.2` tasks there,
every one with an interval of zero seconds)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from tests.integration.server.conftest import Harness

from gpucommons.server.executors import TimerExecutor

START = 1_800_000_000.0


class CreepingClock:
    """The wall clock of a busy server, made repeatable: every reading is `step` seconds after the
    last one, so time passes while a cycle works, as it does for real."""

    def __init__(self, start: float, step: float) -> None:
        self._now = start
        self.step = step

    def now(self) -> float:
        self._now += self.step
        return self._now


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_an_attempt_that_ends_after_the_cycles_instant_is_settled_at_its_end(
    make_harness: Callable[..., Harness],
) -> None:
    clock = CreepingClock(START, step=0.05)
    harness = make_harness(executor=TimerExecutor(clock), clock=clock)
    ids = [
        str(harness.submit(team="a", gpus=1, command=["sleep", "0.2"], name=f"s{i}")["id"]) for i in range(12)
    ]
    harness.cycle()
    # The first cycle's instant admits what fits (4 GPUs: a's 2 and b's 2 borrowed) and no more:
    # none of those attempts has ended at the instant they started.
    states = [harness.task(i)["state"] for i in ids]
    assert states.count("running") == 4, states
    assert states.count("succeeded") == 0, states
    # A cycle whose instant settled ends and started more sees those end after its instant: it
    # says so, and the scheduler goes again at once instead of waiting for its next tick.
    clock.step = 0.25
    harness.cycle()
    assert harness.ctx.scheduler.supervisor.ended_later
    clock.step = 0.05
    harness.run_until(lambda: all(harness.task(i)["state"] == "succeeded" for i in ids), what="all 12 to end")

    usage = harness.http.get("/api/v1/usage", headers=harness.admin).json()
    held = {u["task_id"]: _seconds(u["end"]) - _seconds(u["start"]) for u in usage}
    assert sorted(held) == sorted(ids)
    short = {i: round(s, 3) for i, s in held.items() if s < 0.2}
    assert not short, f"intervals shorter than the 0.2 s each task ran: {short}"
    for i in ids:
        task = harness.task(i)
        assert _seconds(str(task["finished_at"])) - _seconds(str(task["started_at"])) >= 0.2
