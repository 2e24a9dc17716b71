"""`GET /api/v1/queue` rendered once per published view (`routers.queue_answers`): the kept answer is
byte for byte what a fresh build gives, a new view gives a new answer, and a caller who may see less
never gets another caller's answer."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import select
from tests.integration.server.conftest import Harness

from gpucommons.backends.clock import ManualClock
from gpucommons.server import views
from gpucommons.server.executors import TimerExecutor
from gpucommons.server.routers.caching import etag_of
from gpucommons.server.routers.queue_answers import QUEUE, QueueAnswers, ages
from gpucommons.store.models import TaskRow

START = 1_790_000_000.25

#: Names that would break a body cut on the wrong bytes: the key itself, quotes, commas, a backslash.
TRICKY = ['"waiting_seconds":1.5,', 'a,b,"c"', "ünïcödé ✓", "back\\slash", "plain"]


@pytest.fixture
def made(make_harness: Callable[..., Harness]) -> tuple[Harness, ManualClock]:
    clock = ManualClock(START)
    return make_harness(executor=TimerExecutor(clock), clock=clock), clock


def answers(h: Harness) -> QueueAnswers:
    kept = h.http.app.state.queue_answers  # type: ignore[attr-defined]
    assert isinstance(kept, QueueAnswers)
    return kept


def fill_and_queue(h: Harness, clock: ManualClock) -> None:
    """Every GPU held, then waiting tasks of both teams, queued at different instants."""
    h.submit(team="a", gpus=2, command=["sleep", "600"])
    h.submit(team="b", gpus=2, command=["sleep", "600"])
    for i, name in enumerate(TRICKY):
        clock.advance(1.2345 + i)
        h.submit(team="ab"[i % 2], gpus=1, command=["sleep", "600"], name=name)
    h.cycle()


def fresh(h: Harness, visible: frozenset[str]) -> tuple[bytes, str]:
    """The answer built the way the route built it before answers were kept: body and weak ETag."""
    published = h.ctx.scheduler.view
    shown = [row for row in views.queue_order(published.pending) if row[0].team in visible]
    reasons = views.resolve_reasons(views.queue_order(published.pending), published.reasons)
    entries = views.queue_entries(shown, reasons, h.ctx.scheduler.positions(), h.ctx.clock.now())
    with h.ctx.db.session() as session:
        names = {i: n for i, n in session.execute(select(TaskRow.id, TaskRow.name))}
    for e in entries:
        e.name = names[e.task_id]
    body = QUEUE.dump_json(entries)
    return body, etag_of(QUEUE.dump_json(entries, exclude={"__all__": {"waiting_seconds"}}), weak=True)


def test_the_kept_answer_is_the_bytes_a_fresh_build_gives_at_every_instant(
    made: tuple[Harness, ManualClock],
) -> None:
    h, clock = made
    fill_and_queue(h, clock)
    everyone = visible_teams_of_admin(h)
    for step in (0.0, 0.0004, 1.0, 3600.123456):
        clock.advance(step)
        got = h.http.get("/api/v1/queue", headers=h.admin)
        assert got.status_code == 200
        body, etag = fresh(h, everyone)
        assert got.content == body
        assert got.headers["etag"] == etag
        assert got.headers["content-type"] == "application/json"
    assert [e["name"] for e in got.json()] == TRICKY
    assert answers(h).renders == 1  # four reads of one view, one rendering


def visible_teams_of_admin(h: Harness) -> frozenset[str]:
    everyone = frozenset(h.ctx.policies.policy.team_names)
    assert everyone == {"a", "b"}
    return everyone


def test_an_empty_queue_is_an_empty_list(made: tuple[Harness, ManualClock]) -> None:
    h, _ = made
    h.cycle()
    got = h.http.get("/api/v1/queue", headers=h.admin)
    assert got.content == b"[]"
    assert got.headers["etag"] == fresh(h, frozenset({"a", "b"}))[1]


def test_a_new_view_gives_a_new_answer_and_an_unchanged_one_keeps_it(
    made: tuple[Harness, ManualClock],
) -> None:
    h, clock = made
    fill_and_queue(h, clock)
    before = h.http.get("/api/v1/queue", headers=h.admin)
    h.cycle()  # nothing changed: a new view of the same queue
    same = h.http.get("/api/v1/queue", headers={**h.admin, "If-None-Match": before.headers["etag"]})
    assert same.status_code == 304
    assert answers(h).renders == 1
    late = h.submit(team="b", gpus=1, command=["sleep", "600"], name="late")
    h.cycle()
    after = h.http.get("/api/v1/queue", headers={**h.admin, "If-None-Match": before.headers["etag"]})
    assert after.status_code == 200
    assert after.headers["etag"] != before.headers["etag"]
    assert after.json()[-1]["task_id"] == late["id"]
    assert after.content == fresh(h, frozenset({"a", "b"}))[0]
    assert answers(h).renders == 2
    # the head of the queue leaves: every place moves, the kept pieces must not keep them
    head = after.json()[0]
    assert h.http.post(f"/api/v1/tasks/{head['task_id']}/cancel", headers=h.admin).status_code == 200
    h.cycle()
    moved = h.http.get("/api/v1/queue", headers=h.admin)
    assert [e["position"] for e in moved.json()] == list(range(1, len(after.json())))
    assert moved.json()[0]["task_id"] == after.json()[1]["task_id"]
    assert (moved.content, moved.headers["etag"]) == fresh(h, frozenset({"a", "b"}))
    assert answers(h).views == 3


def test_a_caller_who_may_see_less_gets_only_what_it_may_see(made: tuple[Harness, ManualClock]) -> None:
    h, clock = made
    fill_and_queue(h, clock)
    admin = h.http.get("/api/v1/queue", headers=h.admin)  # the whole queue, kept first
    assert {e["team"] for e in admin.json()} == {"a", "b"}
    member = h.member_token("b")
    mine = h.http.get("/api/v1/queue", headers=member)
    assert {e["team"] for e in mine.json()} == {"b"}
    assert mine.content == fresh(h, frozenset({"b"}))[0]
    assert mine.headers["etag"] != admin.headers["etag"]
    # the admin's ETag is no match for the member's answer, and the member cannot filter its way in
    again = h.http.get("/api/v1/queue", headers={**member, "If-None-Match": admin.headers["etag"]})
    assert again.status_code == 200
    assert {e["team"] for e in again.json()} == {"b"}
    assert h.http.get("/api/v1/queue", params={"team": "a"}, headers=member).json() == []
    # the admin's own filter is its own answer, and the whole queue is still the admin's
    only_a = h.http.get("/api/v1/queue", params={"team": "a"}, headers=h.admin)
    assert {e["team"] for e in only_a.json()} == {"a"}
    assert only_a.content == fresh(h, frozenset({"a"}))[0]
    assert h.http.get("/api/v1/queue", headers=h.admin).content == admin.content


@pytest.mark.parametrize("now", [0.0, 1_790_000_000.0, 1_790_000_000.0005, 1_790_000_123.4567])
def test_ages_are_the_rounded_waits_a_fresh_build_writes_even_for_a_task_queued_after_now(now: float) -> None:
    queued_at = [now - d for d in (0.0, 0.0004, 0.0005, 0.0015, 1.23456, 86_400.1)]
    queued_at += [now + d for d in (0.0001, 0.0006, 2.5)]  # another process's clock, slightly ahead
    want = [round(max(0.0, now - q), 3) for q in queued_at]
    got = ages(now, queued_at, max(queued_at))
    assert got == want
    assert [str(a) for a in got] == [str(a) for a in want]  # no -0.0 where a fresh build writes 0.0
    assert ages(now, queued_at[:6], max(queued_at[:6])) == want[:6]


def test_tasks_the_engine_set_aside_behind_their_failed_head_say_why_they_wait(
    made: tuple[Harness, ManualClock],
) -> None:
    """Team a's head asks 2 GPUs it cannot get; the engine stops walking a's queue there (every task
    behind asks as much) and gives the rest no reason. The queue gives them the head's, not
    "not yet considered by the scheduler"; a task asking less, or another team's, is not touched."""
    h, _ = made
    h.submit(team="a", gpus=2, command=["sleep", "600"])
    h.submit(team="b", gpus=2, command=["sleep", "600"])
    h.cycle()
    head = str(h.submit(team="a", gpus=2, command=["sleep", "600"])["id"])
    rest = [str(h.submit(team="a", gpus=g, command=["sleep", "600"])["id"]) for g in (2, 3)]
    h.cycle()
    assert not set(rest) & set(h.ctx.scheduler.view.reasons), "the engine no longer sets them aside"
    queue = {e["task_id"]: e for e in h.http.get("/api/v1/queue", headers=h.admin).json()}
    own = queue[head]
    assert own["reason_code"] and "not yet considered" not in own["reason"], own
    for task_id in rest:
        entry = queue[task_id]
        assert entry["reason_code"] == own["reason_code"], entry
        assert entry["reason"] == f"waits like {head}, which asks no more: {own['reason']}", entry
    # The kept answer is still what a fresh build gives.
    body, _ = fresh(h, frozenset({"a", "b"}))
    assert h.http.get("/api/v1/queue", headers=h.admin).content == body


def test_the_task_list_and_a_tasks_page_say_why_a_pending_task_waits_now(
    made: tuple[Harness, ManualClock],
) -> None:
    """`commons tasks` showed "waiting for the scheduler" (the message written at submit) for a task
    the queue said waits on its team's quota: a pending task's message is the last cycle's reason,
    set-aside tasks included, and a task that left the queue keeps its own."""
    h, _ = made
    running = str(h.submit(team="a", gpus=2, command=["sleep", "600"])["id"])
    h.submit(team="b", gpus=2, command=["sleep", "600"])
    h.cycle()
    head = str(h.submit(team="a", gpus=2, command=["sleep", "600"])["id"])
    behind = str(h.submit(team="a", gpus=2, command=["sleep", "600"])["id"])
    before_cycle = {t["id"]: t["message"] for t in h.http.get("/api/v1/tasks", headers=h.admin).json()}
    assert before_cycle[head] == "waiting for the scheduler"  # no cycle has looked at it yet
    h.cycle()
    queue = {e["task_id"]: e["reason"] for e in h.http.get("/api/v1/queue", headers=h.admin).json()}
    listed = {t["id"]: t["message"] for t in h.http.get("/api/v1/tasks", headers=h.admin).json()}
    assert listed[head] == queue[head] and "waiting for the scheduler" not in listed[head], listed
    assert listed[behind] == queue[behind] and listed[behind].startswith(f"waits like {head}"), listed
    assert h.http.get(f"/api/v1/tasks/{behind}", headers=h.admin).json()["message"] == queue[behind]
    assert listed[running] == h.http.get(f"/api/v1/tasks/{running}", headers=h.admin).json()["message"]
    assert running not in queue and not listed[running].startswith("waits"), listed[running]


def test_a_task_asking_less_than_the_failed_head_is_not_given_its_reason() -> None:
    from gpucommons.domain.resources import Resources
    from gpucommons.engine.types import Pending, PendingCode, TaskRequest

    def task(tid: str, gpus: int, queued_at: float, pools: tuple[str, ...] = ()) -> TaskRequest:
        return TaskRequest(
            tid, "a", Resources(gpus=gpus), 100, "normal", int(queued_at), queued_at, pools=pools
        )

    head, small, pinned, big = task("h", 2, 1), task("s", 1, 2), task("p", 4, 3, ("gpu",)), task("b", 4, 4)
    why = Pending(PendingCode.QUOTA_EXHAUSTED, "team a uses 2/2")
    order = views.queue_order([head, small, pinned, big])
    resolved = views.resolve_reasons(order, {"h": why})
    assert set(resolved) == {"h", "b"}
    assert resolved["b"] == Pending(
        PendingCode.QUOTA_EXHAUSTED, "waits like h, which asks no more: team a uses 2/2"
    )
    assert views.resolve_reasons(order, {}) == {}


def _without_ages(entries: list[dict[str, object]]) -> list[dict[str, object]]:
    return [{k: v for k, v in e.items() if k != "waiting_seconds"} for e in entries]


def test_pages_of_the_queue_follow_their_links_to_the_whole_queue(made: tuple[Harness, ManualClock]) -> None:
    h, clock = made
    fill_and_queue(h, clock)
    whole = h.http.get("/api/v1/queue", headers=h.admin)
    assert "link" not in whole.headers  # no page asked for: the whole queue, as before
    pages, url = [], "/api/v1/queue?limit=2"
    while url:
        got = h.http.get(url, headers=h.admin)
        assert got.status_code == 200, got.text
        page = got.json()
        assert 1 <= len(page) <= 2
        pages.append(page)
        url = got.headers.get("link", "").partition(">")[0].lstrip("<")
        if url:
            assert got.headers["x-next-cursor"] == str(page[-1]["position"])
            assert url == f"/api/v1/queue?after={page[-1]['position']}&limit=2"
    assert [len(p) for p in pages] == [2, 2, 1]
    assert _without_ages([e for p in pages for e in p]) == _without_ages(whole.json())

    # A page has its own weak ETag: polling it answers 304 while it is unchanged.
    first = h.http.get("/api/v1/queue?limit=2", headers=h.admin)
    assert first.headers["etag"] != whole.headers["etag"]
    again = h.http.get("/api/v1/queue?limit=2", headers={**h.admin, "If-None-Match": first.headers["etag"]})
    assert again.status_code == 304
    assert again.headers["link"] == first.headers["link"]

    # With a team filter, a page holds that team's entries and its link keeps the filter.
    team_a = h.http.get("/api/v1/queue?team=a&limit=1", headers=h.admin)
    assert [e["team"] for e in team_a.json()] == ["a"]
    assert "team=a" in team_a.headers["link"]
    last = max(e["position"] for e in whole.json())
    assert h.http.get(f"/api/v1/queue?after={last}", headers=h.admin).json() == []


@pytest.mark.parametrize("query", ["limit=0", "limit=10001", "after=-1", "after=x", "limit=2.5"])
def test_a_bad_page_is_refused_naming_the_parameter(made: tuple[Harness, ManualClock], query: str) -> None:
    h, _ = made
    got = h.http.get(f"/api/v1/queue?{query}", headers=h.admin)
    assert got.status_code == 422
    assert query.partition("=")[0] in got.text
