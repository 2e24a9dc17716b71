"""The usage ledger read straight from its bytes, column by column: the fast path of `commons chargeback`.

A month of a large cluster is a million rows (89 MB). Splitting that text into ten million Python
strings costs more than everything else the command does, so this reader never makes them: numpy finds
every comma and newline, checks each line holds as many fields as the header, and converts each column
from the byte offsets of its fields —
- GPU counts: digit arithmetic on a right-aligned byte matrix;
- times: `YYYY-MM-DDTHH:MM:SSZ` (or with `.ffffff`), date arithmetic on their character codes;
- team, pool, priority class, end reason: the distinct values found by sorting fixed-width keys,
  each row a code into them (`table.Categorical`);
- task ids: left in the bytes until someone asks for one (`table.LazyStrings`);
- lost work: `Decimal` only for the few rows that lost any.

It reads only what it can prove plain: ASCII, no quotes, no blank lines, every field non-empty, every
GPU count a run of digits, every time in the fixed `Z` form. For anything else it answers `None`, and
the caller reads the file the slower ways (csv_io), which accept and refuse exactly what the row
reader does, by line. It never refuses anything itself.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from gpucommons.ledger.contract import (
    LOST_ROUNDING_GPU_US,
    LOST_WORK_COLUMN,
    MAX_GPUS,
    REASONS,
    USAGE_COLUMNS,
)
from gpucommons.ledger.interval import US_PER_HOUR, EndReason
from gpucommons.ledger.table import Categorical, LazyStrings, UsageTable

Int64Array = npt.NDArray[np.int64]
#: Byte offsets into the file: int32 below 2 GiB, else int64.
Offsets = npt.NDArray[np.signedinteger[Any]]
ByteMatrix = npt.NDArray[np.uint8]
T = TypeVar("T")

_COMMA, _NEWLINE, _ZERO_CHAR = 44, 10, 48
#: Longest GPU count read here: MAX_GPUS has 7 digits; anything longer is refused by the row reader.
_MAX_DIGITS = len(str(MAX_GPUS))
#: Longest team, pool or class name read by sorting fixed-width keys (longer: the slower path).
_MAX_NAME = 255


class _NotPlain(Exception):
    """The file holds something this reader does not prove: read it the slower way."""


_DATE_DIGITS = [0, 1, 2, 3, 5, 6, 8, 9]  # YYYY MM DD of YYYY-MM-DD
_TIME_DIGITS = [11, 12, 14, 15, 17, 18]  # HH MM SS of THH:MM:SS
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


def utc_from_chars(chars: ByteMatrix) -> Int64Array:
    """Rows of `YYYY-MM-DDTHH:MM:SSZ` (20 bytes) or `…SS.ffffffZ` (27) as int64 µs since the epoch.

    Raises `ValueError` unless every row is such a time and a real one (no 31 November, no 24:00).
    A month of a ledger holds few distinct dates: each is checked and converted once (by `date`),
    every row's time of day by arithmetic on its digits."""
    width = chars.shape[1]
    if width not in (20, 27):
        raise ValueError("not a YYYY-MM-DDTHH:MM:SSZ time")
    marks = {4: "-", 7: "-", 10: "T", 13: ":", 16: ":", 19: "." if width == 27 else "Z", 26: "Z"}
    for column, char in marks.items():
        if column < width and not bool((chars[:, column] == ord(char)).all()):
            raise ValueError("not a YYYY-MM-DDTHH:MM:SSZ time")
    # the date's eight digits as one integer: equal dates, equal keys
    keys = np.ascontiguousarray(chars[:, _DATE_DIGITS]).view("<u8")
    found = _few_distinct(keys)
    if found is None:
        distinct, inverse = np.unique(keys.reshape(-1), return_inverse=True)
        found = ([(int(k),) for k in distinct], inverse.astype(np.int64).reshape(-1))
    distinct_dates, index = found
    days = np.empty(len(distinct_dates), np.int64)
    for i, (key,) in enumerate(distinct_dates):
        digits = key.to_bytes(8, "little").decode("ascii")
        if not digits.isdigit():
            raise ValueError("a date with a non-digit where a digit belongs")
        moment = date(int(digits[:4]), int(digits[4:6]), int(digits[6:]))  # ValueError if not a date
        days[i] = moment.toordinal() - _EPOCH_ORDINAL
    clock = chars[:, _TIME_DIGITS] - np.uint8(ord("0"))  # uint8: a non-digit wraps above 9
    if not bool((clock <= 9).all()):
        raise ValueError("a time with a non-digit where a digit belongs")
    hour = clock[:, 0] * np.uint8(10) + clock[:, 1]
    minute = clock[:, 2] * np.uint8(10) + clock[:, 3]
    second = clock[:, 4] * np.uint8(10) + clock[:, 5]
    if not (bool((hour < 24).all()) and bool((minute < 60).all()) and bool((second < 60).all())):
        raise ValueError("a time out of range")
    seconds = days[index.reshape(-1)] * 86400
    seconds += hour.astype(np.int64) * 3600 + minute.astype(np.int32) * 60 + second
    out: Int64Array = seconds * 1_000_000
    if width == 27:
        fraction = chars[:, 20:26] - np.uint8(ord("0"))
        if not bool((fraction <= 9).all()):
            raise ValueError("a time with a non-digit where a digit belongs")
        micro = fraction[:, 0].astype(np.int64)
        for k in range(1, 6):
            micro *= 10
            micro += fraction[:, k]
        out += micro
    return out


#: Bytes looked at per step when finding separators: the temporaries stay small and are reused.
_CHUNK = 1 << 23


def _separators(body: ByteMatrix, wide: bool) -> Offsets:
    """Offsets of every comma and newline, in order (int32 unless `wide`: half the memory, which in a
    fresh process is mostly page faults).

    Two comparisons and an `or` (vectorised by numpy) rather than one lookup through a 256-entry
    table: a gather per byte costs twice as much over 89 MB (measured: 0.30 s against 0.13 s)."""
    dtype = np.int64 if wide else np.int32
    parts = []
    mask = np.empty(min(_CHUNK, len(body)), np.bool_)
    more = np.empty_like(mask)
    for start in range(0, len(body), _CHUNK):
        chunk = body[start : start + _CHUNK]
        found_in = mask[: len(chunk)]
        np.equal(chunk, _COMMA, out=found_in)
        np.logical_or(found_in, np.equal(chunk, _NEWLINE, out=more[: len(chunk)]), out=found_in)
        found = np.flatnonzero(found_in)
        parts.append((found + start).astype(dtype, copy=False) if start else found.astype(dtype))
    return np.concatenate(parts) if parts else np.empty(0, dtype)


#: Odd 64-bit multipliers for `_few_distinct`'s hash (golden ratio and xxhash's primes).
_MULTIPLIERS = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93)


def _few_distinct(words: npt.NDArray[np.uint64]) -> tuple[list[tuple[int, ...]], Int64Array] | None:
    """The distinct rows of `words` (each row one key of `k` 64-bit words, never all zero) and each
    row's index into them — when a sample of the rows holds all of them; else `None`.

    A million names or dates of a few distinct values: a binary search per row (`searchsorted`)
    costs ~30 ns, a multiplicative hash into a table of a few slots a tenth of that. The hash only
    proposes: every row is then compared with the key it was given, exactly, so a value the sample
    missed (or a collision) answers `None` and the caller sorts the whole column instead."""
    rows, k = words.shape
    sample = words[:: max(1, rows // 4096)]
    distinct = sorted(set(map(tuple, sample.tolist())))
    if not distinct:
        return [], np.empty(0, np.int64)
    table_rows = np.array([*distinct, (0,) * k], np.uint64)  # the last one matches no row
    bits = max(4, (4 * len(distinct)).bit_length())
    shift = np.uint64(64 - bits)
    multipliers = [np.uint64(m) for m in _MULTIPLIERS]

    def slot(keys: npt.NDArray[np.uint64], first: int) -> npt.NDArray[np.uint64]:
        mixed = keys[:, 0] * multipliers[first]
        for j in range(1, k):
            mixed ^= keys[:, j] * multipliers[(first + j) % len(multipliers)]
        return mixed >> shift

    for first in range(len(multipliers)):
        slots = slot(table_rows[:-1], first)
        if len(set(slots.tolist())) == len(distinct):
            break
    else:
        return None
    lookup = np.full(1 << bits, len(distinct), np.int64)
    lookup[slots] = np.arange(len(distinct))
    codes = lookup[slot(words, first)]
    if not bool((table_rows[codes] == words).all()):
        return None
    return [tuple(int(x) for x in row) for row in distinct], codes


class _Fields:
    """Where each field of a plain CSV body lies: column `c` of row `i` is the bytes after separator
    `i × width + c − 1` (or the body's start) up to separator `i × width + c` (or the body's end)."""

    def __init__(self, body: ByteMatrix, width: int, *, wide: bool, newlines: int) -> None:
        """`newlines`: how many the body holds (`bytes.count` of the file, which is cheaper than numpy)."""
        positions = _separators(body, wide)
        rows = (len(positions) + 1) // width
        if rows * width != len(positions) + 1:
            raise _NotPlain
        # every line is width − 1 commas then a newline (the last one ends the body instead): then
        # no line is blank, none is short or long, and field c of row i is field i × width + c. The
        # body holds rows − 1 newlines and each row's width-th separator but the last row's is one of
        # them: so every other separator is a comma (a gather of the row ends, not of every separator)
        last = positions[width - 1 :: width]
        if newlines != rows - 1 or not bool((body[last] == _NEWLINE).all()):
            raise _NotPlain
        self.rows = rows
        self.width = width
        self.body = body
        self._positions = positions
        self._columns: dict[int, tuple[Offsets, Offsets, Offsets]] = {}

    def _column(self, column: int) -> tuple[Offsets, Offsets, Offsets]:
        """Starts, ends and lengths of one column's fields, as contiguous vectors."""
        if column not in self._columns:
            positions, width, rows = self._positions, self.width, self.rows
            starts = np.empty(rows, positions.dtype)
            if column == 0:
                starts[0] = 0
                starts[1:] = positions[width - 1 :: width]
            else:
                starts[:] = positions[column - 1 :: width]
            starts[1 if column == 0 else 0 :] += 1
            ends = np.empty(rows, positions.dtype)
            if column == width - 1:
                ends[:-1] = positions[column::width]
                ends[-1] = len(self.body)
            else:
                ends[:] = positions[column::width]
            self._columns[column] = (starts, ends, ends - starts)
        return self._columns[column]

    def starts(self, column: int) -> Offsets:
        return self._column(column)[0]

    def ends(self, column: int) -> Offsets:
        return self._column(column)[1]

    def lengths(self, column: int) -> Offsets:
        return self._column(column)[2]

    def matrix(self, column: int, width: int) -> ByteMatrix:
        """Each field's first `width` bytes, NUL past its end: one row of bytes per row."""
        starts, size = self.starts(column), len(self.body)
        if size < width:
            raise _NotPlain
        windows = np.lib.stride_tricks.sliding_window_view(self.body, width)
        near_end = np.flatnonzero(starts > size - width)  # fields of the last row or two
        chars: ByteMatrix = windows[np.minimum(starts, size - width)]
        for row in near_end.tolist():
            tail = self.body[int(starts[row]) :]
            chars[row] = 0
            chars[row, : len(tail)] = tail
        lengths = self.lengths(column)
        if self.rows and int(lengths.min()) < width:
            # (a multiply by the mask is several times cheaper than a masked assignment)
            np.multiply(chars, np.arange(width) < lengths[:, None], out=chars)
        return chars

    def integers(self, column: int) -> Int64Array:
        lengths = self.lengths(column)
        if int(lengths.min()) < 1 or int(lengths.max()) > _MAX_DIGITS:
            raise _NotPlain
        width = int(lengths.max())
        digits = self.matrix(column, width) - np.uint8(_ZERO_CHAR)  # NUL padding wraps above 9
        inside = np.arange(width) < lengths[:, None]
        if not bool((digits[inside] <= 9).all()):
            raise _NotPlain
        value = digits[:, 0].astype(np.int64)
        for k in range(1, width):
            more = inside[:, k]
            value[more] = value[more] * 10 + digits[more, k]
        return value

    def times(self, column: int) -> Int64Array:
        lengths = self.lengths(column)
        width = int(lengths[0])
        if not bool((lengths == width).all()) or width not in (20, 27):
            raise _NotPlain
        try:
            return utc_from_chars(self.matrix(column, width))
        except ValueError:
            raise _NotPlain from None

    def categories(self, column: int) -> tuple[list[str], Int64Array]:
        """The distinct values (ascending) and each row's index into them."""
        lengths = self.lengths(column)
        if int(lengths.min()) < 1 or int(lengths.max()) > _MAX_NAME:
            raise _NotPlain
        width = int(lengths.max())
        if width <= 16:
            # one or two NUL-padded words per name (no name holds a NUL), looked up by hash
            padded = self.matrix(column, 8 if width <= 8 else 16)
            found = _few_distinct(padded.view("<u8"))
            if found is not None:
                distinct, codes = found
                raw = [b"".join(w.to_bytes(8, "little") for w in key).rstrip(b"\0") for key in distinct]
                order = sorted(range(len(raw)), key=raw.__getitem__)
                rank = np.empty(len(order), np.int64)
                rank[order] = np.arange(len(order))
                return [raw[i].decode("ascii") for i in order], rank[codes]
        chars = self.matrix(column, width)
        if width <= 8:
            # zero-padded big-endian integers sort like the bytes they are made of
            padded = np.zeros((self.rows, 8), np.uint8)
            padded[:, :width] = chars
            keys: npt.NDArray[np.generic] = padded.view(">u8").reshape(-1)
        else:
            keys = np.ascontiguousarray(chars).view(f"S{width}").reshape(-1)
        distinct_keys, inverse = np.unique(keys, return_inverse=True)
        if width <= 8:
            names = [int(k).to_bytes(8, "big").rstrip(b"\0").decode("ascii") for k in distinct_keys]
        else:
            names = [bytes(k).decode("ascii") for k in distinct_keys]
        codes = inverse
        return names, codes.astype(np.int64).reshape(-1)


def _categorical(fields: _Fields, column: int, mapping: dict[str, T] | None = None) -> Categorical[T]:
    names, codes = fields.categories(column)
    if mapping is None:
        return Categorical(names, codes)  # type: ignore[arg-type]  # T is str here
    try:
        return Categorical([mapping[n] for n in names], codes)
    except KeyError:
        raise _NotPlain from None


def byte_table(data: bytes, known_pools: frozenset[str] | None) -> UsageTable | None:
    """The ledger in `data` as columns, or `None` when it is not plain enough to read this way."""
    try:
        return _read(data, known_pools)
    except _NotPlain:
        return None


def _read(data: bytes, known_pools: frozenset[str] | None) -> UsageTable:
    # not ASCII (the slower path decodes, and so checks, UTF-8), quotes, carriage returns, NULs
    if not data.isascii() or b'"' in data or b"\r" in data or b"\0" in data:
        raise _NotPlain
    raw = np.frombuffer(data, np.uint8)
    header_end = data.find(b"\n")
    if header_end < 0:
        raise _NotPlain
    names = [h.strip() for h in data[:header_end].decode("ascii").split(",")]
    if any(c not in names for c in USAGE_COLUMNS) or len(set(names)) != len(names):
        raise _NotPlain
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    if end <= header_end + 1:
        raise _NotPlain  # no rows: nothing to gain
    # offsets past the header are added to field offsets: int32 must hold the whole file's size
    fields = _Fields(
        raw[header_end + 1 : end],
        len(names),
        wide=len(data) >= 2**31 - 1,
        newlines=data.count(b"\n", header_end + 1, end),
    )
    column = {name: i for i, name in enumerate(names)}

    task_lengths = fields.lengths(column["task_id"])
    if int(task_lengths.min()) < 1:
        raise _NotPlain
    team: Categorical[str] = _categorical(fields, column["team"])
    pool: Categorical[str] = _categorical(fields, column["pool"])
    if known_pools is not None and not set(pool.names) <= known_pools:
        raise _NotPlain
    priority: Categorical[str] = _categorical(fields, column["priority"])
    reason: Categorical[EndReason] = _categorical(fields, column["end_reason"], REASONS)
    gpus = fields.integers(column["gpus"])
    borrowed = fields.integers(column["borrowed_gpus"])
    if not (bool((gpus <= MAX_GPUS).all()) and bool((borrowed <= gpus).all())):
        raise _NotPlain
    start = fields.times(column["start"])
    finish = fields.times(column["end"])
    if not bool((start <= finish).all()):
        raise _NotPlain
    base = header_end + 1
    lost = _lost_work(data, base, fields, column.get(LOST_WORK_COLUMN), gpus, start, finish, reason)
    return UsageTable(
        task_id=LazyStrings(
            data, fields.starts(column["task_id"]) + base, fields.ends(column["task_id"]) + base
        ),
        team=team,
        pool=pool,
        priority=priority,
        gpus=gpus,
        start_us=start,
        end_us=finish,
        borrowed_gpus=borrowed,
        end_reason=reason,
        lost_gpu_hours=lost,
    )


def _lost_work(
    data: bytes,
    base: int,
    fields: _Fields,
    column: int | None,
    gpus: Int64Array,
    start: Int64Array,
    end: Int64Array,
    reason: Categorical[EndReason],
) -> dict[int, Decimal]:
    """Row -> lost GPU-hours for the rows whose cell is neither empty nor `0` (as the row reader)."""
    if column is None:
        return {}
    lengths = fields.lengths(column)
    first = fields.body[np.minimum(fields.starts(column), len(fields.body) - 1)]
    rows = np.flatnonzero((lengths > 1) | ((lengths == 1) & (first != _ZERO_CHAR)))
    if not rows.size:
        return {}
    preempted = reason.names.index(EndReason.PREEMPTED) if EndReason.PREEMPTED in reason.names else -1
    if not bool((reason.codes[rows] == preempted).all()):
        raise _NotPlain  # lost work on a row that was not preempted: the row reader names it
    held = (gpus[rows] * (end[rows] - start[rows])).tolist()
    lost: dict[int, Decimal] = {}
    starts = (fields.starts(column)[rows] + base).tolist()
    ends = (fields.ends(column)[rows] + base).tolist()
    for i, s, e, held_us in zip(rows.tolist(), starts, ends, held, strict=True):
        try:
            value = Decimal(data[s:e].decode("ascii"))
        except InvalidOperation:
            raise _NotPlain from None
        if not value.is_finite() or value < 0 or value * US_PER_HOUR > held_us + LOST_ROUNDING_GPU_US:
            raise _NotPlain
        if value:
            lost[i] = value
    return lost
