"""The pure parts of `GET /api/v1/events`: the horizon over committed event ids
(`domain.event_horizon`) and the server-sent-events format both ways (`api.sse`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpucommons.api import sse
from gpucommons.domain.event_horizon import Horizon, advance


def test_the_horizon_moves_over_ids_that_follow_one_another() -> None:
    assert advance(Horizon(0), [1, 2, 3], now=0.0, wait_s=2.0) == Horizon(3)
    assert advance(Horizon(3), [5, 4], now=0.0, wait_s=2.0) == Horizon(5)
    assert advance(Horizon(5), [], now=0.0, wait_s=2.0) == Horizon(5)


def test_a_hole_holds_the_horizon_until_it_fills_or_the_wait_is_over() -> None:
    # 42 is still committing when 43 is visible: stop at 41.
    h = advance(Horizon(41), [43], now=10.0, wait_s=2.0)
    assert h == Horizon(41, blocked_since=10.0)
    # It commits: move over both.
    assert advance(h, [42, 43], now=11.0, wait_s=2.0) == Horizon(43)
    # It never does (a rolled-back insert): step over it once the wait is over, not before.
    assert advance(h, [43], now=11.9, wait_s=2.0) == Horizon(41, blocked_since=10.0)
    assert advance(h, [43, 44], now=12.0, wait_s=2.0) == Horizon(44)


def test_moving_on_restarts_the_wait_for_the_next_hole() -> None:
    h = advance(Horizon(1), [3, 5], now=0.0, wait_s=1.0)
    assert h == Horizon(1, blocked_since=0.0)
    h = advance(h, [2, 3, 5], now=0.9, wait_s=1.0)  # 2 came: now waiting at 4, from 0.9
    assert h == Horizon(3, blocked_since=0.9)
    assert advance(h, [5], now=1.5, wait_s=1.0) == Horizon(3, blocked_since=0.9)
    assert advance(h, [5], now=2.0, wait_s=1.0) == Horizon(5)


def test_without_a_wait_holes_are_stepped_over_at_once() -> None:
    assert advance(Horizon(0), [2, 7, 9], now=0.0, wait_s=0.0) == Horizon(9)


@given(st.sets(st.integers(1, 200)), st.floats(0, 10), st.floats(0, 5))
def test_the_horizon_never_goes_back_nor_past_the_largest_id(ids: set[int], now: float, wait: float) -> None:
    start = Horizon(0)
    h = advance(start, ids, now, wait)
    assert 0 <= h.up_to <= max(ids, default=0)
    # Every id up to the horizon is present, unless the horizon stepped over a hole it may skip.
    if wait > 0:
        assert all(i in ids for i in range(1, h.up_to + 1))


def _read(stream: bytes) -> list[sse.Message]:
    parser = sse.Parser()
    out = []
    for line in stream.decode().splitlines():
        message = parser.line(line)
        if message is not None:
            out.append(message)
    return out


def test_messages_read_back_as_they_were_written() -> None:
    stream = (
        sse.retry(1000)
        + sse.message('{"a": 1}', event="submitted", id=7)
        + sse.comment("keep-alive")
        + sse.message("two\nlines")
        + sse.message("x", event="transition", id=9)
    )
    assert _read(stream) == [
        sse.Message("submitted", '{"a": 1}', "7"),
        sse.Message("message", "two\nlines", "7"),
        sse.Message("transition", "x", "9"),
    ]


def test_the_parser_follows_the_spec_on_fields_without_a_space_and_unknown_ones() -> None:
    parser = sse.Parser()
    lines = ["data:no space", "id:3", "foo: bar", "data", "", "retry: 250", "", ": comment", ""]
    got = [m for m in (parser.line(line) for line in lines) if m is not None]
    assert got == [sse.Message("message", "no space\n", "3")]
    assert parser.retry_ms == 250


@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\0")))
def test_any_data_round_trips(data: str) -> None:
    stream = sse.message(data, event="e", id=1)
    parser = sse.Parser()
    got = [m for m in (parser.line(line) for line in stream.decode().split("\n")) if m is not None]
    assert got == [sse.Message("e", data, "1")]


@given(st.lists(st.integers(0, 40), max_size=8), st.sampled_from(["\n", "\r\n", "\r"]))
def test_bytes_in_any_chunks_and_any_line_end_read_the_same(cuts: list[int], end: str) -> None:
    text = 'id: 5\nevent: transition\ndata: {"m": "a\u2028b"}\n\n: keep-alive\n\ndata: z\n\n'
    stream = text.replace("\n", end).encode()
    parser, got, last = sse.Parser(), [], 0
    for cut in sorted(min(c, len(stream)) for c in cuts):
        got += parser.feed(stream[last:cut])
        last = cut
    got += parser.feed(stream[last:])
    if end == "\r":  # a CR at the very end waits for what follows
        got += parser.feed(b"x")
    assert got == [sse.Message("transition", '{"m": "a\u2028b"}', "5"), sse.Message("message", "z", "5")]
