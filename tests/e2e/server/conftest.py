"""`commons up` as a real subprocess on a free port, and the `commons` CLI against it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

TWO_TEAMS = """
cluster:
  name: e2e
  pools:
    - {name: gpu, gpu_type: H100, nodes: 1, gpus_per_node: 4, price_per_gpu_hour: 2.00}
priority_classes:
  - {name: normal, value: 100, grace_period: 10s}
default_priority_class: normal
teams:
  - name: a
    quota:
      gpu: {gpus: 2}
    preemption: {reclaim: any, within_team: lower_priority}
  - name: b
    quota:
      gpu: {gpus: 2}
    preemption: {reclaim: any, within_team: lower_priority}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Platform:
    """One `commons up` process (restartable) and a CLI runner pointed at it."""

    def __init__(
        self,
        home: Path,
        policy: Path,
        executor: str = "local",
        *,
        database_url: str | None = None,
        name: str = "server",
    ) -> None:
        self.home = home
        self.policy = policy
        #: A replica of several on one PostgreSQL database (they may share `home`: same machine).
        self.database_url = database_url
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.executor = executor
        self.proc: subprocess.Popen[bytes] | None = None
        self.token = ""
        self.starts = 0
        #: More `commons up` options and environment (e.g. another backend, a database URL).
        self.extra_args: list[str] = []
        self.extra_env: dict[str, str] = {}

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(COMMONS_URL=self.url, COMMONS_TOKEN=self.token, COMMONS_ISOLATION="logical")
        env.pop("COMMONS_HOME", None)
        env.pop("COMMONS_DATABASE_URL", None)
        if self.database_url:
            env["COMMONS_DATABASE_URL"] = self.database_url
        env.update(self.extra_env)
        return env

    def start(self, timeout: float = 30.0) -> None:
        self.starts += 1
        log = self.log_path().open("wb")
        argv = [
            sys.executable,
            "-m",
            "gpucommons",
            "up",
            "--policy",
            str(self.policy),
            "--home",
            str(self.home),
        ]
        argv += ["--port", str(self.port), "--tick", "0.2", "--executor", self.executor, *self.extra_args]
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"commons up exited with {self.proc.returncode}: {self.server_log()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    self.token = (self.home / "admin-token").read_text().strip()
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError("commons up did not answer /healthz in time")

    def log_path(self) -> Path:
        return self.home.parent / f"{self.name}-{self.starts}.log"

    def server_log(self) -> str:
        return self.log_path().read_text(errors="replace")

    def health(self) -> dict[str, object]:
        return dict(httpx.get(self.url + "/healthz", timeout=5).json())

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "gpucommons", *args],
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=60,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"commons {' '.join(args)} failed ({done.returncode}): {done.stderr}{done.stdout}"
            )
        return done

    def submit(self, *args: str) -> str:
        """`commons submit ...`: returns the id printed alone on the last line."""
        return self.cli("submit", *args).stdout.strip().splitlines()[-1]

    def task(self, task_id: str) -> dict[str, object]:
        return dict(self.api(f"/api/v1/tasks/{task_id}"))  # type: ignore[call-overload]

    def states(self) -> dict[str, str]:
        """Every task's state, from one `commons tasks --json` (the CLI's stable JSON list)."""
        tasks = json.loads(self.cli("tasks", "--json", "--limit", "10000").stdout)
        return {t["id"]: t["state"] for t in tasks}

    def api(self, path: str) -> object:
        response = httpx.get(self.url + path, headers={"Authorization": f"Bearer {self.token}"}, timeout=10)
        response.raise_for_status()
        return response.json()

    def wait(self, predicate: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}\n{self.server_log()[-3000:]}")


@pytest.fixture
def platform_factory(tmp_path: Path) -> Iterator[Callable[..., Platform]]:
    made: list[Platform] = []

    def make(policy: str = TWO_TEAMS, executor: str = "local") -> Platform:
        policy_file = tmp_path / "policy.yaml"
        policy_file.write_text(policy)
        platform = Platform(tmp_path / "home", policy_file, executor)
        made.append(platform)
        platform.start()
        return platform

    yield make
    for p in made:
        p.stop()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for replicas to share (skips when no server answers)."""
    from tests.integration.server.conftest import _postgres_database

    yield from _postgres_database()


@pytest.fixture
def replicas(tmp_path: Path, postgres_url: str) -> Iterator[Callable[..., list[Platform]]]:
    """`make(n, policy)`: n `commons up` on one PostgreSQL database and one home (one machine),
    started one after the other (so the first leads)."""
    made: list[Platform] = []

    def make(n: int = 2, policy: str = TWO_TEAMS, executor: str = "local") -> list[Platform]:
        policy_file = tmp_path / "policy.yaml"
        policy_file.write_text(policy)
        for i in range(n):
            platform = Platform(
                tmp_path / "home", policy_file, executor, database_url=postgres_url, name=f"replica{i}"
            )
            made.append(platform)
            platform.start()
        return made[-n:]

    yield make
    for p in made:
        p.stop()
