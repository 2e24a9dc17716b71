"""Bearer tokens against a real database: resolution, expiry, revocation, the 401 shape."""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from gpucommons.domain.model import Policy, Pool, PriorityClass, Team
from gpucommons.identity.authz import Action, authorize
from gpucommons.identity.principal import Principal, Role
from gpucommons.server.auth import CurrentPrincipal, create_bootstrap_admin_token
from gpucommons.server.auth.credentials import issue_token, resolve_token, revoke_user_credentials
from gpucommons.server.auth_wiring import install_auth
from gpucommons.store.base import Base
from gpucommons.store.db import Database, sqlite_url
from gpucommons.store.identity_models import ApiToken, DirectoryGroup, DirectoryUser, GroupMember

POLICY = Policy(
    cluster_name="t",
    pools=(Pool("h100", "H100", 1, 8, Decimal(1)),),
    priority_classes=(PriorityClass("experiment", 100),),
    default_priority_class="experiment",
    teams=(Team("nlp", (), groups=("ml-nlp",)), Team("vision", (), groups=("ml-vision",))),
)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(sqlite_url(tmp_path))
    Base.metadata.create_all(database.engine)
    yield database
    database.dispose()


@pytest.fixture
def client(db: Database) -> TestClient:
    app = FastAPI()
    app.state.db = db
    app.state.policy = lambda: POLICY
    install_auth(app)

    @app.get("/whoami")
    def whoami(principal: CurrentPrincipal) -> dict[str, object]:
        return {
            "subject": principal.subject,
            "teams": sorted(principal.teams),
            "admin": principal.platform_admin,
        }

    @app.get("/teams/{team}/logs")
    def logs(team: str, principal: CurrentPrincipal) -> dict[str, str]:
        authorize(principal, Action.LOGS_READ, team)
        return {"team": team}

    return TestClient(app)


def _user(db: Database, name: str, groups: list[str]) -> str:
    now = time.time()
    with db.session() as s:
        user = DirectoryUser(
            id=f"u-{name}", user_name=name, user_name_key=name.casefold(), created_at=now, updated_at=now
        )
        s.add(user)
        for g in groups:
            group = s.get(DirectoryGroup, f"g-{g}") or DirectoryGroup(
                id=f"g-{g}", display_name=g, display_name_key=g.casefold(), created_at=now, updated_at=now
            )
            s.add(group)
            s.flush()
            s.add(GroupMember(group_id=group.id, member_id=user.id, added_at=now))
    return f"u-{name}"


def _token(
    db: Database,
    user_id: str | None = None,
    *,
    role: Role | None = None,
    team: str | None = None,
    expires_at: float | None = None,
) -> str:
    with db.session() as s:
        return issue_token(
            s,
            name="t",
            now=time.time(),
            subject=user_id or "svc",
            user_id=user_id,
            role=role,
            team=team,
            expires_at=expires_at,
        ).token


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_bootstrap_admin_token_is_a_platform_admin(db: Database, client: TestClient) -> None:
    token = create_bootstrap_admin_token(db)
    r = client.get("/whoami", headers=_auth(token))
    assert r.status_code == 200 and r.json()["admin"] is True
    with db.session() as s:
        row = s.query(ApiToken).one()
        assert token not in row.secret_hash and row.role == "platform_admin"


@pytest.mark.parametrize(
    "header", [None, "Bearer nonsense", "Bearer gct_0123456789abcdef.wrong", "Basic abc"]
)
def test_missing_or_bad_credentials_get_401_error_json(client: TestClient, header: str | None) -> None:
    r = client.get("/whoami", headers={"Authorization": header} if header else {})
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "unauthenticated"
    assert r.headers["www-authenticate"] == "Bearer"


def test_user_token_carries_current_directory_roles(db: Database, client: TestClient) -> None:
    token = _token(db, _user(db, "alice", ["ml-nlp"]))
    assert client.get("/whoami", headers=_auth(token)).json()["teams"] == ["nlp"]
    assert client.get("/teams/nlp/logs", headers=_auth(token)).status_code == 200
    r = client.get("/teams/vision/logs", headers=_auth(token))
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    assert r.json()["error"]["details"] == {"action": "logs.read", "team": "vision"}


def test_group_removal_takes_effect_on_next_request(db: Database, client: TestClient) -> None:
    uid = _user(db, "bob", ["ml-nlp"])
    token = _token(db, uid)
    assert client.get("/teams/nlp/logs", headers=_auth(token)).status_code == 200
    with db.session() as s:
        s.query(GroupMember).filter_by(member_id=uid).delete()
    assert client.get("/teams/nlp/logs", headers=_auth(token)).status_code == 403


def test_inactive_user_and_revoked_tokens_fail_at_once(db: Database, client: TestClient) -> None:
    uid = _user(db, "carol", ["ml-nlp"])
    token, other = _token(db, uid), _token(db, uid)
    with db.session() as s:
        s.get(DirectoryUser, uid).active = False  # type: ignore[union-attr]
    assert client.get("/whoami", headers=_auth(token)).status_code == 401
    with db.session() as s:
        s.get(DirectoryUser, uid).active = True  # type: ignore[union-attr]
        assert revoke_user_credentials(s, [uid], time.time()) == 2
    assert client.get("/whoami", headers=_auth(other)).status_code == 401


def test_expired_token_fails(db: Database, client: TestClient) -> None:
    token = _token(db, role=Role.FINANCE, expires_at=time.time() - 1)
    assert client.get("/whoami", headers=_auth(token)).status_code == 401


def test_token_narrowed_to_a_team_role(db: Database, client: TestClient) -> None:
    uid = _user(db, "dave", ["ml-nlp", "ml-vision"])
    token = _token(db, uid, role=Role.TEAM_MEMBER, team="vision")
    assert client.get("/whoami", headers=_auth(token)).json()["teams"] == ["vision"]


def test_service_token_needs_a_role() -> None:
    with pytest.raises(ValueError, match="role"):
        issue_token(None, name="x", now=0, subject="x")  # type: ignore[arg-type]


def test_principal_is_left_on_request_state_for_audit(db: Database) -> None:
    app = FastAPI()
    app.state.db = db
    install_auth(app)
    seen: list[Principal] = []

    @app.post("/x")
    def x(request: Request, principal: CurrentPrincipal) -> None:
        seen.append(request.state.principal)

    token = create_bootstrap_admin_token(db)
    assert TestClient(app).post("/x", headers=_auth(token)).status_code == 200
    assert seen[0].platform_admin and seen[0].credential_id == token[4:20]


def test_demo_users_get_the_roles_their_groups_give(db: Database) -> None:
    from dataclasses import replace

    from gpucommons.domain.model import IdentityConfig
    from gpucommons.server.auth.demo import create_demo_users
    from gpucommons.testing.identity import identity_policy

    policy = replace(identity_policy(), identity=IdentityConfig(finance_groups=("finance",)))
    with db.session() as s:
        demo = {u.user_name: u for u in create_demo_users(s, policy, time.time())}
    with db.session() as s:
        again = create_demo_users(s, policy, time.time())  # idempotent: same users, new tokens
    assert set(demo) == {"nlp-member", "nlp-lead", "vision-member", "finance"} == {u.user_name for u in again}

    def who(name: str) -> Principal:
        with db.session() as s:
            p = resolve_token(s, demo[name].token, policy, time.time())
        assert p is not None
        return p

    assert who("nlp-member").member_of == {"nlp"} and who("nlp-lead").admin_of == {"nlp"}
    assert who("vision-member").member_of == {"vision"} and who("finance").finance
    with db.session() as s:
        assert s.query(DirectoryUser).count() == 4
