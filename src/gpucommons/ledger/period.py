"""Billing periods: a calendar month (`2026-11`) or any half-open span of UTC time.

`Period.parse` reads what the CLI's `--period` accepts:
- `2026-11`: the calendar month, `[2026-11-01T00:00Z, 2026-12-01T00:00Z)`;
- `2026-11-01..2026-11-15`: whole days, both included (a finance habit: "1 to 15 November"),
  so the period ends at `2026-11-16T00:00Z`;
- `2026-10..2026-12`: whole months, both included;
- `2026-11-01T06:00:00Z..2026-11-02T06:00:00Z`: exact instants, start included, end excluded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from fractions import Fraction

from gpucommons.ledger.interval import format_utc, to_us

_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class PeriodError(ValueError):
    """A period that cannot be read or is empty."""


def _month_start(year: int, month: int) -> datetime:
    return datetime(year, month, 1, tzinfo=UTC)


def _next_month(year: int, month: int) -> tuple[int, int]:
    return (year + 1, 1) if month == 12 else (year, month + 1)


@dataclass(frozen=True, slots=True)
class Period:
    """`[start, end)` in UTC; `start < end`.

    `until` is set on a period cut short at "now" (`to_date`): the end of the period that was asked
    for, so that an invoice can say "2026-12 to date" rather than pass a part for the whole.
    """

    start: datetime
    end: datetime
    until: datetime | None = None

    def __post_init__(self) -> None:
        for name in ("start", "end", "until"):
            if getattr(self, name) is None:
                continue
            value = getattr(self, name)
            if value.tzinfo is None:
                object.__setattr__(self, name, value.replace(tzinfo=UTC))
            else:
                object.__setattr__(self, name, value.astimezone(UTC))
        if not self.start < self.end:
            raise PeriodError(f"the period must end after it starts ({self.start} .. {self.end})")

    @classmethod
    def month(cls, year: int, month: int) -> Period:
        if not 1 <= month <= 12:
            raise PeriodError(f"no month {month}; months are 01 to 12")
        return cls(_month_start(year, month), _month_start(*_next_month(year, month)))

    @classmethod
    def month_of(cls, moment: datetime) -> Period:
        """The calendar month (UTC) that holds `moment`."""
        moment = moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
        return cls.month(moment.year, moment.month)

    @classmethod
    def parse(cls, text: str) -> Period:
        text = text.strip()
        if ".." in text:
            first, _, last = text.partition("..")
            return cls(_bound(first.strip(), is_end=False), _bound(last.strip(), is_end=True))
        m = _MONTH.match(text)
        if m:
            return cls.month(int(m.group(1)), int(m.group(2)))
        if _DAY.match(text):
            day = _parse_day(text)
            return cls(_bound(text, is_end=False), _bound(day.isoformat(), is_end=True))
        raise PeriodError(
            f"cannot read the period {text!r}: write a month (2026-11), a range of days "
            "(2026-11-01..2026-11-15, both included) or of instants "
            "(2026-11-01T00:00:00Z..2026-11-02T00:00:00Z)"
        )

    @property
    def start_us(self) -> int:
        return to_us(self.start)

    @property
    def end_us(self) -> int:
        return to_us(self.end)

    @property
    def duration_us(self) -> int:
        return self.end_us - self.start_us

    @property
    def is_calendar_month(self) -> bool:
        s = self.start
        if (s.day, s.hour, s.minute, s.second, s.microsecond) != (1, 0, 0, 0, 0):
            return False
        return self.end == _month_start(*_next_month(s.year, s.month))

    @property
    def is_to_date(self) -> bool:
        """True for a period that has not ended and is charged up to a moment (`to_date`)."""
        return self.until is not None

    def to_date(self, now: datetime) -> Period:
        """The period up to `now` (whole seconds) if it has not ended yet, else itself.

        One rule for the CLI and the server: what has not happened is not charged (a month in progress
        would otherwise bill its future days as idle capacity). Raises for a period not yet begun.
        """
        now = (now.astimezone(UTC) if now.tzinfo else now.replace(tzinfo=UTC)).replace(microsecond=0)
        if now >= self.end:
            return self
        if now <= self.start:
            raise PeriodError(f"{self.label} has not started yet: there is nothing to charge")
        return Period(self.start, now, until=self.end)

    @property
    def asked(self) -> Period:
        """The period that was asked for: itself, or the whole of a period cut at now (`to_date`)."""
        return self if self.until is None else Period(self.start, self.until)

    @property
    def label(self) -> str:
        """`2026-11` for a calendar month, else `2026-11-01..2026-11-15` (days, both included) or the
        exact instants; a period cut at now (`to_date`) is the asked period's label + " to date"."""
        if self.until is not None:
            return f"{self.asked.label} to date"
        if self.is_calendar_month:
            return f"{self.start.year:04d}-{self.start.month:02d}"
        if _at_midnight(self.start) and _at_midnight(self.end):
            last_day = date.fromordinal(self.end.date().toordinal() - 1)
            return f"{self.start.date().isoformat()}..{last_day.isoformat()}"
        return f"{format_utc(self.start)}..{format_utc(self.end)}"

    def month_fraction(self) -> Fraction:
        """How many calendar months the period covers, exactly: each month it touches counts for the
        share of that month's time (so of its days, for a period of whole days) that falls inside.

        This is how the monthly admin cost is prorated (docs/design.md, "Chargeback rules", rule 5).
        """
        total = Fraction(0)
        year, month = self.start.year, self.start.month
        while True:
            m_start = _month_start(year, month)
            if m_start >= self.end:
                break
            m_end = _month_start(*_next_month(year, month))
            overlap = to_us(min(m_end, self.end)) - to_us(max(m_start, self.start))
            if overlap > 0:
                total += Fraction(overlap, to_us(m_end) - to_us(m_start))
            year, month = _next_month(year, month)
        return total


def _at_midnight(moment: datetime) -> bool:
    return (moment.hour, moment.minute, moment.second, moment.microsecond) == (0, 0, 0, 0)


def _parse_day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise PeriodError(f"{text!r} is not a date (YYYY-MM-DD)") from None


def _bound(text: str, *, is_end: bool) -> datetime:
    """One side of `FROM..TO`: a month or a day counts whole (an end includes it), an instant is exact."""
    m = _MONTH.match(text)
    if m:
        year, month = int(m.group(1)), int(m.group(2))
        if not 1 <= month <= 12:
            raise PeriodError(f"no month {month} in {text!r}; months are 01 to 12")
        return _month_start(*_next_month(year, month)) if is_end else _month_start(year, month)
    if _DAY.match(text):
        day = _parse_day(text)
        if is_end:
            day = date.fromordinal(day.toordinal() + 1)
        return datetime(day.year, day.month, day.day, tzinfo=UTC)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise PeriodError(
            f"{text!r} is neither a month (2026-11), a day (2026-11-01) nor an ISO-8601 instant"
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
