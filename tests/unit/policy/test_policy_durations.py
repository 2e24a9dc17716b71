"""Durations: the accepted spellings, the refused ones, and the shortest exact spelling back."""

from __future__ import annotations

import pytest

from gpucommons.policy import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("5m", 300), ("2h", 7200), ("7d", 604800), ("90", 90), (45, 45), (0, 0), (" 10 m ", 600)],
)
def test_accepted_durations_become_whole_seconds(text: str | int, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["30x", "1.5h", "-5m", "h", "", "5 minutes", True, -1, 2.5, None])
def test_refused_durations_say_what_is_accepted(text: object) -> None:
    with pytest.raises(ValueError, match="30s, 5m, 2h, 7d"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (90, "90s"), (300, "5m"), (7200, "2h"), (86400, "1d")]
)
def test_format_duration_is_the_shortest_exact_spelling(seconds: int, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds
