"""Replays of the requests Microsoft Entra ID documents sending to a SCIM endpoint.

Sources (payloads copied from the documentation, ids and names shortened):
- "Tutorial: Develop and plan provisioning for a SCIM endpoint in Microsoft Entra ID",
  learn.microsoft.com/entra/identity/app-provisioning/use-scim-to-provision-users-and-groups
  (section "SCIM protocol requests and responses");
- "Known issues and resolutions with SCIM 2.0 protocol compliance of the Microsoft Entra user
  provisioning service", .../application-provisioning-config-problem-scim-compatibility
  (requests sent with and without the `aadOptscim062020` flag).
"""

from __future__ import annotations

from typing import Any

from gpucommons.testing.identity import ScimClient as Scim

PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"

CREATE_USER: dict[str, Any] = {
    "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User", ENTERPRISE],
    "externalId": "0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef",
    "userName": "Test_User_00aa00aa-bb11-cc22-dd33-44ee44ee44ee",
    "active": True,
    "emails": [{"primary": True, "type": "work", "value": "Test_User_11bb11bb@testuser.com"}],
    "meta": {"resourceType": "User"},
    "name": {"formatted": "givenName familyName", "familyName": "familyName", "givenName": "givenName"},
    "roles": [],
}

CREATE_GROUP = {
    "schemas": [
        "urn:ietf:params:scim:schemas:core:2.0:Group",
        "http://schemas.microsoft.com/2006/11/ResourceManagement/ADSCIM/2.0/Group",
    ],
    "externalId": "8aa1a0c0-c4c3-4bc0-b4a5-2ef676900159",
    "displayName": "displayName",
    "meta": {"resourceType": "Group"},
}


def _ops(*operations: dict[str, Any]) -> dict[str, Any]:
    return {"schemas": [PATCH_OP], "Operations": list(operations)}


def _user(scim: Scim) -> dict[str, Any]:
    return scim.ok(scim.post("/Users", CREATE_USER), 201)


def test_create_user_with_enterprise_schema_meta_and_empty_roles(scim: Scim) -> None:
    created = _user(scim)
    assert created["id"] and created["userName"] == CREATE_USER["userName"]
    assert created["meta"]["resourceType"] == "User" and created["meta"]["location"].endswith(created["id"])
    assert created["emails"] == [
        {"value": "Test_User_11bb11bb@testuser.com", "type": "work", "primary": True}
    ]


def test_get_user_by_query_ignores_username_case(scim: Scim) -> None:
    created = _user(scim)
    found = scim.ok(scim.get("/Users", filter=f'userName eq "{str(CREATE_USER["userName"]).upper()}"'))
    assert found["schemas"] == ["urn:ietf:params:scim:api:messages:2.0:ListResponse"]
    assert found["totalResults"] == 1 and found["Resources"][0]["id"] == created["id"]


def test_get_user_by_query_with_zero_results(scim: Scim) -> None:
    found = scim.ok(scim.get("/Users", filter='userName eq "non-existent user"'))
    assert found["totalResults"] == 0 and found.get("Resources", []) == []


def test_query_by_unquoted_external_id(scim: Scim) -> None:
    scim.ok(scim.post("/Users", {**CREATE_USER, "externalId": "jyoung"}), 201)
    assert scim.ok(scim.get("/Users", filter="externalId eq jyoung"))["totalResults"] == 1


def test_update_multi_valued_properties(scim: Scim) -> None:
    uid = _user(scim)["id"]
    patched = scim.ok(
        scim.patch(
            f"/Users/{uid}",
            _ops(
                {
                    "op": "Replace",
                    "path": 'emails[type eq "work"].value',
                    "value": "updatedEmail@microsoft.com",
                },
                {"op": "Replace", "path": "name.familyName", "value": "updatedFamilyName"},
            ),
        )
    )
    assert patched["emails"][0]["value"] == "updatedEmail@microsoft.com"
    assert patched["name"]["familyName"] == "updatedFamilyName"
    assert scim.ok(scim.get(f"/Users/{uid}"))["name"]["familyName"] == "updatedFamilyName"


def test_update_single_valued_user_name(scim: Scim) -> None:
    uid = _user(scim)["id"]
    new = "5b50642d-79fc-4410-9e90-4c077cdd1a59@testuser.com"
    patched = scim.ok(scim.patch(f"/Users/{uid}", _ops({"op": "Replace", "path": "userName", "value": new})))
    assert patched["userName"] == new
    assert scim.ok(scim.get("/Users", filter=f'userName eq "{new}"'))["totalResults"] == 1


def test_disable_user_with_a_boolean(scim: Scim) -> None:
    uid = _user(scim)["id"]
    body = scim.ok(scim.patch(f"/Users/{uid}", _ops({"op": "Replace", "path": "active", "value": False})))
    assert body["active"] is False
    # A disabled user is still returned, with active false (Entra's validator checks it).
    assert (
        scim.ok(scim.get("/Users", filter=f'userName eq "{CREATE_USER["userName"]}"'))["Resources"][0][
            "active"
        ]
        is False
    )


def test_disable_user_with_the_string_false(scim: Scim) -> None:
    uid = _user(scim)["id"]
    body = scim.ok(scim.patch(f"/Users/{uid}", _ops({"op": "Replace", "path": "active", "value": "False"})))
    assert body["active"] is False


def test_add_single_value_attribute_with_capitalised_op(scim: Scim) -> None:
    uid = _user(scim)["id"]
    body = scim.ok(scim.patch(f"/Users/{uid}", _ops({"op": "Add", "path": "nickName", "value": "Babs"})))
    assert body["nickName"] == "Babs"


def test_replace_several_attributes_without_a_path(scim: Scim) -> None:
    uid = _user(scim)["id"]
    body = scim.ok(
        scim.patch(
            f"/Users/{uid}",
            _ops(
                {
                    "op": "replace",
                    "path": 'emails[type eq "work"].value',
                    "value": "TestMhvaes@test.microsoft.com",
                },
                {
                    "op": "replace",
                    "value": {
                        "displayName": "Bjfe",
                        "name.givenName": "Kkom",
                        "name.familyName": "Unua",
                        f"{ENTERPRISE}:employeeNumber": "Aklq",
                    },
                },
            ),
        )
    )
    assert body["displayName"] == "Bjfe"
    assert body["name"]["givenName"] == "Kkom" and body["name"]["familyName"] == "Unua"
    assert body[ENTERPRISE]["employeeNumber"] == "Aklq"
    assert body["emails"][0]["value"] == "TestMhvaes@test.microsoft.com"


def test_replace_extension_attribute_and_external_id_by_path(scim: Scim) -> None:
    uid = _user(scim)["id"]
    body = scim.ok(
        scim.patch(
            f"/Users/{uid}",
            _ops(
                {"op": "Replace", "path": "externalId", "value": "Eqpj"},
                {"op": "Replace", "path": f"{ENTERPRISE}:employeeNumber", "value": "Eqpj"},
            ),
        )
    )
    assert body["externalId"] == "Eqpj" and body[ENTERPRISE]["employeeNumber"] == "Eqpj"


def test_work_email_patch_creates_the_entry_when_missing(scim: Scim) -> None:
    plain = {k: v for k, v in CREATE_USER.items() if k != "emails"}
    uid = scim.ok(scim.post("/Users", plain), 201)["id"]
    body = scim.ok(
        scim.patch(
            f"/Users/{uid}",
            _ops({"op": "Add", "path": 'emails[type eq "work"].value', "value": "w@corp.com"}),
        )
    )
    assert body["emails"] == [{"value": "w@corp.com", "type": "work"}]


def test_delete_user(scim: Scim) -> None:
    uid = _user(scim)["id"]
    assert scim.delete(f"/Users/{uid}").status_code == 204
    gone = scim.get(f"/Users/{uid}")
    assert gone.status_code == 404 and gone.json()["schemas"] == [
        "urn:ietf:params:scim:api:messages:2.0:Error"
    ]


def test_create_group_with_an_undefined_schema_uri(scim: Scim) -> None:
    created = scim.ok(scim.post("/Groups", CREATE_GROUP), 201)
    assert created["schemas"] == ["urn:ietf:params:scim:schemas:core:2.0:Group"]
    assert created["displayName"] == "displayName" and created["externalId"] == CREATE_GROUP["externalId"]


def test_get_group_excluding_members(scim: Scim) -> None:
    uid = _user(scim)["id"]
    gid = scim.ok(scim.post("/Groups", {**CREATE_GROUP, "members": [{"value": uid}]}), 201)["id"]
    one = scim.ok(scim.get(f"/Groups/{gid}", excludedAttributes="members"))
    assert "members" not in one and one["displayName"] == "displayName"
    listed = scim.ok(scim.get("/Groups", excludedAttributes="members", filter='displayName eq "displayName"'))
    assert listed["totalResults"] == 1 and "members" not in listed["Resources"][0]


def test_update_group_display_name(scim: Scim) -> None:
    gid = scim.ok(scim.post("/Groups", CREATE_GROUP), 201)["id"]
    name = "1879db59-3bdf-4490-ad68-ab880a269474updatedDisplayName"
    body = scim.ok(
        scim.patch(f"/Groups/{gid}", _ops({"op": "Replace", "path": "displayName", "value": name}))
    )
    assert body["displayName"] == name


def test_add_then_remove_members_with_a_value_list(scim: Scim) -> None:
    uid = _user(scim)["id"]
    gid = scim.ok(scim.post("/Groups", CREATE_GROUP), 201)["id"]
    added = scim.ok(
        scim.patch(
            f"/Groups/{gid}", _ops({"op": "Add", "path": "members", "value": [{"$ref": None, "value": uid}]})
        )
    )
    assert [m["value"] for m in added["members"]] == [uid]
    assert scim.ok(scim.get("/Groups", filter=f'id eq "{gid}" and members eq "{uid}"'))["totalResults"] == 1
    removed = scim.ok(
        scim.patch(
            f"/Groups/{gid}",
            _ops({"op": "Remove", "path": "members", "value": [{"$ref": None, "value": uid}]}),
        )
    )
    assert not removed.get("members")
    assert scim.ok(scim.get("/Groups", filter=f'id eq "{gid}" and members eq "{uid}"'))["totalResults"] == 0


def test_remove_member_with_a_filter_path(scim: Scim) -> None:
    uid = _user(scim)["id"]
    gid = scim.ok(scim.post("/Groups", {**CREATE_GROUP, "members": [{"value": uid}]}), 201)["id"]
    body = scim.ok(scim.patch(f"/Groups/{gid}", _ops({"op": "remove", "path": f'members[value eq "{uid}"]'})))
    assert not body.get("members")


def test_delete_group(scim: Scim) -> None:
    gid = scim.ok(scim.post("/Groups", CREATE_GROUP), 201)["id"]
    assert scim.delete(f"/Groups/{gid}").status_code == 204
    assert scim.get(f"/Groups/{gid}").status_code == 404
