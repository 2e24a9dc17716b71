"""What pollers get: ETags and `304 Not Modified` for the lists the dashboard polls, and keyset pages
of the task list (`after` cursor in a `Link: rel=next` header; the body stays a plain list)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.integration.server.conftest import Harness

from gpucommons.backends.clock import SystemClock
from gpucommons.server.executors import TimerExecutor

POLLED = ["/api/v1/tasks", "/api/v1/queue", "/api/v1/teams", "/api/v1/usage"]


@pytest.fixture
def harness(make_harness: Callable[..., Harness]) -> Harness:
    """Tasks are timers (`sleep 600` holds its GPUs, and no process outlives the test)."""
    return make_harness(executor=TimerExecutor(SystemClock()))


@pytest.mark.parametrize("path", POLLED)
def test_a_poll_that_finds_nothing_changed_gets_304_without_a_body(harness: Harness, path: str) -> None:
    harness.submit(team="a", gpus=1, command=["sleep", "600"], name="first")
    harness.cycle()
    first = harness.http.get(path, headers=harness.admin)
    assert first.status_code == 200
    etag = first.headers["etag"]
    assert first.headers["cache-control"] == "private, no-cache"
    again = harness.http.get(path, headers={**harness.admin, "If-None-Match": etag})
    if path == "/api/v1/usage":
        # the running task's interval ends "now": a running ledger is never the same twice
        assert again.status_code == 200
        return
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == etag


def test_a_change_gives_a_new_etag_and_the_new_answer(harness: Harness) -> None:
    harness.submit(team="a", gpus=2, command=["sleep", "600"])
    harness.submit(team="b", gpus=2, command=["sleep", "600"])  # the 4 GPUs are all held
    harness.cycle()
    before = harness.http.get("/api/v1/queue", headers=harness.admin)
    assert before.json() == []
    harness.submit(team="b", gpus=1, command=["sleep", "600"], name="waiting")
    harness.cycle()
    after = harness.http.get(
        "/api/v1/queue", headers={**harness.admin, "If-None-Match": before.headers["etag"]}
    )
    assert after.status_code == 200
    assert after.headers["etag"] != before.headers["etag"]
    assert [e["name"] for e in after.json()] == ["waiting"]


def test_the_queue_etag_ignores_waiting_seconds_and_entries_say_when_they_were_queued(
    harness: Harness,
) -> None:
    harness.submit(team="a", gpus=2, command=["sleep", "600"])
    harness.submit(team="b", gpus=2, command=["sleep", "600"])  # the 4 GPUs are all held
    task = harness.submit(team="a", gpus=1, command=["sleep", "600"], name="behind")
    harness.cycle()
    first = harness.http.get("/api/v1/queue", headers=harness.admin)
    (entry,) = first.json()
    assert entry["task_id"] == task["id"]
    assert entry["queued_at"] == task["queued_at"]
    assert first.headers["etag"].startswith('W/"')
    later = harness.http.get(
        "/api/v1/queue", headers={**harness.admin, "If-None-Match": first.headers["etag"]}
    )
    assert later.status_code == 304


def test_an_etag_of_another_callers_view_is_not_a_match(harness: Harness) -> None:
    harness.submit(team="a", gpus=1, command=["sleep", "600"])
    harness.submit(team="b", gpus=1, command=["sleep", "600"])
    harness.cycle()
    admin = harness.http.get("/api/v1/tasks", headers=harness.admin)
    member = harness.member_token("b")
    mine = harness.http.get("/api/v1/tasks", headers={**member, "If-None-Match": admin.headers["etag"]})
    assert mine.status_code == 200
    assert [t["team"] for t in mine.json()] == ["b"]


def test_task_pages_follow_the_link_header_to_the_end_newest_first(harness: Harness) -> None:
    ids = [
        str(harness.submit(team="a", gpus=1, command=["sleep", "600"], name=f"t{i}")["id"]) for i in range(7)
    ]
    seen: list[str] = []
    url: str | None = "/api/v1/tasks?limit=3&team=a"
    pages = 0
    while url is not None:
        page = harness.http.get(url, headers=harness.admin)
        assert page.status_code == 200
        assert isinstance(page.json(), list)
        seen += [t["id"] for t in page.json()]
        pages += 1
        link = page.headers.get("link")
        if link is None:
            assert "x-next-cursor" not in page.headers
            url = None
        else:
            assert link.endswith('>; rel="next"') and "team=a" in link
            url = link[1 : link.index(">")]
    assert seen == list(reversed(ids))
    assert pages == 3


def test_a_page_that_holds_the_last_task_has_no_next_link(harness: Harness) -> None:
    for i in range(3):
        harness.submit(team="a", gpus=1, command=["sleep", "600"], name=f"t{i}")
    page = harness.http.get("/api/v1/tasks?limit=3", headers=harness.admin)
    assert len(page.json()) == 3
    assert "link" not in page.headers


@pytest.mark.parametrize("cursor", ["-1", "abc", "1" * 19, str(2**31), "19799359261154"])
def test_a_malformed_cursor_is_refused(harness: Harness, cursor: str) -> None:
    response = harness.http.get(f"/api/v1/tasks?after={cursor}", headers=harness.admin)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "validation_error"
