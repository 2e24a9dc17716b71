"""The stop machine over an attempt's stored fields (`stop_step`, `StopFields.after`), and the
stop reasons as the store keeps them."""

from __future__ import annotations

import signal

import pytest

from gpucommons.domain.stopping import StopAction, StopFields, StopReason, StopStep, stop_step

TERM = int(signal.SIGTERM)


def step(fields: StopFields, now: float, grace_s: float = 30.0) -> StopStep:
    return stop_step(fields, now, grace_s=grace_s, signum=TERM)


def test_a_stop_not_yet_started_signals_now_with_the_kill_due_after_the_grace() -> None:
    first = step(StopFields(), 100.0)
    assert first == StopStep(StopAction.SEND_SIGNAL, TERM, wake_at=130.0)
    assert StopFields().after(first, 100.0) == StopFields(requested_at=100.0, deadline=130.0)


def test_a_signalled_attempt_waits_until_its_stored_deadline() -> None:
    signalled = StopFields(requested_at=100.0, deadline=130.0)
    assert step(signalled, 129.9) == StopStep(StopAction.WAIT, wake_at=130.0)
    assert signalled.after(step(signalled, 129.9), 129.9) == signalled


def test_the_deadline_passed_kills_and_records_when() -> None:
    signalled = StopFields(requested_at=100.0, deadline=130.0)
    kill = step(signalled, 130.0)
    assert kill == StopStep(StopAction.KILL, int(signal.SIGKILL))
    assert signalled.after(kill, 131.0) == StopFields(100.0, 130.0, killed_at=131.0)


def test_a_killed_attempt_only_waits_for_its_exit() -> None:
    killed = StopFields(requested_at=100.0, deadline=130.0, killed_at=131.0)
    assert step(killed, 1e9) == StopStep(StopAction.WAIT_FOR_EXIT)
    assert killed.after(step(killed, 1e9), 1e9) == killed


def test_the_stored_deadline_stands_when_the_class_grace_changes_meanwhile() -> None:
    signalled = StopFields(requested_at=100.0, deadline=130.0)
    assert step(signalled, 125.0, grace_s=5.0).action is StopAction.WAIT
    assert step(signalled, 135.0, grace_s=600.0).action is StopAction.KILL


def test_a_stop_stored_without_a_deadline_gets_the_class_grace_from_its_request() -> None:
    legacy = StopFields(requested_at=100.0)
    assert step(legacy, 110.0, grace_s=30.0) == StopStep(StopAction.WAIT, wake_at=130.0)
    assert step(legacy, 130.0, grace_s=30.0).action is StopAction.KILL


def test_zero_grace_signals_first_then_kills_at_the_same_instant() -> None:
    first = step(StopFields(), 5.0, grace_s=0)
    assert first.action is StopAction.SEND_SIGNAL
    assert step(StopFields().after(first, 5.0), 5.0, grace_s=0).action is StopAction.KILL


def test_the_class_signal_is_the_one_sent() -> None:
    first = stop_step(StopFields(), 0.0, grace_s=1, signum=int(signal.SIGUSR1))
    assert first.signum == signal.SIGUSR1


@pytest.mark.parametrize("reason", list(StopReason))
def test_stop_reasons_are_stored_as_their_names(reason: StopReason) -> None:
    assert StopReason.of(str(reason.value)) is reason
    assert isinstance(reason, str) and reason == reason.value


def test_the_stored_stop_reasons_are_the_strings_earlier_versions_wrote() -> None:
    assert {r.value for r in StopReason} == {"preempted", "node_left", "max_runtime", "cancelled", "unknown"}


def test_a_stored_reason_this_version_does_not_know_reads_as_unknown_not_an_error() -> None:
    assert StopReason.of("drained_by_a_newer_server") is StopReason.UNKNOWN
    assert StopReason.of(None) is None
