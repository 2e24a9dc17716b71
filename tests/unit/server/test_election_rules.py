"""The pure rules of leadership (domain.election) and of the leader's intake watermark (domain.intake)."""

from __future__ import annotations

import pytest

from gpucommons.domain.election import (
    Election,
    ElectionTiming,
    Refusal,
    Role,
    Sharing,
    on_refusal,
)
from gpucommons.domain.intake import SeqWatermark


def test_a_follower_retries_every_second_while_the_lock_is_taken_and_leads_when_it_gets_it() -> None:
    election = Election(ElectionTiming(retry_s=1.0, check_s=0.5))
    step = election.attempted(False, 0.0)
    assert (step.role, step.wait_s, step.changed) == (Role.FOLLOWER, 1.0, False)
    step = election.attempted(True, 1.0)
    assert (step.role, step.wait_s, step.changed) == (Role.LEADER, 0.5, True)
    assert election.elected_at == 1.0 and election.attempts == 2


def test_an_unreachable_database_backs_off_up_to_the_cap_and_a_clean_answer_resets_it() -> None:
    election = Election(ElectionTiming(retry_s=1.0, backoff_max_s=5.0))
    waits = [election.attempted(None, float(t)).wait_s for t in range(5)]
    assert waits == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert election.attempted(False, 5.0).wait_s == 1.0
    assert election.attempted(None, 6.0).wait_s == 1.0, "the backoff starts over"


def test_a_leader_is_deposed_by_the_first_check_that_says_lost() -> None:
    election = Election()
    election.attempted(True, 0.0)
    assert election.checked(True, 1.0) == election.checked(True, 2.0)
    step = election.checked(False, 3.0)
    assert (step.role, step.changed) == (Role.FOLLOWER, True)
    assert election.deposed_at == 3.0
    with pytest.raises(RuntimeError):
        election.checked(True, 4.0)


def test_a_leader_does_not_try_again_and_timings_are_checked() -> None:
    election = Election()
    election.attempted(True, 0.0)
    with pytest.raises(RuntimeError):
        election.attempted(True, 1.0)
    with pytest.raises(ValueError):
        ElectionTiming(retry_s=10.0, backoff_max_s=5.0)
    with pytest.raises(ValueError):
        ElectionTiming(check_s=0)


def test_sqlite_refuses_a_second_process_and_postgresql_follows() -> None:
    assert on_refusal(Sharing.SINGLE) is Refusal.REFUSE
    assert on_refusal(Sharing.SHARED) is Refusal.FOLLOW


def test_the_watermark_rises_over_contiguous_numbers() -> None:
    mark = SeqWatermark(0, patience_s=10)
    mark.saw([1, 2, 3], 0.0)
    assert mark.floor == 3 and not mark.gaps
    mark.saw([], 1.0)
    assert mark.floor == 3


def test_a_gap_holds_the_watermark_until_the_late_number_commits() -> None:
    mark = SeqWatermark(0, patience_s=10)
    mark.saw([1, 3, 4], 0.0)  # 2 is taken by a transaction still open
    assert mark.floor == 1 and set(mark.gaps) == {2}
    mark.saw([3, 4, 5], 1.0)  # the next scan still reads from 2 on
    assert mark.floor == 1
    mark.saw([2, 3, 4, 5], 2.0)
    assert mark.floor == 5 and not mark.gaps


def test_a_gap_that_never_fills_is_given_up_after_the_patience() -> None:
    mark = SeqWatermark(10, patience_s=5)
    mark.saw([11, 13], 0.0)  # 12: a submission that rolled back
    assert mark.floor == 11
    mark.saw([13, 14], 4.9)
    assert mark.floor == 11
    mark.saw([13, 14], 5.0)
    assert mark.floor == 14 and not mark.gaps


def test_numbers_at_or_below_the_floor_are_ignored() -> None:
    mark = SeqWatermark(5)
    mark.saw([3, 4, 5], 0.0)
    assert mark.floor == 5
    mark.saw([2, 7], 0.0)
    assert mark.floor == 5 and set(mark.gaps) == {6}
