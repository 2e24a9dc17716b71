"""`commons token` and `commons audit` against a live server, as an admin would use them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from gpucommons.cli.audit import parse_since
from gpucommons.cli.main import app as cli
from gpucommons.server.auth import create_bootstrap_admin_token
from gpucommons.testing.identity import identity_app, identity_database, identity_policy, live_server


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    db = identity_database(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("COMMONS_TOKEN", create_bootstrap_admin_token(db))
    with live_server(identity_app(db, identity_policy())) as url:
        monkeypatch.setenv("COMMONS_URL", url)
        yield url
    db.dispose()


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_token_create_prints_the_token_alone_on_its_last_line(server: str) -> None:
    code, out = _run("token", "create", "--role", "scim", "--name", "okta")
    assert code == 0, out
    token = out.strip().splitlines()[-1]
    assert token.startswith("gct_") and " " not in token
    scim = httpx.get(f"{server}/scim/v2/Users", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert scim.status_code == 200


def test_token_list_and_revoke(server: str) -> None:
    _, out = _run("token", "create", "--role", "finance", "--name", "billing", "--expires", "30d")
    token = out.strip().splitlines()[-1]
    code, listing = _run("token", "list", "--json")
    assert code == 0
    billing = next(t for t in json.loads(listing) if t["name"] == "billing")
    expires = datetime.fromisoformat(billing["expires_at"])
    assert timedelta(days=29) < expires - datetime.now(UTC) <= timedelta(days=30)
    assert token not in listing
    code, out = _run("token", "revoke", billing["id"])
    assert code == 0 and "revoked" in out
    assert (
        httpx.get(f"{server}/api/v1/auth/whoami", headers={"Authorization": f"Bearer {token}"}).status_code
        == 401
    )
    code, table = _run("token", "list", "--all")
    assert code == 0 and "billing" in table


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--role", "root"], "--role must be one of"),
        (["--role", "finance", "--expires", "3x"], "not a duration"),
        (["--role", "team_member"], "--team"),
        (["--user", "nobody"], "no user 'nobody'"),
        ([], "give --user"),
    ],
)
def test_bad_token_requests_exit_1_with_a_message(server: str, args: list[str], message: str) -> None:
    code, out = _run("token", "create", *args)
    assert code == 1 and message in out and "Traceback" not in out


def test_audit_shows_the_token_creation(server: str) -> None:
    _run("token", "create", "--role", "scim", "--name", "okta")
    code, out = _run("audit", "--since", "1h", "--json")
    assert code == 0, out
    entries = json.loads(out)
    assert entries[0]["action"] == "token.create" and entries[0]["actor"] == "bootstrap-admin"
    code, table = _run("audit", "--action", "token.*")
    assert code == 0 and "token.create" in table
    code, out = _run("audit", "--since", "yesterday-ish")
    assert code == 1 and "--since takes a duration" in out


def test_without_admin_rights_the_cli_says_so(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _, out = _run("token", "create", "--role", "finance", "--name", "fin")
    monkeypatch.setenv("COMMONS_TOKEN", out.strip().splitlines()[-1])
    code, out = _run("audit")
    assert code == 1 and "audit.read" in out


def test_parse_since_reads_durations_and_times() -> None:
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    assert parse_since("2h", now) == datetime(2026, 11, 30, 10, tzinfo=UTC)
    assert parse_since("2026-11-29T08:00", now) == datetime(2026, 11, 29, 8, tzinfo=UTC)


def test_login_says_when_the_server_has_no_sign_in(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMMONS_TOKEN")
    code, out = _run("login", "--url", server)
    assert code == 1 and "has no sign-in configured" in out and "commons token create --user" in out


def test_login_says_when_the_server_is_unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    code, out = _run("login", "--url", "http://127.0.0.1:9")
    assert code == 1 and "cannot reach" in out and "Traceback" not in out
