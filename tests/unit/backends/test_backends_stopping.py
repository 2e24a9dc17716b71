"""Signal → grace → SIGKILL as a pure function of time and what was already sent."""

from __future__ import annotations

import signal

import pytest

from gpucommons.domain.stopping import StopAction, StopPlan, StopStep, next_stop_step, parse_signal

PLAN = StopPlan(issued_at=100.0, grace_s=30.0, signum=signal.SIGUSR1)


@pytest.mark.parametrize(
    ("now", "signal_sent", "kill_sent", "expected"),
    [
        (100.0, False, False, StopStep(StopAction.SEND_SIGNAL, signal.SIGUSR1, wake_at=130.0)),
        (100.0, True, False, StopStep(StopAction.WAIT, wake_at=130.0)),
        (129.9, True, False, StopStep(StopAction.WAIT, wake_at=130.0)),
        (130.0, True, False, StopStep(StopAction.KILL, signal.SIGKILL)),
        (500.0, True, False, StopStep(StopAction.KILL, signal.SIGKILL)),
        # The worker was down past the deadline and never sent the signal: signal first, kill next.
        (500.0, False, False, StopStep(StopAction.SEND_SIGNAL, signal.SIGUSR1, wake_at=130.0)),
        (500.0, True, True, StopStep(StopAction.WAIT_FOR_EXIT)),
    ],
)
def test_stop_escalates_from_signal_through_grace_to_kill(
    now: float, signal_sent: bool, kill_sent: bool, expected: StopStep
) -> None:
    assert next_stop_step(PLAN, now, signal_sent=signal_sent, kill_sent=kill_sent) == expected


def test_zero_grace_still_signals_before_killing() -> None:
    plan = StopPlan(issued_at=5.0, grace_s=0)
    assert next_stop_step(plan, 5.0, signal_sent=False, kill_sent=False).action is StopAction.SEND_SIGNAL
    assert next_stop_step(plan, 5.0, signal_sent=True, kill_sent=False).action is StopAction.KILL


def test_negative_grace_is_treated_as_none() -> None:
    assert StopPlan(issued_at=5.0, grace_s=-3).deadline == 5.0


@pytest.mark.parametrize("name", ["SIGTERM", "TERM", "sigterm", " SIGTERM ", "15", 15])
def test_parse_signal_accepts_names_and_numbers(name: str | int) -> None:
    assert parse_signal(name) == signal.SIGTERM


@pytest.mark.parametrize("name", ["SIGNOPE", "", "999"])
def test_parse_signal_names_the_bad_value(name: str) -> None:
    with pytest.raises(ValueError, match="unknown signal"):
        parse_signal(name)
