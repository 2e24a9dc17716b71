"""The ledger as a time series: per team and pool, GPUs held and borrowed in each bucket of a window.

The dashboard's history chart draws, for each team, the GPUs it held over time (stacked), the part
above its nominal quota (borrowed, hatched) and the quota line. Each bucket holds exact integrals in
GPU-microseconds, with the same rules as chargeback (docs/design.md, "Chargeback rules", rule 2):
`held` = ∫ used(t) dt and `borrowed` = ∫ max(0, used(t) − nominal(t)) dt over the bucket, where
`nominal(t)` follows the policies in force over time. Summed over every bucket of a window they equal
what `ledger.integrate.summarize_usage` says of the window (the tests check it), so the chart and the
invoice never disagree.

Pure: intervals, quota steps and the window in; integers out. Buckets start at `start` and are `step`
long; the last one ends at `end` and may be shorter.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpucommons.ledger.interval import UsageInterval, to_us

Key = tuple[str, str]
#: What the sweep needs of an interval: (team, pool, gpus, start µs, end µs).
Span = tuple[str, str, int, int, int]
#: A quota that changes over time: `(from_us, nominal_gpus)` steps, sorted by time. Before the first
#: step the first step's value holds (the policy in force when the window opened).
NominalSteps = Sequence[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Buckets:
    start_us: int
    end_us: int
    step_us: int

    def __post_init__(self) -> None:
        if self.step_us <= 0 or self.end_us <= self.start_us:
            raise ValueError(f"an empty or backwards window: {self}")

    @property
    def count(self) -> int:
        return -(-(self.end_us - self.start_us) // self.step_us)

    def edges(self) -> list[int]:
        """`count + 1` bucket edges, the last one `end_us`."""
        return [self.start_us + i * self.step_us for i in range(self.count)] + [self.end_us]

    def length_us(self, index: int) -> int:
        edges_from = self.start_us + index * self.step_us
        return min(self.end_us, edges_from + self.step_us) - edges_from


@dataclass(frozen=True, slots=True)
class TeamPoolSeries:
    team: str
    pool: str
    #: ∫ GPUs held dt per bucket, in GPU-microseconds.
    held_us: tuple[int, ...]
    #: ∫ max(0, held − nominal) dt per bucket, in GPU-microseconds.
    borrowed_us: tuple[int, ...]
    #: The nominal quota in force at the end of each bucket.
    nominal: tuple[int, ...]


def nominal_at(steps: NominalSteps, t_us: int) -> int:
    value = steps[0][1] if steps else 0
    for at, nominal in steps:
        if at > t_us:
            break
        value = nominal
    return value


def spans_of(intervals: Iterable[UsageInterval]) -> list[Span]:
    return [(i.team, i.pool, i.gpus, to_us(i.start), to_us(i.end)) for i in intervals]


def bucket_series(
    spans: Iterable[Span], quotas: Mapping[Key, NominalSteps], buckets: Buckets
) -> list[TeamPoolSeries]:
    """One series per (team, pool) that has a quota or usage in the window, sorted by team and pool."""
    start, end, step = buckets.start_us, buckets.end_us, buckets.step_us
    deltas: dict[Key, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for team, pool, gpus, s0, e0 in spans:
        s, e = max(s0, start), min(e0, end)
        if e <= s or gpus <= 0:
            continue
        changes = deltas[(team, pool)]
        changes[s] += gpus
        changes[e] -= gpus
    edges = buckets.edges()
    n = buckets.count
    out = []
    for key in sorted(set(deltas) | set(quotas)):
        steps = quotas.get(key, ())
        changes = deltas.get(key, {})
        times = sorted({*changes, *edges, *(at for at, _ in steps if start < at < end)})
        held = [0] * n
        borrowed = [0] * n
        used = 0
        for i, t in enumerate(times[:-1]):
            used += changes.get(t, 0)
            span = times[i + 1] - t
            if span <= 0 or used == 0:
                continue
            index = min(n - 1, (t - start) // step)
            held[index] += used * span
            over = used - nominal_at(steps, t)
            if over > 0:
                borrowed[index] += over * span
        nominal = tuple(nominal_at(steps, edges[i + 1] - 1) for i in range(n))
        out.append(TeamPoolSeries(key[0], key[1], tuple(held), tuple(borrowed), nominal))
    return out
