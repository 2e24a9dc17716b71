"""Money as integer cents; prices as exact decimals. Never floats for either."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

CENTS = Decimal(100)


def to_cents(amount: Decimal) -> int:
    """Round an amount in currency units to whole cents, half to even (banker's rounding)."""
    return int((amount * CENTS).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def round_half_even(value: Decimal) -> int:
    """Round an amount that is already in cents to a whole cent, half to even."""
    return int(value.quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def format_cents(cents: int, currency: str = "USD") -> str:
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    return f"{sign}{whole:,}.{frac:02d} {currency}"
