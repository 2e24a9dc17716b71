"""Request size limits: a body over `max_body_bytes` is refused with 413 before it is read — before the
credential is even looked at — whether its length is declared or it streams in chunks; task commands
and names have bounds of their own. Against a real uvicorn server over a real socket, so "before it is
read" is observed on the wire: the 413 arrives while the client has not sent a byte of the body."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.integration.server.conftest import SMALL_POLICY, Harness
from tests.integration.server.test_server_tasks_api import assert_error

from gpucommons.api.schemas import MAX_ARG_CHARS, MAX_COMMAND_ARGS, MAX_COMMAND_CHARS
from gpucommons.server.app import build_context, create_app
from gpucommons.server.settings import Settings
from gpucommons.testing.identity import live_server

LIMIT = 64 * 1024


@pytest.fixture
def server(tmp_path: Path, database_url: str) -> Iterator[tuple[str, dict[str, str]]]:
    (tmp_path / "policy.yaml").write_text(SMALL_POLICY)
    settings = Settings(
        home=tmp_path / "home", database_url=database_url, policy=tmp_path / "policy.yaml",
        run_scheduler=False, isolation="logical", executor="timer", max_body_bytes=LIMIT,
    )  # fmt: skip
    harness = Harness(build_context(settings))
    try:
        with live_server(create_app(context=harness.ctx)) as url:
            yield url, harness.admin
    finally:
        harness.close()


def _raw_request(url: str, head: str) -> str:
    """Send only the request line and headers; return what the server answers without a body."""
    parts = httpx.URL(url)
    with socket.create_connection((parts.host, parts.port), timeout=10) as conn:
        conn.sendall(head.encode())
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
    return answer.decode()


def test_a_declared_oversized_body_is_refused_before_it_is_sent_or_authenticated(
    server: tuple[str, dict[str, str]],
) -> None:
    url, _ = server
    fifty_mb = 50 * 1024 * 1024
    for path in ("/api/v1/tasks", "/scim/v2/Users"):
        head = (
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {fifty_mb}\r\n\r\n"
        )
        answer = _raw_request(url, head)  # no credential, and not one byte of the body
        status_line, _, rest = answer.partition("\r\n")
        assert " 413 " in status_line, answer[:300]
        body = json.loads(rest.split("\r\n\r\n", 1)[1])
        if path.startswith("/scim"):
            assert body["status"] == "413"
        else:
            assert body["error"]["code"] == "payload_too_large"
            assert body["error"]["details"]["limit_bytes"] == LIMIT


def test_a_chunked_body_is_cut_off_at_the_limit(server: tuple[str, dict[str, str]]) -> None:
    url, admin = server
    parts = httpx.URL(url)
    chunk = b" " * (16 * 1024)
    head = (
        "POST /api/v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: {admin['Authorization']}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    sent, answer = 0, b""
    with socket.create_connection((parts.host, parts.port), timeout=10) as conn:
        conn.sendall(head.encode())
        conn.settimeout(0.2)
        while sent < 50 * LIMIT and not answer:
            try:
                conn.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            except OSError:  # the server closed the connection after answering
                break
            sent += len(chunk)
            try:
                answer = conn.recv(65536)
            except TimeoutError:
                continue
        conn.settimeout(10)
        while answer and not answer.rstrip().endswith(b"}"):
            more = conn.recv(65536)
            if not more:
                break
            answer += more
    assert b" 413 " in answer.split(b"\r\n", 1)[0], answer[:300]
    assert sent <= LIMIT + 4 * len(chunk), f"the server read {sent} bytes before refusing"
    assert b'"payload_too_large"' in answer
    with httpx.Client(base_url=url, timeout=10) as client:
        small = client.post(
            "/api/v1/tasks", json={"team": "a", "gpus": 1, "command": ["sleep", "1"]}, headers=admin
        )
        assert small.status_code == 201, small.text


def test_the_limit_is_a_setting_with_a_one_mebibyte_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().max_body_bytes == 1 << 20
    monkeypatch.setenv("COMMONS_MAX_BODY_BYTES", "2048")
    assert Settings().max_body_bytes == 2048


def test_command_and_name_lengths_are_bounded(harness: Harness) -> None:
    def refused(**changes: object) -> str:
        body: dict[str, object] = {"team": "a", "gpus": 1, "command": ["sleep", "1"], **changes}
        response = harness.http.post("/api/v1/tasks", json=body, headers=harness.admin)
        return str(assert_error(response, 422, "validation_error")["message"])

    assert "body.command" in refused(command=["x"] * (MAX_COMMAND_ARGS + 1))
    assert "body.command.0" in refused(command=["x" * (MAX_ARG_CHARS + 1)])
    assert f"at most {MAX_COMMAND_CHARS}" in refused(command=["x" * MAX_ARG_CHARS] * 3)
    assert "body.name" in refused(name="n" * 201)
    assert "body.team" in refused(team="t" * 64)
    fits = {"team": "a", "gpus": 1, "command": ["x" * MAX_ARG_CHARS, "y" * MAX_ARG_CHARS], "name": "n" * 200}
    assert harness.http.post("/api/v1/tasks", json=fits, headers=harness.admin).status_code == 201
