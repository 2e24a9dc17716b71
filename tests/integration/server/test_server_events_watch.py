"""`commons tasks --watch` (piped: a plain table per refresh) against a real server: it refreshes
when an event arrives and not on a timer, and against a server without the event stream (an older
one) it says so once and polls every 2 s as it used to."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.integration.server.conftest import LiveServer


@dataclass
class Watch:
    process: subprocess.Popen[str]
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    tables: int = 0
    text: str = ""

    def pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def read_for(self, seconds: float) -> None:
        """Take what it printed in the next `seconds`."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                return
            self.text += line
            self.tables += line.startswith("# ")

    def read_until(self, word: str, timeout: float = 10.0) -> float:
        """Seconds until `word` was printed."""
        began = time.monotonic()
        while word not in self.text:
            assert time.monotonic() - began < timeout, f"{word!r} never printed:\n{self.text[-2000:]}"
            self.read_for(0.05)
        return time.monotonic() - began


@pytest.fixture
def watching(tmp_path: Path) -> Iterator[tuple[LiveServer, list[Watch]]]:
    watches: list[Watch] = []
    live = LiveServer(tmp_path / "home")
    yield live, watches
    for w in watches:
        w.process.terminate()
        w.process.wait(10)


def start_watch(live: LiveServer, watches: list[Watch], *args: str) -> Watch:
    env = {**os.environ, "COMMONS_URL": live.url, "COMMONS_TOKEN": live.headers["Authorization"][7:]}
    process = subprocess.Popen(
        [sys.executable, "-m", "gpucommons", "tasks", "--watch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    watch = Watch(process)
    watches.append(watch)
    threading.Thread(target=watch.pump, daemon=True).start()
    return watch


def submit(live: LiveServer, team: str = "a") -> str:
    r = httpx.post(
        live.url + "/api/v1/tasks",
        json={"team": team, "gpus": 1, "command": ["sleep", "600"]},
        headers=live.headers,
    )
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def test_watch_refreshes_on_an_event_and_not_on_a_timer(watching: tuple[LiveServer, list[Watch]]) -> None:
    live, watches = watching
    with live:
        watch = start_watch(live, watches)
        watch.read_until("ID")
        watch.read_for(1.5)  # the first table, and the one when the stream opened
        before = watch.tables
        watch.read_for(4.5)  # polling every 2 s would print two more
        assert watch.tables == before, watch.text
        task = submit(live)
        assert watch.read_until(task) < 3
        assert live.ctx.events.streams == 1


def test_watch_polls_a_server_without_the_event_stream(watching: tuple[LiveServer, list[Watch]]) -> None:
    live, watches = watching
    app = live.server.config.app

    async def older_server(scope: Any, receive: Any, send: Any) -> None:
        """The same app, as a version without the event stream answers its path: 404."""
        if scope["type"] == "http" and scope["path"] == "/api/v1/events":
            scope = {**scope, "path": "/api/v1/no-such-route", "raw_path": b"/api/v1/no-such-route"}
        await app(scope, receive, send)

    live.server.config.app = older_server
    with live:
        watch = start_watch(live, watches)
        watch.read_until("ID")
        watch.read_for(5)
        assert 2 <= watch.tables <= 4, watch.text  # the first table, then one every 2 s
        task = submit(live)
        watch.read_until(task, timeout=4)
        watch.process.terminate()
        assert watch.process.stderr is not None
        err = watch.process.stderr.read()
    assert err.count("no event stream") == 1, err
