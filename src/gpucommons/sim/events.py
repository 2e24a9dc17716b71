"""The simulator's clock: a heap of (time, seq) so that equal times pop in the order they were pushed.

The sequence number is what makes a run reproducible: two events at the same instant never compare
by anything but the order the simulation created them in (SimPy's heap does the same).
"""

from __future__ import annotations

import heapq
from enum import IntEnum


class EventKind(IntEnum):
    #: A running job completes its work.
    FINISH = 1
    #: A preempted job's grace period ends: it releases its GPUs and rejoins its queue.
    STOP = 2


class EventQueue:
    """Min-heap of `(time, seq, kind, job index, epoch)`.

    `epoch` is the job's run counter when the event was scheduled; an event whose epoch is stale
    (the job was preempted or restarted since) is ignored by the loop, which is cheaper than
    deleting it from the heap.
    """

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, EventKind, int, int]] = []
        self._seq = 0

    def push(self, time: float, kind: EventKind, job: int, epoch: int) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time, self._seq, kind, job, epoch))

    def pop(self) -> tuple[float, EventKind, int, int]:
        time, _, kind, job, epoch = heapq.heappop(self._heap)
        return time, kind, job, epoch

    def next_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)
