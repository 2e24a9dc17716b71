"""Which submissions the leader has seen, when other processes store tasks too (pure).

Every replica stores the tasks submitted to it; only the leader's own arrive through the scheduler's
inbox. The others the leader finds with a query of the tasks whose submission sequence is above a
watermark. Sequence numbers come from a database sequence, so they are unique but do not commit in
order: a number taken by a slow transaction may become visible after a larger one, and a number taken
by a transaction that rolled back never becomes visible at all. So the watermark (`floor`) is not "the
largest seen": it is the largest number below which every number has been seen or given up for. A gap
(a number not seen although a larger one was) is waited for `patience_s`, then given up; the leader's
periodic comparison of the pending tasks with the store catches a task whose transaction took longer
than that.
"""

from __future__ import annotations

from collections.abc import Iterable


class SeqWatermark:
    def __init__(self, floor: int = 0, patience_s: float = 10.0) -> None:
        #: Every sequence number <= floor has been seen (or given up for).
        self.floor = floor
        self.patience_s = patience_s
        #: Gaps above the floor: number -> when it was first missed.
        self.gaps: dict[int, float] = {}

    def saw(self, seqs: Iterable[int], now: float) -> None:
        """`seqs`: every number above `floor` that the store shows now (in any order)."""
        present = {s for s in seqs if s > self.floor}
        if not present:
            return
        top = max(present)
        for s in range(self.floor + 1, top + 1):
            if s in present:
                self.gaps.pop(s, None)
            else:
                self.gaps.setdefault(s, now)
        waiting = [s for s, since in self.gaps.items() if now - since < self.patience_s]
        self.floor = min(waiting) - 1 if waiting else top
        self.gaps = {s: since for s, since in self.gaps.items() if s > self.floor}
