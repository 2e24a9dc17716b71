"""The CLI against a live server: stable JSON, bad input ends with `error: ...` and exit 1, never a
traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from tests.e2e.server.conftest import Platform

pytestmark = pytest.mark.slow


def commons(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpucommons", *args], capture_output=True, text=True, env=env, timeout=60
    )


def assert_clean_failure(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr + done.stdout
    for word in words:
        assert word in done.stderr, done.stderr


def test_without_a_server_commands_fail_cleanly() -> None:
    env = {**os.environ, "COMMONS_URL": "http://127.0.0.1:9", "COMMONS_TOKEN": "x"}
    assert_clean_failure(commons("tasks", env=env), "error: cannot reach")
    assert_clean_failure(commons("usage", "export", "--from", "yesterday", env=env), "--from", "ISO-8601")
    no_task = {k: v for k, v in env.items() if k != "COMMONS_TASK_ID"}
    assert_clean_failure(commons("checkpoint", env=no_task), "COMMONS_TASK_ID")


def test_cli_against_the_live_server(platform_factory: object, tmp_path: Path) -> None:
    platform: Platform = platform_factory()  # type: ignore[operator]
    env = platform.env()
    unknown = commons("submit", "--team", "nope", "--gpus", "1", "--", "true", env=env)
    assert_clean_failure(unknown, "unknown team")
    assert unknown.stderr.count("unknown team") == 1, unknown.stderr  # said once, not echoed per field
    assert_clean_failure(commons("tasks", env={**env, "COMMONS_TOKEN": ""}), "COMMONS_TOKEN is empty")
    no_token = {k: v for k, v in env.items() if k != "COMMONS_TOKEN"}
    no_token |= {"HOME": str(tmp_path), "COMMONS_HOME": str(tmp_path / "no-server-here")}
    assert_clean_failure(commons("tasks", env=no_token), "no token", "COMMONS_TOKEN")
    assert_clean_failure(
        commons("invoice", "--month", "2026-11", "--format", "html", env=env), "add --team", "your teams"
    )
    assert_clean_failure(
        commons("submit", "--team", "a", "--gpus", "1", "--checkpoint", "often", "--", "true", env=env),
        "checkpoint",
    )
    assert_clean_failure(commons("cancel", "t-missing", env=env), "no task")
    bad = tmp_path / "bad.yaml"
    bad.write_text(platform.policy.read_text().replace("gpus: 2}", "gpus: 99}"))
    assert_clean_failure(commons("policy", "apply", str(bad), env=env), "nothing was applied")

    done = commons("submit", "--team", "a", "--gpus", "1", "--name", "hello", "--", "echo", "hi", env=env)
    assert done.returncode == 0, done.stderr
    task_id = done.stdout.strip().splitlines()[-1]
    platform.wait(lambda: platform.task(task_id)["state"] == "succeeded", what="the task to succeed")
    # On the server's machine, as its user, the CLI finds the bootstrap admin token by itself.
    local = {k: v for k, v in env.items() if k != "COMMONS_TOKEN"} | {"COMMONS_HOME": str(platform.home)}
    assert commons("tasks", "--json", env=local).returncode == 0
    piped = commons("tasks", env=env).stdout.splitlines()  # not a terminal: plain, every column
    assert piped[0].split() == ["ID", "TEAM", "NAME", "STATE", "PRIO", "GPUS", "POOL", "RESTARTS", "MESSAGE"]
    assert piped[1].split()[:4] == [task_id, "a", "hello", "succeeded"]
    listed = json.loads(commons("tasks", "--json", env=env).stdout)
    assert isinstance(listed, list) and listed[0]["id"] == task_id
    assert {"id", "team", "state", "gpus", "priority", "restart_count", "submitted_at"} <= set(listed[0])
    assert "hi" in commons("logs", task_id, env=env).stdout
    assert "hi" in commons("logs", "-f", task_id, env=env).stdout  # ends with the task
    teams = commons("teams", env=env)
    assert teams.returncode == 0 and "a" in teams.stdout
    good = tmp_path / "good.yaml"
    good.write_text(platform.policy.read_text())
    dry = commons("policy", "apply", str(good), "--dry-run", env=env)
    assert dry.returncode == 0 and "would replace version 1" in dry.stdout, dry.stdout
    applied = commons("policy", "apply", str(good), env=env)
    assert applied.returncode == 0 and "applied policy version 2" in applied.stdout, applied.stdout


def test_queue_shows_its_first_tasks_and_says_more_wait(platform_factory: object) -> None:
    platform: Platform = platform_factory()  # type: ignore[operator]
    env = platform.env()
    holders = [platform.submit("--team", t, "--gpus", "2", "--", "sleep", "600") for t in "ab"]
    waiting = [platform.submit("--team", "a", "--gpus", "1", "--", "sleep", "600") for _ in range(3)]
    platform.wait(lambda: all(platform.task(h)["state"] == "running" for h in holders), what="the holders")
    platform.wait(
        lambda: len(json.loads(commons("queue", "--json", env=env).stdout)) == 3, what="three to queue"
    )
    page = commons("queue", "--limit", "2", "--json", env=env)
    assert page.returncode == 0, page.stderr
    assert [e["task_id"] for e in json.loads(page.stdout)] == waiting[:2]
    assert "the first 2 waiting tasks; more wait after position" in page.stderr
    whole = commons("queue", "--limit", "3", env=env)
    assert whole.returncode == 0 and "more wait" not in whole.stderr
    zero = commons("queue", "--limit", "0", env=env)  # a usage error, as click reports them: exit 2
    assert zero.returncode == 2 and "--limit" in zero.stderr and "Traceback" not in zero.stderr
    for task_id in holders + waiting:
        commons("cancel", task_id, env=env)


def test_tasks_watch_prints_tables_when_piped(platform_factory: object) -> None:
    platform: Platform = platform_factory()  # type: ignore[operator]
    watch = subprocess.Popen(
        [sys.executable, "-m", "gpucommons", "tasks", "--watch"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=platform.env(),
    )
    try:
        assert watch.stdout is not None
        first, header = watch.stdout.readline(), watch.stdout.readline()
    finally:
        watch.terminate()
        watch.wait(10)
    assert first.startswith("# ") and header.split()[:2] == ["ID", "TEAM"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_commons_up_stops_promptly_with_an_event_stream_open(platform_factory: object, signum: int) -> None:
    """uvicorn waits for open responses before it stops; the event streams end as the stop begins."""
    platform: Platform = platform_factory(executor="timer")  # type: ignore[operator]
    headers = {"Authorization": f"Bearer {platform.token}"}
    with (
        httpx.Client(base_url=platform.url, headers=headers, timeout=10) as client,
        client.stream("GET", "/api/v1/events") as response,
    ):
        assert response.status_code == 200
        lines = response.iter_lines()
        assert next(lines).startswith("retry:")
        assert platform.proc is not None
        began = time.monotonic()
        platform.proc.send_signal(signum)
        # uvicorn raises the signal again once it has shut down: SIGTERM ends the process by it.
        assert platform.proc.wait(10) in (0, -signum), platform.server_log()
        took = time.monotonic() - began
        rest = list(lines)  # the stream ended cleanly: no error, no half-sent message
        assert all(line == "" or line.startswith(":") for line in rest), rest
    assert took < 3, f"commons up took {took:.1f} s to stop with a stream open"
