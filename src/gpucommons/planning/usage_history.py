"""Usage history → each team's demand over time, as a time-weighted distribution per pool.

The advisor accepts two kinds of history, and both end up as a `Demand`: how many seconds a team
asked for each number of GPUs.

- A job trace (docs/design.md, contract 2, read by `gpucommons.sim.read_trace`): a job asks for its `gpus`
  from its submission until `submit + duration`. This is a proxy. A job that waited in a queue asked
  for its GPUs longer than its run time, so queueing makes the trace *understate* demand; and a trace
  recorded under a scheduler shows the demand that scheduler let in.
- A sampled usage file (`time_s,team,running_gpus,pending_gpus` and optionally `pool`, e.g.
  Helios's 5-minute samples): demand = running + pending. Pending work is *censored* (users
  cancel jobs that wait too long, and some never submit into a full queue), so demand above what
  ran is a lower bound.

Only the distribution is kept, not the timeline: percentiles, the mean and the share of time a team
was active are all the advisor needs, and a histogram of a month of 5-minute samples is a few
hundred numbers. Reading files is the caller's job: the readers take lines.
"""

from __future__ import annotations

import csv
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gpucommons.sim.jobs import SimJob
from gpucommons.sim.trace import MAX_REPORTED_PROBLEMS, TraceError, TraceProblem, gpu_count_cell, seconds_cell

SAMPLE_COLUMNS = ("time_s", "team", "running_gpus", "pending_gpus")
#: Which pool a row that names none counts in (the advisor passes the team's first pool).
PoolOf = Callable[[str], str | None]
HistoryKind = Literal["trace", "samples"]


class UsageFileError(TraceError):
    """A sampled usage file cannot be read; `problems` names each bad line (line 1 is the header)."""


@dataclass(frozen=True, slots=True)
class Demand:
    """One team's demand in one pool: `seconds_at[(gpus, seconds)]`, ascending by GPUs, zero included.

    `pool` is None when the history does not say (a usage file, or a trace without a `pool` column);
    the advisor then counts the demand in the team's first pool. `censored_s` is the time during
    which part of the demand was pending (so the true demand may have been higher). `largest_job`
    is the largest single request in a trace (0 for samples, which do not show jobs).
    """

    team: str
    pool: str | None
    seconds_at: tuple[tuple[int, float], ...]
    censored_s: float = 0.0
    largest_job: int = 0

    @property
    def total_s(self) -> float:
        return sum(s for _, s in self.seconds_at)

    @property
    def active_s(self) -> float:
        return sum(s for g, s in self.seconds_at if g > 0)

    @property
    def active_fraction(self) -> float:
        total = self.total_s
        return self.active_s / total if total else 0.0

    @property
    def gpu_hours(self) -> float:
        return sum(g * s for g, s in self.seconds_at) / 3600

    @property
    def mean(self) -> float:
        total = self.total_s
        return sum(g * s for g, s in self.seconds_at) / total if total else 0.0

    @property
    def peak(self) -> int:
        return max((g for g, s in self.seconds_at if s > 0), default=0)

    def percentile(self, q: float, *, active_only: bool = False) -> int:
        """The smallest demand `d` such that demand was ≤ `d` during at least `q`% of the time.

        Time-weighted and never interpolated, so the answer is a demand that really occurred (whole
        GPUs). With `active_only`, only the time the team asked for at least one GPU counts.
        """
        steps = [(g, s) for g, s in self.seconds_at if s > 0 and (g > 0 or not active_only)]
        total = sum(s for _, s in steps)
        if not steps:
            return 0
        needed = total * min(max(q, 0.0), 100.0) / 100.0
        running = 0.0
        for gpus, seconds in steps:
            running += seconds
            if running >= needed:
                return gpus
        return steps[-1][0]  # float rounding at q = 100

    def share_at_or_below(self, gpus: int, *, active_only: bool = False) -> float:
        """Fraction of the (active) time the demand was at most `gpus`: how often a quota covers it."""
        steps = [(g, s) for g, s in self.seconds_at if g > 0 or not active_only]
        total = sum(s for _, s in steps)
        return sum(s for g, s in steps if g <= gpus) / total if total else 0.0


@dataclass(frozen=True, slots=True)
class UsageHistory:
    """What the advisor sizes quotas from: every team's demand over one window of time."""

    kind: HistoryKind
    start_s: float
    end_s: float
    demands: tuple[Demand, ...]
    #: For samples: the sampling step; for a trace: 0.
    step_s: float = 0.0
    notes: tuple[str, ...] = field(default=())

    @property
    def span_s(self) -> float:
        return self.end_s - self.start_s


def _histogram(seconds_by_gpus: dict[int, float]) -> tuple[tuple[int, float], ...]:
    return tuple(sorted((g, s) for g, s in seconds_by_gpus.items() if s > 0))


def demand_from_jobs(jobs: Sequence[SimJob]) -> UsageHistory:
    """Demand per (team, pool) from a job trace: each job asks for its GPUs from submit to submit + duration.

    The window runs from the first submission to the last job's end, the same for every team, so a
    team's idle time is comparable with another's.
    """
    if not jobs:
        return UsageHistory("trace", 0.0, 0.0, ())
    start = min(j.submit_s for j in jobs)
    end = max(j.submit_s + j.duration_s for j in jobs)
    changes: dict[tuple[str, str | None], dict[float, int]] = defaultdict(lambda: defaultdict(int))
    largest: dict[tuple[str, str | None], int] = defaultdict(int)
    for job in jobs:
        key = (job.team, job.pool)
        gpus = job.resources.gpus
        largest[key] = max(largest[key], gpus)
        if job.duration_s <= 0:
            continue
        changes[key][job.submit_s] += gpus
        changes[key][job.submit_s + job.duration_s] -= gpus
    demands = []
    for key in sorted(largest, key=lambda k: (k[0], k[1] or "")):
        seconds: dict[int, float] = defaultdict(float)
        level, previous = 0, start
        for at in sorted(changes[key]):
            seconds[level] += at - previous
            level += changes[key][at]
            previous = at
        seconds[level] += end - previous  # level is 0 again after the last end
        demands.append(Demand(key[0], key[1], _histogram(seconds), largest_job=largest[key]))
    return UsageHistory("trace", start, end, tuple(demands))


@dataclass(frozen=True, slots=True)
class _Sample:
    time_s: float
    team: str
    pool: str | None
    running: int
    pending: int


def _parse_sample(row: dict[str, str | None], width: int, pool_of: PoolOf) -> _Sample:
    if None in row:  # csv puts surplus cells under the key None
        surplus: Any = row[None]  # type: ignore[index]
        raise ValueError(f"{width + len(surplus)} cells for {width} columns")
    cells = {name: (row.get(name) or "").strip() for name in SAMPLE_COLUMNS}
    for name, text in cells.items():
        if not text:
            raise ValueError(f"{name} is empty")
    pool = (row.get("pool") or "").strip()
    return _Sample(
        seconds_cell(cells["time_s"], "time_s"),
        cells["team"],
        pool or pool_of(cells["team"]),
        gpu_count_cell(cells["running_gpus"], "running_gpus", minimum=0),
        gpu_count_cell(cells["pending_gpus"], "pending_gpus", minimum=0),
    )


def _read_samples(lines: Iterable[str], source: str, pool_of: PoolOf) -> list[_Sample]:
    reader = csv.DictReader(iter(lines))
    header = [h.strip() for h in (reader.fieldnames or [])]
    if not header:
        raise UsageFileError(source, [TraceProblem(1, "the file is empty (expected a CSV header)")])
    reader.fieldnames = header
    missing = [c for c in SAMPLE_COLUMNS if c not in header]
    if missing:
        needed = ",".join(SAMPLE_COLUMNS)
        problem = TraceProblem(1, f"missing column(s) {', '.join(missing)}; a usage file needs {needed}")
        raise UsageFileError(source, [problem])
    samples: list[_Sample] = []
    problems: list[TraceProblem] = []
    more = 0
    seen: dict[tuple[float, str, str | None], int] = {}
    for row in reader:
        line = reader.line_num
        try:
            sample = _parse_sample(row, len(header), pool_of)
            key = (sample.time_s, sample.team, sample.pool)
            if key in seen:
                where = f" in pool {sample.pool!r}" if sample.pool else ""
                raise ValueError(
                    f"team {sample.team!r}{where} at time_s {row['time_s']} already on line {seen[key]}"
                )
        except ValueError as exc:
            if len(problems) < MAX_REPORTED_PROBLEMS:
                problems.append(TraceProblem(line, str(exc)))
            else:
                more += 1
            continue
        seen[key] = line
        samples.append(sample)
    if problems:
        raise UsageFileError(source, problems, more)
    if not samples:
        raise UsageFileError(source, [TraceProblem(1, "the file has a header but no samples")])
    return samples


def read_usage_samples(
    lines: Iterable[str], source: str = "usage", pool_of: PoolOf = lambda team: None
) -> UsageHistory:
    """Demand per (team, pool) from a sampled usage file; raise `UsageFileError` naming every bad line.

    Each sample stands for the time until the file's next sampling instant (the last one for the
    file's usual step, the median gap), so a team's missing rows count as unobserved, not as idle.
    Rows without a pool count in `pool_of(team)`; resolving it here, before demand is summed,
    keeps one histogram per (team, pool).
    """
    samples = _read_samples(lines, source, pool_of)
    times = sorted({s.time_s for s in samples})
    gaps = sorted(b - a for a, b in itertools.pairwise(times))
    step = gaps[len(gaps) // 2] if gaps else 1.0
    lasts = dict(zip(times, [*times[1:], times[-1] + step], strict=True))
    seconds: dict[tuple[str, str | None], dict[int, float]] = defaultdict(lambda: defaultdict(float))
    censored: dict[tuple[str, str | None], float] = defaultdict(float)
    for sample in samples:
        weight = lasts[sample.time_s] - sample.time_s
        key = (sample.team, sample.pool)
        seconds[key][sample.running + sample.pending] += weight
        if sample.pending:
            censored[key] += weight
    demands = tuple(
        Demand(team, pool, _histogram(seconds[(team, pool)]), censored_s=censored[(team, pool)])
        for team, pool in sorted(seconds, key=lambda k: (k[0], k[1] or ""))
    )
    return UsageHistory("samples", times[0], times[-1] + step, demands, step_s=step)


def is_usage_file_header(first_line: str) -> bool:
    """True when a CSV header names the sampled-usage columns (else it should be a job trace)."""
    names = {cell.strip() for cell in next(csv.reader([first_line]), [])}
    return {"running_gpus", "pending_gpus"} <= names and "job_id" not in names
