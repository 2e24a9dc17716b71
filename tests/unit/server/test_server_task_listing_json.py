"""The task list written from its columns (`services.task_listing`) is byte for byte what pydantic
wrote from `convert.task` of the ORM rows, for any values a stored task and its attempt can hold."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from gpucommons.api import schemas
from gpucommons.server.services import convert, task_listing
from gpucommons.store.models import AttemptRow, TaskRow

TASKS = TypeAdapter(list[schemas.Task])
STATES = ["pending", "admitted", "running", "preempting", "succeeded", "failed", "cancelled"]
INT32 = st.integers(-(2**31), 2**31 - 1)
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
#: Times the store can hold and `datetime.fromtimestamp` can write, fractions of microseconds too.
TIME = st.floats(0, 4e9, allow_nan=False)
MAYBE_TIME = st.none() | TIME


def as_listed(task: TaskRow) -> tuple[Any, ...]:
    """The row `task_listing.listing` selects for this task (the attempt's columns None without one)."""
    attempt = task.attempt
    values = []
    for column in task_listing.COLUMNS:
        source = task if column.class_ is TaskRow else attempt
        values.append(None if source is None else getattr(source, column.key))
    return tuple(values)


@st.composite
def tasks(draw: st.DrawFn) -> TaskRow:
    task = TaskRow(
        id=draw(TEXT),
        seq=draw(INT32),
        name=draw(TEXT),
        team=draw(TEXT),
        state=draw(st.sampled_from(STATES)),
        priority_class=draw(TEXT),
        priority_value=draw(INT32),
        command=draw(st.lists(TEXT, max_size=3)),
        gpus=draw(INT32),
        cpu_milli=draw(INT32),
        memory_mib=draw(INT32),
        pool_request=draw(st.none() | TEXT),
        checkpoint_mode=draw(st.sampled_from(["none", "on-signal", "every", "other"])),
        checkpoint_interval_s=draw(st.none() | INT32),
        submitted_at=draw(TIME),
        queued_at=draw(TIME),
        admitted_at=draw(MAYBE_TIME),
        started_at=draw(MAYBE_TIME),
        finished_at=draw(MAYBE_TIME),
        restart_count=draw(INT32),
        preemptions=draw(INT32),
        exit_code=draw(st.none() | INT32),
        cancel_requested=draw(st.booleans()),
        last_checkpoint_at=draw(MAYBE_TIME),
        lost_gpu_seconds=draw(st.floats(allow_nan=False) | st.integers(0, 10**6)),
        message=draw(TEXT),
        submitted_by=draw(TEXT),
        image=draw(st.none() | TEXT),
        cluster_ref=draw(st.none() | TEXT),
        origin=draw(st.sampled_from(["commons", "cluster"])),
    )
    if draw(st.booleans()):
        task.attempt = AttemptRow(
            id=draw(INT32),
            pool=draw(TEXT),
            gpu_indices=draw(st.none() | st.lists(INT32, max_size=4)),
            borrowed_gpus=draw(INT32),
        )
    return task


@given(st.lists(tasks(), max_size=4), st.dictionaries(TEXT, INT32, max_size=4), st.data())
def test_the_listing_writes_what_pydantic_wrote_from_the_orm_rows(
    rows: list[TaskRow], borrowed: dict[str, int], data: st.DataObject
) -> None:
    for row in rows:  # some live tasks are in the scheduler's borrowing, some are not
        if data.draw(st.booleans()):
            borrowed[row.id] = data.draw(INT32)
    before = TASKS.dump_json([convert.task(row, borrowed) for row in rows])
    assert task_listing.render([as_listed(row) for row in rows], borrowed) == before
