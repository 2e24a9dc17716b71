"""Exact money splitting: largest remainder, and round-half-even of exact fractions.

Amounts are split in proportion to weights that are exact rationals (GPU-microseconds times decimal
prices), so every share is computed exactly and rounded once; the parts always add up to the whole.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction

Weight = int | Fraction | Decimal


def round_half_even(value: Fraction) -> int:
    """Round an exact amount of cents to a whole cent, half to even (banker's rounding)."""
    return round(value)


def largest_remainder(total: int, weights: Mapping[str, Weight]) -> dict[str, int]:
    """Split `total` cents over the keys in proportion to `weights`, to the cent.

    docs/design.md, "Chargeback rules": the exact share of key `i` is `total × w_i / Σw`; each key gets its
    share's floor, and the cents left over go one at a time to the largest fractional parts, ties to
    the key that sorts first. Keys with weight zero get nothing. The result adds up to `total` exactly,
    for negative totals too (a credit is split the same way).

    Returns `{}` when every weight is zero: the caller decides who keeps the amount (the platform).
    Raises `ValueError` on a negative weight.
    """
    exact: dict[str, Fraction] = {}
    for key, weight in weights.items():
        w = Fraction(weight)
        if w < 0:
            raise ValueError(f"negative weight {weight} for {key!r}")
        if w:
            exact[key] = w
    whole = sum(exact.values(), Fraction(0))
    if whole == 0:
        return {}
    shares: dict[str, int] = {}
    remainders: list[tuple[Fraction, str]] = []
    for key, w in exact.items():
        share = total * w / whole
        floor = math.floor(share)
        shares[key] = floor
        remainders.append((share - floor, key))
    leftover = total - sum(shares.values())
    remainders.sort(key=lambda item: (-item[0], item[1]))
    for _, key in remainders[:leftover]:
        shares[key] += 1
    return {key: shares.get(key, 0) for key in weights}
