"""`/healthz` tells a liveness probe the truth: a leader whose scheduler thread is alive but finishes
no cycle (stuck on a lock, a hung backend call) answers 503 and says so; it recovers by itself."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.integration.server.conftest import SMALL_POLICY

from gpucommons.server.app import build_context, create_app
from gpucommons.server.routers.health import stalled_for
from gpucommons.server.settings import Settings
from gpucommons.server.workers.scheduler import Scheduler


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, Scheduler]]:
    (tmp_path / "policy.yaml").write_text(SMALL_POLICY)
    settings = Settings(
        home=tmp_path / "home", policy=tmp_path / "policy.yaml", executor="timer", isolation="logical",
        scheduler_tick_s=0.05, scheduler_stall_s=0.5,
    )  # fmt: skip
    ctx = build_context(settings)
    assert isinstance(ctx.scheduler, Scheduler)
    with TestClient(create_app(context=ctx)) as http:
        yield http, ctx.scheduler
    ctx.db.dispose()


def _until(check: TestClient, status: int, timeout: float = 10.0) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while True:
        answer = check.get("/healthz")
        if answer.status_code == status or time.monotonic() > deadline:
            assert answer.status_code == status, answer.json()
            return dict(answer.json())
        time.sleep(0.05)


def test_a_scheduler_stuck_inside_its_cycle_makes_healthz_answer_503_until_it_cycles_again(
    served: tuple[TestClient, Scheduler],
) -> None:
    http, scheduler = served
    ok = _until(http, 200)
    assert ok["status"] == "ok" and ok["scheduler"] == "running" and ok["detail"] is None
    with scheduler.lock:  # the next cycle waits here: the thread lives, no cycle ends
        stuck = _until(http, 503)
    assert stuck["status"] == "degraded" and stuck["scheduler"] == "stalled"
    assert str(stuck["detail"]).startswith("scheduler stalled: last cycle "), stuck
    assert str(stuck["detail"]).endswith("(limit 0.5 s)"), stuck
    assert _until(http, 200)["scheduler"] == "running"


def test_a_stall_counts_from_the_last_cycle_or_from_becoming_the_leader() -> None:
    assert stalled_for(100.0, None, 150.0, 60) is None
    assert stalled_for(100.0, None, 170.0, 60) == 70.0
    # A new leader recovers before its first cycle: judged from when it became the leader.
    assert stalled_for(None, 1_000.0, 1_030.0, 60) is None
    assert stalled_for(None, 1_000.0, 1_090.0, 60) == 90.0
    # A follower's mirrored cycles before the takeover say nothing of the scheduler it now runs.
    assert stalled_for(900.0, 1_000.0, 1_030.0, 60) is None
    # A scheduler driven by hand (no election, no cycle yet): nothing to judge.
    assert stalled_for(None, None, 1e9, 60) is None
