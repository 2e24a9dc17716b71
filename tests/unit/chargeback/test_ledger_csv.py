"""docs/design.md, contract 4 as CSV: round trip, tolerant header handling, and bad rows refused by
line number."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from gpucommons.ledger import (
    LOST_WORK_COLUMN,
    USAGE_COLUMNS,
    EndReason,
    LedgerError,
    read_usage_csv,
    read_usage_table,
    write_usage_csv,
)
from gpucommons.testing.chargeback import hours_interval

HEADER = ",".join(USAGE_COLUMNS)
GOOD = "t1,nlp,h100,8,2026-11-01T00:00:00Z,2026-11-01T02:00:00Z,training,0,succeeded"


def read(text: str, **kwargs: object) -> list:  # type: ignore[type-arg]
    return read_usage_csv(io.StringIO(text), **kwargs)  # type: ignore[arg-type]


def refused(text: str, **kwargs: object) -> list[str]:
    with pytest.raises(LedgerError) as caught:
        read(text, **kwargs)
    return [str(issue) for issue in caught.value.issues]


def test_a_written_ledger_reads_back_equal() -> None:
    intervals = [
        hours_interval("nlp", "h100", gpus=8, start_h=0, end_h=2.5, priority="training"),
        hours_interval(
            "cv", "a100", gpus=2, start_h=1, end_h=3, end_reason=EndReason.PREEMPTED, lost_gpu_hours="1.25"
        ),
    ]
    buffer = io.StringIO()
    assert write_usage_csv(intervals, buffer) == 2
    assert buffer.getvalue().splitlines()[0] == HEADER + "," + LOST_WORK_COLUMN
    assert read(buffer.getvalue()) == intervals


def test_writer_emits_exactly_contract_4_when_no_work_was_lost() -> None:
    buffer = io.StringIO()
    write_usage_csv([hours_interval("nlp", "h100", gpus=1, start_h=0, end_h=1)], buffer)
    header, row = buffer.getvalue().splitlines()
    assert header == HEADER
    assert row.endswith(",2026-11-01T00:00:00Z,2026-11-01T01:00:00Z,experiment,0,succeeded")


def test_times_are_read_as_utc_whatever_their_offset() -> None:
    text = (
        f"{HEADER}\n"
        "t1,nlp,h100,1,2026-11-01T01:00:00+01:00,2026-11-01T02:00:00Z,training,0,succeeded\n"
        "t2,nlp,h100,1,2026-11-01T00:00:00,2026-11-01T00:30:00.250000Z,training,0,running\n"
    )
    first, second = read(text)
    assert first.start == datetime(2026, 11, 1, tzinfo=UTC)
    assert second.start.tzinfo is UTC
    assert second.end == datetime(2026, 11, 1, 0, 30, 0, 250000, tzinfo=UTC)


def test_columns_are_found_by_name_and_unknown_columns_are_ignored() -> None:
    columns = [*reversed(USAGE_COLUMNS), "node"]
    values = dict(zip(USAGE_COLUMNS, GOOD.split(","), strict=True)) | {"node": "n7"}
    text = ",".join(columns) + "\n" + ",".join(values[c] for c in columns) + "\n\n"
    (interval,) = read(text)
    assert (interval.team, interval.gpus, interval.lost_gpu_hours) == ("nlp", 8, Decimal(0))


def test_bad_rows_are_refused_with_their_line_numbers() -> None:
    text = "\n".join(
        [
            HEADER,
            GOOD,  # line 2
            "t2,nlp,h100,eight,2026-11-01T00:00:00Z,2026-11-01T02:00:00Z,training,0,succeeded",
            "t3,nlp,h100,8,2026-11-01T05:00:00Z,2026-11-01T02:00:00Z,training,0,succeeded",
            "t4,nlp,h100,8,2026-11-01T00:00:00Z,2026-11-01T02:00:00Z,training,0,exploded",
            "t5,nlp,h100,8,yesterday,2026-11-01T02:00:00Z,training,0,succeeded",
            "t6,,h100,8,2026-11-01T00:00:00Z,2026-11-01T02:00:00Z,training,9,succeeded",
            "t7,nlp,h100,8,2026-11-01T00:00:00Z",
            GOOD,  # line 9
        ]
    )
    assert refused(text) == [
        "line 3, gpus: 'eight' is not a whole number",
        "line 4, end: 2026-11-01T02:00:00Z is before the start 2026-11-01T05:00:00Z",
        "line 5, end_reason: 'exploded' is not one of succeeded, failed, cancelled, preempted, running",
        "line 6, start: 'yesterday' is not an ISO-8601 time (e.g. 2026-11-03T04:05:06Z)",
        "line 7, team: must not be empty",
        "line 7, borrowed_gpus: 9 is more than the row's 8 GPUs",
        "line 8: expected 9 fields as in the header, found 5",
    ]


def test_a_carriage_return_in_an_unquoted_field_is_refused_by_line_not_raised() -> None:
    """The csv module cannot split such a line; it is a bad row like any other (the command once
    ended with the csv module's own exception), and the rows after it are still checked."""
    text = "\n".join([HEADER, GOOD.replace("t1", "\r"), GOOD, GOOD.replace(",8,", ",eight,")])
    assert refused(text) == [
        "line 2: a carriage return inside a field that is not quoted (quote the field; lines may end "
        "in \\n or \\r\\n)",
        "line 4, gpus: 'eight' is not a whole number",
    ]
    assert read("\r\n".join([HEADER, GOOD, f'"a\rb"{GOOD[2:]}']))[1].task_id == "a\rb"


def test_a_pool_the_policy_lacks_is_refused_when_pools_are_given() -> None:
    text = f"{HEADER}\n{GOOD}\n{GOOD.replace('h100', 'tpu')}\n"
    assert refused(text, pools=["h100", "a100"]) == [
        "line 3, pool: 'tpu' is not a pool of the policy (pools: a100, h100)"
    ]


def test_lost_work_must_be_on_a_preempted_row_and_within_what_it_held() -> None:
    header = f"{HEADER},{LOST_WORK_COLUMN}"
    rows = [
        GOOD.replace("succeeded", "preempted") + ",3.5",  # 16 GPU-hours held: fine
        GOOD + ",1",  # not preempted
        GOOD.replace("succeeded", "preempted") + ",17",  # more than held
        GOOD.replace("succeeded", "preempted") + ",-1",
        GOOD.replace("succeeded", "preempted") + ",lots",
    ]
    assert refused(header + "\n" + "\n".join(rows)) == [
        "line 3, lost_gpu_hours: lost work is counted only for preempted intervals, not succeeded",
        "line 4, lost_gpu_hours: 17 GPU-hours is more than the interval held (16.000000)",
        "line 5, lost_gpu_hours: '-1' must be a number of GPU-hours, zero or more",
        "line 6, lost_gpu_hours: 'lots' is not a number",
    ]


def test_a_header_without_contract_columns_is_refused_on_line_1() -> None:
    assert refused("task_id,team,pool\nt1,nlp,h100\n") == [
        "line 1: the header lacks column(s) gpus, start, end, priority, borrowed_gpus, end_reason; "
        f"a usage ledger needs {HEADER}"
    ]
    assert refused("") == [f"line 1: the file is empty; expected the header {HEADER}"]


def test_reading_stops_after_max_issues_bad_rows() -> None:
    bad = GOOD.replace(",8,", ",x,")
    with pytest.raises(LedgerError) as caught:
        read(HEADER + "\n" + "\n".join([bad] * 100), max_issues=5)
    assert len(caught.value.issues) == 5 and caught.value.truncated
    assert "more bad rows follow" in str(caught.value)


def table(text: str, **kwargs: object) -> list:  # type: ignore[type-arg]
    return read_usage_table(io.StringIO(text), **kwargs).intervals()  # type: ignore[arg-type]


def test_the_column_reader_reads_what_the_row_reader_reads() -> None:
    intervals = [
        hours_interval("nlp", "h100", gpus=8, start_h=-3, end_h=2.25, priority="training"),
        hours_interval(
            "cv", "a100", gpus=2, start_h=1, end_h=3, end_reason=EndReason.PREEMPTED, lost_gpu_hours="1.25"
        ),
        hours_interval("cv", "a100", gpus=0, start_h=1, end_h=1),
    ]
    buffer = io.StringIO()
    write_usage_csv(intervals, buffer)
    assert table(buffer.getvalue()) == read(buffer.getvalue()) == intervals
    assert table(buffer.getvalue().replace("\n", "\r\n")) == intervals


@pytest.mark.parametrize(
    "text",
    [
        # offsets, quoted fields and blank lines take the row-by-row path, with the same result
        f"{HEADER}\nt1,nlp,h100,1,2026-11-01T01:00:00+01:00,2026-11-01T02:00:00Z,training,0,succeeded\n",
        f'{HEADER}\n"t,1",nlp,h100,1,2026-11-01T00:00:00Z,2026-11-01T02:00:00Z,training,0,succeeded\n',
        f"{HEADER}\n\n{GOOD}\n\n",
        f"{HEADER}\n",
    ],
)
def test_the_column_reader_falls_back_to_rows_for_anything_unusual(text: str) -> None:
    assert table(text) == read(text)


def test_the_column_reader_refuses_bad_rows_by_line_like_the_row_reader() -> None:
    text = f"{HEADER}\n{GOOD}\n{GOOD.replace(',8,', ',-8,')}\n{GOOD.replace('succeeded', 'NaT')}\n"
    with pytest.raises(LedgerError) as by_columns:
        table(text)
    assert (
        [str(i) for i in by_columns.value.issues]
        == refused(text)
        == [
            "line 3, gpus: -8 is negative",
            "line 4, end_reason: 'NaT' is not one of succeeded, failed, cancelled, preempted, running",
        ]
    )
    with pytest.raises(LedgerError):
        table(f"{HEADER}\n{GOOD.replace('2026-11-01T02:00:00Z', 'NaTZ')}\n")
    with pytest.raises(LedgerError):
        table(f"{HEADER}\n{GOOD}\n", pools=["a100"])


@pytest.mark.parametrize(
    "cell",
    [
        "2026-02-29T00:00:00Z",  # not a leap year
        "2026-11-31T00:00:00Z",
        "2026-11-01T24:00:00Z",
        "2026-11-01T00:00:60Z",
        "0000-01-01T00:00:00Z",
        "2O26-11-01T00:00:00Z",
        "2026-11-01T00:00:00.12345xZ",
    ],
)
def test_the_column_reader_refuses_impossible_times_like_the_row_reader(cell: str) -> None:
    text = f"{HEADER}\n{GOOD}\n" + GOOD.replace("2026-11-01T00:00:00Z", cell) + "\n"
    with pytest.raises(LedgerError) as caught:
        table(text)
    assert [i.line for i in caught.value.issues] == [3]


def test_the_column_reader_reads_leap_days_and_microseconds_exactly() -> None:
    times = ["2024-02-29T23:59:59Z", "2000-02-29T00:00:00Z", "1900-03-01T00:00:00Z"]
    text = HEADER + "\n" + "\n".join(GOOD.replace("2026-11-01T00:00:00Z", t) for t in times) + "\n"
    assert table(text) == read(text)
    micro = GOOD.replace("00:00:00Z", "00:00:00.000001Z").replace("02:00:00Z", "02:00:00.999999Z")
    assert table(f"{HEADER}\n{micro}\n") == read(f"{HEADER}\n{micro}\n")


def test_a_time_with_two_zones_is_refused_by_both_readers() -> None:
    odd = GOOD.replace("2026-11-01T00:00:00Z", "2026-11-01T00:00:00+01:00Z")
    text = f"{HEADER}\n{GOOD}\n{odd}\n"
    with pytest.raises(LedgerError):
        read(text)
    with pytest.raises(LedgerError):
        table(text)


def test_an_absurd_gpu_count_is_refused_not_overflowed() -> None:
    text = f"{HEADER}\n{GOOD.replace(',8,', ',100000000000000000000,')}\n"
    assert refused(text) == [
        "line 2, gpus: 100000000000000000000 is more GPUs than one task can hold (at most 1,000,000)"
    ]
    with pytest.raises(LedgerError):
        table(text)
