"""The engine's value types: the copies the state makes, and reasons formatted when read."""

from __future__ import annotations

import dataclasses

from gpucommons.domain.resources import Resources
from gpucommons.engine import Admission, NodeSlice, Pending, PendingCode, RunningTask, TaskRequest


def _task() -> TaskRequest:
    # Every field away from its default, so that a copy that dropped one would show.
    return TaskRequest("t", "nlp", Resources(2, 500, 64), 800, "interactive", 7, 3.5, ("h100",), False, True)


def test_copies_pass_every_field_on() -> None:
    task = _task()
    assert task.queued_again(9.0) == dataclasses.replace(task, queued_at=9.0)
    rt = RunningTask(task, Admission("h100", (NodeSlice(0, (0, 1)),), Resources(1)), 2.0, False, 4.0)
    assert rt.marked_preempting() == dataclasses.replace(rt, preempting=True)
    assert rt.with_unsaved_work(1.5) == dataclasses.replace(rt, unsaved_gpu_s=1.5)


def test_a_reason_formatted_when_read_equals_one_given_ready_made() -> None:
    later = Pending.later(PendingCode.QUOTA_EXHAUSTED, "{} uses {}".format, ("nlp", 3))
    ready = Pending(PendingCode.QUOTA_EXHAUSTED, "nlp uses 3")
    assert later == ready and hash(later) == hash(ready) and repr(later) == repr(ready)
    assert later.message == "nlp uses 3"
    assert later != Pending(PendingCode.NO_IDLE_TO_BORROW, "nlp uses 3")
