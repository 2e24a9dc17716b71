"""Time integrals of a simulation: what each team held, borrowed, waited for, and was owed.

Everything here is piecewise constant between events, so the meter keeps the current levels and
integrates them when the clock moves (`advance`). The loop tells it about every change of level
(a job queued, admitted, released). Units are the metered resource's: GPUs on a GPU cluster, CPUs on
a CPU-only one (the Kueue baseline).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gpucommons.sim.errors import CapacityExceeded


@dataclass
class TeamMeter:
    nominal: dict[str, float]
    held: dict[str, float] = field(default_factory=dict)
    pending_units: dict[str, float] = field(default_factory=dict)
    pending_jobs: dict[str, int] = field(default_factory=dict)
    unit_s: float = 0.0
    borrowed_unit_s: float = 0.0
    violation_s: float = 0.0
    #: When the team's current stretch of "asked for no more than nominal, yet waits" began.
    violating_since: float | None = None


class Timeline:
    """Per-team average level in fixed-width bins from `origin_s` (for plots, not for the JSON).

    The bins are made on first use: a run whose timeline nobody reads (the CLI's, the benchmarks')
    does not pay for lists as long as the run divided by the bin width.
    """

    __slots__ = ("_held", "_held_bins", "_pending", "_pending_bins", "bin_s", "nominal", "origin_s")

    def __init__(
        self,
        origin_s: float,
        bin_s: float,
        held: dict[str, _Bins],
        pending: dict[str, _Bins],
        nominal: dict[str, float],
    ) -> None:
        self.origin_s = origin_s
        self.bin_s = bin_s
        self.nominal = nominal
        self._held_bins = held
        self._pending_bins = pending
        self._held: dict[str, list[float]] | None = None
        self._pending: dict[str, list[float]] | None = None

    @property
    def length(self) -> int:
        """How many bins every team's list has (up to the last bin any level reached)."""
        return max((b.length for b in self._held_bins.values()), default=0)

    @property
    def held(self) -> dict[str, list[float]]:
        if self._held is None:
            self._held = self._levels(self._held_bins)
        return self._held

    @property
    def pending(self) -> dict[str, list[float]]:
        if self._pending is None:
            self._pending = self._levels(self._pending_bins)
        return self._pending

    def _levels(self, bins: dict[str, _Bins]) -> dict[str, list[float]]:
        length = self.length
        return {team: b.levels(length) for team, b in bins.items()}


class Meter:
    """Integrates levels over time. `window` is the submission window used for utilization."""

    def __init__(
        self,
        capacity: dict[str, float],
        nominal: dict[str, dict[str, float]],
        window: tuple[float, float],
        grace_allowance_s: float,
        timeline_bins: int = 400,
    ) -> None:
        self.capacity = capacity
        self.teams = {team: TeamMeter(nominal=dict(quotas)) for team, quotas in nominal.items()}
        self.window = window
        self.grace_allowance_s = grace_allowance_s
        self.now = window[0]
        self.held_in_window_unit_s = 0.0
        self.held_total_unit_s = 0.0
        self.idle_while_waiting_unit_s = 0.0
        self.free = dict(capacity)
        #: Pool -> request size -> number of waiting jobs of that size (for idle-while-waiting).
        self.waiting_sizes: dict[str, Counter[float]] = {pool: Counter() for pool in capacity}
        span = max(window[1] - window[0], 1.0)
        self.bin_s = span / max(timeline_bins, 1)
        self._held = {team: _Bins() for team in nominal}
        self._pending = {team: _Bins() for team in nominal}

    # -- level changes -------------------------------------------------------------------------
    def queued(self, team: str, pool: str, units: float) -> None:
        t = self.teams[team]
        t.pending_units[pool] = t.pending_units.get(pool, 0.0) + units
        t.pending_jobs[pool] = t.pending_jobs.get(pool, 0) + 1
        self.waiting_sizes[pool][units] += 1

    def dequeued(self, team: str, pool: str, units: float) -> None:
        t = self.teams[team]
        t.pending_units[pool] -= units
        t.pending_jobs[pool] -= 1
        sizes = self.waiting_sizes[pool]
        sizes[units] -= 1
        if not sizes[units]:
            del sizes[units]

    def acquired(self, team: str, pool: str, units: float) -> None:
        """A job of `team` took `units` in `pool`; refuses an admission beyond the pool's capacity.

        The engine is trusted for quotas, not for arithmetic the simulator can check itself.
        """
        t = self.teams[team]
        t.held[pool] = t.held.get(pool, 0.0) + units
        self.free[pool] -= units
        if self.free[pool] < 0:
            raise CapacityExceeded(
                f"at t={self.now:g}s pool {pool} holds {self.capacity[pool] - self.free[pool]:g} "
                f"of {self.capacity[pool]:g} units"
            )

    def released(self, team: str, pool: str, units: float) -> None:
        self.teams[team].held[pool] -= units
        self.free[pool] += units

    # -- integration ---------------------------------------------------------------------------
    def _wasted_rate(self) -> float:
        """min(free, Σ sizes of waiting jobs that would fit in the free capacity), summed over pools."""
        rate = 0.0
        for pool, sizes in self.waiting_sizes.items():
            free = self.free[pool]
            if free <= 0 or not sizes:
                continue
            fitting = sum(size * count for size, count in sizes.items() if size <= free)
            rate += min(free, fitting)
        return rate

    def _is_violated(self, t: TeamMeter) -> bool:
        for pool, waiting in t.pending_jobs.items():
            if waiting and t.held.get(pool, 0.0) + t.pending_units[pool] <= t.nominal.get(pool, 0.0):
                return True
        return False

    def advance(self, to: float) -> None:
        """Integrate the levels reached at `self.now` (after all its changes) up to `to`."""
        start = self.now
        if to <= start:
            return
        dt = to - start
        total_held = 0.0
        # The bins the stretch [start, to) covers are the same for every team: found once.
        origin, width = self.window[0], self.bin_s
        first = max(int((start - origin) // width), 0)
        last = max(int((to - origin) // width), 0)
        for name, t in self.teams.items():
            held = 0.0
            for pool, units in t.held.items():
                held += units
                over = units - t.nominal.get(pool, 0.0)
                if over > 0:
                    t.borrowed_unit_s += over * dt
            t.unit_s += held * dt
            total_held += held
            if self._is_violated(t):
                if t.violating_since is None:
                    t.violating_since = start
                counted_from = max(start, t.violating_since + self.grace_allowance_s)
                if to > counted_from:
                    t.violation_s += to - counted_from
            else:
                t.violating_since = None
            self._bin(name, first, last, start, to, held, sum(t.pending_units.values()))
        self.held_total_unit_s += total_held * dt
        w0, w1 = self.window
        overlap = min(to, w1) - max(start, w0)
        if overlap > 0:
            self.held_in_window_unit_s += total_held * overlap
        self.idle_while_waiting_unit_s += self._wasted_rate() * dt
        self.now = to

    def _bin(
        self, team: str, first: int, last: int, start: float, end: float, held: float, pending: float
    ) -> None:
        """Add the team's levels over [start, end), which covers bins `first` to `last`."""
        if not held and not pending:
            return
        origin, width = self.window[0], self.bin_s
        self._held[team].add(first, last, start, end, held, origin, width)
        self._pending[team].add(first, last, start, end, pending, origin, width)

    def timeline(self) -> Timeline:
        return Timeline(
            origin_s=self.window[0],
            bin_s=self.bin_s,
            held=dict(self._held),
            pending=dict(self._pending),
            nominal={team: sum(t.nominal.values()) for team, t in self.teams.items()},
        )


class _Bins:
    """One team's level averaged over fixed-width bins, built in time proportional to the number
    of level changes rather than to the bins they span.

    A stretch of constant level covers its first and last bins in part and every bin between in
    full. The partial bins are added up as they come; a full bin's average is the level itself,
    and the stretches never overlap, so each full run is kept as (first bin, end bin, level) and
    written out once (`levels`). A 10,000-second job in a trace whose submissions span a few
    seconds covers hundreds of thousands of bins: walking them one by one at every event was most
    of such a run's time.
    """

    __slots__ = ("full", "length", "part")

    def __init__(self) -> None:
        #: Bin -> the partial stretches' share of its average.
        self.part: dict[int, float] = {}
        #: Runs of bins wholly inside one stretch: [first, end) at `level`.
        self.full: list[tuple[int, int, float]] = []
        #: Bins up to the last one a stretch reached.
        self.length = 0

    def add(
        self, first: int, last: int, start: float, end: float, level: float, origin: float, width: float
    ) -> None:
        self.length = max(self.length, last + 1)
        if not level:
            return
        part = self.part
        # First bin: from `start` to the end of the bin (or to `end`).
        hi = min(end, origin + (first + 1) * width)
        if hi > start:
            part[first] = part.get(first, 0.0) + level * (hi - start) / width
        if last > first:
            if last > first + 1:
                self.full.append((first + 1, last, level))
            lo = origin + last * width
            if end > lo:
                part[last] = part.get(last, 0.0) + level * (end - lo) / width

    def levels(self, length: int) -> list[float]:
        """Every bin's average level, `length` bins."""
        out = [0.0] * length
        for first, end, level in self.full:
            out[first:end] = [level] * (end - first)
        for b, share in self.part.items():
            out[b] += share
        return out
