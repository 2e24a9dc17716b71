"""Durations in the policy file: `30s`, `5m`, `2h`, `7d`, or a bare whole number of seconds."""

from __future__ import annotations

import re

_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^\s*(\d+)\s*([smhd]?)\s*$")

#: The JSON-Schema pattern of a duration written as text (a bare integer is also accepted).
DURATION_PATTERN = r"^\s*\d+\s*[smhd]?\s*$"

DURATION_HELP = "a whole number followed by s, m, h or d (30s, 5m, 2h, 7d), or a bare number of seconds"


def parse_duration(value: object) -> int:
    """Whole seconds from `30s`, `5m`, `2h`, `7d`, `90` or 90; a ValueError names the accepted forms."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration: use {DURATION_HELP}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"a duration cannot be negative (got {value}): use {DURATION_HELP}")
        return value
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return int(match.group(1)) * _UNIT_SECONDS[match.group(2) or "s"]
    raise ValueError(f"{value!r} is not a duration: use {DURATION_HELP}")


def format_duration(seconds: int) -> str:
    """The shortest exact spelling: 86400 → `1d`, 300 → `5m`, 90 → `90s`, 0 → `0s`."""
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative (got {seconds})")
    for unit in ("d", "h", "m"):
        size = _UNIT_SECONDS[unit]
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
