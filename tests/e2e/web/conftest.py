"""A real server (`commons up` in a subprocess) and Debian's chromium driven by Playwright.

The browser tests skip, saying why, when chromium or Playwright is missing. Screenshots go to pytest's
temporary directory, or to `$COMMONS_SCREENSHOT_DIR` when it is set (that is how docs/img/dashboard.png
is made: `COMMONS_SCREENSHOT_DIR=shots pytest tests/e2e/web -k overview_shows`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpucommons.testing.web import ChromiumMissing, Server, chromium, running_server

POLICY = Path(__file__).parent / "dashboard-policy.yaml"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`commons up` on a free loopback port with the small test policy and a fresh home."""
    with running_server(POLICY, tmp_path_factory.mktemp("commons-home")) as srv:
        yield srv


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        with chromium() as instance:
            yield instance
    except ChromiumMissing as exc:
        pytest.skip(str(exc))


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where this test's screenshots go."""
    target = Path(os.environ.get("COMMONS_SCREENSHOT_DIR", "") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    return target


@pytest.fixture
def open_page(browser: Any, server: Server) -> Iterator[Any]:
    """`open_page(token, width=1280)`: a fresh browser tab signed in with `token`; fails on script errors."""
    contexts: list[Any] = []
    errors: list[str] = []

    def _open(token: str, width: int = 1280, path: str = "/", scheme: str = "light") -> Any:
        context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url + "/")
        page.fill("#token", token)
        page.click("#signin-button")
        page.wait_for_selector("h1:has-text('Cluster overview')")
        if path != "/":
            page.goto(server.url + "/" + path)
        return page

    yield _open
    for context in contexts:
        context.close()
    assert not errors, f"the dashboard threw: {errors}"
