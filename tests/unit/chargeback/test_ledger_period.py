"""Periods, cutting intervals at their edges, and the integrals of rule 2."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction

import pytest

from gpucommons.chargeback import compute_chargeback
from gpucommons.ledger import EndReason, Period, PeriodError, cut_to_period, summarize_usage, us_to_hours
from gpucommons.ledger.interval import format_utc
from gpucommons.testing.chargeback import chargeback_policy, hours_interval

NOVEMBER = Period.parse("2026-11")
POLICY = chargeback_policy(pools={"gpu": (8, "1.00")}, teams={"a": {"gpu": 2}, "b": {"gpu": 4}})


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "start", "end", "label"),
    [
        ("2026-11", utc(2026, 11, 1), utc(2026, 12, 1), "2026-11"),
        ("2026-12", utc(2026, 12, 1), utc(2027, 1, 1), "2026-12"),
        ("2026-11-01..2026-11-15", utc(2026, 11, 1), utc(2026, 11, 16), "2026-11-01..2026-11-15"),
        ("2026-11-07", utc(2026, 11, 7), utc(2026, 11, 8), "2026-11-07..2026-11-07"),
        ("2026-10..2026-11", utc(2026, 10, 1), utc(2026, 12, 1), "2026-10-01..2026-11-30"),
        (
            "2026-11-01T06:00:00Z..2026-11-01T18:30:00Z",
            utc(2026, 11, 1, 6),
            utc(2026, 11, 1, 18, 30),
            "2026-11-01T06:00:00Z..2026-11-01T18:30:00Z",
        ),
    ],
)
def test_period_parses_months_days_and_instants(
    text: str, start: datetime, end: datetime, label: str
) -> None:
    period = Period.parse(text)
    assert (period.start, period.end, period.label) == (start, end, label)


@pytest.mark.parametrize("text", ["2026-13", "November", "2026-11-15..2026-11-01", "2026-11-31", ""])
def test_unreadable_or_empty_periods_are_refused(text: str) -> None:
    with pytest.raises(PeriodError):
        Period.parse(text)


def test_month_fraction_counts_each_month_for_the_days_inside_it() -> None:
    assert NOVEMBER.month_fraction() == 1
    assert Period.parse("2026-11-01..2026-11-15").month_fraction() == Fraction(1, 2)
    # 16 days of November (of 30) and 15 days of December (of 31)
    assert Period.parse("2026-11-15..2026-12-15").month_fraction() == Fraction(16, 30) + Fraction(15, 31)
    assert Period.parse("2026-10..2026-12").month_fraction() == 3


def test_intervals_crossing_the_edges_are_cut_there() -> None:
    crossing_start = hours_interval("a", "gpu", gpus=2, start_h=-3, end_h=2)
    crossing_end = hours_interval("a", "gpu", gpus=1, start_h=719, end_h=722)
    outside = hours_interval("a", "gpu", gpus=1, start_h=-5, end_h=-1)
    inside = hours_interval("b", "gpu", gpus=4, start_h=10, end_h=11)
    cut = cut_to_period([crossing_start, crossing_end, outside, inside], NOVEMBER)
    assert [(iv.start, iv.end) for iv in cut] == [
        (utc(2026, 11, 1), utc(2026, 11, 1, 2)),
        (utc(2026, 11, 30, 23), utc(2026, 12, 1)),
        (inside.start, inside.end),
    ]
    usage = summarize_usage([crossing_start, crossing_end, outside, inside], NOVEMBER, POLICY)
    assert usage.pools[("a", "gpu")].gpu_us == (2 * 2 + 1 * 1) * 3_600_000_000
    assert usage.intervals_counted == 3


def test_a_month_is_billed_for_exactly_its_part_of_an_interval_spanning_two_months() -> None:
    spanning = [hours_interval("a", "gpu", gpus=1, start_h=700, end_h=740)]  # 20 h in Nov, 20 h in Dec
    november = compute_chargeback(POLICY, spanning, NOVEMBER)
    december = compute_chargeback(POLICY, spanning, Period.parse("2026-12"))
    assert november.team("a").gpu_hours == december.team("a").gpu_hours == Decimal("20.000000")
    assert november.team("a").direct_cents == december.team("a").direct_cents == 2000


def test_borrowing_is_integrated_over_time_not_taken_from_admission() -> None:
    # a (nominal 2): 2 GPUs over hours 0–4 and 2 more over 2–6 → above nominal only during 2–4
    ledger = [
        hours_interval("a", "gpu", gpus=2, start_h=0, end_h=4),
        hours_interval("a", "gpu", gpus=2, start_h=2, end_h=6),
    ]
    pu = summarize_usage(ledger, NOVEMBER, POLICY).pools[("a", "gpu")]
    assert us_to_hours(pu.gpu_us) == Decimal(16)
    assert us_to_hours(pu.borrowed_us) == Decimal(4)
    assert us_to_hours(pu.unused_quota_us) == Decimal(2 * 720 - 12)


def test_lost_work_counts_in_the_period_where_the_preemption_happened() -> None:
    ledger = [
        hours_interval(
            "a", "gpu", gpus=2, start_h=-2, end_h=3, end_reason=EndReason.PREEMPTED, lost_gpu_hours="1.5"
        ),
        hours_interval(
            "a", "gpu", gpus=2, start_h=719, end_h=721, end_reason=EndReason.PREEMPTED, lost_gpu_hours="2"
        ),
    ]
    usage = summarize_usage(ledger, NOVEMBER, POLICY)
    assert usage.lost_gpu_hours == {("a", "gpu"): Decimal("1.5")}
    assert cut_to_period(ledger, NOVEMBER)[1].lost_gpu_hours == 0


def test_a_naive_time_is_refused_by_the_integration() -> None:
    naive = hours_interval("a", "gpu", gpus=1, start_h=0, end_h=1)._replace(start=datetime(2026, 11, 1))
    with pytest.raises(ValueError, match="without zone"):
        summarize_usage([naive], NOVEMBER, POLICY)


def test_every_quota_appears_even_without_usage() -> None:
    usage = summarize_usage([], NOVEMBER, POLICY)
    assert set(usage.pools) == {("a", "gpu"), ("b", "gpu")}
    assert usage.pools[("b", "gpu")].unused_quota_us == 4 * 720 * 3_600_000_000


@pytest.mark.parametrize(
    ("now", "end"),
    [
        ("2026-12-01T00:30:00.250000+00:00", "2026-12-01T00:30:00Z"),  # a month's first hour
        ("2026-12-31T23:30:00+00:00", "2026-12-31T23:30:00Z"),  # its last hour
    ],
)
def test_a_month_in_progress_is_cut_at_now(now: str, end: str) -> None:
    cut = Period.parse("2026-12").to_date(datetime.fromisoformat(now))
    assert cut.is_to_date and format_utc(cut.end) == end
    assert cut.label == "2026-12 to date" and not cut.is_calendar_month


def test_an_ended_period_is_whole_and_one_not_begun_is_refused() -> None:
    feb = Period.parse("2028-02")  # a leap year: 29 days
    assert feb.to_date(datetime(2028, 3, 1, tzinfo=UTC)) == feb and not feb.is_to_date
    leap_day = feb.to_date(datetime(2028, 2, 29, 12, tzinfo=UTC))
    assert leap_day.duration_us == (28 * 24 + 12) * 3600 * 10**6
    assert leap_day.month_fraction() == Fraction(28 * 24 + 12, 29 * 24)
    with pytest.raises(PeriodError, match="has not started yet"):
        feb.to_date(datetime(2028, 1, 31, 23, tzinfo=UTC))
