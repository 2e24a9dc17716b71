"""Integrating the ledger over a period: per team and pool, GPU-time used, borrowed and left unused.

docs/design.md, "Chargeback rules", rule 2, over `[start, end)` with intervals cut at the period's edges:
- `H` = Σ gpus × duration of the team's intervals in the pool;
- `B` = ∫ max(0, used(t) − nominal) dt: GPU-time above the team's nominal quota (borrowed);
- `Q` = ∫ max(0, nominal − used(t)) dt: guaranteed quota the team left unused.

Since ∫ min(used, nominal) = H − B, `Q = nominal × T − (H − B)`: only `B` needs a sweep over time,
and only for a team whose intervals could ever exceed its nominal quota at once.

Everything is counted in integer GPU-microseconds, so nothing is rounded here. Two implementations
compute the same numbers: `_integrate_python`, the plain reading of the rules (used as the test
oracle, and for inputs so large that 64-bit integers could overflow), and `_integrate_table`, which
does the per-interval arithmetic in int64 vectors over a `UsageTable`, so that a month of a million
intervals takes well under a second.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from gpucommons.domain.model import Policy
from gpucommons.ledger._bulk import gc_paused
from gpucommons.ledger.interval import US_PER_HOUR, UsageInterval, to_us
from gpucommons.ledger.period import Period
from gpucommons.ledger.table import Categorical, UsageTable

_HOURS_QUANTUM = Decimal("0.000001")
#: int64 arithmetic is used only while every product and sum stays below this.
_INT64_SAFE = 2**62

Key = tuple[str, str]
ClassKey = tuple[str, str, str]


def us_to_hours(gpu_us: int | Fraction) -> Decimal:
    """GPU-microseconds as GPU-hours, to the micro-hour (for display and exports; sums use `gpu_us`)."""
    value = Fraction(gpu_us) / US_PER_HOUR
    return (Decimal(value.numerator) / Decimal(value.denominator)).quantize(_HOURS_QUANTUM)


@dataclass(frozen=True, slots=True)
class PoolUsage:
    """One team's use of one pool over the period, in GPU-microseconds."""

    team: str
    pool: str
    nominal_gpus: int
    gpu_us: int
    borrowed_us: int
    unused_quota_us: int

    @property
    def owned_us(self) -> int:
        """GPU-time within the nominal quota: `H − B`."""
        return self.gpu_us - self.borrowed_us


@dataclass(frozen=True, slots=True)
class UsageSummary:
    """What the ledger says about a period: the inputs of every chargeback rule."""

    period: Period
    #: (team, pool) -> usage, sorted by key. Holds every team with a quota in a pool (used or not)
    #: and every (team, pool) the ledger shows usage for.
    pools: dict[Key, PoolUsage]
    #: (team, pool, priority class) -> GPU-microseconds (for invoices).
    by_class: dict[ClassKey, int]
    #: (team, pool) -> GPU-hours of work lost to preemptions inside the period.
    lost_gpu_hours: dict[Key, Decimal]
    #: Every team of the policy or the ledger, sorted.
    teams: tuple[str, ...]
    #: Teams that appear in the ledger but not in the policy (charged as having no quota).
    unknown_teams: tuple[str, ...] = ()
    #: Intervals with some GPU-time inside the period.
    intervals_counted: int = 0


@dataclass(slots=True)
class _Integrals:
    gpu_us: dict[Key, int]
    borrowed_us: dict[Key, int]
    by_class: dict[ClassKey, int]
    lost: dict[Key, Decimal]
    counted: int


def summarize_usage(
    intervals: Iterable[UsageInterval] | UsageTable, period: Period, policy: Policy
) -> UsageSummary:
    """Integrate the ledger over `period` (rule 2). Intervals are cut at the period's edges.

    Lost work counts in the period in which its interval ends (the preemption's instant), i.e. when
    `period.start < interval.end <= period.end`. Raises `ValueError` on a naive (zone-less) time.
    """
    if isinstance(intervals, UsageTable):
        table = intervals
    else:
        table = UsageTable.from_intervals(
            intervals if isinstance(intervals, list | tuple) else list(intervals)
        )
    nominal = {(t.name, q.pool): q.nominal.gpus for t in policy.teams for q in t.quotas}
    with gc_paused():
        found = _integrate_table(table, period, nominal)
        if found is None:
            found = _integrate_python(table.intervals(), period, nominal)
    duration = period.duration_us
    pools: dict[Key, PoolUsage] = {}
    for key in sorted(set(nominal) | set(found.gpu_us)):
        n = max(nominal.get(key, 0), 0)
        used = found.gpu_us.get(key, 0)
        borrowed = found.borrowed_us.get(key, 0)
        pools[key] = PoolUsage(key[0], key[1], n, used, borrowed, n * duration - (used - borrowed))
    policy_teams = set(policy.team_names)
    ledger_teams = {team for team, _ in found.gpu_us} | {team for team, _ in found.lost}
    return UsageSummary(
        period=period,
        pools=pools,
        by_class=dict(sorted(found.by_class.items())),
        lost_gpu_hours=found.lost,
        teams=tuple(sorted(policy_teams | ledger_teams)),
        unknown_teams=tuple(sorted(ledger_teams - policy_teams)),
        intervals_counted=found.counted,
    )


def _lost_in_period(rows: Sequence[UsageInterval], p0: int, p1: int) -> dict[Key, Decimal]:
    lost: dict[Key, Decimal] = {}
    for iv in rows:
        if iv.lost_gpu_hours and p0 < to_us(iv.end) <= p1:
            key = (iv.team, iv.pool)
            lost[key] = lost.get(key, Decimal(0)) + iv.lost_gpu_hours
    return lost


def _integrate_python(rows: Sequence[UsageInterval], period: Period, nominal: dict[Key, int]) -> _Integrals:
    """The rules read plainly, in Python integers (no overflow whatever the input)."""
    p0, p1 = period.start_us, period.end_us
    gpu_us: dict[Key, int] = {}
    spans: dict[Key, list[tuple[int, int, int]]] = {}
    by_class: dict[ClassKey, int] = {}
    counted = 0
    for iv in rows:
        if iv.start.tzinfo is None or iv.end.tzinfo is None:
            raise ValueError(
                f"the interval of task {iv.task_id!r} has a time without zone; ledger times are UTC"
            )
        s, e = max(to_us(iv.start), p0), min(to_us(iv.end), p1)
        if e <= s or iv.gpus <= 0:
            continue
        counted += 1
        key = (iv.team, iv.pool)
        held = iv.gpus * (e - s)
        gpu_us[key] = gpu_us.get(key, 0) + held
        spans.setdefault(key, []).append((s, e, iv.gpus))
        ckey = (iv.team, iv.pool, iv.priority)
        by_class[ckey] = by_class.get(ckey, 0) + held
    borrowed = {key: _borrowed_python(spans[key], nominal.get(key, 0)) for key in gpu_us}
    return _Integrals(gpu_us, borrowed, by_class, _lost_in_period(rows, p0, p1), counted)


def _borrowed_python(spans: list[tuple[int, int, int]], nominal: int) -> int:
    """∫ max(0, used(t) − nominal) dt over the spans (each `(start, end, gpus)`), by a sweep."""
    delta: dict[int, int] = {}
    for s, e, g in spans:
        delta[s] = delta.get(s, 0) + g
        delta[e] = delta.get(e, 0) - g
    borrowed = used = previous = 0
    for t in sorted(delta):
        if used > nominal:
            borrowed += (used - nominal) * (t - previous)
        used += delta[t]
        previous = t
    return borrowed


def _integrate_table(table: UsageTable, period: Period, nominal: dict[Key, int]) -> _Integrals | None:
    """The same integrals in int64 vectors; `None` when the input is too large for int64."""
    count = len(table)
    p0, p1 = period.start_us, period.end_us
    gpus = table.gpus
    if count and (int(gpus.max()) * (p1 - p0) >= _INT64_SAFE or int(gpus.min()) < 0):
        return None
    team_names, team_codes = _codes(table.team)
    pool_names, pool_codes = _codes(table.pool)
    class_names, classes = _codes(table.priority)
    pairs, codes = np.unique(team_codes * len(pool_names) + pool_codes, return_inverse=True)
    codes = codes.astype(np.int64).reshape(-1)
    row_keys = codes  # every row's (team, pool) code, before the rows outside the period are dropped
    keys: list[Key] = [
        (team_names[int(pair) // len(pool_names)], pool_names[int(pair) % len(pool_names)]) for pair in pairs
    ]

    s = np.maximum(table.start_us, p0)
    e = np.minimum(table.end_us, p1)
    keep = (e > s) & (gpus > 0)
    s, e, g, codes, classes = s[keep], e[keep], gpus[keep], codes[keep], classes[keep]
    held = g * (e - s)
    if held.size and float(held.astype(np.float64).sum()) >= _INT64_SAFE:
        return None

    gpu_us_v = np.zeros(len(keys), np.int64)
    np.add.at(gpu_us_v, codes, held)
    peak_v = np.zeros(len(keys), np.int64)  # Σ gpus: an upper bound of the team's concurrent use
    np.add.at(peak_v, codes, g)
    n_classes = max(len(class_names), 1)
    class_v = np.zeros(len(keys) * n_classes, np.int64)
    np.add.at(class_v, codes * n_classes + classes, held)

    order = np.argsort(codes)
    bounds = np.searchsorted(codes[order], np.arange(len(keys) + 1))
    gpu_us: dict[Key, int] = {}
    borrowed: dict[Key, int] = {}
    for code, key in enumerate(keys):
        used = int(gpu_us_v[code])
        if used == 0:
            continue
        gpu_us[key] = used
        n = nominal.get(key, 0)
        if n <= 0:
            borrowed[key] = used
        elif int(peak_v[code]) <= n:
            borrowed[key] = 0
        else:
            idx = order[bounds[code] : bounds[code + 1]]
            borrowed[key] = _borrowed_numpy(s[idx], e[idx], g[idx], n)

    by_class: dict[ClassKey, int] = {}
    for flat in np.flatnonzero(class_v):
        code, klass = divmod(int(flat), n_classes)
        team, pool = keys[code]
        by_class[(team, pool, class_names[klass])] = int(class_v[flat])

    lost: dict[Key, Decimal] = {}
    if table.lost_gpu_hours:
        # a few percent of a million rows: their keys by codes in vectors, not per row by name
        rows = np.fromiter(table.lost_gpu_hours, np.int64, len(table.lost_gpu_hours))
        ends = table.end_us[rows]
        inside = ((ends > p0) & (ends <= p1)).tolist()
        for code, counts, hours in zip(
            row_keys[rows].tolist(), inside, table.lost_gpu_hours.values(), strict=True
        ):
            if counts:
                key = keys[code]
                lost[key] = lost.get(key, Decimal(0)) + hours
    return _Integrals(gpu_us, borrowed, by_class, lost, int(keep.sum()))


def _codes(values: Sequence[str]) -> tuple[list[str], npt.NDArray[np.int64]]:
    """The distinct values (sorted) and each row's index into them."""
    if isinstance(values, Categorical):
        return list(values.names), values.codes  # already so, from the byte reader
    names = sorted(set(values))
    index = {name: i for i, name in enumerate(names)}
    return names, np.fromiter(map(index.__getitem__, values), np.int64, len(values))


def _borrowed_numpy(s: np.ndarray, e: np.ndarray, g: np.ndarray, nominal: int) -> int:
    """`_borrowed_python` in vectors: sort the start (+g) and end (−g) events, accumulate, integrate."""
    times = np.concatenate((s, e))
    deltas = np.concatenate((g, -g))
    order = np.argsort(times)  # any order of simultaneous events integrates the same
    times, deltas = times[order], deltas[order]
    over = np.cumsum(deltas)[:-1] - nominal
    np.maximum(over, 0, out=over)
    return int((over * np.diff(times)).sum())
