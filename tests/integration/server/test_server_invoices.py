"""Invoices and budgets on the live ledger: `/api/v1/invoices`, `/api/v1/budgets`, the budget watcher."""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import select
from tests.integration.server.conftest import SMALL_POLICY, Harness

from gpucommons.server.workers.budgets import ALERT_ACTION, BudgetWatcher
from gpucommons.store.identity_models import AuditEvent
from gpucommons.store.models import UsageIntervalRow

PREEMPTION = "    preemption: {reclaim: any, within_team: lower_priority}\n"
BUDGET_POLICY = (
    SMALL_POLICY.replace(
        PREEMPTION + "  - name: b", PREEMPTION + "    budget: {monthly: 10, enforce: hard}\n  - name: b"
    ).rstrip("\n")
    + "\n    budget: {monthly: 100, enforce: soft}\n"
)


def month_start() -> float:
    now = datetime.now(UTC)
    return datetime(now.year, now.month, 1, tzinfo=UTC).timestamp()


def add_usage(harness: Harness, team: str, gpus: int, hours: float, start_h: float = 0.0) -> None:
    """A finished task of `team` that held `gpus` GPUs for `hours`, early this month."""
    task = harness.submit(team=team, gpus=1, command=["true"])
    start = month_start() + start_h * 3600
    with harness.ctx.db.session() as session:
        session.add(
            UsageIntervalRow(
                task_id=task["id"],
                team=team,
                pool="gpu",
                gpus=gpus,
                start=start,
                end=start + hours * 3600,
                priority="normal",
                borrowed_gpus=0,
                end_reason="succeeded",
                lost_gpu_seconds=0.0,
            )
        )


def this_month() -> str:
    return datetime.now(UTC).strftime("%Y-%m")


def test_invoice_json_is_contract_5_and_adds_up(make_harness: Callable[..., Harness]) -> None:
    harness = make_harness()
    add_usage(harness, "a", gpus=2, hours=3)  # 6 GPU-hours at 2.00 = 12.00
    response = harness.http.get("/api/v1/invoices", params={"month": this_month()}, headers=harness.admin)
    assert response.status_code == 200, response.text
    data = response.json()
    assert set(data) == {"period", "currency", "cluster_cost_cents", "platform_cents", "teams"}
    assert data["teams"]["a"]["direct_cents"] == 1200 and data["teams"]["a"]["gpu_hours"] == 6.0
    assert (
        data["platform_cents"] + sum(t["total_cents"] for t in data["teams"].values())
        == data["cluster_cost_cents"]
    )


def test_a_member_sees_only_the_costs_of_their_team(make_harness: Callable[..., Harness]) -> None:
    harness = make_harness()
    add_usage(harness, "a", gpus=2, hours=3)
    add_usage(harness, "b", gpus=1, hours=1)
    member = harness.member_token("b")
    data = harness.http.get("/api/v1/invoices", params={"month": this_month()}, headers=member).json()
    assert set(data["teams"]) == {"b"}
    denied = harness.http.get("/api/v1/invoices", params={"month": this_month(), "team": "a"}, headers=member)
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "forbidden"
    rows = list(
        csv.DictReader(
            io.StringIO(
                harness.http.get(
                    "/api/v1/invoices", params={"month": this_month(), "format": "focus"}, headers=member
                ).text
            )
        )
    )
    assert rows and {r["SubAccountId"] for r in rows} == {"b"}


def test_invoice_html_and_pdf_for_one_team(make_harness: Callable[..., Harness]) -> None:
    harness = make_harness()
    add_usage(harness, "a", gpus=2, hours=3)
    params = {"month": this_month(), "team": "a"}
    html = harness.http.get("/api/v1/invoices", params=params | {"format": "html"}, headers=harness.admin)
    assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
    assert "Invoice INV-small-" in html.text and "12.00 USD" in html.text
    pdf = harness.http.get("/api/v1/invoices", params=params | {"format": "pdf"}, headers=harness.admin)
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF-")
    needs_team = harness.http.get(
        "/api/v1/invoices", params={"month": this_month(), "format": "pdf"}, headers=harness.admin
    )
    assert needs_team.status_code == 400 and "team" in needs_team.json()["error"]["message"]


def test_bad_invoice_requests_are_4xx_with_an_error_body(make_harness: Callable[..., Harness]) -> None:
    harness = make_harness()
    for params, status in (
        ({"month": "2026-13"}, 400),
        ({"month": "november"}, 422),
        ({"month": "2999-01"}, 400),
        ({"month": this_month(), "team": "ghost"}, 404),
        ({"month": this_month(), "format": "xml"}, 422),
        ({}, 422),
    ):
        response = harness.http.get("/api/v1/invoices", params=params, headers=harness.admin)
        assert response.status_code == status, (params, response.text)
        assert set(response.json()["error"]) == {"code", "message", "details"}


def test_hard_budget_holds_new_tasks_and_alerts_once(make_harness: Callable[..., Harness]) -> None:
    harness = make_harness(BUDGET_POLICY)
    add_usage(harness, "a", gpus=2, hours=3)  # 12.00 of a's hard 10.00
    add_usage(harness, "b", gpus=1, hours=41)  # 82.00 of b's soft 100.00
    sent: list[dict[str, object]] = []
    watcher = BudgetWatcher(
        harness.ctx, webhook="http://hooks.example/budget", send=lambda _u, p: sent.append(p)
    )
    alerts = watcher.check()
    assert sorted((a.team, a.threshold) for a in alerts) == [("a", 80), ("a", 100), ("b", 80)]
    assert harness.ctx.scheduler.state.team_spend("a") == 1200
    assert watcher.check() == []  # each threshold once per month (remembered in the audit log)
    with harness.ctx.db.session() as session:
        events = session.scalars(select(AuditEvent).where(AuditEvent.action == ALERT_ACTION)).all()
        assert len(events) == 3
    deadline = time.monotonic() + 5
    while len(sent) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sorted((p["team"], p["threshold_percent"]) for p in sent) == [("a", 80), ("a", 100), ("b", 80)]
    assert b"commons_budget_alerts_total" in harness.ctx.metrics.render()

    harness.ctx.scheduler.rebuild()  # a fresh state from the store knows no spend...
    assert harness.ctx.scheduler.state.team_spend("a") == 0
    watcher.reapply()  # ...until the watcher hands it over again (its thread does within a second)
    assert harness.ctx.scheduler.state.team_spend("a") == 1200

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
    make_harness: Callable[..., Harness],
) -> None:
    harness = make_harness(BUDGET_POLICY)
    add_usage(harness, "a", gpus=2, hours=3)
    watcher = BudgetWatcher(harness.ctx, interval_s=60)
    watcher.start()
    try:
        deadline = time.monotonic() + 10
        while not watcher.last and time.monotonic() < deadline:
            time.sleep(0.05)
        assert watcher.last["a"].spent_cents == 1200
        harness.ctx.scheduler.rebuild()
        deadline = time.monotonic() + 5
        while harness.ctx.scheduler.state.team_spend("a") != 1200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert harness.ctx.scheduler.state.team_spend("a") == 1200
    finally:
        watcher.stop()
    assert watcher._thread is None
