"""Bad input never makes the server fail (a 5xx), on SQLite and PostgreSQL: every value a database
cannot hold is refused at the edge with a 4xx naming it, and a database that cannot serve answers 503.

Each case here answered 500 (or was accepted) before `api.fields`, `server.request_guard`, the SCIM
body and paging rules and the database classification of `server.errors`.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from sqlalchemy import event, text
from tests.integration.server.conftest import Harness
from tests.integration.server.test_server_tasks_api import assert_error

from gpucommons.api.fields import INT32_MAX

SCIM = {"content-type": "application/scim+json"}
USER = "urn:ietf:params:scim:schemas:core:2.0:User"


def _scim_error(response: object, status: int, scim_type: str | None = None) -> None:
    assert response.status_code == status, response.text  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert body["schemas"] == ["urn:ietf:params:scim:api:messages:2.0:Error"]
    if scim_type:
        assert body["scimType"] == scim_type


def test_event_ids_beyond_the_id_column_are_refused_not_a_server_error(harness: Harness) -> None:
    task = harness.submit(team="a", gpus=1, command=["sleep", "1"])
    url = f"/api/v1/tasks/{task['id']}/events"
    for after in (INT32_MAX + 1, 2**63):  # 2**63: the 9223372036854775808
        error = assert_error(
            harness.http.get(url, params={"after": after}, headers=harness.admin), 422, "validation_error"
        )
        assert "query.after" in str(error["message"])
    assert harness.http.get(url, params={"after": INT32_MAX}, headers=harness.admin).json() == []


def test_nul_in_names_ids_and_parameters_is_refused_naming_where(harness: Harness) -> None:
    body = {"team": "a", "gpus": 1, "command": ["sleep", "1"], "name": "a\x00b"}
    error = assert_error(
        harness.http.post("/api/v1/tasks", json=body, headers=harness.admin), 422, "validation_error"
    )
    assert "body.name" in str(error["message"])
    body = {"team": "a", "gpus": 1, "command": ["sleep", "1\x00"]}
    assert_error(
        harness.http.post("/api/v1/tasks", json=body, headers=harness.admin), 422, "validation_error"
    )
    lone = b'{"team": "a", "gpus": 1, "command": ["x"], "name": "a\\ud800"}'
    headers = {**harness.admin, "content-type": "application/json"}
    assert_error(harness.http.post("/api/v1/tasks", content=lone, headers=headers), 422, "validation_error")
    error = assert_error(
        harness.http.get("/api/v1/tasks/t%00", headers=harness.admin), 422, "validation_error"
    )
    assert error["details"]["errors"][0]["field"] == "path"  # type: ignore[index]
    error = assert_error(
        harness.http.get("/api/v1/audit", params={"actor": "x\x00"}, headers=harness.admin),
        422,
        "validation_error",
    )
    assert "query.actor" in str(error["message"])


def test_nul_in_a_scim_user_name_or_id_is_refused_as_invalid_value(harness: Harness) -> None:
    user = {"schemas": [USER], "userName": "bjensen\x00"}
    response = harness.http.post("/scim/v2/Users", json=user, headers={**harness.admin, **SCIM})
    _scim_error(response, 400, "invalidValue")
    assert "userName" in response.json()["detail"]
    _scim_error(harness.http.get("/scim/v2/Users/u%00", headers=harness.admin), 400, "invalidValue")
    created = harness.http.post(
        "/scim/v2/Users", json={"schemas": [USER], "userName": "bjensen"}, headers={**harness.admin, **SCIM}
    )
    assert created.status_code == 201, created.text


def test_scim_start_index_beyond_every_resource_gives_an_empty_page(harness: Harness) -> None:
    huge = "100000000000000000000000"  # 1e23 as an integer: past any SQL integer
    page = harness.http.get("/scim/v2/Users", params={"startIndex": huge}, headers=harness.admin)
    assert page.status_code == 200, page.text
    assert page.json()["Resources"] == [] if "Resources" in page.json() else True
    assert page.json()["itemsPerPage"] == 0
    _scim_error(harness.http.get("/scim/v2/Users", params={"startIndex": "1e23"}, headers=harness.admin), 400)
    search = {"schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"], "startIndex": int(1e23)}
    found = harness.http.post("/scim/v2/.search", json=search, headers={**harness.admin, **SCIM})
    assert found.status_code == 200, found.text
    assert found.json()["itemsPerPage"] == 0


def test_scim_filters_nested_too_deep_are_refused_as_invalid_filter(harness: Harness) -> None:
    for depth in (5000, 1000, 17):
        nested = "(" * depth + 'userName eq "x"' + ")" * depth
        response = harness.http.get("/scim/v2/Users", params={"filter": nested}, headers=harness.admin)
        _scim_error(response, 400, "invalidFilter")
    fine = "(" * 3 + 'userName eq "x"' + ")" * 3
    assert (
        harness.http.get("/scim/v2/Users", params={"filter": fine}, headers=harness.admin).status_code == 200
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [("gpus", True), ("gpus", "1"), ("gpus", 1.0), ("command", "sleep 1"), ("name", 7)],
)
def test_request_fields_take_their_own_type_only(harness: Harness, field: str, value: object) -> None:
    body = {"team": "a", "gpus": 1, "command": ["sleep", "1"], field: value}
    error = assert_error(
        harness.http.post("/api/v1/tasks", json=body, headers=harness.admin), 422, "validation_error"
    )
    assert f"body.{field}" in str(error["message"])


def test_usage_windows_are_iso_times_and_a_time_without_offset_is_utc(harness: Harness) -> None:
    for number in ("0.5", "1700000000"):
        error = assert_error(
            harness.http.get("/api/v1/usage", params={"to": number}, headers=harness.admin),
            422,
            "validation_error",
        )
        assert "ISO-8601" in str(error["message"])
    task = harness.submit(team="a", gpus=1, command=["sleep", "1"])
    harness.cycle()
    naive = harness.http.get("/api/v1/usage", params={"from": "2000-01-01T00:00:00"}, headers=harness.admin)
    aware = harness.http.get("/api/v1/usage", params={"from": "2000-01-01T00:00:00Z"}, headers=harness.admin)
    assert naive.status_code == 200, naive.text
    assert [i["task_id"] for i in naive.json()] == [i["task_id"] for i in aware.json()] == [task["id"]]
    # A window starting in 2000 local time would still hold the task: so also ask one that ends there.
    before = harness.http.get("/api/v1/usage", params={"to": "2000-01-01T00:00:00"}, headers=harness.admin)
    assert before.json() == []


def _make_read_only(harness: Harness, database_url: str) -> None:
    db = harness.ctx.db
    if db.is_sqlite:
        event.listen(db.engine, "connect", lambda conn, _record: conn.execute("PRAGMA query_only=ON"))
    else:
        name = urlsplit(database_url).path.lstrip("/")
        with db.engine.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on'))
            conn.commit()
    db.engine.dispose()  # every new connection is read-only


def test_a_read_only_database_answers_503_with_retry_after(harness: Harness, database_url: str) -> None:
    harness.http.get("/api/v1/tasks", headers=harness.admin)  # the token's last use is recorded
    _make_read_only(harness, database_url)
    response = harness.http.post(
        "/api/v1/tasks", json={"team": "a", "gpus": 1, "command": ["sleep", "1"]}, headers=harness.admin
    )
    error = assert_error(response, 503, "unavailable")
    assert "read-only" in str(error["message"])
    assert response.headers["retry-after"] == "1"
    user = {"schemas": [USER], "userName": "bjensen"}
    scim = harness.http.post("/scim/v2/Users", json=user, headers={**harness.admin, **SCIM})
    _scim_error(scim, 503)
