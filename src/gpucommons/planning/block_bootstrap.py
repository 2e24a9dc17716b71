"""How sure is the advice? A week-block bootstrap of the change in mean p95 wait.

Waits of jobs submitted close together are not independent (one busy week delays hundreds of jobs),
so resampling single jobs would overstate confidence. The replayed jobs are cut into blocks of a
week (per window: fit and validation keep their own blocks), the blocks are drawn with replacement
as many times as there are blocks, and the mean over teams of the p95 wait is computed for today's
quotas and for the proposal on the *same* draw (a paired comparison). Over `resamples` draws this
gives the share of draws in which the proposal waits less, and an interval of the relative change.

With a month of history there are only four or five blocks, so the interval is coarse; the report
says how many blocks it rests on. The fit blocks are in-sample for the proposal, so the figures lean
optimistic; the validation block alone is the out-of-sample check.

Blocks are drawn with `random.Random(seed)` (stable across Python versions); the arithmetic uses
numpy on fixed-order arrays, so a seed gives the same figures on every run.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucommons.planning.replay_score import DAY, ReplayScore, Window

WEEK_S = 7 * DAY


@dataclass(frozen=True, slots=True)
class BootstrapResult:
    resamples: int
    blocks: int
    #: Share of draws in which the proposal's mean p95 wait was shorter than today's.
    better_share: float
    #: Relative change of the mean p95 wait (proposal ÷ today − 1): 5th, 50th, 95th percentile.
    change_low: float
    change_median: float
    change_high: float

    def describe(self) -> str:
        return (
            f"in {self.better_share:.0%} of {self.resamples} week-block resamples ({self.blocks} blocks of "
            f"fit and validation days) the proposal's mean p95 wait is shorter than today's; change "
            f"{self.change_median:+.0%} (90% interval {self.change_low:+.0%} to {self.change_high:+.0%})"
        )


class _TeamSamples:
    """One team's waits under one policy, sorted once; a draw only changes the weights."""

    def __init__(
        self,
        waits: npt.NDArray[np.float64],
        weights: npt.NDArray[np.float64],
        blocks: npt.NDArray[np.int64],
    ) -> None:
        order = np.argsort(waits, kind="stable")
        self.waits = waits[order]
        self.weights = weights[order]
        self.blocks = blocks[order]

    def p95(self, multiplicity: npt.NDArray[np.float64]) -> float | None:
        w = self.weights * multiplicity[self.blocks]
        keep = w > 0
        if not keep.any():
            return None
        values, w = self.waits[keep], w[keep]
        if len(values) == 1:
            return float(values[0])
        running = np.cumsum(w) - w
        span = running[-1]
        if span <= 0:
            return float(values[-1])
        positions = running / span
        k = int(np.searchsorted(positions, 0.95, side="left"))
        if k == 0:
            return float(values[0])
        lo, hi = positions[k - 1], positions[k]
        if hi == lo:
            return float(values[k])
        return float(values[k - 1] + (values[k] - values[k - 1]) * (0.95 - lo) / (hi - lo))


def _samples(
    scores: Sequence[ReplayScore], windows: Sequence[Window], block_s: float
) -> tuple[dict[str, _TeamSamples], int, list[tuple[int, int]]]:
    per_team: dict[str, tuple[list[float], list[float], list[int]]] = {}
    block_ids: dict[tuple[int, int], int] = {}
    for w_index, (score, window) in enumerate(zip(scores, windows, strict=True)):
        for team, submit, wait, weight in score.samples:
            key = (w_index, int((submit - window.start_s) // block_s))
            block = block_ids.setdefault(key, len(block_ids))
            waits, weights, blocks = per_team.setdefault(team, ([], [], []))
            waits.append(wait)
            weights.append(weight)
            blocks.append(block)
    teams = {
        team: _TeamSamples(
            np.array(w, dtype=np.float64), np.array(g, dtype=np.float64), np.array(b, dtype=np.int64)
        )
        for team, (w, g, b) in sorted(per_team.items())
    }
    return teams, len(block_ids), list(block_ids)  # keys in id order


def _mean_p95(teams: dict[str, _TeamSamples], multiplicity: npt.NDArray[np.float64]) -> float:
    waits = [p for p in (t.p95(multiplicity) for t in teams.values()) if p is not None]
    return sum(waits) / len(waits) if waits else 0.0


def week_block_bootstrap(
    today: Sequence[ReplayScore],
    proposal: Sequence[ReplayScore],
    windows: Sequence[Window],
    *,
    resamples: int = 500,
    seed: int = 0,
    block_s: float = WEEK_S,
) -> BootstrapResult | None:
    """Paired bootstrap over week blocks; `today[i]` and `proposal[i]` are replays of `windows[i]`.

    None when there is nothing to resample (no jobs) or `resamples` is 0.
    """
    if resamples <= 0:
        return None
    base, _, keys = _samples(today, windows, block_s)
    new, _, keys_new = _samples(proposal, windows, block_s)
    all_keys = sorted(set(keys) | set(keys_new))
    if not all_keys:
        return None
    # Both sides must index blocks the same way: rebuild with the union's numbering.
    index = {k: i for i, k in enumerate(all_keys)}
    remap_base = np.array([index[k] for k in keys], dtype=np.int64)
    remap_new = np.array([index[k] for k in keys_new], dtype=np.int64)
    for t in base.values():
        t.blocks = remap_base[t.blocks]
    for t in new.values():
        t.blocks = remap_new[t.blocks]
    rng = random.Random(seed)
    n = len(all_keys)
    changes: list[float] = []
    better = 0
    for _ in range(resamples):
        counts = np.zeros(n, dtype=np.float64)
        for _ in range(n):
            counts[rng.randrange(n)] += 1
        before, after = _mean_p95(base, counts), _mean_p95(new, counts)
        if after < before:
            better += 1
        changes.append(after / before - 1 if before > 0 else 0.0)
    low, mid, high = np.percentile(np.array(changes), [5, 50, 95])
    return BootstrapResult(resamples, n, better / resamples, float(low), float(mid), float(high))
