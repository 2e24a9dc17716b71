"""docs/design.md, contract 4: the usage ledger as CSV, read with line-numbered errors and written back.

Columns (docs/design.md, contract 4): `task_id,team,pool,gpus,start,end,priority,borrowed_gpus,end_reason`,
times in ISO-8601 UTC. Extension: an optional `lost_gpu_hours` column (GPU-hours of work a preemption
threw away), so that invoices can show lost work; files without it are read as having none.

Columns are found by their header name, in any order; unknown extra columns are ignored (readers of
stored data tolerate them). A bad row is never skipped silently: reading stops with a `LedgerError`
that names every bad row by its line number (up to `max_issues`).

Reading is written for speed (a month of a large cluster is a million rows): each row goes through a
fast path of plain conversions and checks; only a row that fails them is examined again, slowly, to
say exactly what is wrong with it.
"""

from __future__ import annotations

import csv
import io
import warnings
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from itertools import repeat
from typing import Protocol, TextIO

import numpy as np
import numpy.typing as npt

from gpucommons.ledger._bulk import gc_paused
from gpucommons.ledger.columns import byte_table, utc_from_chars
from gpucommons.ledger.contract import (
    LOST_ROUNDING_GPU_US,
    MAX_GPUS,
    REASONS,
)
from gpucommons.ledger.contract import LOST_WORK_COLUMN as LOST_WORK_COLUMN
from gpucommons.ledger.contract import USAGE_COLUMNS as USAGE_COLUMNS
from gpucommons.ledger.interval import US_PER_HOUR, EndReason, UsageInterval, format_utc, to_us
from gpucommons.ledger.table import UsageTable

_REASONS = REASONS
_ZERO = Decimal(0)
_LOST_ROUNDING_GPU_US = LOST_ROUNDING_GPU_US


@dataclass(frozen=True, slots=True)
class LineIssue:
    """What is wrong with one line of an input file (line 1 is the header): the ledger, a bill."""

    line: int
    message: str
    column: str | None = None

    def __str__(self) -> str:
        where = f"line {self.line}" + (f", {self.column}" if self.column else "")
        return f"{where}: {self.message}"


class LedgerError(ValueError):
    """The ledger file was refused; `issues` says where and why."""

    def __init__(self, issues: Iterable[LineIssue], *, truncated: bool = False) -> None:
        self.issues = tuple(issues)
        self.truncated = truncated
        lines = [str(i) for i in self.issues]
        more = "\n(more bad rows follow; fix these first)" if truncated else ""
        super().__init__(f"the usage ledger has {len(self.issues)} bad row(s):\n" + "\n".join(lines) + more)


class _Writer(Protocol):
    def write(self, text: str, /) -> object: ...


def read_usage_csv(
    lines: Iterable[str], *, pools: Collection[str] | None = None, max_issues: int = 50
) -> list[UsageInterval]:
    """Read a contract-4 ledger from `lines` (an open text file, or any iterable of lines).

    `pools`: when given, a row naming another pool is refused (the policy does not know its price).
    Raises `LedgerError` listing the bad rows by line number.
    """
    with gc_paused():
        return _read_rows(lines, pools, max_issues)


def _read_rows(lines: Iterable[str], pools: Collection[str] | None, max_issues: int) -> list[UsageInterval]:
    reader = csv.reader(lines)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise LedgerError([LineIssue(reader.line_num, _not_csv(exc))]) from None
    if header is None:
        raise LedgerError([LineIssue(1, "the file is empty; expected the header " + ",".join(USAGE_COLUMNS))])
    names = [h.strip() for h in header]
    missing = [c for c in USAGE_COLUMNS if c not in names]
    if missing:
        raise LedgerError(
            [
                LineIssue(
                    1,
                    f"the header lacks column(s) {', '.join(missing)}; "
                    f"a usage ledger needs {','.join(USAGE_COLUMNS)}",
                )
            ]
        )
    duplicated = sorted({n for n in names if n and names.count(n) > 1})
    if duplicated:
        raise LedgerError([LineIssue(1, f"the header repeats column(s) {', '.join(duplicated)}")])
    i_task, i_team, i_pool, i_gpus, i_start, i_end, i_prio, i_borrow, i_reason = (
        names.index(c) for c in USAGE_COLUMNS
    )
    i_lost = names.index(LOST_WORK_COLUMN) if LOST_WORK_COLUMN in names else -1
    width = len(names)
    known_pools = frozenset(pools) if pools is not None else None

    out: list[UsageInterval] = []
    append = out.append
    issues: list[LineIssue] = []
    fromiso = datetime.fromisoformat
    reasons = _REASONS
    rows = _Rows(reader)
    for row in rows:
        if row is None:
            issues.append(LineIssue(reader.line_num, _not_csv(rows.error)))
        elif len(row) != width:
            if not any(cell.strip() for cell in row):
                continue  # blank line
            issues.append(
                LineIssue(reader.line_num, f"expected {width} fields as in the header, found {len(row)}")
            )
        else:
            try:
                gpus = int(row[i_gpus])
                borrowed = int(row[i_borrow])
                start = fromiso(row[i_start])
                end = fromiso(row[i_end])
                if start.tzinfo is not UTC:
                    start = _utc(start)
                if end.tzinfo is not UTC:
                    end = _utc(end)
                reason = reasons[row[i_reason]]
                lost = _ZERO
                if i_lost >= 0:
                    text = row[i_lost]
                    if text and text != "0":
                        lost = Decimal(text)
                task_id, team, pool = row[i_task], row[i_team], row[i_pool]
                ok = (
                    0 <= gpus <= MAX_GPUS
                    and 0 <= borrowed <= gpus
                    and start <= end
                    and task_id
                    and team
                    and pool
                    and (known_pools is None or pool in known_pools)
                    and (lost is _ZERO or _lost_ok(lost, gpus, start, end, reason))
                )
            except (ValueError, KeyError, InvalidOperation):
                ok = False
            if ok:
                append(
                    UsageInterval(task_id, team, pool, gpus, start, end, row[i_prio], borrowed, reason, lost)
                )
                continue
            issues.extend(_explain(row, names, reader.line_num, known_pools))
        if len(issues) >= max_issues:
            raise LedgerError(issues[:max_issues], truncated=True)
    if issues:
        raise LedgerError(issues)
    return out


class _Rows:
    """`csv.reader` rows, with `None` for a line the csv module cannot split (a carriage return in
    a field that is not quoted), so that such a line is refused by number like any other bad
    row instead of ending the reading with the csv module's own exception."""

    def __init__(self, reader: Iterator[list[str]]) -> None:
        self.reader = reader
        self.error: csv.Error | None = None

    def __iter__(self) -> Iterator[list[str] | None]:
        while True:
            try:
                row: list[str] = next(self.reader)
            except StopIteration:
                return
            except csv.Error as exc:
                self.error = exc
                yield None
            else:
                yield row


def _not_csv(error: csv.Error | None) -> str:
    if "new-line" in str(error):
        return (
            "a carriage return inside a field that is not quoted "
            "(quote the field; lines may end in \\n or \\r\\n)"
        )
    return f"not a CSV line: {error}"


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _lost_ok(lost: Decimal, gpus: int, start: datetime, end: datetime, reason: EndReason) -> bool:
    if not lost.is_finite() or lost < 0:
        return False
    if lost == 0:
        return True
    held_us = gpus * (to_us(end) - to_us(start))
    return reason is EndReason.PREEMPTED and lost * US_PER_HOUR <= held_us + _LOST_ROUNDING_GPU_US


def _explain(
    row: list[str], names: list[str], line: int, known_pools: frozenset[str] | None
) -> list[LineIssue]:
    """The slow path: say precisely what is wrong with a row the fast path refused."""
    cell = dict(zip(names, row, strict=True))
    issues: list[LineIssue] = []

    def bad(column: str, message: str) -> None:
        issues.append(LineIssue(line, message, column))

    for column in ("task_id", "team", "pool"):
        if not cell[column].strip():
            bad(column, "must not be empty")
    pool = cell["pool"]
    if pool and known_pools is not None and pool not in known_pools:
        bad("pool", f"{pool!r} is not a pool of the policy (pools: {', '.join(sorted(known_pools))})")

    def integer(column: str) -> int | None:
        try:
            value = int(cell[column])
        except ValueError:
            bad(column, f"{cell[column]!r} is not a whole number")
            return None
        if value < 0:
            bad(column, f"{value} is negative")
            return None
        if value > MAX_GPUS:
            bad(column, f"{value} is more GPUs than one task can hold (at most {MAX_GPUS:,})")
            return None
        return value

    gpus = integer("gpus")
    borrowed = integer("borrowed_gpus")
    if gpus is not None and borrowed is not None and borrowed > gpus:
        bad("borrowed_gpus", f"{borrowed} is more than the row's {gpus} GPUs")

    def moment(column: str) -> datetime | None:
        try:
            return _utc(datetime.fromisoformat(cell[column]))
        except ValueError:
            bad(column, f"{cell[column]!r} is not an ISO-8601 time (e.g. 2026-11-03T04:05:06Z)")
            return None

    start, end = moment("start"), moment("end")
    if start is not None and end is not None and end < start:
        bad("end", f"{format_utc(end)} is before the start {format_utc(start)}")
    reason = _REASONS.get(cell["end_reason"])
    if reason is None:
        bad("end_reason", f"{cell['end_reason']!r} is not one of {', '.join(_REASONS)}")
    if cell.get(LOST_WORK_COLUMN):
        text = cell[LOST_WORK_COLUMN]
        try:
            lost = Decimal(text)
        except InvalidOperation:
            bad(LOST_WORK_COLUMN, f"{text!r} is not a number")
        else:
            if not lost.is_finite() or lost < 0:
                bad(LOST_WORK_COLUMN, f"{text!r} must be a number of GPU-hours, zero or more")
            elif lost > 0 and reason is not None and reason is not EndReason.PREEMPTED:
                bad(LOST_WORK_COLUMN, f"lost work is counted only for preempted intervals, not {reason}")
            elif lost > 0 and gpus is not None and start is not None and end is not None and start <= end:
                held = Decimal(gpus * (to_us(end) - to_us(start))) / US_PER_HOUR
                if lost * US_PER_HOUR > gpus * (to_us(end) - to_us(start)) + _LOST_ROUNDING_GPU_US:
                    bad(LOST_WORK_COLUMN, f"{text} GPU-hours is more than the interval held ({held:.6f})")
    if not issues:  # the fast path refused it for a reason the checks above do not name
        issues.append(LineIssue(line, "cannot read this row"))
    return issues


def write_usage_csv(
    intervals: Iterable[UsageInterval], file: _Writer, *, lost_work: bool | None = None
) -> int:
    """Write intervals as a contract-4 CSV to `file`; returns the number of rows written.

    `lost_work`: add the `lost_gpu_hours` extension column. `None` (the default) adds it only when
    some interval carries lost work, so a ledger without preemption losses is exactly contract 4
    (docs/design.md).
    """
    rows = list(intervals) if lost_work is None else intervals
    if lost_work is None:
        lost_work = any(iv.lost_gpu_hours for iv in rows)
    writer = csv.writer(file, lineterminator="\n")
    writer.writerow((*USAGE_COLUMNS, LOST_WORK_COLUMN) if lost_work else USAGE_COLUMNS)
    count = 0
    for iv in rows:
        fields: list[object] = [
            iv.task_id,
            iv.team,
            iv.pool,
            iv.gpus,
            format_utc(iv.start),
            format_utc(iv.end),
            iv.priority,
            iv.borrowed_gpus,
            iv.end_reason.value,
        ]
        if lost_work:
            fields.append(format(iv.lost_gpu_hours, "f"))
        writer.writerow(fields)
        count += 1
    return count


def read_usage_table(
    source: Iterable[str] | TextIO, *, pools: Collection[str] | None = None, max_issues: int = 50
) -> UsageTable:
    """Read a contract-4 ledger into columns: the same rows and the same refusals as
    `read_usage_csv`, several times faster on a large file.

    A plain file — ASCII, no quoted fields, no blank lines, every time in `Z` form, every row good —
    is converted column by column from its bytes (`ledger.columns`); a plain file that is not ASCII
    or has times of varying width is split and converted column by column in C (numpy). Anything
    else, including every bad row, goes through `read_usage_csv`, which accepts what it accepts and
    refuses what it refuses, by line.
    """
    text = source.read() if isinstance(source, io.TextIOBase) else "".join(source)
    known = frozenset(pools) if pools is not None else None
    try:
        data: bytes | None = text.encode("ascii")
    except UnicodeEncodeError:
        data = None
    with gc_paused():
        table = byte_table(data, known) if data is not None else None
        if table is None:
            table = _fast_table(text, known)
    if table is not None:
        return table
    return UsageTable.from_intervals(read_usage_csv(io.StringIO(text), pools=pools, max_issues=max_issues))


def read_usage_bytes(
    data: bytes, *, pools: Collection[str] | None = None, max_issues: int = 50
) -> UsageTable:
    """`read_usage_table` of a file's bytes (UTF-8): the same rows and the same refusals, without
    ever decoding a plain ASCII ledger into text (`ledger.columns`). Raises `UnicodeDecodeError` for
    bytes that are not UTF-8, as reading the file as text would."""
    with gc_paused():
        table = byte_table(data, frozenset(pools) if pools is not None else None)
    if table is not None:
        return table
    return read_usage_table(io.StringIO(data.decode("utf-8")), pools=pools, max_issues=max_issues)


_NAT = np.iinfo(np.int64).min


def _utc_column(cells: list[str]) -> npt.NDArray[np.int64]:
    """`…Z` times as int64 µs since the epoch; `ValueError` unless every cell is such a time."""
    widths = set(map(len, cells))
    if len(widths) == 1 and widths <= {20, 27}:
        return _fixed_utc_column(cells, widths.pop())
    bare = [cell[:-1] for cell in cells if cell[-1:] == "Z"]
    if len(bare) != len(cells):
        raise ValueError("a time without the Z suffix")
    with warnings.catch_warnings():
        # numpy warns when a string carries a zone of its own: leave those to the row reader
        warnings.simplefilter("error")
        try:
            values = np.array(bare, dtype="datetime64[us]").astype(np.int64)
        except Warning:
            raise ValueError("a time with a zone of its own") from None
    if values.size and int(values.min()) == _NAT:
        raise ValueError("NaT is not a time")
    return values


def _fixed_utc_column(cells: list[str], width: int) -> npt.NDArray[np.int64]:
    """`YYYY-MM-DDTHH:MM:SSZ` (20 characters) or with `.ffffff` (27), what `write_usage_csv`
    writes, read by arithmetic on the characters' codes: no per-cell Python step at all."""
    try:
        raw = "".join(cells).encode("ascii")
    except UnicodeEncodeError:
        raise ValueError("a time with a non-ASCII character") from None
    return utc_from_chars(np.frombuffer(raw, np.uint8).reshape(len(cells), width))


def _int_column(cells: list[str]) -> npt.NDArray[np.int64]:
    """Whole numbers as the row reader reads them (`int`), into int64 (`OverflowError` past it)."""
    return np.fromiter(map(int, cells), np.int64, len(cells))


def _fast_table(text: str, known_pools: frozenset[str] | None) -> UsageTable | None:
    """The column-wise reading of a plain, good ledger; `None` means "read it row by row"."""
    if '"' in text:
        return None
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:
            return None
    header_end = text.find("\n")
    if header_end < 0:
        return None
    header = text[:header_end]
    body = text[header_end + 1 : len(text) - 1 if text.endswith("\n") else len(text)]
    names = [h.strip() for h in header.split(",")]
    if any(c not in names for c in USAGE_COLUMNS) or len(set(names)) != len(names):
        return None
    width = len(names)
    lines = body.split("\n") if body else []
    # every line holds exactly width - 1 commas (a blank line holds none): then the whole body is one
    # flat run of fields, and column i is every width-th field from i on — sliced in C, not per row
    if lines and set(map(str.count, lines, repeat(",", len(lines)))) != {width - 1}:
        return None
    flat = body.replace("\n", ",").split(",") if lines else []
    column = {name: flat[i::width] for i, name in enumerate(names)}
    task_id, team, pool = column["task_id"], column["team"], column["pool"]
    if "" in task_id or "" in team or "" in pool:
        return None
    if known_pools is not None and not set(pool) <= known_pools:
        return None
    try:
        gpus = _int_column(column["gpus"])
        borrowed = _int_column(column["borrowed_gpus"])
        start = _utc_column(column["start"])
        end = _utc_column(column["end"])
        reasons = tuple(map(_REASONS.__getitem__, column["end_reason"]))
    except (ValueError, KeyError, OverflowError):
        return None
    if lines and not (
        bool((gpus >= 0).all())
        and bool((gpus <= MAX_GPUS).all())
        and bool((borrowed >= 0).all())
        and bool((borrowed <= gpus).all())
    ):
        return None
    if lines and not bool((start <= end).all()):
        return None
    lost: dict[int, Decimal] = {}
    if LOST_WORK_COLUMN in column:
        for i, cell in enumerate(column[LOST_WORK_COLUMN]):
            if cell and cell != "0":
                try:
                    value = Decimal(cell)
                except InvalidOperation:
                    return None
                if not value.is_finite() or value < 0:
                    return None
                if value:
                    held_us = int(gpus[i]) * (int(end[i]) - int(start[i]))
                    if (
                        reasons[i] is not EndReason.PREEMPTED
                        or value * US_PER_HOUR > held_us + _LOST_ROUNDING_GPU_US
                    ):
                        return None
                    lost[i] = value
    return UsageTable(
        task_id=task_id,
        team=team,
        pool=pool,
        priority=column["priority"],
        gpus=gpus,
        start_us=start,
        end_us=end,
        borrowed_gpus=borrowed,
        end_reason=reasons,
        lost_gpu_hours=lost,
    )
