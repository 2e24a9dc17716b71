"""A real server (`commons up` in a subprocess) and Debian's chromium driven by Playwright.

The browser tests skip, saying why, when chromium or Playwright is missing. Screenshots go to pytest's
temporary directory, or to `$COMMONS_SCREENSHOT_DIR` when it is set (that is how docs/img/dashboard.png
is made: `COMMONS_SCREENSHOT_DIR=docs/img pytest tests/e2e/web -k overview`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from gpucommons.client.http import CommonsClient

HERE = Path(__file__).parent
POLICY = HERE / "dashboard-policy.yaml"
CHROMIUM = Path(os.environ.get("COMMONS_CHROMIUM", "/usr/bin/chromium"))
#: RECIPES.md: without the background-networking flags chromium keeps calling blocked hosts.
#: (Playwright adds --headless and its own fresh --user-data-dir.)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 20.0, every: float = 0.2) -> T:
    """Poll `probe` until it returns something truthy; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    url: str
    home: Path
    admin_token: str
    process: subprocess.Popen[bytes]

    def client(self, token: str | None = None) -> CommonsClient:
        return CommonsClient(self.url, token or self.admin_token)

    def team_token(self, team: str, role: str = "team_member", name: str = "") -> str:
        """A service token acting as a member (or admin) of `team`, issued in the server's own store."""
        from gpucommons.identity.principal import Role
        from gpucommons.server.auth.credentials import issue_token
        from gpucommons.store.db import Database

        db = Database(f"sqlite:///{self.home / 'commons.db'}")
        try:
            with db.session() as session:
                issued = issue_token(
                    session,
                    name=name or f"{team}-{role}",
                    now=time.time(),
                    subject=name or f"{team}-{role}",
                    role=Role(role),
                    team=team,
                    created_by="dashboard tests",
                )
                return issued.token
        finally:
            db.dispose()


@contextlib.contextmanager
def running_server(
    home: Path, port: int | None = None, env: dict[str, str] | None = None
) -> Iterator[Server]:
    """`commons up` on a loopback port with the small test policy and `home`; stopped on exit."""
    port = port or free_port()
    log = (home / "server.log").open("wb")
    # Logical isolation: these tests are about what the dashboard shows, not about Unix team accounts
    # (which, as root, cannot reach a home under pytest's private temporary directory).
    environment = {**os.environ, "COMMONS_HOME": str(home), "COMMONS_ISOLATION": "logical", **(env or {})}
    environment.pop("COMMONS_DATABASE_URL", None)
    command = [sys.executable, "-m", "gpucommons", "up", "--policy", str(POLICY), "--home", str(home)]
    process = subprocess.Popen(
        [*command, "--port", str(port), "--tick", "0.2"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=environment,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"commons up exited: {(home / 'server.log').read_text()[-3000:]}")
        try:
            return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for("the server to answer /healthz", healthy, timeout=60)
        token = (home / "admin-token").read_text().strip()
        srv = Server(url=url, home=home, admin_token=token, process=process)
        yield srv
        _cancel_everything(srv)
    finally:
        _stop(process)
        log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("commons-home")) as srv:
        yield srv


def _cancel_everything(srv: Server) -> None:
    """Leave no `sleep` processes behind: cancel every task that still runs or waits."""
    with srv.client() as client:
        for task in client.tasks(states=["pending", "admitted", "running", "preempting"]):
            with contextlib.suppress(Exception):  # already ending: nothing to do
                client.cancel(task.id)
        with contextlib.suppress(AssertionError):
            wait_for(
                "every task to stop",
                lambda: not client.tasks(states=["admitted", "running", "preempting"]),
                timeout=30,
            )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(
            f"Debian's chromium is not at {CHROMIUM}: `apt-get install -y chromium` "
            "(scripts/setup.sh --dev does it), or point COMMONS_CHROMIUM at one"
        )
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed (pip install playwright)"
    )
    with sync_api.sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where this test's screenshots go."""
    target = Path(os.environ.get("COMMONS_SCREENSHOT_DIR", "") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    return target
