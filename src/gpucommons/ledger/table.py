"""The ledger in columns: how a month of a million intervals is read and integrated quickly.

A list of `UsageInterval`s is the ledger's natural shape for the control plane, which writes a few
rows at a time. A month's chargeback reads all of them at once, and a million Python objects cost
seconds to build and walk; a `UsageTable` holds the same rows as columns (integer microsecond times
and GPU counts in int64 vectors), which `read_usage_table` fills straight from the CSV text and
`summarize_usage` integrates without a per-row Python step. `intervals()` and `from_intervals()`
convert both ways, exactly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Generic, TypeVar, overload

import numpy as np
import numpy.typing as npt

from gpucommons.ledger._bulk import gc_paused
from gpucommons.ledger.interval import EPOCH, ONE_MICROSECOND, EndReason, UsageInterval, from_us

Int64Array = npt.NDArray[np.int64]
T = TypeVar("T")


class Categorical(Sequence[T], Generic[T]):
    """A column of few distinct values as codes into them: `names[codes[i]]` is row `i`.

    What the byte reader builds for team, pool, priority and end reason, so that a million rows
    need no million Python strings, and integration gets its codes without looking each row up.
    `names` holds only values some row has, in ascending order.
    """

    __slots__ = ("codes", "names")

    def __init__(self, names: Sequence[T], codes: Int64Array) -> None:
        self.names = tuple(names)
        self.codes = codes

    def __len__(self) -> int:
        return len(self.codes)

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...
    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        if isinstance(index, slice):
            return [self.names[c] for c in self.codes[index].tolist()]
        return self.names[int(self.codes[index])]

    def __iter__(self) -> Iterator[T]:
        return map(self.names.__getitem__, self.codes.tolist())

    def __contains__(self, value: object) -> bool:
        return value in self.names


class LazyStrings(Sequence[str]):
    """A column of distinct strings (task ids) left in the file's bytes until one is asked for:
    row `i` is `data[starts[i]:ends[i]]`, ASCII."""

    __slots__ = ("_data", "_ends", "_starts")

    def __init__(
        self,
        data: bytes,
        starts: npt.NDArray[np.signedinteger[Any]],
        ends: npt.NDArray[np.signedinteger[Any]],
    ) -> None:
        self._data, self._starts, self._ends = data, starts, ends

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return list(LazyStrings(self._data, self._starts[index], self._ends[index]))
        return self._data[int(self._starts[index]) : int(self._ends[index])].decode("ascii")

    def __iter__(self) -> Iterator[str]:
        data = self._data
        for s, e in zip(self._starts.tolist(), self._ends.tolist(), strict=True):
            yield data[s:e].decode("ascii")


@dataclass(frozen=True, slots=True, eq=False)
class UsageTable:
    """Ledger rows as columns; row `i` of every column is one interval. Times in µs since the epoch."""

    task_id: Sequence[str]
    team: Sequence[str]
    pool: Sequence[str]
    priority: Sequence[str]
    gpus: Int64Array
    start_us: Int64Array
    end_us: Int64Array
    borrowed_gpus: Int64Array
    end_reason: Sequence[EndReason]
    #: Row index -> lost GPU-hours, for the few rows that lost work.
    lost_gpu_hours: dict[int, Decimal] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.task_id)

    @classmethod
    def from_intervals(cls, intervals: Sequence[UsageInterval]) -> UsageTable:
        """Columns of `intervals`. Raises `ValueError` for a time without zone (ledger times are UTC)."""
        count = len(intervals)
        epoch, us = EPOCH, ONE_MICROSECOND
        with gc_paused():
            try:
                start = np.fromiter([(iv.start - epoch) // us for iv in intervals], np.int64, count)
                end = np.fromiter([(iv.end - epoch) // us for iv in intervals], np.int64, count)
            except TypeError:
                raise _naive_time_error(intervals) from None
            try:
                gpus = np.fromiter([iv.gpus for iv in intervals], np.int64, count)
                borrowed = np.fromiter([iv.borrowed_gpus for iv in intervals], np.int64, count)
            except (OverflowError, TypeError):
                raise ValueError(
                    "an interval's GPU count is not a whole number that fits in 64 bits"
                ) from None
            return cls(
                task_id=tuple(iv.task_id for iv in intervals),
                team=tuple(iv.team for iv in intervals),
                pool=tuple(iv.pool for iv in intervals),
                priority=tuple(iv.priority for iv in intervals),
                gpus=gpus,
                start_us=start,
                end_us=end,
                borrowed_gpus=borrowed,
                end_reason=tuple(iv.end_reason for iv in intervals),
                lost_gpu_hours={i: iv.lost_gpu_hours for i, iv in enumerate(intervals) if iv.lost_gpu_hours},
            )

    def intervals(self) -> list[UsageInterval]:
        """The rows as `UsageInterval`s (times as UTC datetimes)."""
        with gc_paused():
            lost = self.lost_gpu_hours
            zero = Decimal(0)
            return [
                UsageInterval(
                    t,
                    team,
                    pool,
                    int(g),
                    from_us(int(s)),
                    from_us(int(e)),
                    prio,
                    int(b),
                    r,
                    lost.get(i, zero),
                )
                for i, (t, team, pool, prio, g, s, e, b, r) in enumerate(
                    zip(
                        self.task_id,
                        self.team,
                        self.pool,
                        self.priority,
                        self.gpus.tolist(),
                        self.start_us.tolist(),
                        self.end_us.tolist(),
                        self.borrowed_gpus.tolist(),
                        self.end_reason,
                        strict=True,
                    )
                )
            ]


def _naive_time_error(rows: Sequence[UsageInterval]) -> ValueError:
    for iv in rows:
        if iv.start.tzinfo is None or iv.end.tzinfo is None:
            return ValueError(
                f"the interval of task {iv.task_id!r} has a time without zone; ledger times are UTC"
            )
    return ValueError("an interval has a start or end that is not a datetime")
