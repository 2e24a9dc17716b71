"""The task list as JSON bytes straight from the columns it shows: no ORM rows, no model per task.

`GET /api/v1/tasks` is what every dashboard polls, 200 tasks a poll. Loading ORM rows (identity map,
the joined attempt, instrumented attributes) and building one pydantic `Task` per row was 26–31 % of
the server's CPU under the mixed load (docs/benchmarks.md, "The task list from its columns"). Here
one select reads only the columns a `Task` shows, the task's current attempt by an outer join, as
plain tuples; each becomes a dict in the schema's field order, and pydantic-core writes the whole
list in one Rust call. It infers each value's serialiser from its Python type, and the values are
the types the model's fields hold after validation (str, int, float, bool, None, lists, UTC
datetimes), so the bytes are the ones `TypeAdapter(list[Task]).dump_json` writes for
`convert.task` of the same rows: the tests hold the two equal for rows with every field set and
for rows with none, on SQLite and PostgreSQL. A field added to `schemas.Task` must be added here
too (the same tests then fail until it is).

Rendering (`render`) is pure; `listing` only builds the query, which `services.tasks` filters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic_core import to_json
from sqlalchemy import Select, select

from gpucommons.server.services.convert import EMPTY, HOLDING, PENDING, checkpoint_of, utc, utc_or_none
from gpucommons.store.models import AttemptRow, TaskRow

#: What `render` reads of each row, in this order (the attempt's id says whether the join found one).
COLUMNS = (
    TaskRow.id,
    TaskRow.seq,
    TaskRow.name,
    TaskRow.team,
    TaskRow.state,
    TaskRow.priority_class,
    TaskRow.priority_value,
    TaskRow.command,
    TaskRow.gpus,
    TaskRow.cpu_milli,
    TaskRow.memory_mib,
    TaskRow.pool_request,
    AttemptRow.id,
    AttemptRow.pool,
    AttemptRow.gpu_indices,
    AttemptRow.borrowed_gpus,
    TaskRow.checkpoint_mode,
    TaskRow.checkpoint_interval_s,
    TaskRow.submitted_at,
    TaskRow.queued_at,
    TaskRow.admitted_at,
    TaskRow.started_at,
    TaskRow.finished_at,
    TaskRow.restart_count,
    TaskRow.preemptions,
    TaskRow.exit_code,
    TaskRow.cancel_requested,
    TaskRow.last_checkpoint_at,
    TaskRow.lost_gpu_seconds,
    TaskRow.message,
    TaskRow.submitted_by,
    TaskRow.image,
    TaskRow.cluster_ref,
    TaskRow.origin,
)


def listing() -> Select[*tuple[Any, ...]]:
    """Every task with its current attempt, if it has one (`TaskRow.attempt`'s join), unfiltered."""
    return select(*COLUMNS).outerjoin(AttemptRow, TaskRow.attempt_id == AttemptRow.id)


def record(
    row: Sequence[Any], borrowed_now: Mapping[str, int], waiting_now: Mapping[str, str] = EMPTY
) -> dict[str, Any]:
    """One row of `listing` as `convert.task` builds it: a live task's borrowing is the scheduler's
    of now (`borrowed_now`), any other's the attempt's at admission, 0 without an attempt; a
    pending task's message is why it waits now (`waiting_now`), if the scheduler has said."""
    (
        task_id,
        seq,
        name,
        team,
        state,
        priority,
        priority_value,
        command,
        gpus,
        cpu_milli,
        memory_mib,
        pool,
        attempt_id,
        assigned_pool,
        gpu_indices,
        borrowed,
        checkpoint_mode,
        checkpoint_interval_s,
        submitted_at,
        queued_at,
        admitted_at,
        started_at,
        finished_at,
        restart_count,
        preemptions,
        exit_code,
        cancel_requested,
        last_checkpoint_at,
        lost_gpu_seconds,
        message,
        submitted_by,
        image,
        cluster_ref,
        origin,
    ) = row
    held = attempt_id is not None
    if state in HOLDING:
        borrowed = borrowed_now.get(task_id, 0)
    elif not held:
        borrowed = 0
    if state == PENDING:
        message = waiting_now.get(task_id, message)
    return {
        "id": task_id,
        "seq": seq,
        "name": name,
        "team": team,
        "state": state,
        "priority": priority,
        "priority_value": priority_value,
        "command": list(command),
        "gpus": gpus,
        "cpu_milli": cpu_milli,
        "memory_mib": memory_mib,
        "pool": pool,
        "assigned_pool": assigned_pool if held else None,
        "gpu_indices": list(gpu_indices or []) if held else [],
        "borrowed_gpus": borrowed,
        "checkpoint": checkpoint_of(checkpoint_mode, checkpoint_interval_s),
        "submitted_at": utc(submitted_at),
        "queued_at": utc(queued_at),
        "admitted_at": utc_or_none(admitted_at),
        "started_at": utc_or_none(started_at),
        "finished_at": utc_or_none(finished_at),
        "restart_count": restart_count,
        "preemptions": preemptions,
        "exit_code": exit_code,
        "cancel_requested": cancel_requested,
        "last_checkpoint_at": utc_or_none(last_checkpoint_at),
        # a float field holds a float even when the store hands back an integer
        "lost_gpu_seconds": float(round(lost_gpu_seconds, 3)),
        "message": message,
        "submitted_by": submitted_by,
        "image": image,
        "cluster_ref": cluster_ref,
        "origin": origin,
    }


def render(
    rows: Iterable[Sequence[Any]], borrowed_now: Mapping[str, int], waiting_now: Mapping[str, str] = EMPTY
) -> bytes:
    """The JSON list of `Task`s of these rows of `listing`, in their order. Infinity and NaN are
    written `null`, as a pydantic model writes a float field by default."""
    return to_json([record(row, borrowed_now, waiting_now) for row in rows], inf_nan_mode="null")
