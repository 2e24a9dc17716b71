"""The task list written from its columns (`services.task_listing`) is byte for byte what pydantic
wrote from `convert.task` of the ORM rows, for any values a stored task and its attempt can hold."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter
from tests.unit.server.task_columns import ATTEMPT_COLUMNS, INT32, TEXT, task_columns

from gpucommons.api import schemas
from gpucommons.server.services import convert, task_listing
from gpucommons.store.models import AttemptRow, TaskRow

TASKS = TypeAdapter(list[schemas.Task])


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
    task = TaskRow(**draw(task_columns(TEXT, INT32, TEXT)))
    attempt = draw(ATTEMPT_COLUMNS)
    if attempt is not None:
        task.attempt = AttemptRow(id=draw(INT32), **attempt)
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
