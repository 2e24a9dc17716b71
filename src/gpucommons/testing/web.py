"""Test support for the dashboard: a real `commons up` in a subprocess, and Debian's chromium.

    with running_server(policy, home) as server:            # commons up on a free loopback port
        server.client().submit(...)                         # the typed client, as the admin
        token = server.team_token("beta")                   # a member of team beta
    with chromium() as browser: page = browser.new_page()    # raises ChromiumMissing without one

Used by tests/e2e/web and bench/web_dashboard.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import httpx

from gpucommons.client.http import CommonsClient
from gpucommons.testing.oidc import free_port

if TYPE_CHECKING:
    from playwright.sync_api import Browser

__all__ = [
    "CHROMIUM_ARGS",
    "ChromiumMissing",
    "Server",
    "chromium",
    "chromium_path",
    "free_port",
    "running_server",
    "stop_process",
    "wait_for",
]

#: RECIPES.md: without the background-networking flags chromium keeps calling blocked hosts.
#: (Playwright adds --headless and a fresh --user-data-dir of its own.)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ACTIVE_STATES = ["pending", "admitted", "running", "preempting"]
T = TypeVar("T")


class ChromiumMissing(RuntimeError):
    """No chromium binary or no Playwright; the message says how to get them."""


def chromium_path() -> Path:
    """Debian's chromium, or `$COMMONS_CHROMIUM` (never a browser Playwright downloaded)."""
    return Path(os.environ.get("COMMONS_CHROMIUM", "/usr/bin/chromium"))


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    """Headless chromium driven by Playwright's synchronous API."""
    path = chromium_path()
    if not path.exists():
        raise ChromiumMissing(
            f"Debian's chromium is not at {path}: `apt-get install -y chromium` "
            "(scripts/setup.sh --dev does it), or point COMMONS_CHROMIUM at one"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        raise ChromiumMissing(f"Playwright is not installed ({exc}): pip install playwright") from None
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(path), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


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

        subject = name or f"{team}-{role}"
        db = Database(f"sqlite:///{self.home / 'commons.db'}")
        try:
            with db.session() as session:
                issued = issue_token(
                    session,
                    name=subject,
                    now=time.time(),
                    subject=subject,
                    role=Role(role),
                    team=team,
                    created_by="dashboard tests",
                )
                return issued.token
        finally:
            db.dispose()


@contextlib.contextmanager
def running_server(
    policy: Path,
    home: Path,
    port: int | None = None,
    env: dict[str, str] | None = None,
    executor: str = "local",
) -> Iterator[Server]:
    """`commons up` on a loopback port with `policy` and `home`; every task cancelled, then stopped."""
    port = port or free_port()
    log = (home / "server.log").open("wb")
    # Logical isolation: the dashboard's tests are not about Unix team accounts (which, as root,
    # cannot reach a home under pytest's private temporary directory).
    environment = {**os.environ, "COMMONS_HOME": str(home), "COMMONS_ISOLATION": "logical", **(env or {})}
    environment.pop("COMMONS_DATABASE_URL", None)
    command = [sys.executable, "-m", "gpucommons", "up", "--policy", str(policy), "--home", str(home)]
    process = subprocess.Popen(
        [*command, "--port", str(port), "--tick", "0.2", "--executor", executor],
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
        server = Server(url=url, home=home, admin_token=token, process=process)
        yield server
        _cancel_everything(server)
    finally:
        stop_process(process)
        log.close()


def _cancel_everything(server: Server) -> None:
    """Leave no task processes behind: cancel every task that still runs or waits."""
    with server.client() as client:
        for task in client.tasks(states=ACTIVE_STATES, limit=10_000):
            with contextlib.suppress(Exception):  # already ending: nothing to do
                client.cancel(task.id)
        with contextlib.suppress(AssertionError):
            wait_for("every task to stop", lambda: not client.tasks(states=ACTIVE_STATES[1:]), timeout=30)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """TERM the process group a test started, KILL it if it lingers."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)
