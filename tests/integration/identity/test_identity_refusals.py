"""Refusals leave a trace and cost the refused: failed authentications and denied reads are audited
(boundedly), and past a limit of failed authentications an address gets 429 with Retry-After before
its credential is even looked up. SQLite and PostgreSQL, through the identity app."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from gpucommons.identity.principal import Role
from gpucommons.server.auth.audit import DENIED_PER_ADDRESS, DeniedBudget
from gpucommons.server.auth.throttle import SlidingWindows
from gpucommons.server.auth_wiring import install_auth
from gpucommons.server.errors import install_error_handlers
from gpucommons.store.db import Database
from gpucommons.store.identity_models import AuditEvent
from gpucommons.testing.identity import identity_policy, service_token

LIMIT = 3
BAD = {"Authorization": "Bearer gct_0123456789abcdef.not-the-secret"}


@pytest.fixture
def app(db: Database) -> FastAPI:
    app = FastAPI()
    app.state.db = db
    app.state.policy = identity_policy()
    install_error_handlers(app)
    install_auth(app, failure_limit=LIMIT, failure_window_s=60)
    return app


def _client(app: FastAPI, address: str = "192.0.2.1") -> TestClient:
    return TestClient(app, client=(address, 40000))


def _rows(db: Database) -> list[AuditEvent]:
    with db.session() as s:
        return list(s.scalars(select(AuditEvent).order_by(AuditEvent.id)))


def test_failed_authentications_past_the_limit_get_429_before_any_lookup(app: FastAPI, db: Database) -> None:
    client = _client(app)
    good = {"Authorization": f"Bearer {service_token(db, Role.PLATFORM_ADMIN)}"}
    for _ in range(LIMIT):
        assert client.get("/api/v1/tokens", headers=BAD).status_code == 401
    blocked = client.get("/api/v1/tokens", headers=good)  # even a valid token: not looked up
    assert blocked.status_code == 429
    assert blocked.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(blocked.headers["retry-after"]) <= 60
    scim = client.get("/scim/v2/Users", headers=good)
    assert scim.status_code == 429 and scim.json()["status"] == "429"
    # Another address is not affected; requests without any credential never count.
    other = _client(app, "198.51.100.7")
    assert other.get("/api/v1/tokens", headers=good).status_code == 200
    for _ in range(3 * LIMIT):
        assert other.get("/api/v1/tokens").status_code == 401
    assert other.get("/api/v1/tokens", headers=good).status_code == 200


def test_failed_authentications_and_denied_reads_are_audited(app: FastAPI, db: Database) -> None:
    client = _client(app)
    member = {"Authorization": f"Bearer {service_token(db, Role.TEAM_MEMBER, team='nlp', name='ci')}"}
    assert client.get("/api/v1/auth/whoami", headers=BAD).status_code == 401
    assert client.get("/api/v1/audit", headers=member).status_code == 403
    assert client.get("/api/v1/auth/whoami").status_code == 401  # no credential: not an attempt
    rows = [(r.method, r.outcome, r.status_code, r.credential_id, r.actor, r.remote_addr) for r in _rows(db)]
    assert rows == [
        ("GET", "denied", 401, "0123456789abcdef", None, "192.0.2.1"),
        ("GET", "denied", 403, rows[1][3], "ci", "192.0.2.1"),
    ]


def test_refusal_rows_are_bounded_per_address(app: FastAPI, db: Database) -> None:
    client = _client(app)
    member = {"Authorization": f"Bearer {service_token(db, Role.TEAM_MEMBER, team='nlp', name='ci')}"}
    for _ in range(DENIED_PER_ADDRESS + 10):
        assert client.get("/api/v1/audit", headers=member).status_code == 403
    assert len(_rows(db)) == DENIED_PER_ADDRESS
    assert _client(app, "203.0.113.9").get("/api/v1/audit", headers=member).status_code == 403
    assert len(_rows(db)) == DENIED_PER_ADDRESS + 1


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_windows_forget_old_events_and_bound_what_they_keep() -> None:
    clock = Clock()
    windows = SlidingWindows(2, 10.0, max_keys=2, clock=clock)
    windows.add("a")
    clock.now += 4
    windows.add("a")
    assert windows.full_for("a") == pytest.approx(6.0)
    clock.now += 6
    assert windows.full_for("a") == 0.0  # the first event left the window
    windows.add("b")
    windows.add("c")  # a third address: the least recently seen ("a") is forgotten
    assert windows.full_for("a") == 0.0 and windows.add("a") == 1


def test_the_next_row_says_how_many_refusals_were_left_out() -> None:
    clock = Clock()
    budget = DeniedBudget(per_address=2, in_all=100, window_s=60, clock=clock)
    admitted: list[Any] = [budget.admit("x") for _ in range(5)]
    assert admitted == [0, 0, None, None, None]
    clock.now += 61
    assert budget.admit("x") == 3
    assert budget.admit("x") == 0
