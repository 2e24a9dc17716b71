"""The ledger as a time series (`ledger.timeline`): exact per-bucket integrals that add up to what
chargeback integrates over the same window."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from gpucommons.ledger.integrate import summarize_usage
from gpucommons.ledger.interval import to_us
from gpucommons.ledger.period import Period
from gpucommons.ledger.timeline import Buckets, bucket_series, nominal_at, spans_of
from gpucommons.testing.chargeback import ORIGIN, chargeback_policy, hours_interval

HOUR_US = 3_600_000_000
POLICY = chargeback_policy(pools={"gpu": (8, "1.00")}, teams={"a": {"gpu": 4}, "b": {"gpu": 4}})
QUOTAS = {("a", "gpu"): [(0, 4)], ("b", "gpu"): [(0, 4)]}


def window(hours: int, step_h: float = 1) -> Buckets:
    start = to_us(ORIGIN)
    return Buckets(start, start + hours * HOUR_US, int(step_h * HOUR_US))


def test_a_task_above_quota_fills_its_buckets_and_the_excess_is_borrowed() -> None:
    # a holds 6 GPUs (quota 4) from hour 1 to hour 3 of a 4-hour window in 1-hour buckets.
    series = bucket_series(
        spans_of([hours_interval("a", "gpu", gpus=6, start_h=1, end_h=3)]), QUOTAS, window(4)
    )
    a = next(s for s in series if s.team == "a")
    assert [h / HOUR_US for h in a.held_us] == [0, 6, 6, 0]
    assert [b / HOUR_US for b in a.borrowed_us] == [0, 2, 2, 0]
    assert a.nominal == (4, 4, 4, 4)
    b = next(s for s in series if s.team == "b")
    assert b.held_us == (0, 0, 0, 0)


def test_an_interval_is_cut_at_the_window_and_split_between_buckets() -> None:
    # 2 GPUs from -1 h to 1.5 h: inside the window only [0, 1.5 h), split 1 h + 0.5 h.
    series = bucket_series(
        spans_of([hours_interval("a", "gpu", gpus=2, start_h=-1, end_h=1.5)]), QUOTAS, window(2)
    )
    a = next(s for s in series if s.team == "a")
    assert a.held_us == (2 * HOUR_US, HOUR_US)
    assert a.borrowed_us == (0, 0)


def test_the_quota_line_follows_a_policy_change_inside_the_window() -> None:
    start = to_us(ORIGIN)
    quotas = {("a", "gpu"): [(start - HOUR_US, 4), (start + 2 * HOUR_US, 2)]}
    intervals = [hours_interval("a", "gpu", gpus=3, start_h=0, end_h=4)]
    a = bucket_series(spans_of(intervals), quotas, window(4))[0]
    assert a.nominal == (4, 4, 2, 2)
    # Under the old quota 3 GPUs borrow nothing; under the new one 1 of them is borrowed.
    assert [b / HOUR_US for b in a.borrowed_us] == [0, 0, 1, 1]


def test_the_last_bucket_may_be_shorter_than_the_step() -> None:
    buckets = Buckets(0, int(2.5 * HOUR_US), HOUR_US)
    assert buckets.count == 3
    assert buckets.length_us(2) == HOUR_US // 2
    assert nominal_at([(10, 1), (20, 2)], 5) == 1
    assert nominal_at([(10, 1), (20, 2)], 25) == 2


intervals_strategy = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.integers(1, 6),
        st.floats(-3, 10, allow_nan=False).map(lambda x: round(x, 2)),
        st.floats(0.01, 8, allow_nan=False).map(lambda x: round(x, 2)),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(raw=intervals_strategy, hours=st.integers(1, 12), step=st.sampled_from([0.25, 1, 2.5]))
def test_buckets_add_up_to_what_chargeback_integrates_over_the_window(
    raw: list[tuple[str, int, float, float]], hours: int, step: float
) -> None:
    intervals = [
        hours_interval(team, "gpu", gpus=g, start_h=s, end_h=s + max(d, 0.01)) for team, g, s, d in raw
    ]
    series = bucket_series(spans_of(intervals), QUOTAS, window(hours, step))
    summary = summarize_usage(intervals, Period(ORIGIN, ORIGIN + timedelta(hours=hours)), POLICY)
    for s in series:
        usage = summary.pools[(s.team, s.pool)]
        assert sum(s.held_us) == usage.gpu_us
        assert sum(s.borrowed_us) == usage.borrowed_us
