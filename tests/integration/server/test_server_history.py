"""History, team, task timeline, planning and policy-diff endpoints on a real store (SQLite and
PostgreSQL) with a seeded past and a hand-driven clock; each endpoint scoped as the rest of the API."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.integration.server.conftest import Harness

from gpucommons.backends.clock import ManualClock
from gpucommons.identity.roles import Role
from gpucommons.server.app import build_context
from gpucommons.server.auth.credentials import issue_token
from gpucommons.server.executors import TimerExecutor
from gpucommons.server.settings import Settings
from gpucommons.testing.history import HOUR, expected_held, history_seeds, seed_store

POLICY = (Path(__file__).parents[2] / "e2e" / "web" / "dashboard-policy.yaml").read_text()
#: The hand-driven clock's "now": the middle of a month, ten minutes into a half-hour bucket.
NOW = datetime(2026, 3, 15, 12, 10, tzinfo=UTC).timestamp()
MEMBERS = {"alpha": ["ann", "al"], "alpha-leads": ["ann"], "beta": ["bea"]}

HarnessMaker = Callable[..., tuple[Harness, ManualClock]]


@pytest.fixture
def seeded(tmp_path: Path, database_url: str) -> Iterator[HarnessMaker]:
    made: list[Harness] = []

    def make(policy: str = POLICY, seed: bool = True) -> tuple[Harness, ManualClock]:
        clock = ManualClock(NOW)
        if seed:
            seed_store(database_url, history_seeds(NOW), NOW, MEMBERS)
        policy_file = tmp_path / "policy.yaml"
        policy_file.write_text(policy)
        settings = Settings(
            home=tmp_path / "home",
            database_url=database_url,
            policy=policy_file,
            run_scheduler=False,
            isolation="logical",
        )
        harness = Harness(build_context(settings, executor=TimerExecutor(clock), clock=clock))
        made.append(harness)
        return harness, clock

    yield make
    for h in made:
        h.close()


def token(h: Harness, role: Role, team: str | None = None, subject: str = "someone") -> dict[str, str]:
    with h.ctx.db.session() as session:
        issued = issue_token(session, name=subject, now=time.time(), subject=subject, role=role, team=team)
    return {"Authorization": f"Bearer {issued.token}"}


def get(
    h: Harness, path: str, headers: dict[str, str] | None = None, status: int = 200, **params: object
) -> object:
    response = h.http.get(path, params=params, headers=headers or h.admin)
    assert response.status_code == status, response.text
    return response.json()


def test_gpu_history_is_the_seeded_ledger_bucket_by_bucket_with_the_quota_line(seeded: HarnessMaker) -> None:
    h, _ = seeded()
    history = get(h, "/api/v1/history/gpus", window="24h")
    assert isinstance(history, dict)
    assert history["step_seconds"] == 1800 and len(history["bucket_starts"]) == 48
    starts = [datetime.fromisoformat(t).timestamp() for t in history["bucket_starts"]]
    ends = [*starts[1:], datetime.fromisoformat(history["end"]).timestamp()]
    assert ends[-1] == NOW
    seeds = history_seeds(NOW)
    series = {(s["team"], s["pool"]): s for s in history["series"]}
    assert set(series) == {("alpha", "gpu"), ("beta", "gpu")}
    for team in ("alpha", "beta"):
        s = series[(team, "gpu")]
        assert s["nominal_gpus"] == [4] * 48
        for i, (t0, t1) in enumerate(zip(starts, ends, strict=True)):
            held, borrowed = expected_held(seeds, team, t0, t1)
            assert s["held_gpus"][i] == pytest.approx(held, abs=1e-3), (team, i)
            assert s["borrowed_gpus"][i] == pytest.approx(borrowed, abs=1e-3), (team, i)
    # alpha held 6 GPUs (2 above its quota) from 10 h to 6 h before the current bucket
    b = NOW - 600
    i = starts.index(b - 8 * HOUR)
    assert (series[("alpha", "gpu")]["held_gpus"][i], series[("alpha", "gpu")]["borrowed_gpus"][i]) == (6, 2)


def test_a_member_sees_the_history_of_their_own_team_only(seeded: HarnessMaker) -> None:
    h, _ = seeded()
    bea = token(h, Role.TEAM_MEMBER, "beta", "bea")
    history = get(h, "/api/v1/history/gpus", bea, window="7d")
    assert isinstance(history, dict)
    assert {s["team"] for s in history["series"]} == {"beta"}
    get(h, "/api/v1/history/gpus", bea, status=403, team="alpha")
    waits = get(h, "/api/v1/history/waits", bea)
    assert isinstance(waits, dict)
    assert [t["team"] for t in waits["teams"]] == ["beta"]
    get(h, "/api/v1/history/gpus", {"Authorization": "Bearer nope"}, status=401)


def test_waits_per_day_count_each_admission_from_its_entry_into_the_queue(seeded: HarnessMaker) -> None:
    h, _ = seeded()
    waits = get(h, "/api/v1/history/waits", days=3)
    assert isinstance(waits, dict)
    alpha = next(t for t in waits["teams"] if t["team"] == "alpha")
    # h-alpha-old waited 120 s, then 60 s after its preemption (both on 2026-03-14);
    # h-alpha-big waited 600 s (2026-03-15).
    by_day = {d["day"]: d for d in alpha["days"]}
    assert by_day["2026-03-14"]["admissions"] == 2
    assert by_day["2026-03-14"]["p50_seconds"] == 90.0
    assert by_day["2026-03-14"]["max_seconds"] == 120.0
    assert by_day["2026-03-15"] == {
        "day": "2026-03-15",
        "admissions": 1,
        "p50_seconds": 600.0,
        "p95_seconds": 600.0,
        "max_seconds": 600.0,
    }


def test_the_team_page_names_members_costs_and_who_preempted_whom(seeded: HarnessMaker) -> None:
    h, _ = seeded()
    alpha = get(h, "/api/v1/teams/alpha")
    assert isinstance(alpha, dict)
    assert [(m["user_name"], m["role"]) for m in alpha["members"]] == [("al", "member"), ("ann", "admin")]
    assert alpha["quotas"][0] | {} == alpha["quotas"][0] and alpha["quotas"][0]["nominal_gpus"] == 4
    assert alpha["quotas"][0]["borrow_limit_gpus"] == 2 and alpha["quotas"][0]["lend_limit_gpus"] is None
    suffered = alpha["preemptions"]["suffered"]
    assert suffered == [{"team": "beta", "count": 1, "gpus": 2}]
    assert alpha["preemptions"]["caused"] == []
    # The costs are those of the invoice of the month so far, to the cent.
    invoice = h.http.get("/api/v1/invoices", params={"month": "2026-03"}, headers=h.admin).json()
    assert alpha["costs"]["total_cents"] == invoice["teams"]["alpha"]["total_cents"]
    assert alpha["costs"]["direct_cents"] == invoice["teams"]["alpha"]["direct_cents"]
    budget = alpha["budget"]
    spent = h.http.get("/api/v1/budgets", headers=h.admin).json()
    assert budget["spent_cents"] == next(b for b in spent if b["team"] == "alpha")["spent_cents"]
    assert budget["days"][-1]["spent_cents"] == budget["spent_cents"]
    assert [d["day"] for d in budget["days"]] == [f"2026-03-{d:02d}" for d in range(1, 16)]
    assert budget["projected_cents"] >= budget["spent_cents"]

    beta_member = token(h, Role.TEAM_MEMBER, "beta", "bea")
    beta = get(h, "/api/v1/teams/beta", beta_member)
    assert isinstance(beta, dict)
    assert beta["preemptions"]["caused"] == [{"team": "alpha", "count": 1, "gpus": 2}]
    (item,) = beta["preemptions"]["recent"]
    assert (item["victim_team"], item["victim_task_id"]) == ("alpha", None)  # not beta's to see
    assert item["preemptor_task_id"] == "h-beta-big"
    get(h, "/api/v1/teams/alpha", beta_member, status=403)
    get(h, "/api/v1/teams/nope", status=404)
    finance = get(h, "/api/v1/teams/alpha", token(h, Role.FINANCE, subject="fin"))
    assert isinstance(finance, dict) and finance["costs"] is not None


def test_a_task_timeline_shows_each_attempt_and_the_team_that_preempted_it(seeded: HarnessMaker) -> None:
    h, _ = seeded()
    timeline = get(h, "/api/v1/tasks/h-alpha-old/timeline")
    assert isinstance(timeline, dict)
    first, second = timeline["attempts"]
    assert (first["outcome"], first["waited_seconds"], first["ran_seconds"]) == ("preempted", 120.0, 3600.0)
    assert first["preempted_by"]["team"] == "beta" and first["preempted_by"]["task_id"] == "h-beta-big"
    assert (second["number"], second["outcome"], second["waited_seconds"]) == (2, "succeeded", 60.0)
    assert timeline["estimate"] is None

    alpha_member = token(h, Role.TEAM_MEMBER, "alpha", "al")
    mine = get(h, "/api/v1/tasks/h-alpha-old/timeline", alpha_member)
    assert isinstance(mine, dict)
    assert mine["attempts"][0]["preempted_by"] == {**first["preempted_by"], "task_id": None}
    get(h, "/api/v1/tasks/h-beta-big/timeline", alpha_member, status=404)


def test_a_waiting_task_gets_a_start_estimate_with_its_range(seeded: HarnessMaker) -> None:
    h, clock = seeded()
    for gpus in (4, 2):
        h.submit(team="alpha", gpus=gpus, command=["sleep", "7200"])
    h.cycle()
    waiting = h.submit(team="alpha", gpus=2, command=["sleep", "600"])
    clock.advance(60)
    h.cycle()
    assert h.task(str(waiting["id"]))["state"] == "pending"
    estimate = get(h, f"/api/v1/tasks/{waiting['id']}/timeline")["estimate"]  # type: ignore[index]
    assert estimate["position"] == 1
    assert estimate["history_tasks"] == 4  # the preempted attempt teaches no run time
    likely, low, high = (
        datetime.fromisoformat(estimate[k]).timestamp() for k in ("likely", "earliest", "latest")
    )
    assert NOW + 60 < low <= likely <= high
    assert "replay of the queue" in estimate["basis"] and "rough guess" in estimate["basis"]


def test_a_replay_of_a_month_runs_in_the_background_to_completion(seeded: HarnessMaker) -> None:
    h, _ = seeded()
    proposed = POLICY.replace("gpu: {gpus: 4, borrow_limit: 2}", "gpu: {gpus: 6, borrow_limit: 2}").replace(
        "gpu: {gpus: 4, borrow_limit: 0}", "gpu: {gpus: 2, borrow_limit: 0}"
    )
    member = token(h, Role.TEAM_MEMBER, "alpha", "al")
    body = {"kind": "replay", "policy": proposed, "month": "2026-03"}
    assert h.http.post("/api/v1/planning/runs", json=body, headers=member).status_code == 403
    assert h.http.get("/api/v1/planning/runs", headers=member).status_code == 403
    bad = h.http.post("/api/v1/planning/runs", json={**body, "policy": "teams: [1"}, headers=h.admin)
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "policy_invalid"
    created = h.http.post("/api/v1/planning/runs", json=body, headers=h.admin)
    assert created.status_code == 202, created.text
    run_id = created.json()["id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run = get(h, f"/api/v1/planning/runs/{run_id}")
        assert isinstance(run, dict)
        if run["status"] in ("succeeded", "failed"):
            break
        time.sleep(0.1)
    assert run["status"] == "succeeded", run["error"]
    assert run["report"]["jobs"] == 4 and run["report"]["variants"] == ["current", "proposed"]
    assert {row[0] for row in run["report"]["team_rows"]} == {"alpha", "beta"}
    finance = get(h, "/api/v1/planning/runs", token(h, Role.FINANCE, subject="fin"))
    assert isinstance(finance, list) and finance[0]["id"] == run_id


def test_the_policy_diff_shows_quota_changes_and_refuses_a_bad_file(seeded: HarnessMaker) -> None:
    h, _ = seeded(seed=False)
    proposed = POLICY.replace("gpu: {gpus: 4, borrow_limit: 2}", "gpu: {gpus: 3, borrow_limit: 1}")
    diff = h.http.post("/api/v1/policy/diff", json={"text": proposed}, headers=h.admin).json()
    assert diff["valid"] and diff["quota_changes"] == [
        {"team": "alpha", "pool": "gpu", "before": "4 GPUs, borrow ≤ 2", "after": "3 GPUs, borrow ≤ 1"}
    ]
    assert "-      gpu: {gpus: 4, borrow_limit: 2}" in diff["diff"]
    assert "+      gpu: {gpus: 3, borrow_limit: 1}" in diff["diff"]
    refused = h.http.post("/api/v1/policy/diff", json={"text": "cluster: {name: x}"}, headers=h.admin).json()
    assert not refused["valid"] and refused["issues"]
    member = token(h, Role.TEAM_MEMBER, "alpha", "al")
    assert h.http.post("/api/v1/policy/diff", json={"text": proposed}, headers=member).status_code == 403


def test_a_reclaim_is_recorded_with_both_teams_and_counted_in_the_metrics(seeded: HarnessMaker) -> None:
    h, clock = seeded(seed=False)
    for team, gpus in (("alpha", 4), ("alpha", 2)):
        h.submit(team=team, gpus=gpus, command=["sleep", "7200"])
    h.cycle()
    clock.advance(600)  # past min_runtime protection
    h.submit(team="beta", gpus=4, command=["sleep", "7200"])
    for _ in range(5):
        h.cycle()
        clock.advance(5)
    text = h.http.get("/metrics", headers=h.admin).text
    assert 'commons_preempted_tasks_total{preempting_team="beta",reason="reclaim",team="alpha"} 1.0' in text
    assert 'commons_admission_wait_time_seconds_count{priority_class="normal",team="alpha"}' in text
    assert (
        'commons_api_request_duration_seconds_count{code="201",method="POST",route="/api/v1/tasks"}' in text
    )


def test_every_new_endpoint_documents_its_error_answers_in_the_openapi(seeded: HarnessMaker) -> None:
    h, _ = seeded(seed=False)
    spec = h.http.get("/openapi.json").json()
    expected = {
        ("/api/v1/history/gpus", "get"): {"401", "403", "422"},
        ("/api/v1/history/waits", "get"): {"401", "403", "422"},
        ("/api/v1/teams/{team}", "get"): {"401", "403", "404", "422"},
        ("/api/v1/tasks/{task_id}/timeline", "get"): {"401", "403", "404", "422"},
        ("/api/v1/planning/runs", "get"): {"401", "403"},
        ("/api/v1/planning/runs", "post"): {"400", "401", "403", "422"},
        ("/api/v1/planning/runs/{run_id}", "get"): {"401", "403", "404", "422"},
        ("/api/v1/policy/diff", "post"): {"401", "403", "422"},
    }
    for (path, method), statuses in expected.items():
        responses = spec["paths"][path][method]["responses"]
        assert statuses <= set(responses), (path, method, set(responses))
        for status in statuses - {"422"}:
            assert responses[status]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 12, 1, 0, 30, tzinfo=UTC),  # a month's first hour
        datetime(2028, 2, 29, 23, 30, tzinfo=UTC),  # the last hour of a leap February
        datetime(2026, 12, 1, 0, 0, tzinfo=UTC),  # the month's very first instant
    ],
    ids=["first-hour", "leap-day", "first-instant"],
)
def test_the_team_page_and_history_hold_at_a_months_edges(
    tmp_path: Path, database_url: str, moment: datetime
) -> None:
    now = moment.timestamp()
    seed_store(database_url, history_seeds(now), now, MEMBERS)
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(POLICY)
    clock = ManualClock(now)
    settings = Settings(
        home=tmp_path / "home",
        database_url=database_url,
        policy=policy_file,
        run_scheduler=False,
        isolation="logical",
    )
    h = Harness(build_context(settings, executor=TimerExecutor(clock), clock=clock))
    try:
        alpha = get(h, "/api/v1/teams/alpha")
        assert isinstance(alpha, dict)
        budget = alpha["budget"]
        month_start = datetime(moment.year, moment.month, 1, tzinfo=UTC).timestamp()
        expected_days = 0 if now == month_start else int((now - month_start) // 86400) + 1
        assert len(budget["days"]) == expected_days
        assert budget["projected_cents"] >= budget["spent_cents"] >= 0
        assert (alpha["costs"] is None) == (now == month_start)
        history = get(h, "/api/v1/history/gpus", window="30d")
        assert isinstance(history, dict) and len(history["bucket_starts"]) == 120
    finally:
        h.close()
