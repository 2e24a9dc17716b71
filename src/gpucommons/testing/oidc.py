"""Test support for sign-in: the loopback OpenID provider (tests/oidc, node-oidc-provider) and a
scripted browser that signs in on its development login and consent pages.

    with oidc_provider(redirect_uri) as issuer: ...        # skips the test when node/npm are missing
    final_url = Browser("alice").visit(url, stop_at="http://127.0.0.1:8080/auth/callback")
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path

import httpx

PROVIDER_DIR = Path(__file__).resolve().parents[3] / "tests" / "oidc"
WEB_CLIENT = ("commons-web", "commons-web-secret")
CLI_CLIENT = "commons-cli"


class ProviderMissing(RuntimeError):
    """node, or the oidc-provider npm package, is not installed; the message says how to get it."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def oidc_provider(web_redirect_uri: str) -> Iterator[str]:
    """Run tests/oidc/provider.mjs on a free loopback port; yields its issuer URL."""
    node = shutil.which("node")
    if node is None:
        raise ProviderMissing("node is not installed (apt-get install nodejs)")
    if not (PROVIDER_DIR / "node_modules" / "oidc-provider").is_dir():
        raise ProviderMissing(f"the oidc-provider package is missing: cd {PROVIDER_DIR} && npm install")
    port = free_port()
    proc = subprocess.Popen(
        [node, str(PROVIDER_DIR / "provider.mjs"), str(port), web_redirect_uri],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    issuer = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                output = proc.stdout.read() if proc.stdout else ""
                raise RuntimeError(f"the OpenID provider did not start:\n{output}")
            time.sleep(0.1)
        yield issuer
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


class _Form(HTMLParser):
    """The first <form> of a page: its action, method and inputs (hidden ones with their values)."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.method = "get"
        self.fields: dict[str, str] = {}
        self._inside = False
        self._done = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and not self._done and self.action is None:
            self.action, self.method, self._inside = a.get("action", ""), a.get("method", "get").lower(), True
        elif tag == "input" and self._inside and a.get("name"):
            self.fields[a["name"]] = a.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self._inside:
            self._inside, self._done = False, True


class Browser:
    """Plays a person at the development login: any form gets `login`/`password`/`user_code` filled."""

    def __init__(self, login: str, user_code: str | None = None) -> None:
        self.login = login
        self.user_code = user_code
        self.http = httpx.Client(follow_redirects=False, timeout=10)
        self.pages: list[str] = []

    def visit(self, url: str, stop_at: str | None = None, max_steps: int = 20) -> str:
        """Follow redirects and submit forms from `url` until a redirect to `stop_at` (returned, not
        fetched) or a page without a form (its URL is returned)."""
        response = self.http.get(url)
        for _ in range(max_steps):
            if response.is_redirect:
                target = str(response.url.join(response.headers["location"]))
                if stop_at is not None and target.startswith(stop_at):
                    return target
                response = self.http.get(target)
                continue
            self.pages.append(response.text)
            form = _Form()
            form.feed(response.text)
            if form.action is None:
                return str(response.url)
            data = dict(form.fields)
            for key, value in (("login", self.login), ("password", "any"), ("user_code", self.user_code)):
                if key in data and value is not None:
                    data[key] = value
            action = str(response.url.join(form.action or str(response.url)))
            response = (
                self.http.post(action, data=data)
                if form.method == "post"
                else self.http.get(action, params=data)
            )
        raise RuntimeError(f"sign-in did not finish in {max_steps} steps; last page:\n{response.text[:2000]}")
