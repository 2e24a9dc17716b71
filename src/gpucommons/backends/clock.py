"""Clocks that implement `ports.Clock`: the wall clock for the server, a hand-driven one for tests.

Logic never reads the time itself; it is handed a clock. `ManualClock` lets a test say "five
minutes pass" without sleeping, so grace periods and max runtimes are tested in microseconds.
"""

from __future__ import annotations

import time


class SystemClock:
    """Seconds since the epoch from the operating system."""

    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock that moves only when told to. Time never goes backwards."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        """Move forward by `seconds` (≥ 0) and return the new time."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go back: advance({seconds})")
        self._now += seconds
        return self._now

    def set(self, when: float) -> None:
        """Jump to `when`, which must not be earlier than now."""
        if when < self._now:
            raise ValueError(f"a clock cannot go back: from {self._now} to {when}")
        self._now = float(when)


class ShiftedClock:
    """The wall clock moved to start at `at`: seconds pass as they really do, but the date is chosen.

    For tests with real processes and real waits that must not depend on today's date (a budget
    computed at a month's first hour, an invoice on 29 February).
    """

    def __init__(self, at: float) -> None:
        self._offset = float(at) - time.time()

    def now(self) -> float:
        return time.time() + self._offset
