"""Single sign-on from the dashboard: the *Sign in* button, the OpenID provider's login page, and back.

Runs node-oidc-provider (tests/oidc) on loopback and `commons up` configured for it; chromium plays
the person. The provider's account `alice` is in the directory group `ml-nlp`, which the test policy
maps to team alpha.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpucommons.testing.oidc import WEB_CLIENT, ProviderMissing, oidc_provider
from gpucommons.testing.web import Server, free_port, running_server

pytestmark = [pytest.mark.browser, pytest.mark.oidc, pytest.mark.slow]
POLICY = Path(__file__).parent / "dashboard-policy.yaml"


@pytest.fixture(scope="module")
def sso_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    port = free_port()
    provider = oidc_provider(f"http://127.0.0.1:{port}/auth/callback")
    try:
        issuer = provider.__enter__()
    except ProviderMissing as exc:
        pytest.skip(f"single sign-on needs the loopback OpenID provider: {exc}")
    try:
        env = {
            "COMMONS_OIDC_ISSUER": issuer,
            "COMMONS_OIDC_CLIENT_ID": WEB_CLIENT[0],
            "COMMONS_OIDC_CLIENT_SECRET": WEB_CLIENT[1],
        }
        with running_server(POLICY, tmp_path_factory.mktemp("sso-home"), port, env) as srv:
            yield srv
    finally:
        provider.__exit__(None, None, None)


def test_sign_in_button_signs_in_through_the_provider_and_back_to_the_page_asked_for(
    sso_server: Server, browser: Any, shots: Path
) -> None:
    context = browser.new_context()
    page = context.new_page()
    try:
        page.goto(sso_server.url + "/#/tasks")
        button = page.wait_for_selector("#sso-button")
        page.screenshot(path=str(shots / "signin.png"), full_page=True)
        button.click()

        # The provider's development login page, then its consent page.
        page.wait_for_selector("input[name='login']")
        assert page.url.startswith("http://127.0.0.1:") and not page.url.startswith(sso_server.url)
        page.fill("input[name='login']", "alice")
        page.fill("input[name='password']", "any")
        page.click("button[type='submit']")
        page.wait_for_selector("button[type='submit']:has-text('Continue'), h1:has-text('Tasks')")
        if page.locator("h1:has-text('Tasks')").count() == 0:
            page.click("button[type='submit']")

        page.wait_for_selector("h1:has-text('Tasks')")
        assert page.url.endswith("/#/tasks")
        assert "Alice Adams" in page.inner_text("#who") and "team alpha" in page.inner_text("#who")
        # No token was handed to the page: the session lives in an HttpOnly cookie.
        assert page.evaluate("sessionStorage.getItem('commons.token')") is None
        assert page.evaluate("document.cookie").find("commons_session") == -1

        # Signed in by cookie, an invoice is a plain link that opens in a new tab.
        page.goto(sso_server.url + "/#/usage")
        link = page.wait_for_selector("a[aria-label^='HTML invoice for alpha']")
        assert link.get_attribute("target") == "_blank"
        invoice = context.request.get(sso_server.url + str(link.get_attribute("href")))
        assert invoice.ok and invoice.headers["content-type"].startswith("text/html")
        assert "alpha" in invoice.text()

        page.click("#signout")
        page.wait_for_selector("#sso-button")
        page.reload()
        page.wait_for_selector("#sso-button")  # the session is over on the server, not just forgotten
    finally:
        context.close()


def test_without_a_provider_the_sign_in_page_offers_tokens_only(server: Server, browser: Any) -> None:
    context = browser.new_context()
    page = context.new_page()
    try:
        page.goto(server.url + "/")
        page.wait_for_selector("#token")
        assert page.locator("#sso-button").count() == 0
    finally:
        context.close()
