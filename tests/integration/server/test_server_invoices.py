"""Invoices and budgets on the live ledger: `/api/v1/invoices`, `/api/v1/budgets`, the budget watcher.

No test here reads today's date: the server's clock is moved to chosen instants (`ShiftedClock`) —
the middle of a month, its first and its last hour, and 29 February — and the usage is placed just
before "now", inside the current month, in amounts that fit even 30 minutes into a month.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from tests.integration.server.conftest import SMALL_POLICY, Harness

from gpucommons.backends.clock import ShiftedClock
from gpucommons.server.workers.budgets import ALERT_ACTION, BudgetWatcher
from gpucommons.store.identity_models import AuditEvent
from gpucommons.store.models import UsageIntervalRow

PREEMPTION = "    preemption: {reclaim: any, within_team: lower_priority}\n"
#: a: hard 0.50 (80 % = 0.40, i.e. 0.2 GPU-hours at 2.00); b: soft 0.80.
BUDGET_POLICY = (
    SMALL_POLICY.replace(
        PREEMPTION + "  - name: b", PREEMPTION + "    budget: {monthly: 0.5, enforce: hard}\n  - name: b"
    ).rstrip("\n")
    + "\n    budget: {monthly: 0.8, enforce: soft}\n"
)

#: The server's "now" in each run: the date-sensitive rules must hold at any of them.
INSTANTS = {
    "mid-month": datetime(2026, 11, 17, 13, 0, tzinfo=UTC),
    "first-hour": datetime(2026, 12, 1, 0, 30, tzinfo=UTC),
    "last-hour": datetime(2026, 11, 30, 23, 30, tzinfo=UTC),
    "leap-day": datetime(2028, 2, 29, 12, 0, tzinfo=UTC),
}


@pytest.fixture(params=list(INSTANTS), ids=list(INSTANTS))
def instant(request: pytest.FixtureRequest) -> datetime:
    return INSTANTS[request.param]


@pytest.fixture
def harness_at(make_harness: Callable[..., Harness], instant: datetime) -> Callable[..., Harness]:
    """A harness whose server believes it is `instant` (time still passes as usual)."""

    def make(policy: str = SMALL_POLICY) -> Harness:
        return make_harness(policy, clock=ShiftedClock(instant.timestamp()))

    return make


def month_of(harness: Harness) -> str:
    return datetime.fromtimestamp(harness.ctx.clock.now(), UTC).strftime("%Y-%m")


def add_usage(harness: Harness, team: str, gpus: int, minutes: float) -> None:
    """A finished task of `team` that held `gpus` GPUs for `minutes`, ending a minute ago (so inside
    the current month whenever the server's clock is at least minutes + 1 into it)."""
    task = harness.submit(team=team, gpus=1, command=["true"])
    end = harness.ctx.clock.now() - 60
    with harness.ctx.db.session() as session:
        session.add(
            UsageIntervalRow(
                task_id=task["id"],
                team=team,
                pool="gpu",
                gpus=gpus,
                start=end - minutes * 60,
                end=end,
                priority="normal",
                borrowed_gpus=0,
                end_reason="succeeded",
                lost_gpu_seconds=0.0,
            )
        )


def test_invoice_json_is_contract_5_and_adds_up(harness_at: Callable[..., Harness]) -> None:
    harness = harness_at()
    add_usage(harness, "a", gpus=2, minutes=15)  # 0.5 GPU-hours at 2.00 = 1.00
    response = harness.http.get(
        "/api/v1/invoices", params={"month": month_of(harness)}, headers=harness.admin
    )
    assert response.status_code == 200, response.text
    data = response.json()
    assert set(data) == {"period", "currency", "cluster_cost_cents", "platform_cents", "teams"}
    assert data["teams"]["a"]["direct_cents"] == 100 and data["teams"]["a"]["gpu_hours"] == 0.5
    assert (
        data["platform_cents"] + sum(t["total_cents"] for t in data["teams"].values())
        == data["cluster_cost_cents"]
    )


def test_a_member_sees_only_the_costs_of_their_team(harness_at: Callable[..., Harness]) -> None:
    harness = harness_at()
    add_usage(harness, "a", gpus=2, minutes=15)
    add_usage(harness, "b", gpus=1, minutes=10)
    member = harness.member_token("b")
    data = harness.http.get("/api/v1/invoices", params={"month": month_of(harness)}, headers=member).json()
    assert set(data["teams"]) == {"b"}
    denied = harness.http.get(
        "/api/v1/invoices", params={"month": month_of(harness), "team": "a"}, headers=member
    )
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "forbidden"
    rows = list(
        csv.DictReader(
            io.StringIO(
                harness.http.get(
                    "/api/v1/invoices", params={"month": month_of(harness), "format": "focus"}, headers=member
                ).text
            )
        )
    )
    assert rows and {r["SubAccountId"] for r in rows} == {"b"}


def test_invoice_html_and_pdf_for_one_team(harness_at: Callable[..., Harness]) -> None:
    harness = harness_at()
    add_usage(harness, "a", gpus=2, minutes=15)
    params = {"month": month_of(harness), "team": "a"}
    html = harness.http.get("/api/v1/invoices", params=params | {"format": "html"}, headers=harness.admin)
    assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
    assert "Invoice INV-small-" in html.text and "1.00 USD" in html.text
    pdf = harness.http.get("/api/v1/invoices", params=params | {"format": "pdf"}, headers=harness.admin)
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF-")
    needs_team = harness.http.get(
        "/api/v1/invoices", params={"month": month_of(harness), "format": "pdf"}, headers=harness.admin
    )
    assert needs_team.status_code == 400 and "team" in needs_team.json()["error"]["message"]


def test_bad_invoice_requests_are_4xx_with_an_error_body(harness_at: Callable[..., Harness]) -> None:
    harness = harness_at()
    for params, status in (
        ({"month": "2026-13"}, 400),
        ({"month": "november"}, 422),
        ({"month": "2999-01"}, 400),
        ({"month": month_of(harness), "team": "ghost"}, 404),
        ({"month": month_of(harness), "format": "xml"}, 422),
        ({}, 422),
    ):
        response = harness.http.get("/api/v1/invoices", params=params, headers=harness.admin)
        assert response.status_code == status, (params, response.text)
        assert set(response.json()["error"]) == {"code", "message", "details"}


def test_hard_budget_holds_new_tasks_and_alerts_once(harness_at: Callable[..., Harness]) -> None:
    harness = harness_at(BUDGET_POLICY)
    add_usage(harness, "a", gpus=2, minutes=15)  # 1.00 of a's hard 0.50
    add_usage(harness, "b", gpus=1, minutes=20)  # 0.67 of b's soft 0.80
    sent: list[dict[str, object]] = []
    watcher = BudgetWatcher(
        harness.ctx, webhook="http://hooks.example/budget", send=lambda _u, p: sent.append(p)
    )
    alerts = watcher.check()
    assert sorted((a.team, a.threshold) for a in alerts) == [("a", 80), ("a", 100), ("b", 80)]
    assert harness.ctx.scheduler.state.team_spend("a") == 100
    assert watcher.check() == []  # each threshold once per month (remembered in the audit log)
    with harness.ctx.db.session() as session:
        events = session.scalars(select(AuditEvent).where(AuditEvent.action == ALERT_ACTION)).all()
        assert len(events) == 3
    deadline = time.monotonic() + 5
    while len(sent) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sorted((p["team"], p["threshold_percent"]) for p in sent) == [("a", 80), ("a", 100), ("b", 80)]
    assert b"commons_budget_alerts_total" in harness.ctx.metrics.render()

    # The store keeps no spend, but the scheduler keeps the last ones handed over: a state rebuilt
    # from the store holds the budget at once, with no second from the watcher.
    harness.ctx.scheduler.rebuild()
    assert harness.ctx.scheduler.state.team_spend("a") == 100

    held = harness.submit(team="a", gpus=1, command=["sleep", "30"])
    harness.cycle()
    task = harness.task(str(held["id"]))
    assert task["state"] == "pending"
    queue = harness.http.get("/api/v1/queue", params={"team": "a"}, headers=harness.admin).json()
    # every task of a waits (the watcher's own ledger rows came from tasks of a too); the head says why
    assert all(harness.task(str(e["task_id"]))["state"] == "pending" for e in queue)
    assert "hard monthly budget" in queue[0]["reason"]

    budgets = harness.http.get("/api/v1/budgets", headers=harness.admin).json()
    assert {(b["team"], b["exhausted"], b["holds_new_tasks"]) for b in budgets} == {
        ("a", True, True),
        ("b", False, False),
    }


def test_the_watcher_thread_checks_and_restores_spend_after_a_rebuild(
    harness_at: Callable[..., Harness],
) -> None:
    harness = harness_at(BUDGET_POLICY)
    add_usage(harness, "a", gpus=2, minutes=15)
    watcher = BudgetWatcher(harness.ctx, interval_s=60)
    watcher.start()
    try:
        deadline = time.monotonic() + 10
        while not watcher.last and time.monotonic() < deadline:
            time.sleep(0.05)
        assert watcher.last["a"].spent_cents == 100
        harness.ctx.scheduler.rebuild()
        deadline = time.monotonic() + 5
        while harness.ctx.scheduler.state.team_spend("a") != 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert harness.ctx.scheduler.state.team_spend("a") == 100
    finally:
        watcher.stop()
    assert watcher._thread is None
