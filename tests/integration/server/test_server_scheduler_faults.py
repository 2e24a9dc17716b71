"""The scheduler's thread when a cycle fails and the rebuild after it fails too (issue 11, item 9)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest
from tests.integration.server.conftest import Harness


def test_a_failed_rebuild_is_logged_not_swallowed(
    make_harness: Callable[..., Harness], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    scheduler = make_harness().ctx.scheduler
    rebuilds: list[float] = []

    def failing_cycle() -> None:
        raise RuntimeError("a store write failed")

    def failing_rebuild() -> None:
        rebuilds.append(time.monotonic())
        raise RuntimeError("the store is unreachable")

    monkeypatch.setattr(scheduler, "recover", lambda: None)
    monkeypatch.setattr(scheduler, "cycle", failing_cycle)
    monkeypatch.setattr(scheduler, "rebuild", failing_rebuild)
    caplog.set_level(logging.ERROR, logger="gpucommons.server.workers.scheduler")
    scheduler.start()
    try:
        scheduler.wake()
        deadline = time.monotonic() + 10
        while not rebuilds and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        scheduler.stop()
    assert rebuilds
    assert "rebuilding the state from the store failed" in caplog.text
    assert "the store is unreachable" in caplog.text
