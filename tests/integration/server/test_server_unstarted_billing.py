"""Only what ran is billed: an attempt admitted but never started leaves no ledger interval
(issue 11, item 2). Before, the server that died between the reservation and the launch left an
interval that the restarted server closed as `preempted`, billing the downtime of a task that never
ran; a start the backend refused was billed from admission to the refusal as `failed`."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import pytest
from sqlalchemy import select
from tests.integration.server.conftest import Harness

from gpucommons.backends.ports import LaunchError
from gpucommons.store.models import UsageIntervalRow

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def _intervals(harness: Harness, task_id: str) -> list[tuple[float, float | None, str]]:
    with harness.ctx.db.session() as session:
        rows = session.scalars(select(UsageIntervalRow).where(UsageIntervalRow.task_id == task_id))
        return [(r.start, r.end, r.end_reason) for r in rows]


def test_a_crash_between_admission_and_launch_bills_nothing(
    make_harness: Callable[..., Harness], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = make_harness()
    # The server dies right after the cycle committed the reservation, before any launch.
    monkeypatch.setattr(first.ctx.scheduler.actuator, "launch_all", lambda admissions: None)
    task = str(first.submit(team="a", gpus=2, command=SLEEPER)["id"])
    first.cycle()
    assert first.task(task)["state"] == "admitted"
    assert [end for _, end, _ in _intervals(first, task)] == [None]  # reserved: the interval is open
    time.sleep(1.0)  # the downtime the old code billed (2 GPUs × ≥ 1 s)

    second = make_harness()  # a new server on the same store: recovery requeues, then admits again
    second.ctx.scheduler.recover()
    second.wait_state(task, "running")
    events = second.http.get(f"/api/v1/tasks/{task}/events", headers=second.admin).json()
    assert any("before launch" in e["message"] for e in events)
    closed = [(start, end, reason) for start, end, reason in _intervals(second, task) if end is not None]
    assert closed == []  # nothing ran before the crash: nothing billed for it
    assert len(_intervals(second, task)) == 1  # the attempt that runs now, open
    second.http.post(f"/api/v1/tasks/{task}/cancel", headers=second.admin)
    second.wait_state(task, "cancelled")


def test_a_start_the_backend_refuses_bills_nothing(
    make_harness: Callable[..., Harness], monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = make_harness()
    executor = harness.ctx.scheduler.executor

    def refuse(launch: object) -> object:
        time.sleep(0.3)  # a slow refusal: the old code billed it
        raise LaunchError("no such command")

    monkeypatch.setattr(executor, "start", refuse)
    task = str(harness.submit(team="a", gpus=2, command=SLEEPER)["id"])
    harness.wait_state(task, "failed")
    assert _intervals(harness, task) == []
