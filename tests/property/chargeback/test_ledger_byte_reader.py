"""The byte-level column reader (`ledger.columns`, what `commons chargeback` reads a ledger with) against
the pure-Python row reader (`read_usage_csv`), the oracle: the same rows from every ledger both read,
and the same refusals, line by line, for every ledger the row reader refuses.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucommons.ledger import (
    EndReason,
    LedgerError,
    UsageInterval,
    read_usage_bytes,
    read_usage_csv,
    write_usage_csv,
)
from gpucommons.ledger.columns import byte_table
from gpucommons.ledger.integrate import _integrate_table
from gpucommons.ledger.period import Period
from gpucommons.ledger.table import UsageTable

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
ORIGIN = datetime(2026, 11, 1, tzinfo=UTC)
NAMES = st.text("abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=12)


@st.composite
def intervals(draw: st.DrawFn, whole_seconds: bool) -> UsageInterval:
    unit = 1_000_000 if whole_seconds else 1
    start = ORIGIN + timedelta(microseconds=unit * draw(st.integers(-(10**6), 10**7)))
    length = timedelta(microseconds=unit * draw(st.integers(0, 10**6)))
    gpus = draw(st.integers(0, 1_000_000))
    reason = draw(st.sampled_from(EndReason))
    held_h = Decimal(gpus * int(length / timedelta(microseconds=1))) / 3_600_000_000
    lost = Decimal(0)
    if reason is EndReason.PREEMPTED and held_h and draw(st.booleans()):
        lost = (held_h * Decimal(draw(st.integers(0, 1000))) / 1000).quantize(
            Decimal("0.000001"), "ROUND_DOWN"
        )
    return UsageInterval(
        task_id=draw(NAMES),
        team=draw(st.sampled_from(["nlp", "vision", "a-team-with-a-long-name", "x"])),
        pool=draw(st.sampled_from(["h100", "a100", "l4"])),
        gpus=gpus,
        start=start,
        end=start + length,
        priority=draw(st.sampled_from(["production", "training", "experiment", "p"])),
        borrowed_gpus=draw(st.integers(0, gpus)),
        end_reason=reason,
        lost_gpu_hours=lost,
    )


def ledger_bytes(rows: list[UsageInterval]) -> bytes:
    buffer = io.StringIO()
    write_usage_csv(rows, buffer)
    return buffer.getvalue().encode()


@SETTINGS
@given(st.booleans().flatmap(lambda whole: st.lists(intervals(whole), min_size=1, max_size=40)))
def test_the_byte_reader_reads_every_written_ledger_as_the_row_reader_does(rows: list[UsageInterval]) -> None:
    data = ledger_bytes(rows)
    oracle = read_usage_csv(io.StringIO(data.decode()))
    assert oracle == rows
    table = byte_table(data, None)
    cells = [line.split(",") for line in data.decode().splitlines()[1:]]
    if all(len({len(c[column]) for c in cells}) == 1 for column in (4, 5)):
        # each time column has one width: nothing unusual, so the fast path itself must read it
        assert table is not None
    if table is not None:
        assert table.intervals() == oracle
        assert list(table.task_id) == [r.task_id for r in rows]
    assert read_usage_bytes(data).intervals() == oracle


@SETTINGS
@given(
    st.lists(intervals(True), min_size=1, max_size=20),
    st.data(),
)
def test_the_byte_reader_refuses_what_the_row_reader_refuses_with_the_same_lines(
    rows: list[UsageInterval], data: st.DataObject
) -> None:
    """One field of a written ledger replaced by anything (often still valid): same rows or same issues."""
    lines = ledger_bytes(rows).decode().splitlines()
    line = data.draw(st.integers(1, len(lines) - 1))
    fields = lines[line].split(",")
    column = data.draw(st.integers(0, len(fields) - 1))
    fields[column] = data.draw(
        st.one_of(
            st.text("0123456789-:TZ.+ ", max_size=28),
            st.text(max_size=6),
            st.sampled_from(
                ["", "0", "-1", "1000001", "2026-02-29T00:00:00Z", "2026-11-01T24:00:00Z", "NaN"]
            ),
        )
    )
    lines[line] = ",".join(fields)
    text = "\n".join(lines) + data.draw(st.sampled_from(["\n", "", "\n\n"]))
    try:
        expected = read_usage_csv(io.StringIO(text), pools=["h100", "a100", "l4"])
    except LedgerError as by_rows:
        try:
            read_usage_bytes(text.encode(), pools=["h100", "a100", "l4"])
        except LedgerError as by_bytes:
            assert by_bytes.issues == by_rows.issues
        else:
            raise AssertionError(f"the byte reader accepted what the row reader refused: {by_rows}")
        return
    assert read_usage_bytes(text.encode(), pools=["h100", "a100", "l4"]).intervals() == expected


@SETTINGS
@given(st.lists(intervals(True), min_size=1, max_size=40))
def test_integration_of_the_byte_readers_table_matches_that_of_the_row_readers(
    rows: list[UsageInterval],
) -> None:
    table = byte_table(ledger_bytes(rows), None)
    assert table is not None
    period = Period(ORIGIN, ORIGIN + timedelta(days=30))
    nominal = {("nlp", "h100"): 4, ("x", "l4"): 1}
    fast = _integrate_table(table, period, nominal)
    plain = _integrate_table(UsageTable.from_intervals(rows), period, nominal)
    assert fast == plain
