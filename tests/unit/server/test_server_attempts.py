"""The pure rules of the control plane: how an attempt ends, what work it lost, checkpoint
declarations, and the timer executor's clockwork."""

from __future__ import annotations

import signal
import time

import pytest
from tests.unit.server.task_rows import running_task

from gpucommons.api.errors import CheckpointRequired, ValidationFailed
from gpucommons.backends.clock import ManualClock
from gpucommons.backends.ports import ExitStatus, Launch
from gpucommons.domain.model import PriorityClass
from gpucommons.domain.task import CheckpointMode, TaskState
from gpucommons.ledger.interval import EndReason
from gpucommons.server.executors import TimerExecutor
from gpucommons.server.services.checkpoints import parse_checkpoint, require_declaration, unsaved_gpu_seconds
from gpucommons.server.workers.attempts import lost_gpu_seconds, outcome

row = running_task


@pytest.mark.parametrize(
    ("fields", "status", "expected"),
    [
        ({}, ExitStatus(0), (TaskState.SUCCEEDED, EndReason.SUCCEEDED)),
        ({}, ExitStatus(2), (TaskState.FAILED, EndReason.FAILED)),
        ({}, ExitStatus(None, 9), (TaskState.FAILED, EndReason.FAILED)),
        ({"stop_reason": "preempted"}, ExitStatus(0), (TaskState.PENDING, EndReason.PREEMPTED)),
        ({"stop_reason": "preempted"}, ExitStatus(None, 9), (TaskState.PENDING, EndReason.PREEMPTED)),
        ({"stop_reason": "max_runtime"}, ExitStatus(0), (TaskState.FAILED, EndReason.FAILED)),
        # A node lost the work: what can resume is requeued, what cannot fails; a stop we asked for wins.
        (
            {"checkpoint_mode": "on-signal"},
            ExitStatus(None, 9, lost="n2 down"),
            (TaskState.PENDING, EndReason.PREEMPTED),
        ),
        ({}, ExitStatus(None, 9, lost="n2 down"), (TaskState.FAILED, EndReason.FAILED)),
        ({}, ExitStatus(0, lost="n2 down"), (TaskState.FAILED, EndReason.FAILED)),
        (
            {"stop_reason": "preempted"},
            ExitStatus(None, 9, lost="n2 down"),
            (TaskState.PENDING, EndReason.PREEMPTED),
        ),
        (
            {"cancel_requested": True, "stop_reason": "preempted"},
            ExitStatus(0),
            (TaskState.CANCELLED, EndReason.CANCELLED),
        ),
    ],
)
def test_how_an_attempt_ends_decides_where_the_task_goes(
    fields: dict[str, object], status: ExitStatus, expected: tuple[TaskState, EndReason]
) -> None:
    state, reason, message = outcome(row(**fields), status)
    assert (state, reason) == expected
    assert message


def test_a_preempted_task_loses_the_work_since_its_last_checkpoint() -> None:
    victim = row(last_checkpoint_at=130.0, stop_requested_at=160.0, checkpoint_mode="every")
    assert lost_gpu_seconds(victim, ended_at=170.0) == (160.0 - 130.0) * 4


def test_a_task_that_saves_on_signal_and_stops_in_time_loses_nothing() -> None:
    assert lost_gpu_seconds(row(checkpoint_mode="on-signal", stop_requested_at=160.0), 165.0) == 0.0


def test_a_task_that_saves_on_signal_but_is_killed_loses_everything_since_start() -> None:
    killed = row(checkpoint_mode="on-signal", stop_requested_at=160.0, killed_at=190.0)
    assert lost_gpu_seconds(killed, 190.0) == 60.0 * 4


def test_a_checkpoint_reported_during_the_grace_period_saves_all() -> None:
    assert lost_gpu_seconds(row(last_checkpoint_at=161.0, stop_requested_at=160.0), 162.0) == 0.0


def test_checkpoint_declarations_parse_or_say_what_is_accepted() -> None:
    assert parse_checkpoint(None).mode is CheckpointMode.NONE
    assert parse_checkpoint("on-signal").mode is CheckpointMode.ON_SIGNAL
    assert parse_checkpoint("every:30m").interval_s == 1800
    assert parse_checkpoint("every:365d").interval_s == 365 * 86_400
    # Longer than a year is refused (found by schemathesis: every:9446713h overflowed PostgreSQL's column).
    for bad in ("every:0s", "every:soon", "sometimes", "every:", "every:366d", "every:9446713h"):
        with pytest.raises(ValidationFailed, match="every:<duration>"):
            parse_checkpoint(bad)


def test_checkpoint_required_refuses_only_tasks_without_a_declaration() -> None:
    careful = PriorityClass("training", 500, checkpoint_required=True, grace_period_s=300)
    with pytest.raises(CheckpointRequired, match="300s grace period"):
        require_declaration(parse_checkpoint(None), careful)
    require_declaration(parse_checkpoint("on-signal"), careful)
    require_declaration(parse_checkpoint(None), PriorityClass("experiment", 100))


def test_unsaved_work_counts_gpu_seconds_and_nothing_for_on_signal_tasks() -> None:
    assert unsaved_gpu_seconds("every", 8, 100.0, 110.0) == 80.0
    assert unsaved_gpu_seconds("on-signal", 8, 100.0, 110.0) == 0.0
    assert unsaved_gpu_seconds("none", 8, None, 110.0) == 0.0


def _launch(command: tuple[str, ...]) -> Launch:
    from pathlib import Path

    return Launch(
        task_id="t", team="a", command=command, env={}, workdir=Path("/"), log_path=Path("/dev/null")
    )


def test_timer_executor_ends_sleep_tasks_after_their_duration_and_wakes_the_scheduler() -> None:
    clock = ManualClock(1000.0)
    woken: list[int] = []
    executor = TimerExecutor(clock, on_exit=lambda: woken.append(1))
    handle = executor.start(_launch(("sleep", "2.5")))
    assert executor.poll(handle) is None
    clock.advance(2.5)
    assert executor.poll(handle) == ExitStatus(code=0, ended_at=1002.5)  # when it ended, not when polled
    deadline = time.monotonic() + 5
    while not woken and time.monotonic() < deadline:
        time.sleep(0.05)
    assert woken, "the scheduler is woken when a timer ends"
    other = executor.start(_launch(("python", "train.py")))
    assert executor.poll(other) == ExitStatus(code=0, ended_at=1002.5)  # anything but sleep ends at once


def test_timer_executor_signals_end_the_task_now() -> None:
    clock = ManualClock(0.0)
    executor = TimerExecutor(clock)
    handle = executor.start(_launch(("sleep", "60")))
    executor.signal(handle, signal.SIGTERM)
    assert executor.poll(handle) == ExitStatus(code=128 + signal.SIGTERM, ended_at=0.0)
    killed = executor.start(_launch(("sleep", "60")))
    executor.kill(killed)
    assert executor.poll(killed) == ExitStatus(code=None, signal=signal.SIGKILL, ended_at=0.0)
    executor.release(killed)
    assert not executor.is_alive(killed)  # forgotten attempts count as gone


def test_the_end_time_a_backend_reports_wins_over_now_but_never_precedes_the_start() -> None:
    from gpucommons.backends.ports import Handle
    from gpucommons.server.workers.attempts import ended_at

    handle = Handle("t1", 7, "slurm:7:1")
    assert ended_at(handle, 200.0, 100.0, ExitStatus(0, ended_at=150.0)) == 150.0
    assert ended_at(handle, 200.0, 100.0, ExitStatus(0, ended_at=90.0)) == 100.0
    assert ended_at(handle, 200.0, 100.0, ExitStatus(0)) == 200.0


def test_an_end_after_the_cycles_instant_is_left_to_the_next_cycle() -> None:
    from gpucommons.backends.ports import Handle
    from gpucommons.server.workers.attempts import ended_by

    handle = Handle("t1", 7, "slurm:7:1")
    assert ended_by(handle, ExitStatus(0, ended_at=150.0), now=150.0, current=151.0)
    # It ended while the cycle ran, after the instant it decides at: the next cycle settles it.
    assert not ended_by(handle, ExitStatus(0, ended_at=150.5), now=150.0, current=151.0)
    assert ended_by(handle, ExitStatus(0), now=150.0, current=151.0)  # a backend that does not say
    # An end after the clock's own reading is another machine's clock running ahead: not waited for.
    assert ended_by(handle, ExitStatus(0, ended_at=160.0), now=150.0, current=151.0)


def test_the_queue_names_the_nodes_out_of_service_where_a_task_waits_for_a_node() -> None:
    from gpucommons.engine.types import Pending, PendingCode
    from gpucommons.server.workers.attempts import with_out_of_service

    pending = {
        "a": Pending(PendingCode.NO_NODE_FITS, "no node has 8 free GPUs"),
        "b": Pending(PendingCode.QUOTA_EXHAUSTED, "at quota"),
    }
    out = with_out_of_service(pending, {"gpu": {2: "n3 down: Not responding"}})
    assert out["a"].message == "no node has 8 free GPUs; out of service: n3 down: Not responding"
    assert out["b"] == pending["b"]
    assert with_out_of_service(pending, {}) == pending
