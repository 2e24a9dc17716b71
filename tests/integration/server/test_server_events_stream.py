"""`GET /api/v1/events` through a real uvicorn server on loopback, on SQLite and PostgreSQL: events
arrive in order with their ids, `Last-Event-ID` resumes after one, a member sees only their team's,
a revoked token's stream ends, a disconnect gives back the stream's share of the server, a stop
with a stream open is prompt, and a bad resume point is a 422."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import insert
from tests.integration.server.conftest import LiveServer, member_credential

from gpucommons.api import sse
from gpucommons.server.auth.credentials import revoke_token
from gpucommons.store.models import TaskEventRow

HEARTBEAT_S = 0.5
EVENTS = "/api/v1/events"


@pytest.fixture
def server(tmp_path: Path, database_url: str) -> Iterator[LiveServer]:
    with LiveServer(tmp_path / "home", database_url, events_heartbeat_s=HEARTBEAT_S) as live:
        yield live


def member(server: LiveServer, team: str) -> tuple[dict[str, str], str]:
    return member_credential(server.ctx, team)


def submit(server: LiveServer, team: str, headers: dict[str, str] | None = None) -> str:
    r = httpx.post(
        server.url + "/api/v1/tasks",
        json={"team": team, "gpus": 1, "command": ["sleep", "600"]},
        headers=headers or server.headers,
    )
    assert r.status_code == 201, r.text
    task_id: str = r.json()["id"]
    return task_id


@dataclass
class Stream:
    """An open stream read by a thread of its own: its messages arrive in `messages`."""

    response: httpx.Response
    messages: queue.Queue[sse.Message | None] = field(default_factory=queue.Queue)
    comments: list[str] = field(default_factory=list)
    ended: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.lines = self.response.iter_lines()

    def first_line(self) -> str:
        return next(self.lines)

    def read(self) -> None:
        parser = sse.Parser()
        try:
            for line in self.lines:
                if line.startswith(":"):
                    self.comments.append(line)
                message = parser.line(line)
                if message is not None:
                    self.messages.put(message)
        except httpx.HTTPError:
            pass
        finally:
            self.ended.set()
            self.messages.put(None)

    def take(self, count: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        """The next `count` events' data (with the SSE `id` and `event` fields checked)."""
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while len(out) < count:
            message = self.messages.get(timeout=max(0.01, deadline - time.monotonic()))
            assert message is not None, f"the stream ended after {len(out)} of {count} events"
            data = json.loads(message.data)
            assert message.last_id == str(data["id"]) and message.event == data["kind"]
            out.append(data)
        return out

    def until(self, predicate: Any, timeout: float = 15.0) -> list[dict[str, Any]]:
        """Events up to and including the first that satisfies `predicate`."""
        out: list[dict[str, Any]] = []
        while not out or not predicate(out[-1]):
            out += self.take(1, timeout)
        return out


@pytest.fixture
def open_stream(server: LiveServer) -> Iterator[Any]:
    clients: list[httpx.Client] = []

    def open_(
        headers: dict[str, str] | None = None, params: dict[str, Any] | None = None, started: bool = True
    ) -> Stream:
        client = httpx.Client(base_url=server.url, timeout=httpx.Timeout(10.0, read=10.0))
        clients.append(client)
        request = client.build_request(
            "GET", "/api/v1/events", params=params, headers=headers or server.headers
        )
        response = client.send(request, stream=True)
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        stream = Stream(response)
        if started:  # the first line (`retry:`) comes once the stream has its starting point
            assert stream.first_line().startswith("retry:")
        threading.Thread(target=stream.read, daemon=True).start()
        return stream

    yield open_
    for client in clients:
        client.close()


def test_events_arrive_in_order_with_their_ids_and_resume_after_the_last_one(
    server: LiveServer, open_stream: Any
) -> None:
    stream = open_stream()
    tasks = [submit(server, team) for team in ("a", "b", "a")]
    seen = stream.until(lambda e: e["task_id"] == tasks[-1] and e["kind"] == "submitted")
    # The scheduler's thread admits them: their transitions follow.
    seen += stream.until(lambda e: e["kind"] == "transition" and e["task_id"] == tasks[-1])
    submitted = [e for e in seen if e["kind"] == "submitted"]
    assert [e["task_id"] for e in submitted] == tasks
    assert [e["team"] for e in submitted] == ["a", "b", "a"]
    assert set(submitted[0]) >= {"id", "task_id", "team", "at", "kind", "from_state", "to_state", "message"}
    ids = [e["id"] for e in seen]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)

    # Resuming after the second event gives exactly what followed it (and `Last-Event-ID` wins over
    # `after`, as a reconnecting EventSource sends both).
    mark = ids[1]
    resumed = open_stream(headers={**server.headers, "Last-Event-ID": str(mark)}, params={"after": 0})
    again = resumed.take(len([i for i in ids if i > mark]))
    assert [e["id"] for e in again] == [i for i in ids if i > mark]
    # `after=0` replays every event from the first.
    replay = open_stream(params={"after": 0, "timeout": 3})
    assert [e["id"] for e in replay.take(len(ids))] == ids


def test_a_member_sees_only_their_teams_events(server: LiveServer, open_stream: Any) -> None:
    headers_a, _ = member(server, "a")
    mine, everyone = open_stream(headers=headers_a), open_stream()
    other = submit(server, "b")
    own = submit(server, "a", headers_a)
    seen_all = everyone.until(lambda e: e["task_id"] == own)
    assert {e["task_id"] for e in seen_all} >= {other, own}
    seen_mine = mine.until(lambda e: e["task_id"] == own)
    assert {e["team"] for e in seen_mine} == {"a"} and other not in {e["task_id"] for e in seen_mine}
    # A team filter narrows the stream; a team the caller may not see gives an empty one.
    only_b = open_stream(params={"team": "b", "after": 0, "timeout": 2})
    assert {e["team"] for e in only_b.take(1)} == {"b"}
    none = open_stream(headers=headers_a, params={"team": "b", "after": 0, "timeout": 1})
    assert none.ended.wait(10) and none.messages.get(timeout=1) is None


def test_a_revoked_tokens_stream_ends_at_the_next_heartbeat(server: LiveServer, open_stream: Any) -> None:
    headers_a, token_id = member(server, "a")
    stream = open_stream(headers=headers_a)
    time.sleep(HEARTBEAT_S * 2.5)
    assert not stream.ended.is_set() and ": keep-alive" in stream.comments
    with server.ctx.db.session() as session:
        revoke_token(session, token_id, time.time())
    assert stream.ended.wait(HEARTBEAT_S * 6), "the stream of a revoked token went on"
    assert any("no longer valid" in c for c in stream.comments)
    r = httpx.get(server.url + "/api/v1/events", headers=headers_a)
    assert r.status_code == 401


def test_a_disconnect_gives_back_the_stream_and_the_watcher(server: LiveServer, open_stream: Any) -> None:
    feed, pool = server.ctx.events, server.ctx.db.engine.pool
    streams = [open_stream() for _ in range(3)]
    assert feed.streams == 3
    submit(server, "a")
    for s in streams:
        s.take(1)
    for s in streams:
        s.response.close()
    # Wait for all three: the scheduler and the committers check connections out for a moment too
    # (the submission above is admitted meanwhile), whereas one a stream kept stays out.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (
        feed.streams or _watcher_alive() or pool.checkedout()  # type: ignore[attr-defined]
    ):
        time.sleep(0.05)
    assert feed.streams == 0, "a closed stream is still counted"
    assert not _watcher_alive(), "the watcher runs with no stream open"
    assert pool.checkedout() == 0, "a stream kept a database connection"  # type: ignore[attr-defined]
    # The server still answers, and a new stream starts the watcher again.
    again = open_stream()
    task = submit(server, "b")
    assert again.until(lambda e: e["task_id"] == task)


def _watcher_alive() -> bool:
    return any(t.name == "event-feed" and t.is_alive() for t in threading.enumerate())


def test_a_stream_ends_after_its_timeout(server: LiveServer, open_stream: Any) -> None:
    began = time.monotonic()
    stream = open_stream(params={"timeout": 0.3})
    assert stream.ended.wait(5)
    assert time.monotonic() - began < 3


@pytest.mark.parametrize(
    ("params", "headers", "field"),
    [
        ({"after": -1}, {}, "after"),
        ({"after": "x"}, {}, "after"),
        ({"after": 2**31}, {}, "after"),
        ({}, {"Last-Event-ID": "abc"}, "last-event-id"),
        ({}, {"Last-Event-ID": "4294967295"}, "last-event-id"),
        ({"timeout": 0}, {}, "timeout"),
    ],
)
def test_a_bad_resume_point_is_a_validation_error(
    server: LiveServer, params: dict[str, Any], headers: dict[str, str], field: str
) -> None:
    r = httpx.get(server.url + "/api/v1/events", params=params, headers={**server.headers, **headers})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"]["code"] == "validation_error" and field in r.text


def test_the_server_stops_promptly_with_a_stream_open(tmp_path: Path, database_url: str) -> None:
    live = LiveServer(tmp_path / "home2", database_url)
    with live:
        client = httpx.Client(base_url=live.url, timeout=10)
        response = client.send(
            client.build_request("GET", "/api/v1/events", headers=live.headers), stream=True
        )
        stream = Stream(response)
        assert stream.first_line().startswith("retry:")
        threading.Thread(target=stream.read, daemon=True).start()
        began = time.monotonic()
    # `__exit__` asked the server to stop and joined its thread.
    assert not live.thread.is_alive() and time.monotonic() - began < 3
    assert stream.ended.wait(2), "the stream outlived the server"
    client.close()


def test_an_event_that_commits_after_a_later_one_still_comes_first(
    server: LiveServer, open_stream: Any, database_url: str
) -> None:
    """PostgreSQL hands out ids at insert: 42 may commit after 43. The stream waits at the hole."""
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite has one writer at a time: its ids commit in order")
    task = submit(server, "a")
    stream = open_stream()
    row = {"task_id": task, "at": time.time(), "kind": "warning"}
    with server.ctx.db.engine.connect() as slow, server.ctx.db.engine.connect() as fast:
        slow.execute(insert(TaskEventRow).values(**row, message="slow"))  # an id, not yet committed
        fast.execute(insert(TaskEventRow).values(**row, message="fast"))
        fast.commit()
        time.sleep(0.8)  # several polls of the watcher: it sees the later id, and waits
        assert stream.messages.empty(), "an event was sent past a hole in the ids"
        slow.commit()
    got = stream.take(2, timeout=5)
    assert [e["message"] for e in got] == ["slow", "fast"] and got[0]["id"] < got[1]["id"]
