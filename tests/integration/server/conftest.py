"""Fixtures for the control plane's integration tests: a real store (SQLite and PostgreSQL), a real
app with its scheduler driven by hand, real processes through the local executor."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient

from gpucommons.backends.ports import Clock, Executor
from gpucommons.identity.roles import Role
from gpucommons.server.app import build_context, create_app
from gpucommons.server.auth.credentials import issue_token
from gpucommons.server.context import ServerContext
from gpucommons.server.serving import CommonsServer
from gpucommons.server.settings import Settings
from gpucommons.testing.postgres import fresh_database

SMALL_POLICY = """
cluster:
  name: small
  pools:
    - {name: gpu, gpu_type: H100, nodes: 1, gpus_per_node: 4, price_per_gpu_hour: 2.00}
priority_classes:
  - {name: normal, value: 100, grace_period: 2s}
  - {name: high, value: 500, grace_period: 2s}
  - {name: careful, value: 300, grace_period: 2s, checkpoint_required: true}
  - {name: short, value: 200, grace_period: 1s, max_runtime: 1s, min_runtime: 0s}
default_priority_class: normal
teams:
  - name: a
    groups: [team-a]
    quota:
      gpu: {gpus: 2}
    preemption: {reclaim: any, within_team: lower_priority}
  - name: b
    groups: [team-b]
    quota:
      gpu: {gpus: 2}
    preemption: {reclaim: any, within_team: lower_priority}
"""


def _postgres_database() -> Iterator[str]:
    with fresh_database() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh empty database: SQLite in tmp_path, or a new PostgreSQL database dropped afterwards."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'commons.db'}"
    else:
        yield from _postgres_database()


def member_credential(
    ctx: ServerContext, team: str, subject: str | None = None
) -> tuple[dict[str, str], str]:
    """A new team member's token: the headers that present it, and its id (to revoke it)."""
    with ctx.db.session() as session:
        issued = issue_token(
            session,
            name=f"member-{team}",
            now=time.time(),
            subject=subject or f"svc-{team}",
            role=Role.TEAM_MEMBER,
            team=team,
        )
    return {"Authorization": f"Bearer {issued.token}"}, issued.row.id


class Harness:
    """A real app on a real store; the test drives the scheduler's cycles itself."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        self.http = TestClient(create_app(context=ctx), raise_server_exceptions=False)
        self.http.__enter__()
        with ctx.db.session() as session:
            self.admin_token = issue_token(
                session, name="admin", now=time.time(), subject="admin", role=Role.PLATFORM_ADMIN
            ).token
        self.admin = {"Authorization": f"Bearer {self.admin_token}"}

    def member_token(self, team: str, subject: str | None = None) -> dict[str, str]:
        return member_credential(self.ctx, team, subject)[0]

    def submit(self, headers: dict[str, str] | None = None, **body: object) -> dict[str, object]:
        response = self.http.post("/api/v1/tasks", json=body, headers=headers or self.admin)
        assert response.status_code == 201, response.text
        return dict(response.json())

    def task(self, task_id: str) -> dict[str, object]:
        response = self.http.get(f"/api/v1/tasks/{task_id}", headers=self.admin)
        assert response.status_code == 200, response.text
        return dict(response.json())

    def cycle(self) -> None:
        self.ctx.scheduler.cycle()

    def run_until(
        self, predicate: Callable[[], bool], timeout: float = 15.0, what: str = "condition"
    ) -> None:
        """Cycle the scheduler until `predicate()` holds (real processes take real time)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.cycle()
            if predicate():
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")

    def wait_state(self, task_id: str, *states: str, timeout: float = 15.0) -> dict[str, object]:
        self.run_until(lambda: self.task(task_id)["state"] in states, timeout, f"{task_id} to be {states}")
        return self.task(task_id)

    def close(self) -> None:
        self.http.__exit__(None, None, None)
        self.ctx.db.dispose()


@pytest.fixture
def make_harness(tmp_path: Path, database_url: str) -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def make(
        policy: str = SMALL_POLICY,
        executor: Executor | None = None,
        clock: Clock | None = None,
        **settings: object,
    ) -> Harness:
        policy_file = tmp_path / f"policy-{len(made)}.yaml"
        policy_file.write_text(policy)
        config = Settings(
            home=tmp_path / "home",
            database_url=database_url,
            policy=policy_file,
            run_scheduler=False,
            isolation="logical",
            **settings,  # type: ignore[arg-type]
        )
        harness = Harness(build_context(config, executor=executor, clock=clock))
        made.append(harness)
        return harness

    yield make
    for h in made:
        h.close()


@pytest.fixture
def harness(make_harness: Callable[..., Harness]) -> Harness:
    return make_harness()


class LiveServer:
    """A real uvicorn server on loopback (the timer executor: submitted commands never run), with a
    platform admin's token in `headers`; `settings` override the server's (`Settings` fields)."""

    def __init__(self, home: Path, database_url: str | None = None, **settings: Any) -> None:
        policy = home / "policy.yaml"
        home.mkdir(parents=True, exist_ok=True)
        policy.write_text(SMALL_POLICY)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        settings_ = Settings(
            home=home, database_url=database_url, policy=policy, executor="timer", port=self.port,
            isolation="logical",
            # The fuzzer presents bad credentials on purpose (to see them refused) and would soon be
            # throttled; the throttle has its own tests.
            auth_failure_limit=0,
            **settings,
        )  # fmt: skip
        self.ctx = build_context(settings_)
        with self.ctx.db.session() as session:
            token = issue_token(
                session, name="fuzz", now=time.time(), subject="fuzz", role=Role.PLATFORM_ADMIN
            ).token
        self.headers = {"Authorization": f"Bearer {token}"}
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = create_app(context=self.ctx)
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="error")
        # The server `commons up` runs: it ends open event streams when it stops.
        self.server = CommonsServer(config, self.ctx)
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
        self.ctx.db.dispose()
