"""The trace reader (docs/design.md, contract 2): optional columns, and bad rows refused with their
line numbers."""

from __future__ import annotations

import pytest

from gpucommons.domain import Resources
from gpucommons.sim.trace import TraceError, read_trace

HEADER = "job_id,team,submit_time_s,duration_s,gpus"


def lines(*rows: str) -> list[str]:
    return [row + "\n" for row in rows]


def test_reads_the_required_columns_in_file_order() -> None:
    jobs = read_trace(lines(HEADER, "7,nlp,10,30,2", "3,vision,5,60,1"))
    assert [(j.job_id, j.team, j.submit_s, j.duration_s, j.resources) for j in jobs] == [
        ("7", "nlp", 10, 30, Resources(gpus=2)),
        ("3", "vision", 5, 60, Resources(gpus=1)),
    ]
    assert jobs[0].priority_class is None and jobs[0].pool is None and jobs[0].checkpoint_interval_s is None
    assert [j.line for j in jobs] == [2, 3]


def test_optional_columns_may_be_present_empty_or_in_any_order() -> None:
    jobs = read_trace(
        lines(
            "gpus,pool,team,job_id,checkpoint_interval_s,submit_time_s,duration_s,priority",
            "8,h100,nlp,a,1800,0,3600,training",
            "1,,nlp,b,,5,10,",
        )
    )
    assert (jobs[0].pool, jobs[0].checkpoint_interval_s, jobs[0].priority_class) == ("h100", 1800, "training")
    assert (jobs[1].pool, jobs[1].checkpoint_interval_s, jobs[1].priority_class) == (None, None, None)


def test_fractional_seconds_are_kept() -> None:
    (job,) = read_trace(lines(HEADER, "a,nlp,0.5,0.2,1"))
    assert (job.submit_s, job.duration_s) == (0.5, 0.2)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("a,nlp,ten,30,1", "submit_time_s must be a number of seconds, got 'ten'"),
        ("a,nlp,-1,30,1", "submit_time_s must be ≥ 0"),
        ("a,nlp,0,30,0", "gpus must be at least 1"),
        ("a,nlp,0,30,1.5", "gpus must be a whole number"),
        ("a,,0,30,1", "team is empty"),
        ("a,nlp,0,nan,1", "duration_s must be a finite number"),
        ("a,nlp,0,30", "gpus is empty"),
        ("a,nlp,0,30,1,extra", "6 cells for 5 columns"),
    ],
)
def test_a_bad_row_is_refused_with_its_line_number(row: str, message: str) -> None:
    with pytest.raises(TraceError) as caught:
        read_trace(lines(HEADER, "ok,nlp,0,1,1", row), source="t.csv")
    (problem,) = caught.value.problems
    assert problem.line == 3
    assert message in problem.message
    assert str(caught.value).startswith("t.csv: line 3: ")


def test_every_bad_row_is_reported_at_once() -> None:
    with pytest.raises(TraceError) as caught:
        read_trace(lines(HEADER, "a,nlp,x,1,1", "b,nlp,0,1,1", "c,nlp,0,1,0"))
    assert [p.line for p in caught.value.problems] == [2, 4]


def test_a_zero_checkpoint_interval_is_refused() -> None:
    with pytest.raises(TraceError, match="checkpoint_interval_s must be > 0"):
        read_trace(lines(HEADER + ",checkpoint_interval_s", "a,nlp,0,1,1,0"))


def test_duplicate_job_ids_are_refused_naming_the_first_use() -> None:
    with pytest.raises(TraceError, match="job_id 'a' already used on line 2"):
        read_trace(lines(HEADER, "a,nlp,0,1,1", "a,nlp,3,1,1"))


def test_missing_required_columns_are_named() -> None:
    with pytest.raises(TraceError, match="missing column\\(s\\) duration_s, gpus"):
        read_trace(lines("job_id,team,submit_time_s", "a,nlp,0"))


@pytest.mark.parametrize(("sep", "name"), [(";", "semicolons"), ("\t", "tabs")])
def test_a_header_with_another_separator_gets_a_hint(sep: str, name: str) -> None:
    header = sep.join(("job_id", "team", "submit_time_s", "duration_s", "gpus"))
    with pytest.raises(TraceError, match=f"separated by {name}, but a trace is comma-separated"):
        read_trace(lines(header, sep.join(("a", "nlp", "0", "10", "1"))))


def test_an_empty_file_is_refused() -> None:
    with pytest.raises(TraceError, match="the file is empty"):
        read_trace([])


def test_problems_beyond_the_cap_are_counted_not_listed() -> None:
    rows = [HEADER] + [f"j{i},nlp,0,1,0" for i in range(25)]
    with pytest.raises(TraceError) as caught:
        read_trace(lines(*rows))
    assert len(caught.value.problems) == 20 and caught.value.more == 5
    assert "and 5 more bad rows" in str(caught.value)
