"""Priority classes reserved to teams or roles: who may submit in which class, through the real app on
SQLite and PostgreSQL. Others get 403 with a sentence naming the class and who may use it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from tests.integration.server.conftest import SMALL_POLICY, Harness
from tests.integration.server.test_server_tasks_api import assert_error

from gpucommons.identity.roles import Role
from gpucommons.server.auth.credentials import issue_token

POLICY = SMALL_POLICY.replace(
    "  - {name: normal, value: 100, grace_period: 2s}\n",
    "  - {name: normal, value: 100, grace_period: 2s}\n"
    "  - {name: production, value: 1000, preemptible: false, teams: [a]}\n"
    "  - {name: leads, value: 400, grace_period: 2s, roles: [team_admin]}\n"
    "  - {name: ops, value: 800, grace_period: 2s, teams: [b], roles: [platform_admin]}\n",
)


@pytest.fixture
def classes(make_harness: Callable[..., Harness]) -> Harness:
    return make_harness(POLICY)


def _team_admin(harness: Harness, team: str) -> dict[str, str]:
    with harness.ctx.db.session() as session:
        token = issue_token(
            session,
            name=f"lead-{team}",
            now=time.time(),
            subject=f"lead-{team}",
            role=Role.TEAM_ADMIN,
            team=team,
        ).token
    return {"Authorization": f"Bearer {token}"}


def _submit(harness: Harness, headers: dict[str, str], team: str, priority: str | None) -> Any:
    body: dict[str, object] = {"team": team, "gpus": 1, "command": ["sleep", "1"]}
    if priority is not None:
        body["priority"] = priority
    return harness.http.post("/api/v1/tasks", json=body, headers=headers)


def test_a_class_reserved_to_teams_refuses_the_others_naming_it_and_who_may(classes: Harness) -> None:
    member_b = classes.member_token("b")
    error = assert_error(_submit(classes, member_b, "b", "production"), 403, "forbidden")
    assert "priority class 'production' is reserved for team a" in str(error["message"])
    assert "team 'b' may not use it" in str(error["message"])
    assert error["details"] == {
        "action": "task.submit", "team": "b", "priority_class": "production", "teams": ["a"], "roles": []
    }  # fmt: skip
    assert _submit(classes, classes.member_token("a"), "a", "production").status_code == 201
    # The teams rule is about the team's share of the cluster: a platform admin is refused for b too.
    assert_error(_submit(classes, classes.admin, "b", "production"), 403, "forbidden")


def test_a_class_reserved_to_a_role_refuses_members_without_it(classes: Harness) -> None:
    error = assert_error(_submit(classes, classes.member_token("a"), "a", "leads"), 403, "forbidden")
    assert "priority class 'leads' is reserved for team admins" in str(error["message"])
    assert _submit(classes, _team_admin(classes, "a"), "a", "leads").status_code == 201
    assert _submit(classes, classes.admin, "b", "leads").status_code == 201


def test_teams_and_roles_together_need_both(classes: Harness) -> None:
    error = assert_error(_submit(classes, _team_admin(classes, "b"), "b", "ops"), 403, "forbidden")
    assert "reserved for platform admins of team b" in str(error["message"])
    assert _submit(classes, classes.admin, "b", "ops").status_code == 201
    assert_error(_submit(classes, classes.admin, "a", "ops"), 403, "forbidden")


def test_the_default_class_stays_open_and_a_batch_names_the_refused_task(classes: Harness) -> None:
    member_b = classes.member_token("b")
    assert _submit(classes, member_b, "b", None).status_code == 201
    batch = {
        "tasks": [
            {"team": "b", "gpus": 1, "command": ["sleep", "1"]},
            {"team": "b", "gpus": 1, "command": ["sleep", "1"], "priority": "production"},
        ]
    }
    response = classes.http.post("/api/v1/tasks/batch", json=batch, headers=member_b)
    error = assert_error(response, 403, "forbidden")
    assert error["details"]["index"] == 1  # type: ignore[index]
    listed = classes.http.get("/api/v1/tasks", params={"team": "b"}, headers=classes.admin).json()
    assert len(listed) == 1  # all or none
