"""Cutting ledger intervals at a period's edges (docs/design.md, "Chargeback rules": intervals crossing the
period's edges are cut there), so a task that ran over midnight of the 1st is billed to both months
for exactly the part that fell in each."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

from gpucommons.ledger.interval import UsageInterval
from gpucommons.ledger.period import Period


def cut_to_period(intervals: Iterable[UsageInterval], period: Period) -> list[UsageInterval]:
    """The parts of `intervals` inside `[period.start, period.end)`, in the same order.

    Intervals wholly outside (or empty once cut) are dropped. Lost work stays with the part that holds
    the interval's end (the preemption happened there) and is zero on a part cut short by the period's end.
    """
    out: list[UsageInterval] = []
    for iv in intervals:
        start = max(iv.start, period.start)
        end = min(iv.end, period.end)
        if end <= start:
            continue
        if start == iv.start and end == iv.end:
            out.append(iv)
            continue
        lost = iv.lost_gpu_hours if end == iv.end else Decimal(0)
        out.append(iv._replace(start=start, end=end, lost_gpu_hours=lost))
    return out
