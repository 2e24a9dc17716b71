"""The control plane's structure (issue 11, item 10): the API changes what the scheduler owns only
through its commands, and reads only its published view.

Against a real uvicorn server with the scheduler's own thread running (timer executor), so cancels
and admissions really race. A test that holds the scheduler's lock stands for a cycle in progress:
writes wait for it, reads do not.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select
from tests.integration.server.conftest import SMALL_POLICY, Harness

from gpucommons.server.app import build_context, create_app
from gpucommons.server.settings import Settings
from gpucommons.server.workers.scheduler import Scheduler
from gpucommons.store.models import GpuAllocationRow, UsageIntervalRow
from gpucommons.testing.identity import live_server

TASKS = 40
POOL_GPUS = 4


class Live:
    def __init__(self, harness: Harness, url: str) -> None:
        self.harness = harness
        self.http = httpx.Client(base_url=url, headers=harness.admin, timeout=30)
        scheduler = harness.ctx.scheduler
        assert isinstance(scheduler, Scheduler)
        self.scheduler = scheduler

    def submit(self, team: str, command: str = "sleep 600") -> str:
        response = self.http.post("/api/v1/tasks", json={"team": team, "gpus": 1, "command": [command]})
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def state(self, task_id: str) -> str:
        return str(self.http.get(f"/api/v1/tasks/{task_id}").json()["state"])


@pytest.fixture
def live(tmp_path: Path, database_url: str) -> Iterator[Live]:
    (tmp_path / "policy.yaml").write_text(SMALL_POLICY)
    settings = Settings(
        home=tmp_path / "home", database_url=database_url, policy=tmp_path / "policy.yaml",
        run_scheduler=False, isolation="logical", executor="timer", scheduler_tick_s=0.05,
    )  # fmt: skip
    harness = Harness(build_context(settings))
    harness.ctx.scheduler.start()
    try:
        with live_server(create_app(context=harness.ctx)) as url:
            server = Live(harness, url)
            yield server
            server.http.close()
    finally:
        harness.ctx.scheduler.stop()
        harness.close()


def _wait(predicate: object, what: str, timeout: float = 30.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_cancels_racing_admissions_are_neither_lost_nor_double_allocated(live: Live) -> None:
    """Each task is cancelled right after its submission, while the scheduler's thread admits: some
    cancels find the task pending, some find it admitted or running. Every one must end the task, and
    at the end no GPU, ledger interval or engine slot may still be held by any of them."""
    rng = random.Random(11)
    pauses = [rng.uniform(0.0, 0.03) for _ in range(TASKS)]

    def submit_then_cancel(index: int) -> tuple[str, int, str]:
        task_id = live.submit("a" if index % 2 else "b")
        time.sleep(pauses[index])
        response = live.http.post(f"/api/v1/tasks/{task_id}/cancel")
        return task_id, response.status_code, str(response.json().get("state"))

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(submit_then_cancel, range(TASKS)))
    assert [code for _, code, _ in results] == [200] * TASKS, results
    ids = [task_id for task_id, _, _ in results]
    _wait(lambda: all(live.state(t) == "cancelled" for t in ids), "every cancelled task to end")
    # The race really happened: some cancels met a task already admitted (it ends after its stop).
    caught_live = [state for _, _, state in results if state != "cancelled"]
    _wait(lambda: live.scheduler.view.usage.free_gpus.get("gpu") == POOL_GPUS, "the pool to be free")
    view = live.scheduler.view
    assert view.pending == () and view.running == ()
    with live.harness.ctx.db.session() as session:
        assert session.scalar(select(func.count()).select_from(GpuAllocationRow)) == 0
        still_open = select(func.count()).select_from(UsageIntervalRow).where(UsageIntervalRow.end.is_(None))
        assert session.scalar(still_open) == 0
    # Both sides of the race occurred: four GPUs for six submitters at a time leave some tasks
    # pending when their cancel arrives, and the first ones are admitted before theirs.
    assert 0 < len(caught_live) < TASKS, caught_live


def test_a_checkpoint_report_waits_for_the_cycle_in_progress(live: Live) -> None:
    """A checkpoint changes a live row the supervision reads: it is applied under the scheduler's
    lock, never in the middle of a cycle (before, the route wrote the row with no lock at all)."""
    task_id = live.submit("a")
    _wait(lambda: live.state(task_id) == "running", "the task to run")
    done = threading.Event()
    answers: list[int] = []

    def report() -> None:
        answers.append(live.http.post(f"/api/v1/tasks/{task_id}/checkpoint", json={"note": "n"}).status_code)
        done.set()

    with live.scheduler.lock:  # a cycle in progress
        threading.Thread(target=report, daemon=True).start()
        assert not done.wait(1.0), "the checkpoint was written while a cycle held the scheduler's lock"
    assert done.wait(10.0) and answers == [200]


def test_reads_never_wait_for_a_cycle(live: Live) -> None:
    """The queue, teams, a task's timeline and the metrics read the published view: a cycle that
    holds the scheduler's lock does not hold them up (before, the queue and timeline took the lock)."""
    for _ in range(POOL_GPUS + 2):
        live.submit("a")
    _wait(lambda: len(live.scheduler.view.pending) == 2, "two tasks to wait")
    waiting = live.scheduler.view.pending[0].id
    paths = ("/api/v1/queue", "/api/v1/teams", f"/api/v1/tasks/{waiting}/timeline", "/metrics")
    # The lock stands for a cycle in progress; it is let go before the pool waits for its threads.
    with ThreadPoolExecutor(max_workers=len(paths)) as pool, live.scheduler.lock:
        reads = [pool.submit(live.http.get, path) for path in paths]
        answers = [r.result(timeout=5.0) for r in reads]
    assert [a.status_code for a in answers] == [200] * 4, [a.text for a in answers]
    assert [e["task_id"] for e in answers[0].json()][:1] == [waiting]
