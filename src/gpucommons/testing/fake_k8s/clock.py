"""The fake cluster's time: a fixed start, a speed, and jumps a test asks for.

`now()` = start + real seconds since start × scale + every `advance()`. With `scale=0` time stands
still and only `advance()` moves it, so a test decides exactly when pods start and end; with
`scale=60` one real second is one cluster minute, so a `sleep 600` container ends in 10 real
seconds. Object timestamps are written with second precision, as `metav1.Time` serialises them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

#: The day the recorded shapes use (tests/data/kueue/shapes); a test never depends on today's date.
DEFAULT_START = datetime(2026, 9, 1, 10, 0, 0, tzinfo=UTC)


class FakeClock:
    def __init__(
        self,
        start: datetime = DEFAULT_START,
        scale: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if scale < 0:
            raise ValueError("the time scale cannot be negative")
        self._start = start.astimezone(UTC)
        self._scale = scale
        self._monotonic = monotonic
        self._real_start = monotonic()
        self._offset = 0.0
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    @property
    def scale(self) -> float:
        return self._scale

    def set_scale(self, scale: float) -> None:
        """Change the speed from now on; the current time does not jump."""
        if scale < 0:
            raise ValueError("the time scale cannot be negative")
        with self._lock:
            elapsed = (self._monotonic() - self._real_start) * self._scale
            self._offset += elapsed
            self._real_start = self._monotonic()
            self._scale = scale
        self._notify()

    def now(self) -> datetime:
        with self._lock:
            seconds = (self._monotonic() - self._real_start) * self._scale + self._offset
        return self._start + timedelta(seconds=seconds)

    def advance(self, seconds: float) -> None:
        """Jump forward: timers due by then fire (in due order) on the controller thread."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        with self._lock:
            self._offset += seconds
        self._notify()

    def real_seconds_until(self, moment: datetime) -> float | None:
        """How long to sleep in real time until `moment`; None when time stands still."""
        ahead = (moment - self.now()).total_seconds()
        if ahead <= 0:
            return 0.0
        if self._scale == 0:
            return None
        return ahead / self._scale

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def _notify(self) -> None:
        for listener in list(self._listeners):
            listener()


def timestamp(moment: datetime) -> str:
    """`metav1.Time`: RFC 3339, UTC, whole seconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
