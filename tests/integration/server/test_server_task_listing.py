"""`GET /api/v1/tasks` written from its columns (`services.task_listing`) answers, byte for byte,
what the route wrote before from ORM rows through `convert.task` and pydantic: every field set or
none, a task whose attempt row is gone, each filter, each page, and only what the caller may see."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter
from sqlalchemy import Select, func, select
from tests.integration.server.conftest import Harness
from tests.unit.server.task_columns import ATTEMPT_COLUMNS, task_columns

from gpucommons.api import schemas
from gpucommons.backends.clock import SystemClock
from gpucommons.server import views
from gpucommons.server.executors import TimerExecutor
from gpucommons.server.services import convert
from gpucommons.store.models import AttemptRow, TaskRow

TASKS = TypeAdapter(list[schemas.Task])


@pytest.fixture
def harness(make_harness: Callable[..., Harness]) -> Harness:
    """Tasks are timers (`sleep 600` holds its GPUs, and no process outlives the test)."""
    return make_harness(executor=TimerExecutor(SystemClock()))


def before(h: Harness, query: Select[TaskRow]) -> bytes:
    """The answer as the route wrote it before: ORM rows, `convert.task`, pydantic."""
    with h.ctx.db.session() as session:
        rows = list(session.scalars(query))
        published = h.ctx.scheduler.view
        borrowed, waiting = published.usage.borrowed_by_task, views.WaitingMessages().of(published)
        return TASKS.dump_json([convert.task(row, borrowed, waiting) for row in rows])


def newest(*teams: str) -> Select[TaskRow]:
    return select(TaskRow).where(TaskRow.team.in_(teams)).order_by(TaskRow.seq.desc())


def listed(h: Harness, url: str, headers: dict[str, str] | None = None) -> bytes:
    response = h.http.get(url, headers=headers or h.admin)
    assert response.status_code == 200, response.text
    return response.content


def fill(h: Harness) -> list[str]:
    """Live tasks (team a borrowing), waiting ones, and ended ones with every field set; one task
    names an attempt row that is not there. Newest first."""
    ids = [str(h.submit(team="a", gpus=1, command=["sleep", "600"], name=f"a{i}")["id"]) for i in range(3)]
    ids.append(str(h.submit(team="b", gpus=1, command=["sleep", "600"], name="b0")["id"]))
    h.cycle()  # the pool's 4 GPUs: a holds 3 (one above its quota of 2), b one
    ids += [str(h.submit(team="ab"[i % 2], gpus=1, command=["sleep", "600"])["id"]) for i in range(4)]
    ended, lost = ids[0], ids[4]
    with h.ctx.db.session() as session:
        row = session.get(TaskRow, ended)
        assert row is not None and row.attempt is not None
        row.state, row.finished_at, row.exit_code = "failed", row.queued_at + 12.345678, -9
        row.attempt.ended_at, row.attempt.end_reason = row.finished_at, "failed"
        row.checkpoint_mode, row.checkpoint_interval_s = "every", 1800
        row.last_checkpoint_at, row.lost_gpu_seconds = row.queued_at + 0.5, 1234.56789
        row.message, row.image = 'ünïcödé "quoted", back\\slash ✓', "registry/img:1"
        row.cluster_ref, row.origin, row.cancel_requested = "ns/job-1", "cluster", True
        row.restart_count, row.preemptions = 2, 3
        waiting = session.get(TaskRow, lost)
        assert waiting is not None
        waiting.attempt_id = 2**31 - 1
    return list(reversed(ids))


def test_every_answer_of_the_list_is_what_the_orm_and_pydantic_wrote(harness: Harness) -> None:
    ids = fill(harness)
    assert listed(harness, "/api/v1/tasks") == before(harness, newest("a", "b"))
    assert listed(harness, "/api/v1/tasks?team=b") == before(harness, newest("b"))
    states = "/api/v1/tasks?state=running&state=failed"
    assert listed(harness, states) == before(
        harness, newest("a", "b").where(TaskRow.state.in_(["running", "failed"]))
    )
    member = harness.member_token("a")
    assert listed(harness, "/api/v1/tasks", member) == before(harness, newest("a"))
    assert listed(harness, "/api/v1/tasks?team=b", member) == b"[]"
    page = harness.http.get("/api/v1/tasks?limit=3", headers=harness.admin)
    assert page.content == before(harness, newest("a", "b").limit(3))
    assert [t["id"] for t in page.json()] == ids[:3]
    rest = listed(harness, page.headers["link"][1 : page.headers["link"].index(">")])
    cursor = int(page.headers["x-next-cursor"])
    assert rest == before(harness, newest("a", "b").where(TaskRow.seq < cursor).limit(3))


def test_a_poll_of_an_unchanged_list_gets_304_and_a_change_a_new_body(harness: Harness) -> None:
    fill(harness)
    first = harness.http.get("/api/v1/tasks?limit=5", headers=harness.admin)
    tag = first.headers["etag"]
    again = harness.http.get("/api/v1/tasks?limit=5", headers={**harness.admin, "If-None-Match": tag})
    assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", tag)
    harness.submit(team="b", gpus=1, command=["sleep", "600"], name="new")
    changed = harness.http.get("/api/v1/tasks?limit=5", headers={**harness.admin, "If-None-Match": tag})
    assert changed.status_code == 200 and changed.headers["etag"] != tag
    assert changed.content == before(harness, newest("a", "b").limit(5))


#: A task of a team the admin sees, and its attempt or none (its id and seq are given when stored).
STORED = st.tuples(task_columns(st.just(""), st.just(0), st.sampled_from(["a", "b"])), ATTEMPT_COLUMNS)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(STORED)
def test_any_stored_task_is_listed_as_the_orm_and_pydantic_wrote_it(
    harness: Harness, made: tuple[dict[str, Any], dict[str, Any] | None]
) -> None:
    columns, attempt_columns = made
    with harness.ctx.db.session() as session:
        seq = (session.scalar(select(func.max(TaskRow.seq))) or 0) + 1  # the newest: listed first
        session.add(task := TaskRow(**{**columns, "id": f"h{seq}", "seq": seq}))
        session.flush()
        if attempt_columns is not None:
            session.add(attempt := AttemptRow(task_id=task.id, **attempt_columns))
            session.flush()
            task.attempt_id = attempt.id
    assert listed(harness, "/api/v1/tasks?limit=1") == before(harness, newest("a", "b").limit(1))
