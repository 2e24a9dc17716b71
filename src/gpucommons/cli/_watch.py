"""What `commons tasks --watch` waits for between two refreshes of its table.

Following the server's event stream (`GET /api/v1/events`), it refreshes when something the caller
may see happened, at most `MIN_GAP_S` apart however many events arrive (a sweep of 1,000
submissions is one or two refreshes, not 1,000), and at least every `SAFETY_S` seconds. A server
without the stream (an older one: 404) or `--poll` gives the old behaviour, a refresh every
`POLL_S`. The stream is read in a thread of its own with its own connection; when it ends (the
server's maximum duration) the thread follows it again from the last event it saw.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from gpucommons.api.errors import CommonsError, NotFound

if TYPE_CHECKING:
    from gpucommons.client import CommonsClient

#: Refresh interval when polling (no event stream), as before the stream existed.
POLL_S = 2.0
#: Fewest seconds between two refreshes on events (at most twice a second).
MIN_GAP_S = 0.5
#: A refresh at least this often even when no event came (fields no event announces).
SAFETY_S = 60.0
#: Wait before following the stream again after an error (the refresh shows the error).
RETRY_S = 2.0


class EventFollower:
    """Sets `changed` when an event arrives; `missing` once the server answered 404."""

    def __init__(self, client: CommonsClient, team: str | None) -> None:
        self.client = client
        self.team = team
        self.changed = threading.Event()
        self.connected = threading.Event()
        self.missing = False
        self.events = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)

    def start(self) -> EventFollower:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.client.close()

    def _opened(self) -> None:
        # What happened between the last refresh and now came before the stream: refresh once.
        self.connected.set()
        self.changed.set()

    def _run(self) -> None:
        last_id: str | None = None
        while not self._stop.is_set():
            try:
                for message in self.client.follow_events(self.team, last_id, on_open=self._opened):
                    last_id = message.last_id or last_id
                    self.events += 1
                    self.changed.set()
                # The server ended it (its maximum duration): follow it again after the last event.
            except NotFound:
                self.missing = True
                self.changed.set()
                return
            except CommonsError:
                if self._stop.is_set():
                    return
                self.changed.set()  # the refresh reports it (server gone, token revoked)
                self._stop.wait(RETRY_S)


class Pacer:
    """When the next refresh is due: on an event (at most every `MIN_GAP_S`), else after `SAFETY_S`;
    every `POLL_S` without a stream. `note` is called once when the stream turns out missing."""

    def __init__(
        self,
        follower: EventFollower | None,
        note: Callable[[str], None],
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.follower = follower
        self.note = note
        self.sleep = sleep
        self.clock = clock
        self._last = clock()
        self._noted = False

    def wait(self) -> None:
        follower = self.follower
        if follower is None or follower.missing:
            self._fallback_note()
            self.sleep(POLL_S)
        else:
            follower.changed.wait(SAFETY_S)
            follower.changed.clear()
            if follower.missing:
                self._fallback_note()
            self.sleep(max(0.0, self._last + MIN_GAP_S - self.clock()))
        self._last = self.clock()

    def _fallback_note(self) -> None:
        if self.follower is not None and not self._noted:
            self._noted = True
            self.note(
                f"note: this server has no event stream (GET /api/v1/events): refreshing every {POLL_S:g} s"
            )
