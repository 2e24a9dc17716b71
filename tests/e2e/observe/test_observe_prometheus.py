"""Monitoring against a live `commons up`: what /metrics exports, the Grafana board's expressions, and a
real Prometheus (Debian's) scraping the server and evaluating deploy/prometheus/alerts.yaml.

One server for the module (the timer executor: tasks are in-process timers, no processes to reap).
alpha takes 6 GPUs (2 borrowed from beta) and waits for 2 more; a short beta task finishes; then beta
asks for 3 GPUs and reclaims alpha's borrowed ones (a preemption, alpha's task back in its queue).
Prices are such that alpha's $50 budget is spent within a second, so CommonsBudgetExhausted fires
for alpha and only for alpha.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gpucommons.api import schemas
from gpucommons.testing.promql import MISSING, exported_names, metric_names, prometheus, running_prometheus
from gpucommons.testing.web import Server, running_server, wait_for

pytestmark = [pytest.mark.slow]

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yaml"
BOARD = ROOT / "deploy" / "grafana" / "gpu-commons.json"
VARIABLES = {"$__rate_interval": "1m", "$team": ".*"}
#: Kueue-style families the issue asks for, each with a label it must carry.
KUEUE_STYLE = {
    "commons_pending_tasks": {"team", "priority_class", "reason"},
    "commons_admitted_tasks_total": {"team", "pool", "borrowing"},
    "commons_preempted_tasks_total": {"team", "preempting_team", "reason"},
    "commons_finished_tasks_total": {"team", "outcome"},
    "commons_team_nominal_quota": {"team", "pool", "cohort", "resource"},
    "commons_team_resource_usage": {"team", "pool", "cohort", "resource"},
    "commons_team_resource_borrowed": {"team", "pool", "cohort", "resource"},
    "commons_admission_wait_time_seconds_bucket": {"team", "priority_class", "le"},
    "commons_budget_spent_cents": {"team"},
    "commons_budget_cents": {"team"},
    "commons_scheduling_cycle_seconds_bucket": {"le"},
    "commons_api_request_duration_seconds_bucket": {"method", "route", "code"},
}


def board_expressions() -> list[tuple[str, str]]:
    board = json.loads(BOARD.read_text())
    return [(p["title"], t["expr"]) for p in board["panels"] for t in p.get("targets", [])]


def rule_expressions() -> list[tuple[str, str]]:
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    return [(r["alert"], r["expr"]) for r in rules]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    env = {"COMMONS_BUDGET_INTERVAL_S": "1"}
    with running_server(
        HERE / "observe-policy.yaml", tmp_path_factory.mktemp("home"), env=env, executor="timer"
    ) as srv:
        with srv.client() as client:

            def used(team: str) -> int:
                return next(t for t in client.teams() if t.name == team).used_gpus

            short = client.submit(schemas.TaskSubmit(team="beta", gpus=1, command=["sleep", "0.2"]))
            wait_for("a short task to finish", lambda: client.task(short.id).state == "succeeded")
            for team, gpus in (("alpha", 4), ("alpha", 2), ("beta", 1), ("alpha", 2)):
                client.submit(schemas.TaskSubmit(team=team, gpus=gpus, command=["sleep", "600"]))
            wait_for("alpha to hold 6 GPUs", lambda: used("alpha") == 6)
            client.submit(schemas.TaskSubmit(team="beta", gpus=3, command=["sleep", "600"]))
            wait_for("beta to reclaim its quota", lambda: used("beta") == 4 and used("alpha") == 4)
        yield srv


def scrape(server: Server) -> str:
    response = httpx.get(
        f"{server.url}/metrics", headers={"Authorization": f"Bearer {server.admin_token}"}, timeout=10
    )
    response.raise_for_status()
    return response.text


def samples(text: str, name: str) -> list[dict[str, str]]:
    out = []
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels = line[len(name) + 1 : line.index("}")]
            out.append(dict(part.split("=", 1) for part in labels.replace('"', "").split(",") if part))
    return out


def test_metrics_carry_kueue_style_names_and_labels(server: Server) -> None:
    def after_a_budget_check() -> str | None:
        text = scrape(server)
        return text if "commons_budget_spent_cents{" in text else None

    text = wait_for("a budget check to have run", after_a_budget_check)
    for name, labels in KUEUE_STYLE.items():
        found = samples(text, name)
        assert found, f"{name} has no sample"
        assert labels <= set(found[0]), f"{name} lacks labels {labels - set(found[0])}"
    assert {p["team"] for p in samples(text, "commons_pending_tasks")} == {"alpha"}
    assert {"team": "alpha", "preempting_team": "beta", "reason": "reclaim"} in samples(
        text, "commons_preempted_tasks_total"
    )
    assert {"team": "beta", "outcome": "succeeded"} in samples(text, "commons_finished_tasks_total")
    usage = 'commons_team_resource_usage{cohort="cluster",pool="gpu",resource="gpu",team="beta"} 4.0'
    assert usage in text


def test_every_expression_of_the_board_and_the_rules_names_only_metrics_the_server_exports(
    server: Server,
) -> None:
    exported = exported_names(scrape(server))
    for where, expr in board_expressions() + rule_expressions():
        unknown = metric_names(expr) - exported
        assert not unknown, f"{where}: {expr!r} names metrics the server does not export: {sorted(unknown)}"


@pytest.fixture(scope="module")
def prometheus_url(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if prometheus() is None:
        pytest.skip(MISSING)
    work = tmp_path_factory.mktemp("prometheus")
    token = work / "token"
    token.write_text(server.admin_token)
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {
                "job_name": "commons",
                "metrics_path": "/metrics",
                "authorization": {"credentials_file": str(token)},
                "static_configs": [{"targets": [server.url.removeprefix("http://")]}],
            }
        ],
    }
    with running_prometheus(config, work) as url:
        yield url


def query(url: str, expr: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10).json()
    assert answer["status"] == "success", answer
    result = answer["data"]["result"]
    assert isinstance(result, list)
    return result


def test_a_real_prometheus_scrapes_commons_up_and_evaluates_the_alert_rules(prometheus_url: str) -> None:
    wait_for(
        "the scrape to succeed",
        lambda: [r for r in query(prometheus_url, 'up{job="commons"}') if r["value"][1] == "1"],
    )
    wait_for(
        "the budget gauges to be scraped",
        lambda: query(
            prometheus_url, 'commons_budget_spent_cents{team="alpha"} >= commons_budget_cents{team="alpha"}'
        ),
    )

    def firing() -> list[dict[str, Any]]:
        alerts = httpx.get(f"{prometheus_url}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
        return [a for a in alerts if a["state"] == "firing"]

    alerts = wait_for(
        "CommonsBudgetExhausted to fire",
        lambda: [a for a in firing() if a["labels"]["alertname"] == "CommonsBudgetExhausted"],
    )
    assert [a["labels"]["team"] for a in alerts] == ["alpha"]
    assert "alpha has spent its whole monthly budget" in alerts[0]["annotations"]["summary"]
    assert not [a for a in firing() if a["labels"].get("team") == "beta"]

    groups = httpx.get(f"{prometheus_url}/api/v1/rules", timeout=10).json()["data"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert len(rules) == 7
    for rule in rules:
        assert rule["health"] == "ok", f"{rule['name']}: {rule.get('lastError')}"

    # Every panel of the Grafana board evaluates against the data Prometheus holds.
    for title, expr in board_expressions():
        for name, value in VARIABLES.items():
            expr = expr.replace(name, value)
        query(prometheus_url, expr)  # asserts status success
        assert title

    # docs/img/grafana-board.png: COMMONS_SCREENSHOT_DIR=... pytest tests/e2e/observe
    target = os.environ.get("COMMONS_SCREENSHOT_DIR")
    if target:
        import time

        from gpucommons.testing.board_preview import render_board

        time.sleep(20)  # some history for the time series
        now = time.time()
        render_board(BOARD, prometheus_url, Path(target) / "grafana-board.png", now - 60, now)
