"""How exports write numbers: cents as exact decimals, GPU-hours to the micro-hour, times in UTC."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal


def cents_to_decimal(cents: int) -> Decimal:
    """`1234` -> `Decimal('12.34')`, exact (never a float)."""
    return Decimal(cents).scaleb(-2)


def decimal_text(value: Decimal) -> str:
    """A decimal written plainly: no exponent, no `+`, e.g. `12.34`, `-4.00`, `0.000001`."""
    return format(value, "f")


def money_text(cents: int) -> str:
    return decimal_text(cents_to_decimal(cents))


def utc_seconds(moment: datetime) -> str:
    """`YYYY-MM-DDTHH:MM:SSZ`, the one date/time form FOCUS allows."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def hours_float(value: Decimal) -> float:
    """GPU-hours for JSON (docs/design.md, contract 5 shows them as numbers), from the micro-hour decimal."""
    return float(value)
