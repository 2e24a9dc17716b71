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
    format_utc,
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


def _same_outcome(text: bytes, pools: list[str] | None = None) -> None:
    """`read_usage_bytes` (the command's reader) and the row reader: the same rows, or the same
    issues naming the same lines."""
    try:
        expected = read_usage_csv(io.StringIO(text.decode("utf-8")), pools=pools)
    except LedgerError as by_rows:
        try:
            read_usage_bytes(text, pools=pools)
        except LedgerError as by_bytes:
            assert by_bytes.issues == by_rows.issues
            assert by_bytes.truncated == by_rows.truncated
        else:
            raise AssertionError(f"the byte reader accepted what the row reader refused: {by_rows}")
        return
    assert read_usage_bytes(text, pools=pools).intervals() == expected


def _quoted(field: str) -> str:
    return '"' + field.replace('"', '""') + '"'


EDITS = st.sampled_from(
    [
        "crlf",  # every line ends \r\n (what Excel and csv.writer's default write)
        "quote",  # one field in quotes, as a spreadsheet writes them
        "quote-comma",  # a quoted field with a comma in it: one field, not two
        "blank",  # a blank line between rows
        "huge-gpus",  # a GPU count far past int64
        "huge-lost",  # lost work of 30 digits
        "no-final-newline",
        "short-row",  # a row with a field missing
        "header-only",
        "empty",
    ]
)


@SETTINGS
@given(st.lists(intervals(True), min_size=1, max_size=20), EDITS, st.data())
def test_unusual_files_read_or_fail_exactly_as_the_row_reader_says(
    rows: list[UsageInterval], edit: str, data: st.DataObject
) -> None:
    """Empty files, quotes, CRLF, huge values, short rows: the same rows or the same refusals by line."""
    lines = ledger_bytes(rows).decode().splitlines()
    line = data.draw(st.integers(1, len(lines) - 1))
    fields = lines[line].split(",")
    column = data.draw(st.integers(0, len(fields) - 1))
    ending = "\n"
    if edit == "crlf":
        ending = "\r\n"
    elif edit == "quote":
        fields[column] = _quoted(fields[column])
    elif edit == "quote-comma":
        fields[1] = _quoted(fields[1] + ",x")
    elif edit == "blank":
        lines.insert(line, "")
    elif edit == "huge-gpus":
        fields[3] = data.draw(st.sampled_from(["9" * 30, "18446744073709551616", str(2**63)]))
    elif edit == "huge-lost" and len(fields) > 9:
        fields[9] = "1" + "0" * 29
    elif edit == "short-row":
        del fields[column]
    elif edit == "header-only":
        lines = lines[:1]
    elif edit == "empty":
        lines = []
    if edit not in ("blank", "header-only", "empty"):
        lines[line] = ",".join(fields)
    text = ending.join(lines) + ("" if edit == "no-final-newline" or not lines else ending)
    _same_outcome(text.encode(), pools=data.draw(st.sampled_from([None, ["h100", "a100", "l4"]])))


RARE = st.sampled_from(["team", "pool", "priority", "end_reason", "date", "none"])


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(intervals(True), min_size=1, max_size=5), RARE, st.integers(0, 4000), st.data())
def test_a_value_only_on_rows_the_sample_skips_is_read_as_the_row_reader_does(
    base: list[UsageInterval], rare: str, which: int, data: st.DataObject
) -> None:
    """The byte reader finds a column's few distinct values in a sample of the rows (every
    `rows // 4096`-th) and looks every row up by hash: a value only on rows between samples, a name
    longer than the hash's 16 bytes, or a date the sample missed must still be read exactly."""
    rows = [base[i % len(base)] for i in range(9_000)]  # a step of 2: odd rows are never sampled
    i = 2 * which + 1
    changed = rows[i]
    if rare == "team":
        changed = changed._replace(team=data.draw(st.sampled_from(["zz", "a-name-longer-than-16-bytes"])))
    elif rare == "pool":
        changed = changed._replace(pool="a100" if changed.pool != "a100" else "l4")
    elif rare == "priority":
        changed = changed._replace(priority="rare-class")
    elif rare == "end_reason":
        reason = EndReason.RUNNING if changed.end_reason is not EndReason.RUNNING else EndReason.FAILED
        changed = changed._replace(end_reason=reason, lost_gpu_hours=Decimal(0))
    elif rare == "date":
        shift = timedelta(days=400)
        changed = changed._replace(start=changed.start + shift, end=changed.end + shift)
    rows[i] = changed
    data_bytes = ledger_bytes(rows)
    table = byte_table(data_bytes, None)
    oracle = read_usage_csv(io.StringIO(data_bytes.decode()))
    if len({len(format_utc(r.start)) for r in rows} | {len(format_utc(r.end)) for r in rows}) == 1:
        assert table is not None  # plain: the fast path read it (and did not give up)
    if table is not None:
        assert table.intervals() == oracle
    assert read_usage_bytes(data_bytes).intervals() == oracle
