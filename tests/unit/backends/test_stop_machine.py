"""The stop machine over an attempt's stored fields (`stop_step`, `StopFields.after`), and the
stop reasons as the store keeps them."""

from __future__ import annotations

import signal

import pytest

from gpucommons.domain.stopping import (
    GIVE_UP_AFTER_S,
    KILL_RETRY_S,
    StopAction,
    StopFields,
    StopReason,
    StopStep,
    stop_step,
)

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
    assert kill == StopStep(StopAction.KILL, int(signal.SIGKILL), wake_at=130.0 + KILL_RETRY_S)
    assert signalled.after(kill, 131.0) == StopFields(
        100.0, 130.0, killed_at=131.0, kills=1, last_kill_at=131.0
    )


def test_a_killed_attempt_waits_for_its_exit_until_the_retry() -> None:
    killed = StopFields(requested_at=100.0, deadline=130.0, killed_at=131.0, kills=1, last_kill_at=131.0)
    assert step(killed, 131.0 + KILL_RETRY_S - 0.01) == StopStep(StopAction.WAIT_FOR_EXIT, wake_at=161.0)
    assert killed.after(step(killed, 140.0), 140.0) == killed


def test_a_kill_that_did_not_take_is_sent_again_keeping_the_first_kills_time() -> None:
    killed = StopFields(requested_at=100.0, deadline=130.0, killed_at=131.0, kills=1, last_kill_at=131.0)
    again = step(killed, 200.0)  # the supervisor looked late
    assert again.action is StopAction.KILL and again.signum == signal.SIGKILL
    twice = killed.after(again, 200.0)
    assert twice == StopFields(100.0, 130.0, killed_at=131.0, kills=2, last_kill_at=200.0)
    # The next one is due a retry after the last, however late that one was.
    assert step(twice, 201.0) == StopStep(StopAction.WAIT_FOR_EXIT, wake_at=230.0)


def test_after_the_give_up_time_the_stop_stops_sending_and_only_waits() -> None:
    killed = StopFields(requested_at=100.0, deadline=130.0, killed_at=131.0, kills=9)
    give_up = step(killed, 131.0 + GIVE_UP_AFTER_S)
    assert give_up == StopStep(StopAction.GIVE_UP)
    gave_up = killed.after(give_up, 431.0)
    assert gave_up == StopFields(100.0, 130.0, 131.0, kills=9, gave_up_at=431.0)
    assert gave_up.gave_up_at == 431.0
    assert step(gave_up, 1e9) == StopStep(StopAction.WAIT_FOR_EXIT)  # once, then nothing more
    assert gave_up.after(step(gave_up, 1e9), 1e9) == gave_up


def test_a_kill_recorded_by_an_older_version_counts_as_one() -> None:
    legacy = StopFields(requested_at=100.0, deadline=130.0, killed_at=131.0)  # no count stored
    assert step(legacy, 150.0).action is StopAction.WAIT_FOR_EXIT
    assert step(legacy, 161.0).action is StopAction.KILL
    assert legacy.after(step(legacy, 161.0), 161.0).kills == 2


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
