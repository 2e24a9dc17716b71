"""The trace reader (docs/design.md, contract 2): `job_id,team,submit_time_s,duration_s,gpus` +
optional columns.

Optional columns (`priority`, `pool`, `checkpoint_interval_s`) may be absent from the header or
empty in a row. A bad row is refused with its line number, and every bad row is reported at once
(up to a cap), so a user fixes a file in one pass. The reader takes lines, not a path: reading the
file is the caller's I/O.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass

from gpucommons.domain.resources import Resources
from gpucommons.sim.jobs import SimJob

REQUIRED_COLUMNS = ("job_id", "team", "submit_time_s", "duration_s", "gpus")
OPTIONAL_COLUMNS = ("priority", "pool", "checkpoint_interval_s")
#: Stop collecting problems after this many: the first ones are enough to fix a systematic mistake.
MAX_REPORTED_PROBLEMS = 20


@dataclass(frozen=True, slots=True)
class TraceProblem:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class TraceError(ValueError):
    """The trace cannot be read; `problems` names each bad line."""

    def __init__(self, source: str, problems: list[TraceProblem], more: int = 0) -> None:
        self.source = source
        self.problems = problems
        self.more = more
        lines = [f"{source}: {p}" for p in problems]
        if more:
            lines.append(f"{source}: ... and {more} more bad rows")
        super().__init__("\n".join(lines))


def seconds_cell(text: str, column: str, *, allow_zero: bool = True) -> float:
    """A cell holding a finite, non-negative number of seconds (also read by the quota advisor)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{column} must be a number of seconds, got {text!r}") from None
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"{column} must be a finite number, got {text!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{column} must be {'≥' if allow_zero else '>'} 0, got {text!r}")
    return int(value) if value.is_integer() else value


def gpu_count_cell(text: str, column: str = "gpus", *, minimum: int = 1) -> int:
    """A cell holding a whole number of GPUs, at least `minimum` (also read by the quota advisor)."""
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{column} must be a whole number of GPUs, got {text!r}") from None
    if value < minimum:
        raise ValueError(f"{column} must be at least {minimum}, got {text!r}")
    return value


def _parse_row(row: dict[str, str | None], line: int) -> SimJob:
    def cell(name: str) -> str:
        return (row.get(name) or "").strip()

    for name in REQUIRED_COLUMNS:
        if not cell(name):
            raise ValueError(f"{name} is empty")
    interval_text = cell("checkpoint_interval_s")
    return SimJob(
        job_id=cell("job_id"),
        team=cell("team"),
        submit_s=seconds_cell(cell("submit_time_s"), "submit_time_s"),
        duration_s=seconds_cell(cell("duration_s"), "duration_s"),
        resources=Resources(gpus=gpu_count_cell(cell("gpus"))),
        priority_class=cell("priority") or None,
        pool=cell("pool") or None,
        checkpoint_interval_s=(
            seconds_cell(interval_text, "checkpoint_interval_s", allow_zero=False) if interval_text else None
        ),
        line=line,
    )


def _delimiter_hint(header: list[str]) -> str:
    """A header read as one column that holds `;`, tab or `|`: the file uses another separator."""
    if len(header) != 1:
        return ""
    for sep, name in ((";", "semicolons"), ("\t", "tabs"), ("|", "bars")):
        if sep in header[0]:
            return (
                f"; the header is separated by {name}, but a trace is comma-separated: "
                f"convert it, e.g. tr '{sep}' ',' < in.csv > out.csv"
            ).replace("'\t'", "'\\t'")
    return ""


def read_trace(lines: Iterable[str], source: str = "trace") -> list[SimJob]:
    """Parse a trace; raise `TraceError` naming every bad line (line 1 is the header).

    Jobs come back in file order; the simulator orders them by submit time itself.
    """
    reader = csv.DictReader(iter(lines))
    header = [h.strip() for h in (reader.fieldnames or [])]
    if not header:
        raise TraceError(source, [TraceProblem(1, "the file is empty (expected a CSV header)")])
    reader.fieldnames = header
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        message = f"missing column(s) {', '.join(missing)}; a trace needs {','.join(REQUIRED_COLUMNS)}"
        raise TraceError(source, [TraceProblem(1, message + _delimiter_hint(header))])
    jobs: list[SimJob] = []
    problems: list[TraceProblem] = []
    more = 0
    seen: dict[str, int] = {}
    for row in reader:
        line = reader.line_num
        try:
            if None in row:  # csv puts surplus cells under the key None
                raise ValueError(f"{len(header) + len(row[None])} cells for {len(header)} columns")  # type: ignore[index]
            job = _parse_row(row, line)
            if job.job_id in seen:
                raise ValueError(f"job_id {job.job_id!r} already used on line {seen[job.job_id]}")
        except ValueError as exc:
            if len(problems) < MAX_REPORTED_PROBLEMS:
                problems.append(TraceProblem(line, str(exc)))
            else:
                more += 1
            continue
        seen[job.job_id] = line
        jobs.append(job)
    if problems:
        raise TraceError(source, problems, more)
    return jobs
