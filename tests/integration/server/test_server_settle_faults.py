"""A finished task's exit status survives a store write that fails while it is settled (issue 11,
item 1). The settlement's transaction fails when the database is locked longer than its busy
timeout; the exit file and the executor's cached status must still be there for the next try,
which records the real exit code and closes the ledger interval when the process ended — not
`failed (signal 9)` at the time the lock went away."""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import threading
import time
from collections.abc import Callable

import pytest
from sqlalchemy import select
from tests.integration.server.conftest import Harness

from gpucommons.store.models import UsageIntervalRow

LOCK_LIMIT_S = 60.0  # held until the cycle gave up (the store's busy timeout is 10 s)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_an_exit_while_the_database_is_locked_is_settled_afterwards_with_its_status(
    make_harness: Callable[..., Harness], database_url: str
) -> None:
    harness = make_harness()
    scheduler = harness.ctx.scheduler
    task = str(
        harness.submit(team="a", gpus=1, command=[sys.executable, "-c", "import time; time.sleep(1)"])["id"]
    )
    harness.wait_state(task, "running")

    path = database_url.removeprefix("sqlite:///")
    locked, release = threading.Event(), threading.Event()

    def hold_lock() -> None:
        other = sqlite3.connect(path, timeout=30, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        locked.set()
        release.wait(LOCK_LIMIT_S)
        other.execute("ROLLBACK")
        other.close()

    holder = threading.Thread(target=hold_lock)
    holder.start()
    locked.wait(10)
    time.sleep(2.0)  # the task ends while the lock is held
    failed = False
    try:
        scheduler.cycle()  # waits the busy timeout out, then the settling write fails
    except Exception:
        failed = True
        with contextlib.suppress(Exception):
            scheduler.rebuild()  # what the scheduler's thread does after a failed cycle
    release.set()
    holder.join()
    unlocked_at = time.time()
    assert failed, "the lock did not make the settling transaction fail"

    ended = harness.wait_state(task, "succeeded", "failed")
    assert ended["state"] == "succeeded" and ended["exit_code"] == 0, ended
    with harness.ctx.db.session() as session:
        (interval,) = session.scalars(select(UsageIntervalRow).where(UsageIntervalRow.task_id == task))
        assert interval.end_reason == "succeeded"
        assert interval.end is not None and interval.end < unlocked_at - 5  # when the process ended
