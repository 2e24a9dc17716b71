"""The `utilization_bound` reference: a work-conserving FIFO scheduler with backfill and no quotas.

It answers "how busy could this cluster have been with these jobs, if nobody had quotas?": each
time capacity frees up, waiting jobs are started in submission order, skipping (backfilling past)
any that do not fit the free GPUs of their pools. No preemption, no grace periods, no teams. It is a
separate ~80-line scheduler on purpose: it is a yardstick, not a policy the engine could run.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

from gpucommons.sim.resolve import ResolvedJob


@dataclass(frozen=True, slots=True)
class BoundOutcome:
    utilization: float
    makespan_s: float
    #: Jobs larger than any pool they may use (the bound cannot run them either).
    unplaceable: int


def utilization_bound(
    capacity: dict[str, float],
    jobs: tuple[ResolvedJob, ...],
    units_of: dict[str, float],
    window: tuple[float, float],
) -> BoundOutcome:
    """Replay `jobs` (in submission order) FIFO with backfill on pools of `capacity` units.

    `units_of[job_id]` is each job's size in the metered unit; `window` is the submission window
    over which utilization is measured (the same window as the simulation's).
    """
    free = dict(capacity)
    # Waiting jobs grouped by (pools, size): each group is FIFO, so the oldest job that fits is the
    # oldest head among the groups that fit (few groups, so this is cheap).
    groups: dict[tuple[tuple[str, ...], float], deque[tuple[int, ResolvedJob]]] = {}
    finishes: list[tuple[float, int, str, float]] = []
    w0, w1 = window
    held_in_window = 0.0
    held = 0.0
    now = w0
    end = w0
    pending = [j for j in jobs if any(units_of[j.job.job_id] <= capacity[p] for p in j.pools)]
    unplaceable = len(jobs) - len(pending)
    nxt = 0
    seq = 0

    def advance(to: float) -> None:
        nonlocal held_in_window, now
        overlap = min(to, w1) - max(now, w0)
        if overlap > 0:
            held_in_window += held * overlap
        now = to

    while nxt < len(pending) or finishes:
        t_submit = pending[nxt].job.submit_s if nxt < len(pending) else float("inf")
        t = min(t_submit, finishes[0][0]) if finishes else t_submit
        advance(t)
        while finishes and finishes[0][0] == t:
            _, _, pool, units = heapq.heappop(finishes)
            free[pool] += units
            held -= units
            end = max(end, t)
        while nxt < len(pending) and pending[nxt].job.submit_s == t:
            job = pending[nxt]
            groups.setdefault((job.pools, units_of[job.job.job_id]), deque()).append((job.seq, job))
            nxt += 1
        while True:
            best: tuple[int, tuple[tuple[str, ...], float], str] | None = None
            for key, queue in groups.items():
                if not queue:
                    continue
                pools, units = key
                fitting = next((p for p in pools if units <= free[p]), None)
                if fitting is not None and (best is None or queue[0][0] < best[0]):
                    best = (queue[0][0], key, fitting)
            if best is None:
                break
            _, key, pool = best
            _, job = groups[key].popleft()
            units = key[1]
            free[pool] -= units
            held += units
            seq += 1
            heapq.heappush(finishes, (t + job.job.duration_s, seq, pool, units))
    total_capacity = sum(capacity.values())
    span = w1 - w0
    utilization = held_in_window / (total_capacity * span) if total_capacity and span > 0 else 0.0
    return BoundOutcome(utilization=utilization, makespan_s=end - w0, unplaceable=unplaceable)
