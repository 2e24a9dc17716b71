"""When `commons tasks --watch` refreshes (`cli._watch.Pacer`), on a hand-driven clock: at an event,
never twice within half a second, every 2 s without a stream, and one note when the server has none."""

from __future__ import annotations

from gpucommons.cli._watch import MIN_GAP_S, POLL_S, EventFollower, Pacer
from gpucommons.client import CommonsClient


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


def follower() -> EventFollower:
    return EventFollower(CommonsClient("http://127.0.0.1:9"), None)  # never started: no connection


def test_an_event_refreshes_at_once_when_the_last_refresh_is_old_enough() -> None:
    clock, notes, f = Clock(), list[str](), follower()
    pacer = Pacer(f, notes.append, clock.sleep, lambda: clock.now)
    clock.now += 5
    f.changed.set()
    pacer.wait()
    assert clock.slept == [0.0] and not f.changed.is_set()


def test_events_in_a_burst_give_at_most_two_refreshes_a_second() -> None:
    clock, f = Clock(), follower()
    pacer = Pacer(f, lambda _: None, clock.sleep, lambda: clock.now)
    clock.now += 0.1  # an event 0.1 s after the last refresh
    f.changed.set()
    pacer.wait()
    assert clock.slept == [round(MIN_GAP_S - 0.1, 6)]
    f.changed.set()  # the next one at once: waits the whole gap
    pacer.wait()
    assert clock.slept[-1] == MIN_GAP_S


def test_without_a_stream_it_polls_and_says_so_once() -> None:
    clock, notes, f = Clock(), list[str](), follower()
    f.missing = True
    pacer = Pacer(f, notes.append, clock.sleep, lambda: clock.now)
    pacer.wait()
    pacer.wait()
    assert clock.slept == [POLL_S, POLL_S]
    assert len(notes) == 1 and "no event stream" in notes[0]


def test_poll_asked_for_polls_without_a_note() -> None:
    clock, notes = Clock(), list[str]()
    pacer = Pacer(None, notes.append, clock.sleep, lambda: clock.now)
    pacer.wait()
    assert clock.slept == [POLL_S] and notes == []
