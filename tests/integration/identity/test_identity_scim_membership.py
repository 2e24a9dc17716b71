"""What SCIM changes mean for access: team membership, revocation at once, pending members, errors."""

from __future__ import annotations

import time
from typing import Any

from fastapi.testclient import TestClient

from gpucommons.identity.principal import Principal, Role
from gpucommons.server.auth.credentials import SESSION_KIND, issue_token, resolve_token
from gpucommons.store.db import Database
from gpucommons.store.identity_models import GroupMember
from gpucommons.testing.identity import NLP_GROUP, NLP_LEADS, ScimClient, identity_policy, service_token

PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"


def _ops(*operations: dict[str, Any]) -> dict[str, Any]:
    return {"schemas": [PATCH_OP], "Operations": list(operations)}


def _user(scim: ScimClient, name: str) -> str:
    body = scim.ok(
        scim.post("/Users", {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": name}),
        201,
    )
    uid: str = body["id"]
    return uid


def _group(scim: ScimClient, name: str, *members: str) -> str:
    body = scim.ok(
        scim.post(
            "/Groups",
            {
                "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"],
                "displayName": name,
                "members": [{"value": m} for m in members],
            },
        ),
        201,
    )
    gid: str = body["id"]
    return gid


def _token(db: Database, user_id: str, kind: str = "api") -> str:
    with db.session() as s:
        return issue_token(s, name="t", now=time.time(), subject=user_id, user_id=user_id, kind=kind).token


def _whois(db: Database, token: str) -> Principal | None:
    with db.session() as s:
        return resolve_token(s, token, identity_policy(), time.time())


def test_group_membership_makes_team_members_and_admins(db: Database, scim: ScimClient) -> None:
    alice, bob = _user(scim, "alice"), _user(scim, "bob")
    _group(scim, NLP_GROUP, alice)
    _group(scim, NLP_LEADS, bob)
    a, b = _whois(db, _token(db, alice)), _whois(db, _token(db, bob))
    assert a is not None and a.member_of == {"nlp"} and a.admin_of == frozenset()
    assert b is not None and b.admin_of == {"nlp"}


def test_removal_from_the_group_takes_team_rights_and_ends_sessions(db: Database, scim: ScimClient) -> None:
    alice = _user(scim, "alice")
    gid = _group(scim, NLP_GROUP, alice)
    api, session = _token(db, alice), _token(db, alice, kind=SESSION_KIND)
    scim.ok(scim.patch(f"/Groups/{gid}", _ops({"op": "remove", "path": f'members[value eq "{alice}"]'})))
    assert _whois(db, session) is None  # signed out at once
    still = _whois(db, api)
    assert still is not None and still.teams == frozenset()  # the token lives on, with no team


def test_deactivation_revokes_every_token_at_once_and_for_good(db: Database, scim: ScimClient) -> None:
    alice = _user(scim, "alice")
    _group(scim, NLP_GROUP, alice)
    api, session = _token(db, alice), _token(db, alice, kind=SESSION_KIND)
    scim.ok(scim.patch(f"/Users/{alice}", _ops({"op": "Replace", "path": "active", "value": "False"})))
    assert _whois(db, api) is None and _whois(db, session) is None
    scim.ok(scim.patch(f"/Users/{alice}", _ops({"op": "replace", "value": {"active": True}})))
    assert _whois(db, api) is None  # reactivation does not bring revoked tokens back
    assert _whois(db, _token(db, alice)) is not None


def test_deleting_a_user_removes_tokens_and_memberships(db: Database, scim: ScimClient) -> None:
    alice = _user(scim, "alice")
    gid = _group(scim, NLP_GROUP, alice)
    api = _token(db, alice)
    assert scim.delete(f"/Users/{alice}").status_code == 204
    assert _whois(db, api) is None
    assert not scim.ok(scim.get(f"/Groups/{gid}")).get("members")


def test_deleting_the_group_ends_its_members_sessions(db: Database, scim: ScimClient) -> None:
    alice = _user(scim, "alice")
    gid = _group(scim, NLP_GROUP, alice)
    session = _token(db, alice, kind=SESSION_KIND)
    assert scim.delete(f"/Groups/{gid}").status_code == 204
    assert _whois(db, session) is None


def test_unknown_member_is_kept_pending_and_grants_nothing(db: Database, scim: ScimClient) -> None:
    alice = _user(scim, "alice")
    gid = _group(scim, NLP_GROUP)
    body = scim.ok(
        scim.patch(
            f"/Groups/{gid}", _ops({"op": "add", "path": "members", "value": [{"value": "fake-member-id"}]})
        )
    )
    assert [m["value"] for m in body["members"]] == ["fake-member-id"]
    with db.session() as s:
        assert s.get(GroupMember, (gid, "fake-member-id")) is not None
    who = _whois(db, _token(db, alice))
    assert who is not None and who.teams == frozenset()
    scim.ok(scim.patch(f"/Groups/{gid}", _ops({"op": "add", "path": "members", "value": [{"value": alice}]})))
    who = _whois(db, _token(db, alice))
    assert who is not None and who.member_of == {"nlp"}


def test_group_names_are_unique_regardless_of_case(scim: ScimClient) -> None:
    _group(scim, "ml-nlp")
    clash = scim.post(
        "/Groups", {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"], "displayName": "ML-NLP"}
    )
    assert clash.status_code == 409 and clash.json()["scimType"] == "uniqueness"


def test_members_pushed_twice_are_kept_once(scim: ScimClient) -> None:
    alice = _user(scim, "alice")
    gid = _group(scim, "g", alice)
    body = scim.ok(
        scim.patch(f"/Groups/{gid}", _ops({"op": "add", "path": "members", "value": [{"value": alice}]}))
    )
    assert [m["value"] for m in body["members"]] == [alice]


def test_errors_are_scim_error_resources(db: Database, client: TestClient, scim: ScimClient) -> None:
    error = "urn:ietf:params:scim:api:messages:2.0:Error"
    anonymous = client.get("/scim/v2/Users")
    assert anonymous.status_code == 401 and anonymous.json()["schemas"] == [error]
    assert "Bearer" in anonymous.headers["www-authenticate"]
    finance = service_token(db, Role.FINANCE, name="fin")
    refused = client.get("/scim/v2/Users", headers={"Authorization": f"Bearer {finance}"})
    assert refused.status_code == 403 and refused.json()["schemas"] == [error]
    bad_json = client.post("/scim/v2/Users", content=b"{not json", headers=scim.headers)
    assert bad_json.status_code == 400 and bad_json.json()["scimType"] == "invalidSyntax"
    no_name = scim.post("/Users", {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"]})
    assert no_name.status_code == 400 and no_name.json()["schemas"] == [error]
    bad_filter = scim.get("/Users", filter='userName co "a"')
    assert bad_filter.status_code == 400 and bad_filter.json()["scimType"] == "invalidFilter"
    nowhere = scim.get("/NoSuchThing")
    assert nowhere.status_code == 404 and nowhere.json()["schemas"] == [error]
    bad_count = scim.get("/Users", count="many")
    assert bad_count.status_code == 400 and bad_count.json()["schemas"] == [error]


def test_discovery_describes_what_we_serve(scim: ScimClient) -> None:
    spc = scim.ok(scim.get("/ServiceProviderConfig"))
    assert spc["patch"]["supported"] is True and spc["filter"]["supported"] is True
    types = scim.ok(scim.get("/ResourceTypes"))
    assert {r["id"] for r in types["Resources"]} == {"User", "Group"}
    schemas = scim.ok(scim.get("/Schemas"))
    ids = {s["id"] for s in schemas["Resources"]}
    assert "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User" in ids
    one = scim.ok(scim.get("/Schemas/urn:ietf:params:scim:schemas:core:2.0:User"))
    assert any(a["name"] == "userName" and a["uniqueness"] == "server" for a in one["attributes"])


def test_count_is_capped_and_zero_count_returns_only_the_total(scim: ScimClient) -> None:
    for i in range(3):
        _user(scim, f"u{i}")
    zero = scim.ok(scim.get("/Users", count=0))
    assert zero["totalResults"] == 3 and not zero.get("Resources")
    assert scim.ok(scim.get("/Users", count=10_000))["itemsPerPage"] == 3
