"""Small exact statistics helpers (no numpy in the pure core: results must not depend on its version)."""

from __future__ import annotations

from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0–100) with linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    frac = rank - low
    return ordered[low] + (ordered[high] - ordered[low]) * frac


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def tidy(value: float, digits: int = 3) -> float | int:
    """Round for the report; whole numbers print as integers, so JSON stays short and stable."""
    rounded = round(value, digits)
    if rounded == int(rounded) and abs(rounded) < 2**53:
        return int(rounded)
    return rounded
