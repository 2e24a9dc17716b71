"""How far a stream of task events may go: the horizon below which no event can still appear.

Event ids come from the database's sequence, which hands them out when a row is inserted, not when
its transaction commits. On PostgreSQL two transactions can therefore commit out of order (ids 41
and 43 visible, 42 a moment later), and a reader that moved its cursor past 43 would never see 42.
On SQLite one writer at a time inserts and commits, so ids appear in order.

The horizon moves over present ids while they follow one another. At a hole it stops and waits up
to `wait_s` for the hole to fill (a transaction still committing), then steps over it (a rolled-back
insert leaves a hole for ever). Pure: the caller reads the ids and the clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Horizon:
    #: Every event with an id up to here is committed or will never be (deliver up to it).
    up_to: int
    #: When the horizon first stopped at the hole it waits at now (None: not waiting).
    blocked_since: float | None = None


def advance(horizon: Horizon, ids: Iterable[int], now: float, wait_s: float) -> Horizon:
    """The horizon after seeing `ids` (committed event ids, any order, any beyond the horizon).

    Holes are stepped over once the horizon has waited `wait_s` at one (0: at once, for a store
    whose ids commit in order); moving on restarts the wait for the next hole.
    """
    up_to, since = horizon.up_to, horizon.blocked_since
    for i in sorted(set(ids)):
        if i <= up_to:
            continue
        if i == up_to + 1:
            up_to, since = i, None
            continue
        waited_from = since if since is not None and up_to == horizon.up_to else now
        if now - waited_from >= wait_s:
            up_to, since = i, None
            continue
        return Horizon(up_to, waited_from)
    return Horizon(up_to, None)
