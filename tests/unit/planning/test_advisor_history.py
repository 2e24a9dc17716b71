"""Usage history → demand: time-weighted percentiles, the trace proxy, and refused files."""

from __future__ import annotations

import pytest

from gpucommons.domain.resources import Resources
from gpucommons.planning.usage_history import (
    Demand,
    UsageFileError,
    demand_from_jobs,
    is_usage_file_header,
    read_usage_samples,
)
from gpucommons.sim.jobs import SimJob

HEADER = "time_s,team,quota_gpus,running_gpus,pending_gpus"


def samples(*rows: str) -> list[str]:
    return [HEADER + "\n", *(row + "\n" for row in rows)]


def demand_of(history_rows: list[str], team: str) -> Demand:
    history = read_usage_samples(history_rows, source="usage.csv")
    return next(d for d in history.demands if d.team == team)


def job(job_id: str, team: str, submit: float, duration: float, gpus: int) -> SimJob:
    return SimJob(job_id, team, submit, duration, Resources(gpus=gpus))


def test_demand_is_running_plus_pending_weighted_by_the_sampling_step() -> None:
    rows = samples(
        "0,a,8,2,0",
        "300,a,8,4,0",
        "600,a,8,6,2",  # demand 8, partly pending
        "900,a,8,0,0",
    )
    history = read_usage_samples(rows)
    demand = history.demands[0]
    assert history.step_s == 300
    assert (history.start_s, history.end_s) == (0, 1200)
    assert demand.seconds_at == ((0, 300.0), (2, 300.0), (4, 300.0), (8, 300.0))
    assert demand.censored_s == 300
    assert demand.gpu_hours == pytest.approx((2 + 4 + 8) * 300 / 3600)


def test_percentiles_are_time_weighted_demands_that_occurred() -> None:
    # 5 samples: 0, 0, 0, 10, 20 GPUs.
    demand = demand_of(samples(*(f"{t * 300},a,8,{g},0" for t, g in enumerate([0, 0, 0, 10, 20]))), "a")
    assert demand.percentile(50) == 0  # idle 60% of the time
    assert demand.percentile(50, active_only=True) == 10  # the median of the busy time
    assert demand.percentile(95, active_only=True) == 20
    assert demand.percentile(100) == demand.peak == 20
    assert demand.percentile(0, active_only=True) == 10
    assert demand.active_fraction == pytest.approx(0.4)
    assert demand.share_at_or_below(10) == pytest.approx(0.8)
    assert demand.share_at_or_below(10, active_only=True) == pytest.approx(0.5)


def test_a_missing_row_is_unobserved_time_not_idle_time() -> None:
    rows = samples("0,a,8,4,0", "0,b,8,1,0", "300,b,8,1,0", "600,a,8,4,0", "600,b,8,1,0")
    a = demand_of(rows, "a")
    assert a.seconds_at == ((4, 600.0),)  # two samples of 300 s each; t=300 not counted as 0
    assert a.percentile(1) == 4


def test_trace_demand_is_the_gpus_of_jobs_from_submit_to_submit_plus_duration() -> None:
    history = demand_from_jobs(
        [
            job("1", "a", 0, 100, 4),
            job("2", "a", 50, 100, 2),
            job("3", "b", 0, 300, 1),
            job("4", "a", 10, 0, 64),  # no run time: asks for nothing, but shows the largest request
        ]
    )
    a = next(d for d in history.demands if d.team == "a")
    assert (history.start_s, history.end_s) == (0, 300)
    # 4 GPUs on [0,50), 6 on [50,100), 2 on [100,150), idle until the window ends at 300.
    assert a.seconds_at == ((0, 150.0), (2, 50.0), (4, 50.0), (6, 50.0))
    assert a.largest_job == 64
    assert a.percentile(50, active_only=True) == 4
    assert a.gpu_hours == pytest.approx((4 * 100 + 2 * 100) / 3600)


def test_trace_demand_is_kept_per_pool() -> None:
    history = demand_from_jobs(
        [
            SimJob("1", "a", 0, 10, Resources(gpus=2), pool="h100"),
            SimJob("2", "a", 0, 10, Resources(gpus=3), pool="a100"),
        ]
    )
    assert {(d.pool, d.peak) for d in history.demands} == {("a100", 3), ("h100", 2)}


def test_bad_rows_are_all_reported_with_their_line_numbers() -> None:
    rows = samples(
        "0,a,8,2,0",
        "0,b,8,-1,0",
        "x,a,8,1,0",
        "0,a,8,3,0",
        "300,a,8,1.5,0",
        "300,,8,1,0",
        "600,a,8,1,0,extra",
    )
    with pytest.raises(UsageFileError) as caught:
        read_usage_samples(rows, source="usage.csv")
    text = str(caught.value)
    assert [p.line for p in caught.value.problems] == [3, 4, 5, 6, 7, 8]
    assert "usage.csv: line 3: running_gpus must be at least 0, got '-1'" in text
    assert "line 4: time_s must be a number of seconds, got 'x'" in text
    assert "line 5: team 'a' at time_s 0 already on line 2" in text
    assert "line 6: running_gpus must be a whole number of GPUs, got '1.5'" in text
    assert "line 7: team is empty" in text
    assert "line 8: 6 cells for 5 columns" in text


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([], "line 1: the file is empty"),
        (["time_s,team,running_gpus\n", "0,a,1\n"], "missing column(s) pending_gpus"),
        ([HEADER + "\n"], "has a header but no samples"),
        ([HEADER + "\n", "inf,a,8,1,0\n"], "time_s must be a finite number"),
    ],
)
def test_unusable_usage_files_are_refused_with_a_reason(lines: list[str], message: str) -> None:
    with pytest.raises(UsageFileError, match=None) as caught:
        read_usage_samples(lines, source="u.csv")
    assert message in str(caught.value)


def test_the_header_tells_a_usage_file_from_a_trace() -> None:
    assert is_usage_file_header(HEADER + ",running_gpu_jobs\n")
    assert not is_usage_file_header("job_id,team,submit_time_s,duration_s,gpus\n")
    assert not is_usage_file_header("")
