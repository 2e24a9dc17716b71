"""Sign-in end to end against a real OpenID provider (node-oidc-provider on loopback, tests/oidc).

The web login (authorization code + PKCE through the browser), `commons login` (loopback redirect +
PKCE) and `commons login --device` (device authorization grant) each end in our own session token;
then what the directory says — not the token's groups claim — decides access, and revocation bites.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from gpucommons.cli.main import app as cli
from gpucommons.cli.oidc_flows import DevicePrompt
from gpucommons.identity.principal import Role
from gpucommons.server.auth.oidc import OidcSettings
from gpucommons.store.db import Database
from gpucommons.testing.identity import (
    ScimClient,
    identity_app,
    identity_database,
    identity_policy,
    live_server,
    service_token,
)
from gpucommons.testing.oidc import CLI_CLIENT, WEB_CLIENT, Browser, ProviderMissing, oidc_provider

pytestmark = [pytest.mark.oidc, pytest.mark.slow]


@dataclass
class Env:
    url: str
    issuer: str
    app: FastAPI
    db: Database
    scim: ScimClient


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    db = identity_database(tmp_path)
    app = identity_app(db, identity_policy())
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("COMMONS_TOKEN", raising=False)
    monkeypatch.delenv("COMMONS_URL", raising=False)
    with live_server(app) as url, ExitStack() as stack:
        try:
            issuer = stack.enter_context(oidc_provider(f"{url}/auth/callback"))
        except ProviderMissing as exc:
            pytest.skip(f"sign-in e2e needs the loopback OpenID provider: {exc}")
        app.state.oidc_settings = OidcSettings(
            issuer=issuer, client_id=WEB_CLIENT[0], client_secret=WEB_CLIENT[1], cli_client_id=CLI_CLIENT
        )
        scim = ScimClient(TestClient(app), service_token(db, Role.SCIM, name="idp"))
        yield Env(url, issuer, app, db, scim)
    db.dispose()


def _whoami(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.get(f"{url}/api/v1/auth/whoami", timeout=10, **kwargs)


def _web_login(env: Env, login: str) -> httpx.Response:
    browser = Browser(login)
    answer = browser.visit(f"{env.url}/auth/login?next=/tasks", stop_at=f"{env.url}/auth/callback")
    return browser.http.get(answer)


def _cli_login(env: Env, login: str, monkeypatch: pytest.MonkeyPatch, *args: str) -> Any:
    monkeypatch.setattr("gpucommons.cli.login.webbrowser.open", lambda link: Browser(login).visit(link))
    return CliRunner().invoke(cli, ["login", "--url", env.url, *args])


def _saved_token() -> str:
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "gpucommons" / "config.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    token: str = json.loads(config.read_text())["token"]
    return token


def test_web_login_uses_pkce_and_ends_in_a_session_cookie(env: Env) -> None:
    start = httpx.get(f"{env.url}/auth/login", timeout=10)
    assert start.status_code == 303
    assert (
        "code_challenge_method=S256" in start.headers["location"]
        and "code_challenge=" in start.headers["location"]
    )
    done = _web_login(env, "alice")
    assert done.status_code == 303 and done.headers["location"] == "/tasks"
    cookie = done.cookies["commons_session"]
    assert (
        "httponly" in done.headers["set-cookie"].lower()
        and "samesite=lax" in done.headers["set-cookie"].lower()
    )
    me = _whoami(env.url, cookies={"commons_session": cookie}).json()
    assert me["subject"] == "alice" and me["member_of"] == ["nlp"]  # seeded from the claim at first sign-in


def test_callback_without_the_browser_state_is_refused(env: Env) -> None:
    answer = Browser("alice").visit(f"{env.url}/auth/login", stop_at=f"{env.url}/auth/callback")
    forged = httpx.get(answer, timeout=10)  # another browser: no state cookie
    assert forged.status_code == 400 and "no sign-in under way" in forged.json()["error"]["message"]


def test_open_redirects_are_not_followed(env: Env) -> None:
    browser = Browser("alice")
    answer = browser.visit(f"{env.url}/auth/login?next=//evil.example/x", stop_at=f"{env.url}/auth/callback")
    assert browser.http.get(answer).headers["location"] == "/"


def test_cli_loopback_login_saves_a_private_session_token(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    result = _cli_login(env, "lena", monkeypatch)
    assert result.exit_code == 0, result.output
    assert "as lena (teams: nlp; admin of nlp)" in result.output
    me = _whoami(env.url, headers={"Authorization": f"Bearer {_saved_token()}"}).json()
    assert me["admin_of"] == ["nlp"] and me["credential_id"]


def test_cli_device_login(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    def approve(prompt: DevicePrompt) -> None:
        Browser("victor", user_code=prompt.user_code).visit(prompt.verification_uri)

    monkeypatch.setattr("gpucommons.cli.login._show_device_prompt", approve)
    result = CliRunner().invoke(cli, ["login", "--url", env.url, "--device"])
    assert result.exit_code == 0, result.output
    me = _whoami(env.url, headers={"Authorization": f"Bearer {_saved_token()}"}).json()
    assert me["subject"] == "victor" and me["member_of"] == ["vision"]


def test_logout_revokes_the_saved_token(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _cli_login(env, "alice", monkeypatch).exit_code == 0
    token = _saved_token()
    result = CliRunner().invoke(cli, ["login", "--url", env.url, "--logout"])
    assert result.exit_code == 0, result.output
    assert _whoami(env.url, headers={"Authorization": f"Bearer {token}"}).status_code == 401


def test_tampered_or_foreign_id_tokens_are_refused(env: Env) -> None:
    for bad in ("not-a-jwt-at-all", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJyb290In0."):
        answer = httpx.post(f"{env.url}/api/v1/auth/token", json={"id_token": bad}, timeout=10)
        assert answer.status_code == 401, answer.text


def test_the_groups_claim_only_seeds_a_new_user(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    _web_login(env, "alice")  # creates alice in ml-nlp from the claim
    groups = env.scim.ok(env.scim.get("/Groups", filter='displayName eq "ml-nlp"'))["Resources"]
    gid = groups[0]["id"]
    env.scim.ok(
        env.scim.patch(
            f"/Groups/{gid}",
            {
                "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
                "Operations": [{"op": "replace", "path": "members", "value": []}],
            },
        )
    )
    assert _cli_login(env, "alice", monkeypatch).exit_code == 0  # the claim still says ml-nlp
    me = _whoami(env.url, headers={"Authorization": f"Bearer {_saved_token()}"}).json()
    assert me["member_of"] == []


def test_a_scim_user_is_linked_and_keeps_directory_roles(env: Env) -> None:
    created = env.scim.ok(
        env.scim.post(
            "/Users", {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": "victor"}
        ),
        201,
    )
    env.scim.ok(
        env.scim.post(
            "/Groups",
            {
                "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"],
                "displayName": "ml-nlp",
                "members": [{"value": created["id"]}],
            },
        ),
        201,
    )
    done = _web_login(env, "victor")  # the claim says ml-vision; the directory says ml-nlp
    me = _whoami(env.url, cookies={"commons_session": done.cookies["commons_session"]}).json()
    assert me["user_id"] == created["id"] and me["member_of"] == ["nlp"]


def test_deactivation_ends_the_session_and_blocks_sign_in(env: Env) -> None:
    done = _web_login(env, "alice")
    cookie = {"commons_session": done.cookies["commons_session"]}
    uid = _whoami(env.url, cookies=cookie).json()["user_id"]
    env.scim.ok(
        env.scim.patch(
            f"/Users/{uid}",
            {
                "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
                "Operations": [{"op": "Replace", "path": "active", "value": "False"}],
            },
        )
    )
    assert _whoami(env.url, cookies=cookie).status_code == 401
    again = _web_login(env, "alice")
    assert again.status_code == 403 and "deactivated" in again.json()["error"]["message"]
