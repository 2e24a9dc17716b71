"""What the election worker says when this process becomes the leader.

A single server leads from its first attempt, and its banner says so: the log says it at INFO.
A process that takes over later does so because another leader went away, which operators
look for: WARNING."""

from __future__ import annotations

import logging

import pytest

from gpucommons.domain.election import Role, Sharing
from gpucommons.server.workers.election import ElectionWorker


class _Lock:
    """A leadership lock another process holds for the first `held_for` attempts."""

    def __init__(self, held_for: int) -> None:
        self.held_for = held_for
        self.tries = 0

    def try_acquire(self) -> bool:
        self.tries += 1
        return self.tries > self.held_for

    def still_held(self) -> bool:
        return True

    def holder(self) -> str | None:
        return "another process"

    def describe(self) -> str:
        return "the test's lock"

    def release(self) -> None:
        pass


def _leader_records(caplog: pytest.LogCaptureFixture) -> list[int]:
    return [r.levelno for r in caplog.records if "is now the leader" in r.getMessage()]


def test_leading_from_the_start_is_logged_at_info(caplog: pytest.LogCaptureFixture) -> None:
    worker = ElectionWorker(_Lock(held_for=0), sharing=Sharing.SINGLE)  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="gpucommons.server.workers.election"):
        assert worker.start() is Role.LEADER
        worker.stop()
    assert _leader_records(caplog) == [logging.INFO]


def test_a_takeover_is_logged_as_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    worker = ElectionWorker(_Lock(held_for=1), sharing=Sharing.SHARED)  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="gpucommons.server.workers.election"):
        assert worker.start() is Role.FOLLOWER
        while worker.role is not Role.LEADER:
            worker._attempt()  # what the worker's thread does at each step
        worker.stop()
    assert _leader_records(caplog) == [logging.WARNING]
