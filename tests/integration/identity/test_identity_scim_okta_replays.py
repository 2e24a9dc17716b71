"""Replays of the requests Okta documents sending to a SCIM 2.0 endpoint.

Source: Okta developer documentation, "SCIM 2.0 Protocol Reference"
(developer.okta.com/docs/reference/scim/scim-20/): user existence check, create, import with
pagination, PUT update, PATCH deactivate, group push, rename, membership add/remove and full push.
"""

from __future__ import annotations

from typing import Any

from gpucommons.testing.identity import ScimClient as Scim

PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User"

CREATE_USER: dict[str, Any] = {
    "schemas": [USER_SCHEMA],
    "userName": "test.user@okta.local",
    "name": {"givenName": "Test", "familyName": "User"},
    "emails": [{"primary": True, "value": "test.user@okta.local", "type": "work"}],
    "displayName": "Test User",
    "locale": "en-US",
    "externalId": "00ujl29u0le5T6Aj10h7",
    "groups": [],
    "password": "1mz050nq",
    "active": True,
}


def _ops(*operations: dict[str, Any]) -> dict[str, Any]:
    return {"schemas": [PATCH_OP], "Operations": list(operations)}


def _user(scim: Scim, **changes: Any) -> dict[str, Any]:
    return scim.ok(scim.post("/Users", {**CREATE_USER, **changes}), 201)


def test_existence_check_with_paging_parameters_finds_nobody(scim: Scim) -> None:
    body = scim.ok(scim.get("/Users", filter='userName eq "test.user@okta.local"', startIndex=1, count=100))
    assert body["totalResults"] == 0 and body["startIndex"] == 1


def test_create_user_keeps_no_password(scim: Scim, db: Any) -> None:
    created = _user(scim)
    assert "password" not in created and created["locale"] == "en-US"
    assert created["emails"][0]["value"] == "test.user@okta.local"  # a private .local domain is fine
    from gpucommons.store.identity_models import DirectoryUser

    with db.session() as session:
        row = session.get(DirectoryUser, created["id"])
        assert row is not None and "password" not in row.attributes and "1mz050nq" not in str(row.attributes)


def test_creating_an_existing_user_answers_409_uniqueness(scim: Scim) -> None:
    _user(scim)
    again = scim.post("/Users", {**CREATE_USER, "userName": "TEST.USER@okta.local"})
    assert again.status_code == 409
    assert again.json()["scimType"] == "uniqueness" and again.json()["status"] == "409"


def test_import_pages_in_a_stable_order(scim: Scim) -> None:
    ids = [_user(scim, userName=f"u{i}@okta.local", externalId=f"x{i}")["id"] for i in range(5)]
    first = scim.ok(scim.get("/Users", startIndex=1, count=2))
    second = scim.ok(scim.get("/Users", startIndex=3, count=2))
    last = scim.ok(scim.get("/Users", startIndex=5, count=2))
    assert first["totalResults"] == 5 and first["itemsPerPage"] == 2 and second["startIndex"] == 3
    assert [r["id"] for page in (first, second, last) for r in page["Resources"]] == ids
    assert isinstance(first["totalResults"], int) and isinstance(first["itemsPerPage"], int)


def test_update_user_by_whole_resource_put(scim: Scim) -> None:
    created = _user(scim)
    body = {
        "schemas": [USER_SCHEMA],
        "id": created["id"],
        "userName": "test.user@okta.local",
        "name": {"givenName": "Another", "middleName": "Excited", "familyName": "User"},
        "emails": [
            {
                "primary": True,
                "value": "test.user@okta.local",
                "type": "work",
                "display": "test.user@okta.local",
            }
        ],
        "active": True,
        "groups": [],
        "meta": {"resourceType": "User"},
    }
    replaced = scim.ok(scim.put(f"/Users/{created['id']}", body))
    assert replaced["name"] == {"givenName": "Another", "middleName": "Excited", "familyName": "User"}
    assert "locale" not in replaced  # PUT replaces the whole resource
    assert scim.ok(scim.get(f"/Users/{created['id']}"))["name"]["middleName"] == "Excited"


def test_deactivate_with_a_pathless_replace(scim: Scim) -> None:
    uid = _user(scim)["id"]
    body = scim.ok(scim.patch(f"/Users/{uid}", _ops({"op": "replace", "value": {"active": False}})))
    assert body["active"] is False and body["userName"] == "test.user@okta.local"


def _group(scim: Scim) -> str:
    created = scim.ok(
        scim.post(
            "/Groups",
            {
                "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"],
                "displayName": "Test SCIMv2",
                "members": [],
            },
        ),
        201,
    )
    assert created["displayName"] == "Test SCIMv2"
    gid: str = created["id"]
    return gid


def test_rename_group_with_its_id_in_the_value(scim: Scim) -> None:
    gid = _group(scim)
    body = scim.ok(
        scim.patch(
            f"/Groups/{gid}", _ops({"op": "replace", "value": {"id": gid, "displayName": "Test SCIMv20"}})
        )
    )
    assert body["displayName"] == "Test SCIMv20" and body["id"] == gid


def test_membership_remove_by_filter_then_add(scim: Scim) -> None:
    a = _user(scim, userName="a@okta.local", externalId="a")["id"]
    b = _user(scim, userName="b@okta.local", externalId="b")["id"]
    gid = _group(scim)
    scim.ok(
        scim.patch(
            f"/Groups/{gid}", _ops({"op": "add", "path": "members", "value": [{"value": b, "display": "b"}]})
        )
    )
    body = scim.ok(
        scim.patch(
            f"/Groups/{gid}",
            _ops(
                {"op": "remove", "path": f'members[value eq "{b}"]'},
                {"op": "add", "path": "members", "value": [{"value": a, "display": "test.user@okta.local"}]},
            ),
        )
    )
    assert [m["value"] for m in body["members"]] == [a]


def test_full_membership_push_with_replace(scim: Scim) -> None:
    a = _user(scim, userName="a@okta.local", externalId="a")["id"]
    b = _user(scim, userName="b@okta.local", externalId="b")["id"]
    gid = _group(scim)
    body = scim.ok(
        scim.patch(
            f"/Groups/{gid}",
            _ops(
                {
                    "op": "replace",
                    "path": "members",
                    "value": [{"value": a, "display": "a"}, {"value": b, "display": "b"}],
                }
            ),
        )
    )
    assert sorted(m["value"] for m in body["members"]) == sorted([a, b])
    got = scim.ok(scim.get(f"/Groups/{gid}"))
    assert sorted(m["value"] for m in got["members"]) == sorted([a, b])
    # The users see the group as a read-only `groups` attribute.
    assert [g["value"] for g in scim.ok(scim.get(f"/Users/{a}"))["groups"]] == [gid]


def test_group_push_by_put_replaces_members(scim: Scim) -> None:
    a = _user(scim, userName="a@okta.local", externalId="a")["id"]
    gid = _group(scim)
    body = {
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"],
        "id": gid,
        "displayName": "Test SCIMv2",
        "members": [{"value": a, "display": "a"}],
    }
    assert [m["value"] for m in scim.ok(scim.put(f"/Groups/{gid}", body))["members"]] == [a]


def test_delete_pushed_group(scim: Scim) -> None:
    gid = _group(scim)
    assert scim.delete(f"/Groups/{gid}").status_code == 204
