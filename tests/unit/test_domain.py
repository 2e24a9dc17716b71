"""Domain basics: resource arithmetic, quota derivations and the task transition table."""

from decimal import Decimal

import pytest

from gpucommons.domain import (
    TRANSITIONS,
    UNLIMITED,
    InvalidTransition,
    Quota,
    Resources,
    TaskState,
    check_transition,
    round_half_even,
    to_cents,
)


def test_resources_add_subtract_and_fit() -> None:
    a = Resources(gpus=8, cpu_milli=16_000)
    b = Resources(gpus=2, cpu_milli=4_000, memory_mib=1024)
    assert a + b == Resources(10, 20_000, 1024)
    assert (a - b) == Resources(6, 12_000, -1024)
    assert b.fits_in(Resources(2, 4_000, 1024))
    assert not a.fits_in(b)
    assert (a - b).clamp_nonnegative() == Resources(6, 12_000, 0)


def test_resources_describe_for_people() -> None:
    assert Resources(gpus=1).describe() == "1 GPU"
    assert Resources(gpus=8, cpu_milli=1500).describe() == "8 GPUs, 1.5 CPUs"
    assert Resources().describe() == "0 GPUs"


def test_absent_limits_mean_unlimited_borrowing_and_lending_everything() -> None:
    q = Quota(pool="h100", nominal=Resources(gpus=16))
    assert q.lendable == Resources(gpus=16)
    assert q.reserved == Resources()
    assert q.max_usage.gpus == UNLIMITED


def test_lend_limit_reserves_the_rest_of_nominal() -> None:
    q = Quota(pool="h100", nominal=Resources(gpus=16), lend_limit=Resources(12, UNLIMITED, UNLIMITED))
    assert q.lendable.gpus == 12
    assert q.reserved.gpus == 4


def test_every_state_has_a_row_and_terminal_states_go_nowhere() -> None:
    assert set(TRANSITIONS) == set(TaskState)
    for state in (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED):
        assert TRANSITIONS[state] == frozenset()


def test_preemption_returns_a_task_to_its_queue() -> None:
    assert check_transition(TaskState.RUNNING, TaskState.PREEMPTING) is TaskState.PREEMPTING
    assert check_transition(TaskState.PREEMPTING, TaskState.PENDING) is TaskState.PENDING


def test_an_ended_task_cannot_run_again() -> None:
    with pytest.raises(InvalidTransition, match="cannot go from succeeded to running"):
        check_transition(TaskState.SUCCEEDED, TaskState.RUNNING)


def test_money_rounds_half_to_even() -> None:
    assert to_cents(Decimal("0.125")) == 12
    assert to_cents(Decimal("0.135")) == 14
    assert round_half_even(Decimal("2.5")) == 2
