"""Stop reasons as the store hands them back (members, plain strings, values this version does not
know) decide where an ended attempt goes; and the one reading of a task's unsaved work."""

from __future__ import annotations

import pytest
from tests.unit.server.task_rows import running_task

from gpucommons.backends.ports import ExitStatus
from gpucommons.domain.stopping import StopReason
from gpucommons.domain.task import TaskState
from gpucommons.ledger.interval import EndReason
from gpucommons.server.services.checkpoints import unsaved_work
from gpucommons.server.workers.attempts import outcome

row = running_task


@pytest.mark.parametrize("stored", [StopReason.PREEMPTED, "preempted"])
def test_a_member_and_its_stored_string_mean_the_same_stop(stored: str) -> None:
    assert outcome(row(stop_reason=stored), ExitStatus(0))[:2] == (TaskState.PENDING, EndReason.PREEMPTED)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (ExitStatus(0), (TaskState.SUCCEEDED, EndReason.SUCCEEDED)),
        (ExitStatus(None, 9), (TaskState.FAILED, EndReason.FAILED)),
    ],
)
def test_a_reason_this_version_does_not_know_leaves_the_exit_status_to_decide(
    status: ExitStatus, expected: tuple[TaskState, EndReason]
) -> None:
    assert outcome(row(stop_reason="drained_by_v9"), status)[:2] == expected


def test_unsaved_work_counts_gpu_seconds_since_the_last_save_unless_the_task_saves_on_signal() -> None:
    periodic = row(checkpoint_mode="every", last_checkpoint_at=160.0)
    assert unsaved_work(periodic, 170.0) == 40.0  # 10 s since the checkpoint, on 4 GPUs
    assert unsaved_work(row(), 130.0) == 120.0  # no checkpoint: since the start
    assert unsaved_work(row(checkpoint_mode="on-signal"), 1e6) == 0.0
    assert unsaved_work(row(started_at=None), 1e6) == 0.0
