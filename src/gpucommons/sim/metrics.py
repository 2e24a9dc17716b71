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


@dataclass(frozen=True, slots=True)
class Timeline:
    """Per-team average level in fixed-width bins from `origin_s` (for plots, not for the JSON)."""

    origin_s: float
    bin_s: float
    held: dict[str, list[float]]
    pending: dict[str, list[float]]
    nominal: dict[str, float]


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
        self._held_bins: dict[str, list[float]] = {team: [] for team in nominal}
        self._pending_bins: dict[str, list[float]] = {team: [] for team in nominal}

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
            self._bin(name, start, to, held, sum(t.pending_units.values()))
        self.held_total_unit_s += total_held * dt
        w0, w1 = self.window
        overlap = min(to, w1) - max(start, w0)
        if overlap > 0:
            self.held_in_window_unit_s += total_held * overlap
        self.idle_while_waiting_unit_s += self._wasted_rate() * dt
        self.now = to

    def _bin(self, team: str, start: float, end: float, held: float, pending: float) -> None:
        if not held and not pending:
            return
        origin, width = self.window[0], self.bin_s
        held_bins, pending_bins = self._held_bins[team], self._pending_bins[team]
        first = max(int((start - origin) // width), 0)
        last = max(int((end - origin) // width), 0)
        while len(held_bins) <= last:
            held_bins.append(0.0)
            pending_bins.append(0.0)
        for b in range(first, last + 1):
            lo = max(start, origin + b * width)
            hi = min(end, origin + (b + 1) * width)
            if hi > lo:
                held_bins[b] += held * (hi - lo) / width
                pending_bins[b] += pending * (hi - lo) / width

    def timeline(self) -> Timeline:
        length = max((len(b) for b in self._held_bins.values()), default=0)

        def pad(bins: list[float]) -> list[float]:
            return bins + [0.0] * (length - len(bins))

        return Timeline(
            origin_s=self.window[0],
            bin_s=self.bin_s,
            held={team: pad(b) for team, b in self._held_bins.items()},
            pending={team: pad(b) for team, b in self._pending_bins.items()},
            nominal={team: sum(t.nominal.values()) for team, t in self.teams.items()},
        )
