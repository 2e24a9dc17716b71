"""schemathesis over /openapi.json against a real uvicorn server on loopback: no 5xx, ever, and every
4xx of our REST API in the error schema. Tasks run on the timer executor here, so that the random
commands schemathesis submits are never executed."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, given, settings
from tests.integration.server.conftest import SMALL_POLICY

from gpucommons.identity.roles import Role
from gpucommons.server.app import build_context, create_app
from gpucommons.server.auth.credentials import issue_token
from gpucommons.server.settings import Settings

pytestmark = pytest.mark.slow


class LiveServer:
    def __init__(self, home: Path) -> None:
        policy = home / "policy.yaml"
        home.mkdir(parents=True, exist_ok=True)
        policy.write_text(SMALL_POLICY)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        settings_ = Settings(home=home, policy=policy, executor="timer", port=self.port, isolation="logical")
        self.ctx = build_context(settings_)
        with self.ctx.db.session() as session:
            token = issue_token(
                session, name="fuzz", now=time.time(), subject="fuzz", role=Role.PLATFORM_ADMIN
            ).token
        self.headers = {"Authorization": f"Bearer {token}"}
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            create_app(context=self.ctx), host="127.0.0.1", port=self.port, log_level="error"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                httpx.get(self.url + "/healthz", timeout=1)
                return self
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError("the server did not start")

    def __exit__(self, *_exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer(tmp_path_factory.mktemp("fuzz") / "home") as server:
        yield server


MAX_EXAMPLES = 30
SIGN_OUT = {"/auth/logout", "/api/v1/auth/session"}


def test_no_request_makes_the_server_fail(live_server: LiveServer) -> None:
    """Every operation of the OpenAPI document, MAX_EXAMPLES generated requests each."""
    api = schemathesis.openapi.from_url(live_server.url + "/openapi.json")
    # Signing out revokes the presented token: fuzz those operations last, or all else meets a 401.
    operations = sorted(
        (result.ok() for result in api.get_all_operations()),
        key=lambda op: (op.path in SIGN_OUT, op.path, op.method),
    )
    assert len(operations) >= 10
    failures: list[str] = []
    answered: Counter[int] = Counter()
    seen: list[str] = []

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
        )
        def exercise(case: Any) -> None:
            # A valid token instead of a generated one (which would only ever meet a 401).
            generated = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
            case.headers = {**generated, **live_server.headers}
            response = case.call(base_url=live_server.url, timeout=10)
            answered[response.status_code // 100] += 1
            seen.append(f"{response.status_code} {case.method} {case.formatted_path}")
            where = f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:300]}"
            if response.status_code >= 500:
                failures.append(where)
            elif 400 <= response.status_code < 500 and case.formatted_path.startswith("/api/v1/"):
                body = response.json()
                if set(body) != {"error"} or not {"code", "message", "details"} <= set(body["error"]):
                    failures.append("not the error schema: " + where)

        exercise()
    assert not failures, "\n".join(failures[:20])
    assert answered[2] >= 100, (
        f"too few requests got past validation to mean anything: {answered}" + "\n".join(seen[::10])
    )
