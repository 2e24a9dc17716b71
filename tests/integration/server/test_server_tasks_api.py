"""Submitting, reading and cancelling tasks over the API, with every refusal in the error schema."""

from __future__ import annotations

import sys

import pytest
from tests.integration.server.conftest import Harness

PY = sys.executable


def assert_error(response: object, status: int, code: str) -> dict[str, object]:
    assert response.status_code == status, response.text  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    return dict(body["error"])


def test_task_runs_to_success_and_every_transition_is_an_event(harness: Harness) -> None:
    task = harness.submit(team="a", gpus=1, command=[PY, "-c", "print('hi from the task')"])
    assert task["state"] == "pending"
    done = harness.wait_state(str(task["id"]), "succeeded")
    assert done["exit_code"] == 0
    events = harness.http.get(f"/api/v1/tasks/{task['id']}/events", headers=harness.admin).json()
    steps = [(e["from_state"], e["to_state"]) for e in events if e["kind"] == "transition"]
    assert steps == [("pending", "admitted"), ("admitted", "running"), ("running", "succeeded")]
    log = harness.http.get(f"/api/v1/tasks/{task['id']}/logs", headers=harness.admin)
    assert "hi from the task" in log.text


def test_nonzero_exit_fails_the_task_with_its_code(harness: Harness) -> None:
    task = harness.submit(team="a", gpus=1, command=[PY, "-c", "raise SystemExit(3)"])
    done = harness.wait_state(str(task["id"]), "failed")
    assert done["exit_code"] == 3
    assert "exit code 3" in str(done["message"])


def test_task_environment_names_its_gpus_team_and_checkpoint_dir(harness: Harness, tmp_path: object) -> None:
    script = (
        "import os,json;print(json.dumps({k:os.environ.get(k) for k in "
        "['CUDA_VISIBLE_DEVICES','COMMONS_TASK_ID','COMMONS_TEAM','COMMONS_CHECKPOINT_DIR','COMMONS_RESTART_COUNT']}))"
    )
    task = harness.submit(team="b", gpus=2, command=[PY, "-c", script])
    harness.wait_state(str(task["id"]), "succeeded")
    log = harness.http.get(f"/api/v1/tasks/{task['id']}/logs", headers=harness.admin).text
    import json

    env = json.loads(log.strip().splitlines()[-1])
    assert env["COMMONS_TASK_ID"] == task["id"]
    assert env["COMMONS_TEAM"] == "b"
    assert env["COMMONS_RESTART_COUNT"] == "0"
    assert len(env["CUDA_VISIBLE_DEVICES"].split(",")) == 2
    assert env["COMMONS_CHECKPOINT_DIR"]


def test_cancel_pending_task_ends_it_at_once(harness: Harness) -> None:
    task = harness.submit(team="a", gpus=1, command=["sleep", "5"])
    response = harness.http.post(f"/api/v1/tasks/{task['id']}/cancel", headers=harness.admin)
    assert response.json()["state"] == "cancelled"
    assert_error(
        harness.http.post(f"/api/v1/tasks/{task['id']}/cancel", headers=harness.admin), 409, "conflict"
    )


def test_cancel_running_task_signals_it_and_frees_its_gpus(harness: Harness) -> None:
    task = harness.submit(team="a", gpus=2, command=["sleep", "30"])
    harness.wait_state(str(task["id"]), "running")
    response = harness.http.post(f"/api/v1/tasks/{task['id']}/cancel", headers=harness.admin)
    assert response.json()["cancel_requested"] is True
    done = harness.wait_state(str(task["id"]), "cancelled")
    assert done["finished_at"]
    teams = harness.http.get("/api/v1/teams", headers=harness.admin).json()
    assert {t["name"]: t["used_gpus"] for t in teams} == {"a": 0, "b": 0}


def test_max_runtime_stops_the_task_and_fails_it(harness: Harness) -> None:
    task = harness.submit(team="a", gpus=1, priority="short", command=["sleep", "30"])
    done = harness.wait_state(str(task["id"]), "failed", timeout=20)
    assert "max_runtime" in str(done["message"])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"team": "nope", "gpus": 1, "command": ["true"]}, "team"),
        ({"team": "a", "gpus": 1, "command": ["true"], "priority": "nope"}, "priority"),
        ({"team": "a", "gpus": 1, "command": ["true"], "pool": "nope"}, "pool"),
        ({"team": "a", "gpus": 5, "command": ["true"]}, "gpus"),
        ({"team": "a", "gpus": 0, "command": ["true"]}, "gpus"),
        ({"team": "a", "gpus": 1, "command": ["true"], "checkpoint": "every:soon"}, "checkpoint"),
        ({"team": "a", "gpus": 1, "command": []}, "command"),
        ({"team": "a", "gpus": -1, "command": ["true"]}, "gpus"),
        ({"team": "a", "gpus": 1, "command": ["true"], "colour": "red"}, "colour"),
    ],
)
def test_bad_submissions_are_refused_naming_the_field(
    harness: Harness, body: dict[str, object], field: str
) -> None:
    error = assert_error(
        harness.http.post("/api/v1/tasks", json=body, headers=harness.admin), 422, "validation_error"
    )
    assert field in str(error)


def test_checkpoint_required_class_explains_why_it_refuses(harness: Harness) -> None:
    response = harness.http.post(
        "/api/v1/tasks",
        json={"team": "a", "gpus": 1, "priority": "careful", "command": ["true"]},
        headers=harness.admin,
    )
    error = assert_error(response, 422, "checkpoint_required")
    assert "--checkpoint on-signal" in str(error["message"])
    assert "preempt" in str(error["message"])
    ok = harness.submit(team="a", gpus=1, priority="careful", checkpoint="every:30m", command=["true"])
    assert ok["checkpoint"] == "every:1800s"


def test_malformed_requests_get_the_error_schema(harness: Harness) -> None:
    assert_error(
        harness.http.post(
            "/api/v1/tasks",
            content=b"{not json",
            headers={**harness.admin, "content-type": "application/json"},
        ),
        422,
        "validation_error",
    )
    assert_error(harness.http.get("/api/v1/tasks?limit=abc", headers=harness.admin), 422, "validation_error")
    assert_error(harness.http.get("/api/v1/nowhere", headers=harness.admin), 404, "not_found")
    assert_error(harness.http.delete("/api/v1/tasks", headers=harness.admin), 405, "method_not_allowed")
    assert_error(harness.http.get("/api/v1/tasks"), 401, "unauthenticated")
    assert_error(harness.http.get("/api/v1/tasks/nope", headers=harness.admin), 404, "not_found")


def test_members_of_one_team_never_see_another_teams_tasks(harness: Harness) -> None:
    member_a, member_b = harness.member_token("a"), harness.member_token("b")
    task_b = harness.submit(headers=member_b, team="b", gpus=1, command=["sleep", "5"])
    assert_error(
        harness.http.post(
            "/api/v1/tasks", json={"team": "b", "gpus": 1, "command": ["true"]}, headers=member_a
        ),
        403,
        "forbidden",
    )
    assert harness.http.get("/api/v1/tasks", headers=member_a).json() == []
    for path in ("", "/events", "/logs"):
        assert_error(
            harness.http.get(f"/api/v1/tasks/{task_b['id']}{path}", headers=member_a), 404, "not_found"
        )
    assert_error(
        harness.http.post(f"/api/v1/tasks/{task_b['id']}/cancel", headers=member_a), 404, "not_found"
    )
    assert [t["name"] for t in harness.http.get("/api/v1/teams", headers=member_a).json()] == ["a"]
    assert harness.http.get("/api/v1/queue", headers=member_a).json() == []
    assert [t["id"] for t in harness.http.get("/api/v1/tasks", headers=member_b).json()] == [task_b["id"]]


def test_batch_submission_queues_all_or_none(harness: Harness) -> None:
    good = {"team": "a", "gpus": 1, "command": ["true"]}
    response = harness.http.post(
        "/api/v1/tasks/batch", json={"tasks": [good, good, good]}, headers=harness.admin
    )
    assert response.status_code == 201, response.text
    tasks = response.json()
    assert [t["seq"] for t in tasks] == sorted(t["seq"] for t in tasks)
    bad = {"team": "a", "gpus": 1, "command": ["true"], "priority": "nope"}
    refused = harness.http.post("/api/v1/tasks/batch", json={"tasks": [good, bad]}, headers=harness.admin)
    error = assert_error(refused, 422, "validation_error")
    assert error["details"]["index"] == 1  # type: ignore[index]
    listed = harness.http.get("/api/v1/tasks", headers=harness.admin).json()
    assert len(listed) == 3  # the refused batch left nothing behind
    for task in tasks:
        harness.wait_state(str(task["id"]), "succeeded")
