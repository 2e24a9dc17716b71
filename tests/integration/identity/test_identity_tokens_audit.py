"""`/api/v1/tokens` and `/api/v1/audit` over HTTP: who may create what, revocation, the audit trail."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from gpucommons.identity.principal import Role
from gpucommons.server.auth import create_bootstrap_admin_token
from gpucommons.store.db import Database
from gpucommons.testing.identity import NLP_GROUP, ScimClient, service_token


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _user_in_nlp(scim: ScimClient, name: str = "alice") -> str:
    uid: str = scim.ok(
        scim.post("/Users", {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": name}),
        201,
    )["id"]
    scim.ok(
        scim.post(
            "/Groups",
            {
                "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"],
                "displayName": NLP_GROUP,
                "members": [{"value": uid}],
            },
        ),
        201,
    )
    return uid


def _create(client: TestClient, admin: str, **body: Any) -> Any:
    return client.post("/api/v1/tokens", json=body, headers=_auth(admin))


def test_admin_creates_a_scim_service_token_that_only_reaches_scim(db: Database, client: TestClient) -> None:
    admin = create_bootstrap_admin_token(db)
    created = _create(client, admin, name="okta", role="scim")
    assert created.status_code == 201, created.text
    token = created.json()["token"]
    assert created.json()["role"] == "scim" and created.json()["subject"] == "okta"
    assert client.get("/scim/v2/Users", headers=_auth(token)).status_code == 200
    assert client.get("/api/v1/tokens", headers=_auth(token)).status_code == 403
    assert client.get("/api/v1/audit", headers=_auth(token)).status_code == 403


def test_user_token_acts_as_the_user_and_expires(db: Database, client: TestClient, scim: ScimClient) -> None:
    _user_in_nlp(scim)
    admin = create_bootstrap_admin_token(db)
    body = _create(client, admin, name="alice-ci", user="ALICE", expires_in_s=3600).json()
    assert body["subject"] == "alice" and body["expires_at"] is not None
    me = client.get("/api/v1/auth/whoami", headers=_auth(body["token"])).json()
    assert me["member_of"] == ["nlp"] and me["platform_admin"] is False


def test_narrowed_user_token_cannot_widen(db: Database, client: TestClient, scim: ScimClient) -> None:
    _user_in_nlp(scim)
    admin = create_bootstrap_admin_token(db)
    body = _create(client, admin, name="x", user="alice", role="platform_admin").json()
    me = client.get("/api/v1/auth/whoami", headers=_auth(body["token"])).json()
    assert me["platform_admin"] is False and me["member_of"] == []


def test_bad_token_requests_are_refused_with_reasons(db: Database, client: TestClient) -> None:
    admin = create_bootstrap_admin_token(db)
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"name": "x"}, 422, "--user"),
        ({"name": "x", "role": "team_member"}, 422, "--team"),
        ({"name": "x", "role": "team_member", "team": "nope"}, 422, "unknown team"),
        ({"name": "x", "role": "finance", "team": "nlp"}, 422, "team role"),
        ({"name": "x", "user": "ghost"}, 404, "ghost"),
        ({"name": "x", "role": "root"}, 422, "role"),
        ({"name": "x", "role": "finance", "expires_in_s": 1}, 422, "expires_in_s"),
    ]
    for body, status, words in cases:
        response = _create(client, admin, **body)
        assert response.status_code == status, (body, response.text)
        assert words in response.json()["error"]["message"], (body, response.text)


def test_only_platform_admins_manage_tokens(db: Database, client: TestClient) -> None:
    finance = service_token(db, Role.FINANCE, name="fin")
    lead = service_token(db, Role.TEAM_ADMIN, team="nlp", name="lead")
    for token in (finance, lead):
        assert _create(client, token, name="x", role="finance").status_code == 403
        assert client.get("/api/v1/tokens", headers=_auth(token)).status_code == 403
        assert client.delete("/api/v1/tokens/0123456789abcdef", headers=_auth(token)).status_code == 403


def test_listed_tokens_show_no_secret_and_revocation_bites_at_once(db: Database, client: TestClient) -> None:
    admin = create_bootstrap_admin_token(db)
    created = _create(client, admin, name="fin", role="finance").json()
    listing = client.get("/api/v1/tokens", headers=_auth(admin)).json()
    assert {t["name"] for t in listing} == {"bootstrap-admin", "fin"}
    assert all("token" not in t for t in listing)
    assert created["token"] not in str(listing)
    revoked = client.delete(f"/api/v1/tokens/{created['id']}", headers=_auth(admin))
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    assert client.get("/api/v1/auth/whoami", headers=_auth(created["token"])).status_code == 401
    assert client.delete("/api/v1/tokens/ffffffffffffffff", headers=_auth(admin)).status_code == 404
    assert [t["name"] for t in client.get("/api/v1/tokens", headers=_auth(admin)).json()] == [
        "bootstrap-admin"
    ]
    assert len(client.get("/api/v1/tokens?include_revoked=true", headers=_auth(admin)).json()) == 2


def test_signing_out_revokes_the_token_used(db: Database, client: TestClient) -> None:
    token = service_token(db, Role.FINANCE, name="fin")
    assert client.delete("/api/v1/auth/session", headers=_auth(token)).status_code == 204
    assert client.get("/api/v1/auth/whoami", headers=_auth(token)).status_code == 401


def test_every_mutation_is_audited_with_who_what_where_and_outcome(
    db: Database, client: TestClient, scim: ScimClient
) -> None:
    admin = create_bootstrap_admin_token(db)
    created = _create(client, admin, name="fin", role="finance").json()
    _create(client, created["token"], name="sneaky", role="platform_admin")  # refused: 403
    client.post(
        "/api/v1/tokens", json={"name": "x", "role": "finance"}, headers=_auth("gct_0123456789abcdef.nope")
    )
    _user_in_nlp(scim)
    client.get("/api/v1/tokens", headers=_auth(admin))  # reads are not audited

    rows = client.get("/api/v1/audit", headers=_auth(admin)).json()
    by_action = [(r["action"], r["outcome"], r["actor"]) for r in reversed(rows)]
    assert by_action[0] == ("token.create", "ok", "bootstrap-admin")
    assert ("token.create", "denied", "fin") in by_action or (
        "POST /api/v1/tokens",
        "denied",
        "fin",
    ) in by_action
    anonymous = next(r for r in rows if r["status_code"] == 401)
    assert anonymous["actor"] is None and anonymous["credential_id"] == "0123456789abcdef"
    scim_rows = [r for r in rows if r["path"].startswith("/scim/v2/")]
    assert {r["action"] for r in scim_rows} == {"POST /scim/v2/Users", "POST /scim/v2/Groups"}
    assert all(r["actor"] == "idp" and r["outcome"] == "ok" and r["remote_addr"] for r in scim_rows)
    assert all(r["method"] != "GET" for r in rows)
    first = next(r for r in rows if r["action"] == "token.create" and r["outcome"] == "ok")
    assert first["target"] == created["id"] and first["details"]["role"] == "finance"


def test_audit_filters_and_is_for_admins_only(db: Database, client: TestClient) -> None:
    admin = create_bootstrap_admin_token(db)
    for name in ("a", "b"):
        _create(client, admin, name=name, role="finance")
    assert len(client.get("/api/v1/audit?action=token.*", headers=_auth(admin)).json()) == 2
    assert client.get("/api/v1/audit?actor=nobody", headers=_auth(admin)).json() == []
    assert len(client.get("/api/v1/audit?limit=1", headers=_auth(admin)).json()) == 1
    assert client.get("/api/v1/audit?outcome=maybe", headers=_auth(admin)).status_code == 422
    lead = service_token(db, Role.TEAM_ADMIN, team="nlp", name="lead")
    assert client.get("/api/v1/audit", headers=_auth(lead)).status_code == 403
