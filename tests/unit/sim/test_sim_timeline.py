"""The simulator's timeline: per-team average level per bin, as an integral checked by hand.

The meter builds bins from stretches of constant level (full bins written once, partial bins
added up); these tests compare it with the definition — the integral of the level over the bin,
divided by the bin's width — computed here point by point.
"""

from __future__ import annotations

from gpucommons.domain.resources import Resources
from gpucommons.sim import SimConfig, SimJob, simulate
from gpucommons.sim.metrics import Meter
from gpucommons.testing.sim import policy, team


def reference(
    levels: list[tuple[float, float, float]], origin: float, width: float, bins: int
) -> list[float]:
    """Σ level × overlap / width over stretches (start, end, level), bin by bin."""
    out = []
    for b in range(bins):
        lo, hi = origin + b * width, origin + (b + 1) * width
        out.append(sum(v * max(0.0, min(e, hi) - max(s, lo)) for s, e, v in levels) / width)
    return out


def test_bins_are_the_integral_of_the_level_over_each_bin() -> None:
    meter = Meter({"p": 8.0}, {"a": {"p": 4.0}}, window=(0.0, 10.0), grace_allowance_s=0.0, timeline_bins=10)
    # a holds 2 GPUs on [0.5, 3.25), 6 on [3.25, 3.5), nothing on [3.5, 4), 1 on [4, 7.75).
    steps = [(0.5, 2.0), (3.25, 4.0), (3.5, -6.0), (4.0, 1.0), (7.75, -1.0)]
    for at, change in steps:
        meter.advance(at)
        if change > 0:
            meter.acquired("a", "p", change)
        else:
            meter.released("a", "p", -change)
    meter.advance(8.0)
    held = meter.timeline().held["a"]
    want = reference([(0.5, 3.25, 2.0), (3.25, 3.5, 6.0), (4.0, 7.75, 1.0)], 0.0, 1.0, 8)
    assert held == want  # up to the bin the last stretch with a level ends in
    # Wholly covered bins hold the level itself, not an approximation of it.
    assert held[1] == held[2] == 2.0 and held[4] == held[5] == held[6] == 1.0


def test_a_long_job_in_a_short_window_fills_its_bins_with_its_size() -> None:
    # Submissions span 9 s, so bins are 9/400 s wide, and each 10,000-s job spans ~444,000 of them.
    p = policy(team("a", 8), team("b", 8), nodes=2)
    jobs = [SimJob(f"j{i}", "ab"[i % 2], float(i), 10_000.0, Resources(1)) for i in range(10)]
    timeline = simulate(p, jobs, SimConfig(engine="kueue")).timeline
    assert timeline.bin_s == 9 / 400
    held = timeline.held["a"]
    assert len(held) == timeline.length == int(10_009 // timeline.bin_s) + 1  # j9 ends at 10,009 s
    mid = int(5_000 // timeline.bin_s)
    assert held[mid] == 5.0 and timeline.held["b"][mid] == 5.0
    assert timeline.pending["a"][mid] == 0.0
    assert held[-1] < 1.0  # the last job ends inside the last bin
