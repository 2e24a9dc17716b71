"""Deprovisioning reaches what a person minted: a platform admin deactivated, deleted or removed from
the admin group through SCIM loses the tokens they created too — also those minted by a token they
created — unless a platform admin made a token service-owned (and the listing says so). SQLite and
PostgreSQL, through the real app and SCIM."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gpucommons.domain.model import IdentityConfig
from gpucommons.server.auth.credentials import issue_token
from gpucommons.store.db import Database
from gpucommons.store.identity_models import ApiToken
from gpucommons.testing.identity import ADMINS, ScimClient, identity_policy

USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class Admins:
    """Alice, a platform admin pushed by SCIM (in the admin group), and her own API token."""

    def __init__(self, db: Database, client: TestClient, scim: ScimClient) -> None:
        self.db, self.client, self.scim = db, client, scim
        self.alice = scim.ok(scim.post("/Users", {"schemas": [USER], "userName": "alice"}), 201)["id"]
        self.group = scim.ok(
            scim.post(
                "/Groups", {"schemas": [GROUP], "displayName": ADMINS, "members": [{"value": self.alice}]}
            ),
            201,
        )["id"]
        with db.session() as s:
            self.alice_token = issue_token(
                s, name="alice", now=time.time(), subject="alice", user_id=self.alice, created_by="sign-in"
            ).token

    def mint(self, with_token: str, **body: Any) -> dict[str, Any]:
        response = self.client.post("/api/v1/tokens", json=body, headers=_bearer(with_token))
        assert response.status_code == 201, response.text
        return dict(response.json())

    def works(self, token: str) -> bool:
        status = self.client.get("/api/v1/auth/whoami", headers=_bearer(token)).status_code
        assert status in (200, 401)
        return status == 200

    def revoked(self, token_id: str) -> bool:
        with self.db.session() as s:
            row = s.get(ApiToken, token_id)
            assert row is not None
            return row.revoked_at is not None


@pytest.fixture
def admins(db: Database, client: TestClient, scim: ScimClient) -> Admins:
    return Admins(db, client, scim)


def test_a_deactivated_admin_takes_the_tokens_they_minted_along(admins: Admins) -> None:
    minted = admins.mint(admins.alice_token, name="robot", role="platform_admin")
    assert minted["created_by"] == "alice"
    assert minted["created_by_user_id"] == admins.alice
    assert minted["service_owned"] is False
    assert admins.works(minted["token"])
    admins.scim.ok(
        admins.scim.patch(
            f"/Users/{admins.alice}",
            {"schemas": [PATCH_OP], "Operations": [{"op": "replace", "value": {"active": False}}]},
        )
    )
    assert not admins.works(admins.alice_token)
    assert not admins.works(minted["token"])
    assert admins.revoked(minted["id"])


def test_a_deleted_admin_takes_the_tokens_they_minted_along(admins: Admins) -> None:
    minted = admins.mint(admins.alice_token, name="ci", role="team_member", team="nlp")
    assert admins.scim.delete(f"/Users/{admins.alice}").status_code == 204
    assert not admins.works(minted["token"])
    assert admins.revoked(minted["id"])


def test_removal_from_the_admin_group_revokes_what_they_minted_but_not_their_own_sign_in(
    admins: Admins,
) -> None:
    minted = admins.mint(admins.alice_token, name="robot", role="platform_admin")
    remove = {"op": "remove", "path": f'members[value eq "{admins.alice}"]'}
    admins.scim.ok(
        admins.scim.patch(f"/Groups/{admins.group}", {"schemas": [PATCH_OP], "Operations": [remove]})
    )
    assert admins.revoked(minted["id"])
    assert not admins.works(minted["token"])
    assert admins.works(admins.alice_token)  # her own token stays, with the roles she has left
    denied = admins.client.get("/api/v1/tokens", headers=_bearer(admins.alice_token))
    assert denied.status_code == 403


def test_a_chain_of_tokens_rests_on_the_person_who_began_it(admins: Admins) -> None:
    robot = admins.mint(admins.alice_token, name="robot", role="platform_admin")
    child = admins.mint(robot["token"], name="child", role="finance")
    assert child["created_by"] == "robot"
    assert child["created_by_user_id"] == admins.alice
    admins.scim.ok(
        admins.scim.patch(
            f"/Users/{admins.alice}",
            {"schemas": [PATCH_OP], "Operations": [{"op": "replace", "path": "active", "value": False}]},
        )
    )
    assert not admins.works(child["token"])
    assert admins.revoked(child["id"])


def test_a_service_owned_token_outlives_its_creator_and_is_listed_as_such(admins: Admins) -> None:
    owned = admins.mint(admins.alice_token, name="okta", role="scim", service_owned=True)
    grandchild = admins.mint(admins.alice_token, name="helper", role="platform_admin", service_owned=True)
    from_owned = admins.mint(grandchild["token"], name="from-service", role="finance")
    assert from_owned["created_by_user_id"] is None  # a service-owned token has no person behind it
    assert admins.scim.delete(f"/Users/{admins.alice}").status_code == 204
    assert not admins.revoked(owned["id"]) and not admins.revoked(from_owned["id"])
    assert admins.works(grandchild["token"]) and admins.works(from_owned["token"])
    listed = admins.client.get("/api/v1/tokens", headers=_bearer(grandchild["token"])).json()
    flags = {t["name"]: t["service_owned"] for t in listed}
    assert flags["okta"] is True and flags["helper"] is True and flags["from-service"] is False


def test_only_service_tokens_can_be_service_owned(admins: Admins) -> None:
    response = admins.client.post(
        "/api/v1/tokens",
        json={"name": "x", "user": "alice", "service_owned": True},
        headers=_bearer(admins.alice_token),
    )
    assert response.status_code == 422
    assert response.json()["error"]["details"]["field"] == "service_owned"


def test_a_token_is_refused_while_its_creator_holds_no_admin_role_under_the_policy(
    admins: Admins, client: TestClient
) -> None:
    """A policy that stops naming the admin group takes no directory change: resolution refuses the
    tokens such admins minted for as long as the policy says so, without revoking them."""
    minted = admins.mint(admins.alice_token, name="robot", role="finance")
    policy = identity_policy()
    client.app.state.policy = replace(policy, identity=IdentityConfig(admin_groups=("someone-else",)))  # type: ignore[attr-defined]
    assert not admins.works(minted["token"])
    assert not admins.revoked(minted["id"])
    client.app.state.policy = policy  # type: ignore[attr-defined]
    assert admins.works(minted["token"])
